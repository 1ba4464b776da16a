// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/asio/reactor_service.hpp: the reactor service that watches completion lines for
// every gpu_completion_port of one execution context (an implementation detail, as Asio keeps its
// services: the port and run_fill are the public API).
//
// Design:
//
// - One service per execution context (io_context, thread_pool, ...), found through
//   asio::use_service. It owns a doorbell (<gpu_async/doorbell.hpp>), shared with the producers
//   that ring it (shared_bell()): host producers (the simulated device, test threads) store to
//   their line and then ring it; GPU producers may store to the doorbell's line as well. A
//   producer that outlives the service keeps the doorbell alive and rings nobody.
// - One waiter: a watcher thread of the service's own, started lazily at the first pending wait,
//   joined while run_fill() drives the context (the run_fill thread is then the waiter; the
//   watcher restarts when the last run_fill returns with waits pending), and joined on shutdown
//   and before fork (it restarts lazily in the parent and the child). The waiter parks on the
//   doorbell only, so its wake latency is that of one futex (or one user-mode monitor on the
//   doorbell's line, where the CPU has one) whatever the number of lines watched.
// - The pending waits live in one gpu_async::watch_table (<gpu_async/core/watch_table.hpp>): a
//   registration reads the word once (complete now, or registered in order); a scan reads one
//   word per watched slot and hands out what completed in ascending target order per slot.
// - Every park is bounded by the park bound (default_park_bound, 100 us, settable per service and
//   per registration) so producers that do not ring (GPUs) are seen within one bound, and by the
//   earliest registration deadline.
// - Completions are batched, not posted one by one: what a scan finds goes, in the order found,
//   onto the completion queue of each wait's port (an intrusive list), and one drain handler per
//   port, posted to the port's executor when its queue becomes non-empty, completes the whole
//   batch there (the handler invoked at once when its executor is the port's). The post happens
//   with no lock held; its memory is the queue's own. Exactly one of (scan, cancellation, line
//   retirement, shutdown) takes a wait out of the table, under the lock; whoever does queues or
//   destroys it.
// - While a drain is out (posted, running or awaiting a retry), its end scans the lines on the
//   executor's thread (scan_after_drain), and the watcher stands back: it waits for the drains
//   to end (a short spin, then, while rings come densely, a sleep on the count of drains out)
//   instead of scanning beside them, so a busy port's thread completes, re-arms and scans alone,
//   as under run_fill, with no lock or line traded between two threads per completion. It scans
//   anyway once a park bound passes in which no drain ran (a handler or an executor holds one
//   back), at a device's doorbell signal, at a registration with a deadline within one park
//   bound or a tighter bound, and after stand_back_bounds park bounds at most; in between, the
//   drains' scans (each after a ring) see what producers store.
// - Cancellation by key, as Asio's timers do it: a cancellation handler holds the wait's
//   descriptor, its address and its serial number, and looks the wait up under the lock; it
//   never dereferences a wait that is not registered, so a signal racing the completion on
//   another thread is harmless.
// - Line retirement: the service is a line watcher (<gpu_async/line_retirement.hpp>); a line
//   owner that retires a line ends its waits here (operation_aborted) before the memory goes.
// - shutdown() destroys pending waits without invoking their handlers.
// - The waits live in a scan engine (<gpu_async/core/scan_engine.hpp>); the watcher's steps are
//   the park policy's (<gpu_async/core/park_policy.hpp>). Locks: mutex_ then incoming_mutex_, in
//   the hierarchy written at the top of <gpu_async/line_retirement.hpp>.
//
#ifndef GPU_ASYNC_ASIO_REACTOR_SERVICE_HPP
#define GPU_ASYNC_ASIO_REACTOR_SERVICE_HPP

