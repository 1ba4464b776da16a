// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The simulated device, a software GPU for machines without one.
///
/// A `sim_device` runs streams. A `sim_stream` executes queued work items in order: a duration
/// (the item takes that long from the moment the previous item finished), a callable (run on a
/// device thread when its turn comes), or both (wait the duration, then run the callable). Behind
/// each item the stream release-stores the item's sequence number into its word of a completion
/// line (its slot), exactly as a GPU stream's cuStreamWriteValue64 with the default fence would:
/// once a reader's acquire load sees the number, everything the item wrote is visible.
///
/// Streams are cheap: a device has a few worker threads (options::workers), and each stream is
/// assigned to one of them; a worker keeps a timer queue of its streams' next items, so thousands
/// of streams with overlapping durations complete concurrently, in the order their durations
/// dictate (e.g. random durations give a random completion order). Streams may get a line of
/// their own (`make_stream()`, slot 0) or share one slot by slot (`make_line()` then
/// `make_stream(line, slot)`): eight streams per line, one waiter per line.
///
/// A callable occupies its worker thread while it runs: the other streams of that worker wait for
/// it (as kernels queued behind a long one do); use more workers, or durations, for overlap.
///
/// Each stream is a `completion_source` (query, block, arm, descriptor, park) over its tail: the
/// last sequence number enqueued.
///
/// Faults: `enqueue_fault()` (or a callable returning a non-empty std::error_code) fails when its
/// turn comes: its number is never stored, the fault is sticky as on a real device (the stream's
/// queued and later items never run, their numbers are never stored), and `query()` reports
/// failed with the code (errc::device_fault by default); `block()` and `arm()` return it; `park()`
/// returns false early.
///
/// Ringing: `set_doorbell(bell)` (a std::shared_ptr, e.g. a port's shared_bell()) makes the stream
/// ring the doorbell after each store (and after a fault), as a host producer does, and `park()`
/// then sleeps on the doorbell's futex instead of the word wait. `set_doorbell(bell,
/// sim_signal::device_store)` makes it behave as a GPU line with the doorbell attached instead:
/// after each store it stores the doorbell's device word and never rings (no system call), and
/// it counts as a device producer of the doorbell while set. With no doorbell at all the stream
/// only stores its word, as a GPU without doorbell stores. The stream shares the doorbell's
/// ownership, so a device that outlives the reactor whose doorbell it signals stays safe.
///
/// Manual mode (options::manual): no worker threads; nothing runs until the caller calls
/// `step(stream)` (runs that stream's next item on the calling thread, durations ignored) or
/// `step_all()`. `block()` on pending work returns errc::stalled instead of hanging (the caller is
/// the device).
///
/// Streams are given back: `make_stream()` returns a `sim_stream_handle`, a move-only owner (`*h`,
/// `h->`, `h.get()`). Dropping it (or `reset()`) gives the stream back: its queued items are
/// dropped (their numbers are never stored); an item a worker is running finishes first and the
/// worker then frees the stream; a line the device made for that stream alone (`make_stream()`) is
/// retired (gpu_async::retire_line: as for a slot below, waits whose target was stored complete,
/// the rest end with operation_aborted) and reused (zeroed) for
/// a later stream. A stream on a device line from `make_line()` (`make_stream(line, slot)`) retires
/// its slot alone (gpu_async::retire_slot: waits on the slot whose target was stored complete, the
/// rest end with operation_aborted, the slot's descriptors go stale, its fault is cleared, so a
/// later stream on the slot starts clean; the other slots are untouched). An item still running for
/// it then stores nothing into the slot and records no fault there (they would be a later
/// stream's), and a stream made on such a slot retires it again first. A stream on a caller's line
/// leaves the line alone: end waits on its slot before dropping it.
/// Do not drop a handle while another thread still uses its stream (block(), park(), step()), nor
/// while a wait given the stream itself (`port.async_wait(*h, plan, ...)`, wait_blocking) is
/// pending: such a wait reads the stream object, not only its word. A handle may outlive its
/// device: it is then false, a call through it throws errc::device_gone, and dropping it does
/// nothing (the device freed the stream already); a reference to the stream taken earlier must
/// not be used after the device is gone.
///
/// Lifetime: the destructor retires every line the device made (gpu_async::retire_line: every
/// reactor ends its waits on them, with success where the target was stored, else with
/// operation_aborted), then stops the device (below); the
/// lines' memory goes last. A caller's line given to `make_stream` is the caller's to retire.
///
/// Shutdown: `shutdown(sim_shutdown::drain)` refuses new work and waits until every queued item has
/// run (manual mode: runs them on the calling thread); `shutdown(sim_shutdown::cancel)` lets each
/// worker finish the item it is running, then drops every queued item. Work refused or dropped is
/// never stored; its stream reports failed with std::errc::operation_canceled, and when it was
/// refused or dropped from a stream on a device line its slot is retired (gpu_async::retire_slot,
/// once the shutdown has stopped the workers): descriptor waits on the slot end with
/// operation_aborted (a cancellation is not a fault; what was stored first still completes), and
/// later ones on its descriptors with stale_descriptor. Both join the workers. The destructor
/// cancels, so no worker runs, or writes to any line, after it returns; the device's own lines are
/// freed only then. A caller's line given to `make_stream` must outlive the device. Do not call
/// `shutdown` from a work item.
///
/// Thread safety: enqueue, query, block, arm, descriptor, park, set_doorbell and make_stream may
/// be called from any thread; step and shutdown from one thread at a time. A handle may be
/// dropped (or reset()) from any thread at any time, within the rule above about its own stream:
/// concurrently with other drops, with work enqueued through other handles, with shutdown() and
/// with the device's destructor (which waits for a give-back in progress). Each stream given back
/// is freed exactly once, by the thread that gave it back or by the worker that was running it.
#ifndef GPU_ASYNC_DEVICE_SIM_DEVICE_HPP
#define GPU_ASYNC_DEVICE_SIM_DEVICE_HPP

