// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/asio/reactor_shell.hpp: the locked shell of the reactor service over its scan
// engine (an implementation detail): registration from any thread, cancellation, retirement
// and faults, the engine's adapter, and the delivery of what leaves the engine to the ports'
// completion queues.
//
// The scan engine (<gpu_async/core/scan_engine.hpp>) holds the pending waits and decides what
// leaves; this shell serializes it under mutex_ (then the registration queue's lock, in the
// hierarchy of <gpu_async/host/ranked_mutex.hpp>), turns each wait that leaves into its op's
// result, and hands the ops, batched, to each port's completion queue, posting one drain per
// batch with no lock held. The waiter (the service's watcher thread or a run_fill caller) is
// the derived reactor_service's.
//
#ifndef GPU_ASYNC_ASIO_REACTOR_SHELL_HPP
#define GPU_ASYNC_ASIO_REACTOR_SHELL_HPP

#include <gpu_async/asio/completion_queue.hpp>
#include <gpu_async/asio/detail/delivery.hpp>
#include <gpu_async/asio/detail/registration_queue.hpp>
#include <gpu_async/asio/detail/waiter_roster.hpp>
#include <gpu_async/asio_flavour.hpp>
#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/completion_rhythm.hpp>
#include <gpu_async/core/detail/config.hpp>
#include <gpu_async/core/park_policy.hpp>
#include <gpu_async/core/scan_engine.hpp>
#include <gpu_async/core/time.hpp>
#include <gpu_async/doorbell.hpp>
#include <gpu_async/error.hpp>
#include <gpu_async/host/detail/bell_waiter.hpp>
#include <gpu_async/host/detail/mono_clock.hpp>
#include <gpu_async/host/ranked_mutex.hpp>
#include <gpu_async/line_health.hpp>
#include <gpu_async/line_life.hpp>
#include <gpu_async/line_watchers.hpp>
#include <gpu_async/wordwait.hpp>

#if defined(GPU_ASYNC_STANDALONE_ASIO)
#include <asio/error.hpp>
#else
#include <boost/asio/error.hpp>
#endif

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

namespace gpu_async {
GPU_ASYNC_ASIO_NAMESPACE_BEGIN

/// The default bound of one park of the reactor's waiter: 100 us. Producers that do not ring the
/// service's doorbell (GPU streams) are seen within one bound.
inline constexpr dur_ns default_park_bound = dur_ns::from_us(100);

GPU_ASYNC_ASIO_NAMESPACE_END
namespace detail {
GPU_ASYNC_ASIO_NAMESPACE_BEGIN

/// How a wait on `d` ends before it is registered, by one checked read of its word
/// (read_checked: judged, read, judged again; the ending by ending_of, judged at registration):
/// reached when complete while its line's life stood still; stale for a retired line's
/// descriptor (its line is not read); aborted when the line's life moved across the read (a
/// retirement found it pending: what was read does not count) or its slot's stream was given
/// back before storing the target; faulted for a faulted slot whose word has not reached the
/// target (what the stream stored before its fault still completes); none when it may wait.
inline std::optional<wait_end> result_at_start(const memory_descriptor& d) noexcept {
    return ending_of(read_checked(d, &descriptor_status), judgement::at_registration);
}

/// The locked shell over the scan engine; see the header comment. The reactor service derives
/// from it and adds the waiter.
///
/// Thread safety: every public member function may be called from any thread.
class reactor_shell : private line_watcher {
public:
    /// The doorbell host producers ring after their store (any thread).
    doorbell& bell() noexcept { return *bell_; }
    /// The doorbell, shared: a producer that holds it may outlive the service safely.
    std::shared_ptr<doorbell> shared_bell() const noexcept { return bell_; }

    /// The bound of one park when no registration asks for less (default_park_bound).
    dur_ns park_bound() const noexcept { return {park_bound_ns_.load(std::memory_order_relaxed)}; }
    /// Sets the park bound; zero is taken as 1 ns. Applies from the waiter's next park.
    GPU_ASYNC_DECL void park_bound(dur_ns bound) noexcept;

    /// Number of waits registered and not yet completed, cancelled or destroyed.
    GPU_ASYNC_DECL std::size_t pending() const;

    /// Number of `port`'s waits still registered.
    GPU_ASYNC_DECL std::size_t pending(const reactor_port& port) const;

    /// Number of drains posted, running or awaiting a retry (for tests and diagnostics): 0 once
    /// every completion queue is idle.
    std::uint32_t drains_out() const noexcept { return delivery_.gate().drains_out(); }

    // --- used by the I/O objects -------------------------------------------------------------