#include <gpu_async/asio/completion_queue.hpp>
#include <gpu_async/asio_flavour.hpp>
#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/completion_rhythm.hpp>
#include <gpu_async/core/park_policy.hpp>
#include <gpu_async/core/scan_engine.hpp>
#include <gpu_async/core/time.hpp>
#include <gpu_async/detail/bell_waiter.hpp>
#include <gpu_async/detail/config.hpp>
#include <gpu_async/doorbell.hpp>
#include <gpu_async/error.hpp>
#include <gpu_async/line_retirement.hpp>
#include <gpu_async/wordwait.hpp>

#if defined(GPU_ASYNC_STANDALONE_ASIO)
#include <asio/error.hpp>
#include <asio/execution_context.hpp>
#else
#include <boost/asio/error.hpp>
#include <boost/asio/execution_context.hpp>
#endif

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <utility>
#include <vector>

namespace gpu_async {
GPU_ASYNC_ASIO_NAMESPACE_BEGIN

/// The default bound of one park of the reactor's waiter: 100 us. Producers that do not ring the
/// service's doorbell (GPU streams) are seen within one bound.
inline constexpr dur_ns default_park_bound = dur_ns::from_us(100);

GPU_ASYNC_ASIO_NAMESPACE_END
namespace detail {
GPU_ASYNC_ASIO_NAMESPACE_BEGIN

/// The code a wait on `d` ends with before it is registered: errc::stale_descriptor for a
/// retired line's descriptor (its line is not read), errc::device_fault for a faulted slot whose
/// word has not reached the target (what the stream stored before its fault still completes);
/// empty when it may wait.
inline error_code status_error(const memory_descriptor& d) noexcept {
    switch (descriptor_status(d)) {
    case line_status::live:
        return {};
    case line_status::stale:
        return errc::stale_descriptor;
    case line_status::faulted:
        if (d.is_complete()) return {};
        return errc::device_fault;
    }
    return {};
}

/// The reactor service of one execution context. See the header comment for its design.
///
/// Thread safety: every member function may be called from any thread.
class reactor_service : public asio::execution_context::service, private line_watcher {
public:
    using key_type = reactor_service;
    inline static asio::execution_context::id id;

    GPU_ASYNC_DECL explicit reactor_service(asio::execution_context& ctx);
    GPU_ASYNC_DECL ~reactor_service() override;

    /// The doorbell host producers ring after their store (any thread).
    doorbell& bell() noexcept { return *bell_; }
    /// The doorbell, shared: a producer that holds it may outlive the service safely.
    std::shared_ptr<doorbell> shared_bell() const noexcept { return bell_; }

    /// The bound of one park when no registration asks for less (default_park_bound).
    dur_ns park_bound() const noexcept { return {park_bound_ns_.load(std::memory_order_relaxed)}; }
    /// Sets the park bound; zero is taken as 1 ns. Applies from the waiter's next park.
    GPU_ASYNC_DECL void park_bound(dur_ns bound) noexcept;

    /// Without a user-mode monitor, while the doorbell counts device producers (GPU lines that
    /// store its device word: doorbell::add_device_producer), the waiter sleeps in steps of this
    /// interval and reads the device word after each: the longest a device's store waits to be
    /// seen, against one wake-up of the waiter per interval (the CPU it costs). Default
    /// default_device_poll; zero is taken as 1 ns.
    dur_ns device_poll() const noexcept { return waiter_.device_poll(); }
    void device_poll(dur_ns interval) noexcept { waiter_.device_poll(interval); }
    /// Whether the waiter learns each slot's completion rhythm and, in the same conditions as
    /// device_poll (device producers, no monitor), sleeps to the earliest expected completion
    /// (within the park bound) instead of stepping (default true). Turned on, it learns from
    /// waits started after the change; turned off, the waiter steps from its next park.
    bool predicts() const noexcept { return predict_.load(std::memory_order_relaxed); }
    void predicts(bool on) noexcept { predict_.store(on, std::memory_order_relaxed); }
    /// Lines with a learnt rhythm (for tests and diagnostics).
    GPU_ASYNC_DECL std::size_t rhythm_lines() const;
    /// The sleep after a wait's start on (line, slot) that the rhythm allows now (for tests and
    /// diagnostics): completion_rhythm::sleep_ns under rhythm_plan().
    GPU_ASYNC_DECL std::optional<std::uint64_t> rhythm_sleep_ns(const completion_line& line,
                                                                slot_id slot) const;
    /// At most this many pending waits are looked through for the earliest expected completion;
    /// with more the waiter steps (a scan per park would cost more than the steps it saves).
    static constexpr std::size_t predict_max_pending = park_policy::predict_max_pending;