#include <gpu_async/core/detail/config.hpp>
#include <gpu_async/wait/detail/mono_clock.hpp>
#include <gpu_async/wait/detail/ranked_mutex.hpp>

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/completion_source.hpp>
#include <gpu_async/core/error.hpp>
#include <gpu_async/core/time.hpp>
#include <gpu_async/line/line_life.hpp>
#include <gpu_async/wait/doorbell.hpp>
#include <gpu_async/wait/wordwait.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <concepts>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <queue>
#include <system_error>
#include <thread>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

namespace gpu_async {

/// How `sim_device::shutdown` treats queued work.
enum class sim_shutdown : std::uint8_t {
    drain,  ///< run every queued item, then stop
    cancel, ///< finish the running items, drop the queued ones
};

class sim_device;
class sim_stream;

/// How a simulated stream tells a doorbell about its stores (sim_stream::set_doorbell).
enum class sim_signal : std::uint8_t {
    ring,         ///< a host producer: rings the doorbell (futex wake when someone sleeps)
    device_store, ///< a GPU line with the doorbell attached: stores its device word, no ring
};

namespace detail {

/// Shared between a device and its handles: the device while it lives, else null (from the
/// start of its destructor on). Atomic so that a handle's checks read it without the lock.
struct sim_life {
    ranked_mutex mutex{lock_rank::device_life};
    ranked_condition_variable idle;
    std::atomic<sim_device*> device{nullptr};
    std::size_t giving_back = 0; // handles in reset(), counted rather than locked: a give-back
                                 // retires a line, which may wait for a callback that gives
                                 // back another stream
};

/// Throws the std::system_error of errc::device_gone: a call through a handle whose device is
/// gone.
[[noreturn]] GPU_ASYNC_DECL void throw_device_gone();

/// Throws the std::system_error of errc::invalid_target: descriptor_for(`seq`) on a stream
/// whose numbers run from `start` through `tail`.
[[noreturn]] GPU_ASYNC_DECL void throw_invalid_target(std::uint64_t seq, std::uint64_t start,
                                                      std::uint64_t tail);

/// A type-erased work item body (move-only callables allowed).
struct sim_work {
    virtual ~sim_work() = default;
    virtual std::error_code run() = 0;
};

template <class F>
struct sim_work_impl final : sim_work {
    explicit sim_work_impl(F f)
        : fn(std::move(f)) {}
    std::error_code run() override {
        if constexpr (std::is_convertible_v<std::invoke_result_t<F&>, std::error_code>)
            return fn();
        else {
            fn();
            return {};
        }
    }
    F fn;
};

struct sim_item {
    std::uint64_t seq = 0;
    dur_ns duration{};
    std::unique_ptr<sim_work> work;
    std::error_code fault{}; // non-empty: this item fails with it
};

/// One worker thread (none in manual mode) and the timer queue of its streams' next items.
struct sim_worker {
    struct entry {
        mono_ns due;
        std::uint64_t order;
        sim_stream* stream;
        friend bool operator>(const entry& a, const entry& b) noexcept {
            return a.due != b.due ? a.due > b.due : a.order > b.order;
        }
    };

