// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/asio/detail/completion_queue.hpp: a pending wait of the reactor service (reactor_op),
// and the completion queue its port's finished waits are delivered from (an implementation detail).
//
// A finished wait does not go to its executor one by one: what a scan finds goes, in order, onto
// the completion queue of the wait's port, and one drain handler per port, posted to the port's
// executor when its queue becomes non-empty, completes the whole batch there. The post happens
// with no lock held; its memory is the queue's own.
//
#ifndef GPU_ASYNC_ASIO_DETAIL_COMPLETION_QUEUE_HPP
#define GPU_ASYNC_ASIO_DETAIL_COMPLETION_QUEUE_HPP

#include <gpu_async/asio/detail/flavour.hpp>
#include <gpu_async/asio/error.hpp>
#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/detail/config.hpp>
#include <gpu_async/core/detail/scan_engine.hpp>
#include <gpu_async/core/time.hpp>
#include <gpu_async/core/wait_end.hpp>
#include <gpu_async/wait/detail/ranked_mutex.hpp>

#if defined(GPU_ASYNC_STANDALONE_ASIO)
#include <asio/error.hpp>
#else
#include <boost/asio/error.hpp>
#endif

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <utility>

namespace gpu_async::detail {
GPU_ASYNC_ASIO_NAMESPACE_BEGIN

class reactor_service;
class delivery;
class reactor_watcher;
class reactor_op;
struct ready_list;
class completion_queue;
struct reactor_port;

/// The port's codes for the endings that are not the library's own: Asio's (the one mapping
/// of a wait's end to a code is to_error_code in <gpu_async/core/wait_end.hpp>).
inline const generic_codes<error_code>& asio_codes() noexcept {
    static const generic_codes<error_code> codes{asio::error::operation_aborted,
                                                 asio::error::timed_out, asio::error::no_memory};
    return codes;
}

/// A pending wait as the reactor sees it. The concrete operation (a handler and its allocator,
/// with work guards where its executor needs them) derives from it; the reactor calls `complete`
/// (hand the completion to the executor; called with no lock held, at most once) or, at
/// shutdown, `destroy` (free it without invoking anything). Its engine part (descriptor, bound,
/// deadline, place in the table and in its port's group) is the scan engine's
/// (<gpu_async/core/detail/scan_engine.hpp>); its link (engine_wait::next) is the incoming batch's,
/// then the engine's (the port's group) while it is in the table, then the completion queue's.
/// Its group (engine_wait::group, set here and never changed) is its completion queue's: the op
/// finds its queue through it, with no pointer of its own.
class reactor_op : public engine_wait {
public:
    /// Completes (`invoke`) or destroys the op: one pointer for both.
    using func_type = void (*)(reactor_op*, bool invoke);

    inline reactor_op(const memory_descriptor& d, completion_queue* queue, func_type f) noexcept;

    /// Set by the reactor before `complete`.
    void set_result(wait_end r) noexcept { result_ = r; }
    wait_end result() const noexcept { return result_; }
    error_code ec() const noexcept { return to_error_code(result_, asio_codes()); }

    /// Hands the completion to the executor. Consumes the op, also when it throws (posting
    /// failed: the op has been destroyed without invoking anything).
    void complete() { func_(this, true); }
    void destroy() { func_(this, false); }

    /// The next op of the list it is on (incoming, ready, a completion queue).
    reactor_op* next_op() const noexcept { return static_cast<reactor_op*>(next); }
    /// The completion queue its completion is delivered from (its port's).
    inline completion_queue* queue() const noexcept;
    /// Whether `complete` dispatches to an executor other than the drain's (see
    /// set_foreign_executor).
    bool foreign_executor() const noexcept { return foreign_executor_; }
    /// When it was registered (the mono clock's ns), or 0: registered while nothing was
    /// predicted (no clock read). Set by the service at registration.
    /// When it was registered, if it was predicted then (else none: not learnt from).
    std::optional<mono_ns> started() const noexcept {
        return started_ns_ != 0 ? std::optional<mono_ns>(mono_ns{started_ns_}) : std::nullopt;
    }
    void started(std::optional<mono_ns> at) noexcept { started_ns_ = at ? at->ns : 0; }
    /// With its address, the key a cancellation looks up (never wraps). Set by the service.
    std::uint64_t serial() const noexcept { return serial_; }
    void serial(std::uint64_t s) noexcept { serial_ = s; }

protected:
    ~reactor_op() = default;