    /// Ends every wait on `line` (operation_aborted, through their executors); after it returns
    /// the service does not read `line` until a new wait on it is started. Line owners call the
    /// process-wide gpu_async::retire_line(), which calls this on every service.
    GPU_ASYNC_DECL void retire_line(const completion_line& line) noexcept override;

    /// Ends every wait on `slot` of `line` with errc::device_fault (the slot's stream faulted);
    /// line owners call the process-wide gpu_async::fault_slot(). Later waits on the slot are
    /// ended by the status check at their start.
    GPU_ASYNC_DECL void fault_slot(const completion_line& line, slot_id slot) noexcept override;

    /// Number of waits registered and not yet completed, cancelled or destroyed.
    GPU_ASYNC_DECL std::size_t pending() const;

    /// Number of `port`'s waits still registered.
    GPU_ASYNC_DECL std::size_t pending(const reactor_port& port) const;

    /// Whether the watcher thread is running (for tests and diagnostics).
    GPU_ASYNC_DECL bool watcher_running() const;

    /// Number of drains posted, running or awaiting a retry (for tests and diagnostics): 0 once
    /// every completion queue is idle.
    std::uint32_t drains_out() const noexcept {
        return drains_out_.load(std::memory_order_acquire);
    }

    // --- used by the I/O objects -------------------------------------------------------------

    /// What start() did with an op, and so what its caller must do with it.
    enum class start_result : std::uint8_t {
        registered, ///< pending: the service completes, cancels or destroys it
        finished,   ///< not registered, `ec` set: the caller calls `deliver()` (never inline)
        dropped     ///< the service has shut down: the caller calls `destroy()`
    };

    /// The key a cancellation handler for `op` holds (call before start()).
    GPU_ASYNC_DECL reactor_key make_key(reactor_op& op) noexcept;

    /// Starts `op` for `port`: registers it, unless its descriptor is already complete or its
    /// deadline has passed (`finished`), or the service has shut down (`dropped`); in those cases
    /// the op stays the caller's, who then delivers or destroys it outside every lock. `bound`
    /// (zero: the service's) bounds the waiter's parks while it is pending; `deadline`, when
    /// given, completes it with asio::error::timed_out. Registering a wait may complete other
    /// waits of the same slot (the word moved far since the last scan): they are queued for
    /// delivery before this returns. Throws std::system_error when the watcher thread cannot be
    /// started, std::bad_alloc (nothing registered; the op stays the caller's).
    [[nodiscard]] GPU_ASYNC_DECL start_result
    start(reactor_port& port, reactor_op* op, dur_ns bound = {},
          std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);

    /// Delivers an op start() returned as `finished`: queued on its port's completion queue,
    /// whose drain completes it on the port's executor (never inline).
    GPU_ASYNC_DECL void deliver(reactor_op* op) noexcept;

    /// Cancels the wait `wait` names: when it is still registered it is unlinked and completed
    /// with operation_aborted; otherwise (completed, cancelled, never started, or after shutdown)
    /// nothing happens and nothing is dereferenced. Returns whether this call cancelled it.
    GPU_ASYNC_DECL bool cancel(const reactor_key& wait);

    /// Cancels every registered wait of `port`; returns how many.
    GPU_ASYNC_DECL std::size_t cancel(reactor_port& port);

    // --- FILL mode (run_fill) ----------------------------------------------------------------