    ranked_mutex mutex{lock_rank::device_worker};
    ranked_condition_variable work_cv; // the worker waits here for due items
    ranked_condition_variable done_cv; // block() and drain wait here for completions
    // A priority queue whose entries can be taken out (a stream given back while it waits).
    struct entry_heap : std::priority_queue<entry, std::vector<entry>, std::greater<>> {
        void remove(const sim_stream* s) {
            const auto n = std::erase_if(c, [s](const entry& e) { return e.stream == s; });
            if (n != 0) std::make_heap(c.begin(), c.end(), comp);
        }
    };
    entry_heap heap;
    std::uint64_t order = 0;
    std::size_t active = 0; // streams with an item scheduled or running
    bool closed = false;    // refuses new work
    bool stop = false;      // the thread exits
    std::thread thread;
};

} // namespace detail

/// One stream of a `sim_device`: executes its items in order and stores each item's sequence
/// number into its word (`line()`, `slot()`) behind it. Made by `sim_device::make_stream`; lives
/// until its handle is dropped, at most as long as its device.
class sim_stream {
public:
    sim_stream(const sim_stream&) = delete;
    sim_stream& operator=(const sim_stream&) = delete;

    /// Enqueues an item that takes `d`; returns its sequence number.
    std::uint64_t enqueue(dur_ns d) { return push(d, nullptr, {}); }
    /// Enqueues an item that takes `d` (`s.enqueue(2ms)`; negative: zero).
    template <class Rep, class Period>
    std::uint64_t enqueue(std::chrono::duration<Rep, Period> d) {
        return push(dur_ns::from(d), nullptr, {});
    }

    /// Enqueues a callable, run on a device thread when its turn comes (after `d`, if given).
    /// It may return void or a std::error_code; a non-empty code fails the item (a fault).
    /// Returns the item's sequence number.
    template <class F>
    requires std::invocable < std::decay_t<F>
    & > std::uint64_t enqueue(F&& fn, dur_ns d = {}) {
        return push(
            d, std::make_unique<detail::sim_work_impl<std::decay_t<F>>>(std::forward<F>(fn)), {});
    }

    /// As above, after a std::chrono duration (`s.enqueue(fn, 2ms)`).
    template <class F, class Rep, class Period>
    requires std::invocable < std::decay_t<F>
    & > std::uint64_t enqueue(F&& fn, std::chrono::duration<Rep, Period> d) {
        return enqueue(std::forward<F>(fn), dur_ns::from(d));
    }

    /// Enqueues an item that fails with `ec` (after `d`); returns its sequence number, which
    /// is never stored.
    std::uint64_t enqueue_fault(std::error_code ec = errc::device_fault, dur_ns d = {}) {
        return push(d, nullptr, ec ? ec : make_error_code(errc::device_fault));
    }
    /// As above, after a std::chrono duration.
    template <class Rep, class Period>
    std::uint64_t enqueue_fault(std::error_code ec, std::chrono::duration<Rep, Period> d) {
        return enqueue_fault(ec, dur_ns::from(d));
    }