    /// Set at initiation when `complete` hands the handler to an executor other than the I/O
    /// executor the drain runs on (dispatch), rather than invoking it: see completion_queue::run.
    void set_foreign_executor(bool foreign) noexcept { foreign_executor_ = foreign; }
    /// Whether its work is counted by its queue (the concrete op's hold_work).
    bool counted() const noexcept { return counted_; }
    void set_counted() noexcept { counted_ = true; }

private:
    // The small fields first: they take the tail padding of engine_wait, not words of their own.
    wait_end result_ = wait_end::reached; // how it ended (the hot path)
    bool foreign_executor_ = false;       // see set_foreign_executor
    bool counted_ = false;                // see counted()
    func_type func_;
    std::uint64_t started_ns_ = 0; // when it was registered (wordwait clock), 0: not predicted
    std::uint64_t serial_ = 0; // with the address, the key a cancellation looks up (never wraps)
};

/// Asks for the cache line at `p`, to be written (a hint: nothing where the compiler has none).
inline void prefetch_line(const void* p) noexcept {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(p, 1);
#else
    (void)p;
#endif
}

/// Asks for the cache lines of `op` that the service and a drain read and write (the reactor's
/// part and the first line after it): with thousands of waits pending, an op is out of the cache
/// by the time it is taken in or completed.
inline void prefetch_op(const reactor_op* op) noexcept {
    const char* p = reinterpret_cast<const char*>(op);
    for (std::size_t at = 0; at < sizeof(reactor_op) + 64; at += 64)
        prefetch_line(p + at);
}

/// Ready completions in the order they were found (FIFO, linked through engine_wait::next).
struct ready_list {
    engine_list waits; // reactor_ops, linked through engine_wait::next
    // The completion queue of the first op pushed, and whether another queue's op followed
    // (noted while each op is at hand: completion_queue::enqueue then walks no list of one queue).
    completion_queue* queue = nullptr;
    bool mixed = false;

    reactor_op* head() const noexcept { return static_cast<reactor_op*>(waits.head); }
    reactor_op* tail() const noexcept { return static_cast<reactor_op*>(waits.tail); }
    std::size_t count() const noexcept { return waits.count; }
    void push(reactor_op* op) noexcept {
        if (waits.count == 0)
            queue = op->queue();
        else if (op->queue() != queue)
            mixed = true;
        waits.push(op);
    }
};

/// Where the finished waits of one port wait for delivery: an intrusive FIFO that one drain
/// handler at a time empties on the port's I/O executor. A batch of completions costs one post
/// (not one per wait), and the drain's memory is the queue's own, so delivering cannot fail for
/// want of memory with the standard executors; when posting the drain throws anyway (a custom
/// executor, an allocator out of memory), the waits stay queued and the service posts again
/// within one park bound: no wait is stranded, none is completed twice.
///
/// Reference counted: the port's state holds one reference and a posted (or to-be-reposted)
/// drain holds one, so a queue with waits in it outlives the port that filled it.
///
/// It is also the group of its port's waits in the engine's table (waits()): the group an op
/// is in names the queue it is delivered from.
class completion_queue : private engine_group {
public:
    completion_queue(const completion_queue&) = delete;
    completion_queue& operator=(const completion_queue&) = delete;

    void add_ref() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
    void release() noexcept {
        if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) free_(this);
    }

    /// Counts an op whose handler runs in this queue's drain as outstanding work on the port's
    /// I/O executor. The queue holds that work once (a tracked executor) while any such op lives,
    /// rather than each op holding its own, so `run()` does not return while a wait is pending.
    /// Throws when the work cannot be taken (nothing is counted then).
    GPU_ASYNC_DECL void work_started();
    /// An op counted by work_started() is gone (after its handler returned, or destroyed).
    GPU_ASYNC_DECL void work_finished() noexcept;

    /// Runs on the I/O executor (the drain): delivers the waits queued when it started, in
    /// order, then posts itself again if more arrived meanwhile. If a delivery throws (a handler
    /// invoked inline threw), the waits not yet delivered stay queued, a drain is posted for them,
    /// and the exception propagates. A wait whose handler has an executor of its own ends the
    /// drain too (the rest is posted again after it): that executor may run the handler inline
    /// and keep what it throws until the drain returns. Consumes the drain's reference.
    GPU_ASYNC_DECL void run();

    /// The drain was destroyed without running. When the service has shut down (the execution
    /// context is going away) the queued waits are destroyed without invoking their handlers;
    /// otherwise (an executor dropped it) the service posts a drain again. Consumes the drain's
    /// reference.
    GPU_ASYNC_DECL void dropped() noexcept;

protected:
    /// Posts one drain holding the reference the caller passes on. Returns false when posting
    /// failed before the drain took the reference (the caller still holds it and retries).
    using schedule_fn = bool (*)(completion_queue*) noexcept;
    using free_fn = void (*)(completion_queue*) noexcept;
    /// Takes (`hold`) one more hold of outstanding work on the I/O executor, or lets one go;
    /// taking may throw. Holds are alike: which one goes does not matter. Called with no lock
    /// held (the executor's work functions are its own code).
    using work_fn = void (*)(completion_queue*, bool hold);