    /// While at least one FILL driver is active, the watcher thread stands down and the drivers
    /// are the waiters. `park_bound`: the driver's park bound (predicting() weighs the longest
    /// of the drivers'); end_fill() takes the same.
    GPU_ASYNC_DECL void begin_fill(dur_ns park_bound);
    GPU_ASYNC_DECL void end_fill(dur_ns park_bound);

    /// Scans the lines once and completes what is due; returns how many completed.
    GPU_ASYNC_DECL std::size_t poll_ready();

    /// Parks the caller on the doorbell until it rings past `seen` (a bell().count() read before
    /// the caller's last poll_ready), at most `bound` and at most to the earliest deadline.
    GPU_ASYNC_DECL void park(std::uint64_t seen, dur_ns bound);

private:
    /// Ready completions in the order they were found (FIFO, linked through engine_wait::next).
    struct ready_list {
        reactor_op* head = nullptr;
        reactor_op* tail = nullptr;
        std::size_t count = 0;
        // The completion queue of the first op pushed, and whether another queue's op followed
        // (noted while each op is at hand: enqueue_locked then walks no list of one queue).
        completion_queue* queue = nullptr;
        bool mixed = false;
        void push(reactor_op* op) noexcept {
            op->next = nullptr;
            if (tail != nullptr)
                tail->next = op;
            else
                head = op;
            tail = op;
            if (count == 0)
                queue = op->queue_;
            else if (op->queue_ != queue)
                mixed = true;
            ++count;
        }
    };

    GPU_ASYNC_DECL void shutdown() override;
    GPU_ASYNC_DECL void notify_fork(asio::execution_context::fork_event event) override;

    // --- the engine's adapter (under mutex_) ----------------------------------------------------

    /// The engine's fetch: swaps the incoming registrations into `b`; with none, publishes the
    /// table's size (see start(): a registration after that take reads it and rings).
    void fetch_incoming(engine_batch& b) noexcept;
    auto fetch() noexcept {
        return [this](engine_batch& b) { fetch_incoming(b); };
    }
    /// The engine kept a wait: linked into its port's list (cancel(port)).
    auto registered() noexcept {
        return [this](engine_wait& w) { link_locked(static_cast<reactor_op&>(w)); };
    }
    /// What left the engine: the op's result from why it ended, the port's list, the rhythm's
    /// sample, then onto `list`, in order.
    GPU_ASYNC_DECL void finish_locked(engine_list& out, ready_list& list) noexcept;
    /// Takes registrations in and, when waits are pending, scans at `now`; what ended goes onto
    /// `list`.
    GPU_ASYNC_DECL void pass_locked(std::chrono::steady_clock::time_point now,
                                    ready_list& list) noexcept;
    /// Takes registrations in before a cancellation, retirement or fault (so that a wait not yet
    /// taken in is found), with the waits of their slots that the same store reached.
    GPU_ASYNC_DECL void take_in_settled_locked(engine_list& out) noexcept;
    void publish_size() noexcept { table_size_.store(engine_.size(), std::memory_order_seq_cst); }
    void link_locked(reactor_op& op) noexcept;
    void unlink_port_locked(reactor_op& op) noexcept;
    dur_ns bound_locked(std::chrono::steady_clock::time_point now, dur_ns bound) const noexcept;

    // --- delivery -------------------------------------------------------------------------------