    /// Makes the stream signal `bell` after each store, as `how` says (empty: stop). The stream
    /// keeps every doorbell it was given alive until it is destroyed, so a doorbell whose
    /// reactor is gone is still safe to signal (nobody hears it).
    GPU_ASYNC_DECL void set_doorbell(std::shared_ptr<doorbell> bell,
                                     sim_signal how = sim_signal::ring);

    /// Ends its count as a device producer, if it has one.
    GPU_ASYNC_DECL ~sim_stream();

    completion_line& line() const noexcept { return *line_; }
    slot_id slot() const noexcept { return slot_; }
    /// The last sequence number enqueued.
    std::uint64_t tail() const noexcept { return tail_.load(std::memory_order_acquire); }
    /// The value of the stream's word (an acquire load): the last sequence number stored.
    std::uint64_t word() const noexcept {
        return line_->words[slot_.index()].load(std::memory_order_acquire);
    }
    /// The descriptor of item `seq`: a number enqueue() returned, or the stream's start(): the
    /// numbers from start() through tail(), in wrapping order. Any other number was never given
    /// to the stream: past the tail it would never complete (a wait on it would hang
    /// unnoticed), before the start (a `-1` sentinel, a number of another stream) it would
    /// complete at once for work never done. It throws a std::system_error with
    /// errc::invalid_target.
    memory_descriptor descriptor_for(std::uint64_t seq) const {
        const std::uint64_t t = tail();
        if (seq - start_ > t - start_) detail::throw_invalid_target(seq, start_, t);
        return memory_descriptor(*line_, slot_, seq, generation_);
    }
    /// The stream's first number: its word when it was made (nothing of the stream's is stored
    /// at or before it); its first item's number is start() + 1.
    std::uint64_t start() const noexcept { return start_; }
    /// The error the stream failed with (empty while it has not).
    GPU_ASYNC_DECL std::error_code error() const;

    // completion_source, over the tail at the time of the call.

    /// done when the word has reached the tail; failed with the stream's error after a fault
    /// or a cancel; else pending. Never blocks (it takes a lock only once the stream failed).
    GPU_ASYNC_DECL query_result query() const;
    /// Waits until the tail is stored or the stream fails; its error, or empty. Manual mode:
    /// errc::stalled while work is pending (nothing else would run it).
    GPU_ASYNC_DECL std::error_code block();
    /// Every item already stores its number, so there is nothing to enqueue: empty, or the
    /// stream's error once it failed.
    GPU_ASYNC_DECL std::error_code arm();
    /// (line, slot, tail).
    memory_descriptor descriptor() const noexcept {
        return memory_descriptor(*line_, slot_, tail(), generation_);
    }
    /// Parks on the word (the doorbell's futex when one is set) until the tail is stored, the
    /// stream fails, or `bound` passes; true when the word reached the tail.
    GPU_ASYNC_DECL bool park(dur_ns bound) const;
    /// park() bounded by a std::chrono duration.
    template <class Rep, class Period>
    bool park(std::chrono::duration<Rep, Period> bound) const {
        return park(dur_ns::from(bound));
    }

private:
    friend class sim_device;
    sim_stream(sim_device& dev, detail::sim_worker& w, completion_line& line, slot_id slot) noexcept
        : device_(&dev)
        , worker_(&w)
        , line_(&line)
        , slot_(slot)
        , start_(line.words[slot.index()].load(std::memory_order_acquire))
        , tail_(start_) {}

    GPU_ASYNC_DECL std::uint64_t push(dur_ns d, std::unique_ptr<detail::sim_work> work,
                                      std::error_code fault);
    // Under the worker's lock: fail the stream with `ec` (the first error wins) and wake
    // blockers. The caller decides whether the queue goes too.
    GPU_ASYNC_DECL void fail_locked(std::error_code ec);
    // Runs one item (no lock held): its body, then the store or the fault, then the ring.
    GPU_ASYNC_DECL void run(detail::sim_item& item);
    GPU_ASYNC_DECL void ring() const noexcept;