    completion_queue(reactor_service& svc, schedule_fn s, free_fn f, work_fn w) noexcept
        : svc_(&svc)
        , schedule_(s)
        , free_(f)
        , work_(w) {}
    ~completion_queue() = default;

public:
    // --- the interface of a queue to the service and its parts (not for ports) ---------------

    /// Posts a drain for this queue (the port's schedule function); false when it could not.
    bool post_drain() noexcept { return schedule_(this); }
    /// The next queue of the to-schedule or retry list this queue is on (the lists are the
    /// service's, linked through the queues).
    completion_queue*& next_in_list() noexcept { return next_schedule_; }

    /// Appends the ops [head, tail] (linked by next_ready_). Returns true when a drain must be
    /// scheduled: the queue was idle; the caller then holds a new reference for it.
    bool push(reactor_op* head, reactor_op* tail) noexcept;
    /// Puts back what a drain did not deliver (in front of what arrived meanwhile); returns
    /// whether a drain must be posted again (posted_ stays set while one must).
    GPU_ASYNC_DECL bool put_back(reactor_op* rest) noexcept;
    /// Hands `list` to the ops' completion queues, in order (one push per run of one queue's ops,
    /// usually the whole list); returns the queues that need a drain posted (with a reference
    /// each), linked through next_schedule_.
    GPU_ASYNC_DECL static completion_queue* enqueue(ready_list& list) noexcept;
    /// Destroys every queued op uninvoked; the queue becomes idle. Consumes a drain reference.
    void abandon() noexcept;

    /// Its port's waits in the engine's table (under the service's lock): every op delivered
    /// from this queue is in this group while it is in the table.
    engine_group& waits() noexcept { return *this; }
    const engine_group& waits() const noexcept { return *this; }
    /// The queue whose waits() `g` is.
    static completion_queue* of(engine_group* g) noexcept {
        return static_cast<completion_queue*>(g);
    }

private:
    reactor_service* svc_;
    schedule_fn schedule_;
    free_fn free_;
    work_fn work_;
    std::atomic<std::size_t> refs_{1};
    // Ops counted by work_started(). A move from 0 takes a hold of the executor's work before
    // it counts, a move to 0 lets one go after, so a hold is there while the count is not 0
    // (other moves are one compare-and-swap).
    std::atomic<std::size_t> ops_{0};
    ranked_mutex mutex_{lock_rank::completion_queue};
    reactor_op* head_ = nullptr;
    reactor_op* tail_ = nullptr;
    bool posted_ = false;                       // a drain is posted, running or awaiting a retry
    completion_queue* next_schedule_ = nullptr; // in a to-schedule or retry list
};

inline reactor_op::reactor_op(const memory_descriptor& d, completion_queue* queue,
                              func_type f) noexcept
    : engine_wait(d)
    , func_(f) {
    group = &queue->waits();
}

inline completion_queue* reactor_op::queue() const noexcept {
    return completion_queue::of(group);
}

/// A counted reference to a completion_queue.
class queue_ref {
public:
    queue_ref() noexcept = default;
    /// Adopts a reference the caller already holds.
    explicit queue_ref(completion_queue* q) noexcept
        : q_(q) {}
    queue_ref(queue_ref&& o) noexcept
        : q_(std::exchange(o.q_, nullptr)) {}
    queue_ref& operator=(queue_ref&& o) noexcept {
        if (this != &o) {
            reset();
            q_ = std::exchange(o.q_, nullptr);
        }
        return *this;
    }
    ~queue_ref() { reset(); }
    void reset() noexcept {
        if (q_ != nullptr) std::exchange(q_, nullptr)->release();
    }
    completion_queue* get() const noexcept { return q_; }
    completion_queue* release_ownership() noexcept { return std::exchange(q_, nullptr); }
    explicit operator bool() const noexcept { return q_ != nullptr; }

private:
    completion_queue* q_ = nullptr;
};

/// What identifies a registered wait to a cancellation handler without touching it: looked up
/// under the service's lock, never dereferenced unless found registered.
struct reactor_key {
    memory_descriptor descriptor;
    const reactor_op* op;
    std::uint64_t serial;
};

/// The per-port state the service keeps: the queue its waits' completions are delivered from,
/// which is also the group of its waits in the engine's table (completion_queue::waits).
struct reactor_port {
    queue_ref queue;
};

GPU_ASYNC_ASIO_NAMESPACE_END
} // namespace gpu_async::detail

// Its definitions use the service: <gpu_async/asio/detail/reactor_service.hpp> includes them.

#endif // GPU_ASYNC_ASIO_DETAIL_COMPLETION_QUEUE_HPP