    friend class completion_queue;
    /// Hands `list` to the ops' completion queues, in order (under the lock, so no queue can go
    /// away meanwhile); returns the queues that need a drain posted (with a reference each).
    completion_queue* enqueue_locked(ready_list& list) noexcept;
    /// Posts a drain for each queue of the list; one that cannot be posted waits in the retry
    /// list (the waiter posts it again within one park bound) or, after shutdown, is abandoned.
    void schedule(completion_queue* list) noexcept;
    /// Called by a drain after its batch, on the I/O executor: scans the lines when the bell
    /// rang since the last scan and the lock is free (never waits for it).
    GPU_ASYNC_DECL void scan_after_drain() noexcept;
    /// A queue's drain was posted (its posted_ flag set), or ended without being posted again.
    void drain_out() noexcept { drains_out_.fetch_add(1, std::memory_order_seq_cst); }
    GPU_ASYNC_DECL void drain_ended() noexcept;
    /// Ends a stand-back (bumps the eventcount, wakes its sleeper).
    void wake_stand_back() noexcept;
    /// Keeps `q` (its drain reference included) for the waiter to post again, or abandons it
    /// after shutdown.
    void retry_later(completion_queue* q) noexcept;
    /// Takes the retry list (under the lock).
    completion_queue* take_retries_locked() noexcept { return std::exchange(retry_, nullptr); }

    // --- the waiter -----------------------------------------------------------------------------

    /// Runs the line owners' health queries when one is due (line_retirement.hpp: at most one
    /// run per fault backstop in the process); no lock held, waits pending.
    static void query_health() noexcept {
        if (line_health_watched()) query_line_health(detail::wordwait_now_ns());
    }
    /// Whether no thread is the waiter: no FILL driver runs and no watcher thread (under the
    /// lock). A wait registered then is scanned by nobody until a watcher starts.
    bool no_waiter_locked() const noexcept { return fill_ == 0 && !thread_.joinable(); }
    /// Whether waits are registered or queued (under the lock).
    bool waits_locked() const;
    void start_thread_locked();
    void stop_thread();
    /// The watcher thread: passes of park_policy's steps until stopped.
    void watcher_main();
    /// The watcher's steps (lock held on entry and exit; each releases it while it waits).
    void post_retries_step(std::unique_lock<std::mutex>& lk, std::uint64_t seen);
    void idle_step(std::unique_lock<std::mutex>& lk, std::uint64_t seen);
    void stand_back_step(std::unique_lock<std::mutex>& lk);
    void scan_step(std::unique_lock<std::mutex>& lk, std::uint64_t seen);
    /// Parks until a ring or a device's signal, at most `bound` (the shared watcher wait,
    /// <gpu_async/detail/bell_waiter.hpp>). `watching`: waits are pending.
    void park_on_bell(std::uint64_t seen, dur_ns bound, bool watching = true) {
        waiter_.park(*bell_, seen, bound, watching);
    }
    /// Whether waits started now are predicted: predicts(), device producers on the doorbell, no
    /// user-mode monitor (a monitor sees the device's store at once: nothing to predict), and a
    /// device poll interval shorter than the waiter's park bound (park_policy::polls_within).
    bool predicting() const noexcept {
        return predict_.load(std::memory_order_relaxed) && bell_->device_producers() != 0 &&
               !waiter_.has_monitor() &&
               park_policy::polls_within(waiter_.device_poll(), waiter_bound());
    }
    /// The park bound of the thread that waits for the table: the longest of the FILL drivers'
    /// own while any runs, else the watcher's, park_bound().
    dur_ns waiter_bound() const noexcept {
        const std::uint64_t fill = fill_bound_ns_.load(std::memory_order_relaxed);
        return dur_ns{fill != 0 ? fill : park_bound_ns_.load(std::memory_order_relaxed)};
    }
    /// The estimator's plan for the rhythm: the margin is one device poll interval.
    deadline_plan rhythm_plan() const noexcept;
    /// Feeds what `op`, found complete now, teaches its slot's rhythm (under the lock; never
    /// throws: without memory the sample is dropped).
    void learn_locked(const reactor_op& op) noexcept;
    /// park_policy::predicted_sleep for the pending waits, their expected completions from the
    /// learnt rhythms.
    std::optional<park_policy::predicted_park> predicted_sleep_locked(std::uint64_t now_ns,
                                                                      dur_ns bound) const;
    /// Parks as park_on_bell, or sleeps and polls as predicted (bell_waiter::park_predicted);
    /// returns whether the next scan's samples are late.
    bool park_between_scans(std::uint64_t seen, dur_ns bound,
                            std::optional<park_policy::predicted_park> sleep);
    /// While drains are out (their ends scan), the watcher waits for them instead of scanning
    /// beside them: spins as a park would, then, while rings come densely, sleeps on
    /// drains_out_. Returns when none is out, at a stop, or after `bound`. `spin_first`: spin
    /// before the sleep (the first round of a stand-back).
    void stand_back(dur_ns bound, bool spin_first);
    /// What ends a stand-back: no drain out, a stop, an urgent registration, a device's signal.
    GPU_ASYNC_DECL bool stand_back_over() const noexcept;