    sim_device* device_;
    detail::sim_worker* worker_;
    completion_line* line_;
    slot_id slot_;
    // Its slot's generation when the stream was made (0 for a line never adopted): its
    // descriptors carry it, so they go stale when the stream is given back.
    std::uint64_t generation_ = 0;
    std::uint64_t start_; // the word when the stream was made
    std::atomic<std::uint64_t> tail_;
    std::atomic<bool> failed_{false};
    std::atomic<doorbell*> bell_{nullptr};
    std::atomic<bool> device_store_{false}; // sim_signal::device_store
    doorbell* counted_ = nullptr; // the doorbell it counts as a device producer of (worker lock)
    // Guarded by worker_->mutex:
    std::vector<std::shared_ptr<doorbell>> bells_; // every doorbell given, kept alive
    std::deque<detail::sim_item> queue_;
    bool scheduled_ = false; // an item is in the worker's heap or running
    bool running_ = false;   // a worker runs its item now
    bool released_ = false;  // given back: the worker frees it when it is done with it
    bool retiring_ = false;  // given back, its slot being retired: the giver frees it after
    bool refused_ = false;   // work refused during a shutdown: drop_queued() retires the slot
    std::error_code error_{};
    // Guarded by device_->mutex_:
    bool own_line_ = false;    // the device made line_ for this stream alone
    bool shared_slot_ = false; // line_ is a device line from make_line(): its slot is retired
    std::size_t index_ = 0;    // in device_->streams_
};

static_assert(completion_source<sim_stream>);

/// The owner of a `sim_stream` (from `sim_device::make_stream`): move-only; dropping it gives
/// the stream back to its device (see the header comment).
///
/// A handle may outlive its device, whose destructor frees the stream: from the moment that
/// destructor begins the handle is false, get() is null, and `*h` and `h->` throw a
/// std::system_error with errc::device_gone rather than reach the freed stream. (A reference or
/// pointer to the stream taken earlier is not tracked: do not use it once the device is gone,
/// nor destroy the device while another thread uses its streams.) On an empty handle (default
/// made, moved from or reset) `*h` and `h->` are undefined, as for std::unique_ptr.
class sim_stream_handle {
public:
    sim_stream_handle() noexcept = default;
    sim_stream_handle(sim_stream_handle&& o) noexcept
        : life_(std::move(o.life_))
        , stream_(std::exchange(o.stream_, nullptr)) {}
    sim_stream_handle& operator=(sim_stream_handle&& o) noexcept {
        if (this != &o) {
            reset();
            life_ = std::move(o.life_);
            stream_ = std::exchange(o.stream_, nullptr);
        }
        return *this;
    }
    sim_stream_handle(const sim_stream_handle&) = delete;
    sim_stream_handle& operator=(const sim_stream_handle&) = delete;
    ~sim_stream_handle() { reset(); }

    /// The stream. Throws errc::device_gone once its device is gone.
    sim_stream& operator*() const { return *checked(); }
    /// The stream. Throws errc::device_gone once its device is gone.
    sim_stream* operator->() const { return checked(); }
    /// The stream, or null when the handle is empty or its device is gone.
    sim_stream* get() const noexcept { return alive() ? stream_ : nullptr; }
    /// True while the handle owns a stream whose device lives.
    explicit operator bool() const noexcept { return alive(); }

    /// Gives the stream back now (nothing when empty, or when the device is gone).
    GPU_ASYNC_DECL void reset() noexcept;

private:
    friend class sim_device;
    sim_stream_handle(std::shared_ptr<detail::sim_life> life, sim_stream* s) noexcept
        : life_(std::move(life))
        , stream_(s) {}

    // A handle with a stream always has the life it came with.
    bool alive() const noexcept {
        return stream_ != nullptr && life_->device.load(std::memory_order_acquire) != nullptr;
    }
    sim_stream* checked() const {
        if (stream_ != nullptr && life_->device.load(std::memory_order_acquire) == nullptr)
            detail::throw_device_gone();
        return stream_;
    }

    std::shared_ptr<detail::sim_life> life_;
    sim_stream* stream_ = nullptr;
};

/// The simulated device: owns its worker threads, streams and lines.
class sim_device {
public:
    struct options {
        std::size_t workers = 1; ///< worker threads (at least one; ignored in manual mode)
        bool manual = false;     ///< no threads: the caller runs items with step()
    };