    /// What start() did with an op, and so what its caller must do with it.
    enum class start_result : std::uint8_t {
        registered, ///< pending: the service completes, cancels or destroys it
        finished,   ///< not registered, its result set: the caller calls `deliver()` (never inline)
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

    /// What start() would return for `op` without registering it: `finished` (its result set)
    /// or `dropped`; none when it would register it (call start(), which looks again). For a
    /// caller that completes a finished op itself and makes an op outstanding work only when
    /// it goes to the service (an immediate completion leaves the context's work alone).
    [[nodiscard]] GPU_ASYNC_DECL std::optional<start_result>
    ends_before_start(reactor_op& op,
                      std::optional<std::chrono::steady_clock::time_point> deadline) noexcept;

    /// Cancels the wait `wait` names: when it is still registered it is unlinked and completed
    /// with operation_aborted; otherwise (completed, cancelled, never started, or after shutdown)
    /// nothing happens and nothing is dereferenced. Returns whether this call cancelled it.
    GPU_ASYNC_DECL bool cancel(const reactor_key& wait);

    /// Cancels every registered wait of `port`; returns how many.
    GPU_ASYNC_DECL std::size_t cancel(reactor_port& port);

    /// Ends every wait on `line` (operation_aborted, through their executors); after it returns
    /// the service does not read `line` until a new wait on it is started. Line owners call the
    /// process-wide gpu_async::retire_line(), which calls this on every service.
    GPU_ASYNC_DECL void retire_line(const completion_line& line) noexcept override;

    /// Ends every wait on `slot` of `line` with errc::device_fault (the slot's stream of
    /// `generation` faulted), if the slot is still at that generation; line owners call the
    /// process-wide gpu_async::fault_slot(). Later waits on the slot are ended by the status
    /// check at their start.
    GPU_ASYNC_DECL void fault_slot(const completion_line& line, slot_id slot,
                                   std::uint64_t generation) noexcept override;

    /// Ends every wait on `slot` of `line`, through their executors: the slot's stream went (the
    /// process-wide gpu_async::retire_slot()); those it stored complete, the rest end
    /// operation_aborted; the line stays watched. Registrations not yet taken in whose
    /// descriptors carry `r.retired` are among them (read, not judged stale). Nothing is ended
    /// when the slot has moved past `r.next` meanwhile: the later retirement ends them.
    GPU_ASYNC_DECL void retire_slot(const completion_line& line, slot_id slot,
                                    slot_retirement r) noexcept override;

protected:
    GPU_ASYNC_DECL reactor_shell();
    GPU_ASYNC_DECL ~reactor_shell();
    reactor_shell(const reactor_shell&) = delete;
    reactor_shell& operator=(const reactor_shell&) = delete;
    /// From now on retirements and faults reach this shell. The most-derived service calls it
    /// last in its constructor: a retirement calls a virtual function on another thread, which
    /// must not run while a derived constructor still sets the object's dynamic type.
    void start_watching_lines() { add_line_watcher(*this); }
    /// No retirement or fault reaches this shell once it returns, and none is still asking it
    /// (one in progress has delivered what it ended); call with none of the shell's locks held.
    /// The derived service calls it first in its shutdown and in its destructor (idempotent).
    void stop_watching_lines() noexcept { remove_line_watcher(*this); }

    // --- the waiter's side, which the derived service provides (under the lock) -------------

    /// Starts the watcher thread (throws std::system_error when it cannot).
    virtual void start_thread_locked() = 0;

    /// start()'s steps: whether the op ends before it is registered (its result set: a deadline
    /// passed, a stale or faulted descriptor, a word already at its target); and the push into
    /// the incoming batch, with the ring that an idle or urgent waiter needs.
    GPU_ASYNC_DECL static bool
    ends_at_start(reactor_op& op, std::optional<std::chrono::steady_clock::time_point> deadline,
                  std::chrono::steady_clock::time_point now) noexcept;
    GPU_ASYNC_DECL void push_incoming(reactor_op& op, dur_ns bound,
                                      std::optional<std::chrono::steady_clock::time_point> deadline,
                                      std::chrono::steady_clock::time_point now) noexcept;

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