    std::shared_ptr<doorbell> bell_;
    std::atomic<std::uint64_t> park_bound_ns_{default_park_bound.ns};
    std::atomic<std::uint64_t> fill_bound_ns_{0}; // the longest in fill_bounds_ (0: none)
    std::multiset<std::uint64_t> fill_bounds_;    // the FILL drivers' park bounds
    std::atomic<std::uint64_t> next_serial_{1};
    mutable std::mutex mutex_;
    scan_engine engine_{&descriptor_status}; // the pending waits (under mutex_)
    std::size_t fill_ = 0;
    bool stop_ = false;
    detail::bell_waiter waiter_; // the wait between scans (watcher thread, run_fill's park)
    std::atomic<bool> predict_{true};
    completion_rhythm rhythm_;        // per slot, registration to completion (under the lock)
    bool scan_late_ = false;          // the next scan follows a predicted sleep the device outran
    std::uint64_t slept_from_ns_ = 0; // with scan_late_: when that sleep began (the last look)
    /// The longest spin of a stand-back before it sleeps on drains_out_ (dense rings only).
    static constexpr std::uint64_t stand_back_spin_ns = 20000;
    std::atomic<bool> shut_down_{false};
    std::atomic<bool> waiter_present_{false}; // the watcher runs or a FILL driver is active
    // Registered, not yet taken in, in registration order (engine_batch: an array while it has
    // room, so a registration never allocates, then a stack). Under incoming_mutex_, held to add
    // one, to take them all or to count them (pending()), never during a scan; taken after
    // mutex_ when both are held.
    mutable std::mutex incoming_mutex_;
    engine_batch incoming_ = engine_.make_batch();
    std::atomic<std::size_t> table_size_{0};   // engine_.size() as last published
    std::atomic<std::uint64_t> scanned_at_{0}; // the ring count before a drain's last scan
    // Drains posted, running or awaiting a retry (queues with posted_ set); a futex word that
    // the watcher sleeps on while it stands back (stand_back), with its sleepers counted.
    std::atomic<std::uint32_t> drains_out_{0};
    // The stand-back's eventcount: bumped (then its sleepers woken) by whatever ends a
    // stand-back: the last drain's end, a stop, an urgent registration.
    std::atomic<std::uint32_t> stand_back_epoch_{0};
    std::atomic<std::uint32_t> stand_back_sleepers_{0};
    // A registration with a deadline within one park bound or a bound tighter than the park
    // bound came in: the watcher scans now rather than stand back.
    std::atomic<bool> urgent_{false};
    std::atomic<bool> stopping_{false}; // stop_, readable without the lock (ends a stand-back)
    std::atomic<std::uint64_t> drain_progress_{0}; // drains' scans, and every 64 ops they ran
    completion_queue* retry_ = nullptr;            // queues whose drain could not be posted
    std::thread thread_;
};

GPU_ASYNC_ASIO_NAMESPACE_END
} // namespace detail
} // namespace gpu_async

#if GPU_ASYNC_HEADER_ONLY
#include <gpu_async/impl/completion_queue.ipp>
#include <gpu_async/impl/reactor_service.ipp>
#endif

#endif // GPU_ASYNC_ASIO_REACTOR_SERVICE_HPP