    sim_device()
        : sim_device(options{}) {}
    GPU_ASYNC_DECL explicit sim_device(options opts);
    /// Retires the device's lines, then cancels (see the header comment) and joins the workers.
    GPU_ASYNC_DECL ~sim_device();
    sim_device(const sim_device&) = delete;
    sim_device& operator=(const sim_device&) = delete;

    /// A stream with a line of its own (slot 0); dropping the handle gives the stream back and
    /// retires the line (reused for a later stream).
    GPU_ASYNC_DECL sim_stream_handle make_stream();
    /// A stream storing into `slot` of `line` (a device line from make_line(), or the caller's,
    /// which must then outlive the device). Give each stream a slot of its own.
    GPU_ASYNC_DECL sim_stream_handle make_stream(completion_line& line, slot_id slot);
    /// A zeroed line that lives as long as the device.
    GPU_ASYNC_DECL completion_line& make_line();

    bool manual() const noexcept { return manual_; }
    /// Streams not yet given back (and freed).
    GPU_ASYNC_DECL std::size_t stream_count() const;
    /// Lines the device holds (make_line()'s and the streams' own, in use or kept for reuse).
    GPU_ASYNC_DECL std::size_t line_count() const;

    /// Manual mode: runs `s`'s next queued item on the calling thread; false when it has none
    /// (or the device is not manual).
    GPU_ASYNC_DECL bool step(sim_stream& s);
    /// Manual mode: runs every queued item (stream by stream, in order); returns how many ran.
    GPU_ASYNC_DECL std::size_t step_all();

    /// Stops the device (see the header comment). Idempotent; later work is refused.
    GPU_ASYNC_DECL void shutdown(sim_shutdown mode);

private:
    friend class sim_stream;
    friend class sim_stream_handle;
    // own_line: the device made `line` for this stream alone; shared_slot: `line` is one of
    // make_line()'s, shared slot by slot.
    GPU_ASYNC_DECL sim_stream_handle make_stream_on(completion_line& line, slot_id slot,
                                                    bool own_line, bool shared_slot);
    // A handle was dropped: drop the queue; free now, or let the worker free it.
    GPU_ASYNC_DECL void release(sim_stream& s) noexcept;
    // No worker holds `s`: retire its own line (kept for reuse), then free it.
    GPU_ASYNC_DECL void dispose(sim_stream& s) noexcept;
    // After the workers stopped: drops every queued item; returns the device lines' slots whose
    // work it dropped (as many as it has room for), to retire with no lock held.
    /// A slot whose work was dropped, at the generation of the stream that had it.
    struct dropped_slot {
        const completion_line* line;
        slot_id slot;
        std::uint64_t generation;
    };
    GPU_ASYNC_DECL std::vector<dropped_slot> drop_queued() noexcept;
    GPU_ASYNC_DECL void worker_loop(detail::sim_worker& w);
    // Under w's lock: put `s`'s front item into the heap, due `d` from now.
    GPU_ASYNC_DECL void schedule_locked(detail::sim_worker& w, sim_stream& s);

    bool manual_;
    mutable detail::ranked_mutex mutex_{
        detail::lock_rank::device}; // guards streams_, lines_, next_worker_, shut_
    std::deque<completion_line> lines_;
    std::unordered_set<const completion_line*> shared_lines_; // lines_ made by make_line()
    std::vector<completion_line*> free_lines_;                // own lines of freed streams, retired
    std::vector<std::unique_ptr<detail::sim_worker>> workers_;
    std::vector<std::unique_ptr<sim_stream>> streams_;
    std::shared_ptr<detail::sim_life> life_ = std::make_shared<detail::sim_life>();
    std::size_t next_worker_ = 0;
    bool shut_ = false;
};

} // namespace gpu_async

#if GPU_ASYNC_HEADER_ONLY
#include <gpu_async/device/impl/sim_device.ipp>
#endif

#endif // GPU_ASYNC_DEVICE_SIM_DEVICE_HPP