    /// What left the engine (each op finished as it left: left_locked) onto `list`, in order;
    /// then publishes the table's size. Every change to the table ends here (a pass, a
    /// settle, the shutdown), so the size is published in this one place and in
    /// fetch_incoming, where a take that finds nothing publishes it under the queue's lock for a
    /// registration's idle check (registration_queue).
    GPU_ASYNC_DECL void finish_locked(engine_list& out, ready_list& list) noexcept;
    /// The engine's leave hook: the op's result from why it ended, the port's list, the
    /// rhythm's sample, and the queue it goes to, while the op is at hand.
    GPU_ASYNC_DECL void left_locked(reactor_op& op) noexcept;
    /// Takes registrations in and, when waits are pending, scans at `now`; what ended goes onto
    /// `list`.
    GPU_ASYNC_DECL void pass_locked(std::chrono::steady_clock::time_point now,
                                    ready_list& list) noexcept;
    /// Takes registrations in before a cancellation, retirement or fault (so that a wait not yet
    /// taken in is found), with the waits of their slots that the same store reached.
    GPU_ASYNC_DECL void take_in_settled_locked(engine_list& out) noexcept;
    /// Under the lock, after taking in what is queued, `end(out)` takes waits out of the engine
    /// (a retirement, a fault); they are settled and scheduled after it.
    template <class End>
    void end_waits(End&& end) noexcept;
    void publish_size() noexcept { incoming_.publish(engine_.size()); }
    void link_locked(reactor_op& op) noexcept;
    void unlink_port_locked(reactor_op& op) noexcept;
    dur_ns bound_locked(std::chrono::steady_clock::time_point now, dur_ns bound) const noexcept;

    // --- delivery -------------------------------------------------------------------------------

    friend class completion_queue;
    /// What left the engine, finished (finish_locked), handed to its completion queues in order
    /// (completion_queue::enqueue; under the lock, so no queue can go away meanwhile); returns
    /// the queues that need a drain posted (with a reference each).
    GPU_ASYNC_DECL completion_queue* settle_locked(engine_list& out) noexcept;
    /// Posts a drain for each queue of the list; one that cannot be posted waits in the retry
    /// list (the waiter posts it again within one park bound) or, after shutdown, is abandoned.
    void schedule(completion_queue* list) noexcept;
    /// Called by a drain after its batch, on the I/O executor: scans the lines when the bell
    /// rang since the last scan and the lock is free (never waits for it).
    GPU_ASYNC_DECL void scan_after_drain() noexcept;
    /// Keeps `q` (its drain reference included) for the waiter to post again, or abandons it
    /// after shutdown.
    void retry_later(completion_queue* q) noexcept;

    /// Runs the line owners' health queries when one is due (line_health.hpp: at most one
    /// run per fault backstop in the process); no lock held, waits pending.
    static void query_health() noexcept { query_line_health(); }
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
        const std::uint64_t fill = roster_.fill_bound_ns();
        return dur_ns{fill != 0 ? fill : park_bound_ns_.load(std::memory_order_relaxed)};
    }
    /// The estimator's plan for the rhythm: the margin is one device poll interval.
    deadline_plan rhythm_plan() const noexcept;
    /// Feeds what `op`, found complete now, teaches its slot's rhythm (under the lock; never
    /// throws: without memory the sample is dropped).
    void learn_locked(const reactor_op& op) noexcept;

    std::shared_ptr<doorbell> bell_;
    std::atomic<std::uint64_t> park_bound_ns_{default_park_bound.ns};
    std::atomic<std::uint64_t> next_serial_{1};
    mutable ranked_mutex mutex_{lock_rank::reactor};
    scan_engine engine_{library_line_life()}; // the pending waits (mutex_)
    // Who waits for the table (the watcher thread, FILL drivers): changed under mutex_, read
    // without it through what it publishes (whether a waiter is present, a stop, the FILL
    // bound). A wait registered while none waits is scanned by nobody until a watcher starts.
    waiter_roster roster_;
    detail::bell_waiter waiter_; // the wait between scans (watcher thread, run_fill's park)
    std::atomic<bool> predict_{true};
    rhythm_learner rhythm_; // per slot, registration to completion (under the lock)
    std::atomic<bool> shut_down_{false};
    // Registered, not yet taken in, with the table's size as last published (its own lock,
    // taken after mutex_ when both are held).
    registration_queue incoming_{engine_.make_batch()};
    // A registration with a deadline within one park bound or a bound tighter than the park
    // bound came in: the watcher scans now rather than stand back.
    std::atomic<bool> urgent_{false};
    // What left the engine on its way to the completion queues, the queues awaiting a retry, and
    // the drains out (the stand-back gate).
    delivery delivery_;
};

GPU_ASYNC_ASIO_NAMESPACE_END
} // namespace detail
} // namespace gpu_async

#if GPU_ASYNC_HEADER_ONLY
#include <gpu_async/impl/completion_queue.ipp>
#include <gpu_async/impl/reactor_shell.ipp>
#endif

#endif // GPU_ASYNC_ASIO_REACTOR_SHELL_HPP
