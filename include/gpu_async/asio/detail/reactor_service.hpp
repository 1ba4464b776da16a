// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/asio/detail/reactor_service.hpp: the reactor service that watches completion lines for
// every gpu_completion_port of one execution context (an implementation detail, as Asio keeps its
// services: the port and run_fill are the public API).
//
// Design:
//
// - One service per execution context (io_context, thread_pool, ...), found through
//   asio::use_service. It owns a doorbell (<gpu_async/wait/doorbell.hpp>), shared with the
//   producers that ring it (shared_bell()): host producers (the simulated device, test threads)
//   store to their line and then ring it; GPU producers may store to the doorbell's line as well. A
//   producer that outlives the service keeps the doorbell alive and rings nobody.
// - One waiter: a watcher thread of the service's own, started lazily at the first pending wait,
//   joined while run_fill() drives the context (the run_fill thread is then the waiter; the
//   watcher restarts when the last run_fill returns with waits pending), and joined on shutdown
//   and before fork (it restarts lazily in the parent and the child). The waiter parks on the
//   doorbell only, so its wake latency is that of one futex (or one user-mode monitor on the
//   doorbell's line, where the CPU has one) whatever the number of lines watched.
// - A registration waits in the incoming queue until a take-in; the waits watched then live in
//   the scan engine's gpu_async::watch_table (<gpu_async/core/watch_table.hpp>): a
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
// - Line retirement: the service is a line watcher (<gpu_async/line/detail/line_watchers.hpp>); a
// line
//   owner that retires a line ends its waits here (operation_aborted) before the memory goes.
// - shutdown() first leaves the line watchers (after a retirement asking the service has
//   delivered: nothing posts into the context or reaches the service from a retirement after
//   it), then destroys pending waits without invoking their handlers.
// - The service is made of parts, each with one job: the scan engine
//   (<gpu_async/core/detail/scan_engine.hpp>), which holds the pending waits and decides what
//   leaves; the registration queue (asio/detail/registration_queue.hpp), registrations from any
//   thread not yet taken in; the delivery (asio/detail/delivery.hpp), what left on its way to the
//   ports' completion queues, the drains to post again, and the drains out; the waiter roster
//   (asio/detail/waiter_roster.hpp), who waits (the watcher thread, run_fill callers); and the
//   watcher (asio/detail/reactor_watcher.hpp), the thread that carries out the park policy's
//   steps (<gpu_async/core/park_policy.hpp>). This class serializes the engine under mutex_,
//   turns each wait that leaves into its op's result, and answers the ports, run_fill, line
//   owners and Asio. Locks: mutex_ then the registration queue's, ranked in the hierarchy of
//   <gpu_async/wait/detail/ranked_mutex.hpp>.
//
#ifndef GPU_ASYNC_ASIO_DETAIL_REACTOR_SERVICE_HPP
#define GPU_ASYNC_ASIO_DETAIL_REACTOR_SERVICE_HPP

#include <gpu_async/asio/detail/completion_queue.hpp>
#include <gpu_async/asio/detail/delivery.hpp>
#include <gpu_async/asio/detail/flavour.hpp>
#include <gpu_async/asio/detail/reactor_watcher.hpp>
#include <gpu_async/asio/detail/registration_queue.hpp>
#include <gpu_async/asio/detail/waiter_roster.hpp>
#include <gpu_async/asio/error.hpp>
#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/completion_rhythm.hpp>
#include <gpu_async/core/detail/config.hpp>
#include <gpu_async/core/detail/scan_engine.hpp>
#include <gpu_async/core/park_policy.hpp>
#include <gpu_async/core/time.hpp>
#include <gpu_async/core/wait_tuning.hpp>
#include <gpu_async/line/detail/line_watchers.hpp>
#include <gpu_async/line/line_health.hpp>
#include <gpu_async/line/line_life.hpp>
#include <gpu_async/wait/detail/bell_waiter.hpp>
#include <gpu_async/wait/detail/mono_clock.hpp>
#include <gpu_async/wait/detail/ranked_mutex.hpp>
#include <gpu_async/wait/doorbell.hpp>
#include <gpu_async/wait/wordwait.hpp>

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
#include <thread>
#include <utility>

namespace gpu_async {
GPU_ASYNC_ASIO_NAMESPACE_BEGIN

/// The default bound of one park of the reactor's waiter (wait_tuning::park_bound, 100 us).
/// Producers that do not ring the service's doorbell (GPU streams) are seen within one bound.
inline constexpr dur_ns default_park_bound = default_wait_tuning.park_bound;

GPU_ASYNC_ASIO_NAMESPACE_END
namespace detail {
GPU_ASYNC_ASIO_NAMESPACE_BEGIN

/// The reactor service of one execution context. See the header comment for its design.
///
/// Thread safety: every public member function may be called from any thread.
class reactor_service final : public asio::execution_context::service, private line_watcher {
public:
    using key_type = reactor_service;
    inline static asio::execution_context::id id;

    GPU_ASYNC_DECL explicit reactor_service(asio::execution_context& ctx);
    GPU_ASYNC_DECL ~reactor_service() override;

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
    /// At most this many pending waits are looked through for the earliest expected completion
    /// (wait_tuning::predict_max_pending).
    static constexpr std::size_t predict_max_pending = default_wait_tuning.predict_max_pending;

    /// Whether the watcher thread is running (for tests and diagnostics).
    GPU_ASYNC_DECL bool watcher_running() const;

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

    /// Starts `op` for its port (the one whose completion queue it was made with): registers
    /// it, unless its descriptor is already complete or its
    /// deadline has passed (`finished`), or the service has shut down (`dropped`); in those cases
    /// the op stays the caller's, who then delivers or destroys it outside every lock. `bound`
    /// (zero: the service's) bounds the waiter's parks while it is pending; `deadline`, when
    /// given, completes it with asio::error::timed_out. Registering a wait may complete other
    /// waits of the same slot (the word moved far since the last scan): they are queued for
    /// delivery before this returns. Throws std::system_error when the watcher thread cannot be
    /// started, std::bad_alloc (nothing registered; the op stays the caller's).
    [[nodiscard]] GPU_ASYNC_DECL start_result start(reactor_op* op, dur_ns bound = {},
                                                    std::optional<mono_ns> deadline = std::nullopt);

    /// Delivers an op start() returned as `finished`: queued on its port's completion queue,
    /// whose drain completes it on the port's executor (never inline).
    GPU_ASYNC_DECL void deliver(reactor_op* op) noexcept;

    /// What start() would return for `op` without registering it: `finished` (its result set)
    /// or `dropped`; none when it would register it (call start(), which looks again). For a
    /// caller that completes a finished op itself and makes an op outstanding work only when
    /// it goes to the service (an immediate completion leaves the context's work alone).
    [[nodiscard]] GPU_ASYNC_DECL std::optional<start_result>
    ends_before_start(reactor_op& op, std::optional<mono_ns> deadline) noexcept;

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

    // --- the interface of the service to its own parts --------------------------------------
    // The watcher thread (reactor_watcher), run_fill and the completion queues' drains drive the
    // service through these members and the parts' own interfaces (roster(), deliveries(),
    // waiter(), bell()); none of them is for a port.

    /// The service's lock: the engine, the roster, the rhythm and the incoming take.
    ranked_mutex& mutex() const noexcept { return mutex_; }
    /// Who waits for the table (changed under mutex()).
    waiter_roster& roster() noexcept { return roster_; }
    /// What left the engine on its way to the completion queues, the retries and the
    /// stand-back gate.
    delivery& deliveries() noexcept { return delivery_; }
    /// The wait between scans.
    bell_waiter& waiter() noexcept { return waiter_; }
    /// A registration that cannot wait for the next pass came in (a near deadline, a tight
    /// bound); a scan clears it as it takes registrations in.
    bool urgent() const noexcept { return urgent_.load(std::memory_order_seq_cst); }
    void clear_urgent() noexcept { urgent_.store(false, std::memory_order_seq_cst); }
    /// Whether waits are watched (under mutex()).
    bool watching_locked() const noexcept { return !engine_.empty(); }
    /// A park predicted at `from` ended late: the next samples are late (under mutex()).
    void slept_late_locked(mono_ns from) noexcept { rhythm_.slept_late(from); }

    /// Starts the watcher thread (throws std::system_error when it cannot).
    void start_thread_locked() { watcher_.start_locked(); }
    /// Whether waits are registered or queued (under the lock).
    bool waits_locked() const;

    /// start()'s steps: whether the op ends before it is registered (its result set: a deadline
    /// passed, a stale or faulted descriptor, a word already at its target); and the push into
    /// the incoming batch, with the ring that an idle or urgent waiter needs.
    GPU_ASYNC_DECL bool ends_at_start(reactor_op& op, std::optional<mono_ns> deadline,
                                      mono_ns now) const noexcept;
    GPU_ASYNC_DECL void push_incoming(reactor_op& op, dur_ns bound, std::optional<mono_ns> deadline,
                                      mono_ns now) noexcept;

    // --- the engine's adapter (under mutex_) ----------------------------------------------------

    /// The incoming registrations, swapped into taking_ to be taken in; with none, publishes
    /// the table's size (see start(): a registration after that take reads it and rings).
    engine_batch& take_incoming_locked() noexcept;

    /// What left the engine onto `list`, in order, each op finished (left_locked); then
    /// publishes the table's size. Every change to the table ends here (a pass, a settle, the
    /// shutdown), so the size is published in this one place and in take_incoming_locked, where
    /// a take that finds nothing publishes it under the queue's lock for a registration's idle
    /// check (registration_queue).
    GPU_ASYNC_DECL void finish_locked(engine_list& out, ready_list& list) noexcept;
    /// An op that left the engine: its result from why it ended, the rhythm's sample, and the
    /// queue it goes to.
    GPU_ASYNC_DECL void left_locked(reactor_op& op) noexcept;
    /// Takes registrations in and, when waits are pending, scans at `now`; what ended goes onto
    /// `list`.
    GPU_ASYNC_DECL void pass_locked(mono_ns now, ready_list& list) noexcept;
    /// Takes registrations in before a cancellation, retirement or fault (so that a wait not yet
    /// taken in is found), with the waits of their slots that the same store reached.
    GPU_ASYNC_DECL void take_in_settled_locked(engine_list& out) noexcept;
    /// Under the lock, after taking in what is queued, `end(out)` takes waits out of the engine
    /// (a retirement, a fault); they are settled, then `after()` runs, still under the lock, and
    /// they are scheduled after it.
    template <class End, class After>
    void end_waits(End&& end, After&& after) noexcept;
    void publish_size() noexcept { incoming_.publish(engine_.size()); }
    dur_ns bound_locked(mono_ns now, dur_ns bound) const noexcept;

    // --- delivery -------------------------------------------------------------------------------

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

    /// Runs the line owners' health queries when one is due (line/line_health.hpp: at most one
    /// run per fault backstop in the process); no lock held, waits pending.
    static void query_health() noexcept { query_line_health(); }
    /// Whether waits started now are predicted: predicts(), device producers on the doorbell, no
    /// user-mode monitor (a monitor sees the device's store at once: nothing to predict), and a
    /// device poll interval shorter than the waiter's park bound (park_policy::polls_within).
    bool predicting() const noexcept {
        return park_policy::predicts(predict_.load(std::memory_order_relaxed),
                                     bell_->device_producers() != 0, waiter_.has_monitor(),
                                     waiter_.device_poll(), waiter_bound());
    }
    /// The park bound of the thread that waits for the table: the longest of the FILL drivers'
    /// own while any runs, else the watcher's, park_bound().
    dur_ns waiter_bound() const noexcept {
        const dur_ns fill = roster_.fill_bound();
        return fill.ns != 0 ? fill : park_bound();
    }
    /// The estimator's plan for the rhythm: the margin is one device poll interval.
    deadline_plan rhythm_plan() const noexcept;
    /// Feeds what `op`, found complete now, teaches its slot's rhythm (under the lock; never
    /// throws: without memory the sample is dropped).
    void learn_locked(const reactor_op& op) noexcept;

    // --- the waiter's wait between scans (the watcher, run_fill's park) -----------------------

    /// Parks until a ring or a device's signal, at most `bound` (the shared watcher wait,
    /// <gpu_async/wait/detail/bell_waiter.hpp>). `watching`: waits are pending.
    void park_on_bell(std::uint64_t seen, dur_ns bound, bool watching = true) {
        waiter_.park(*bell_, seen, bound, watching);
    }
    /// park_policy::predicted_sleep for the pending waits, their expected completions from the
    /// learnt rhythms.
    std::optional<park_policy::predicted_park> predicted_sleep_locked(mono_ns now,
                                                                      dur_ns bound) const;
    /// Parks as park_on_bell, or sleeps and polls as predicted (bell_waiter::park_predicted);
    /// returns whether the next scan's samples are late.
    bool park_between_scans(std::uint64_t seen, dur_ns bound,
                            std::optional<park_policy::predicted_park> sleep);

private:
    GPU_ASYNC_DECL void shutdown() override;
    GPU_ASYNC_DECL void notify_fork(asio::execution_context::fork_event event) override;

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
    // Registered, not yet taken in, with the table's size as last published (its own lock,
    // taken after mutex_ when both are held).
    registration_queue incoming_{engine_.make_batch()};
    // The batch the engine takes in, swapped with the queue's at each take (mutex_).
    engine_batch taking_{engine_.make_batch()};
    // A registration with a deadline within one park bound or a bound tighter than the park
    // bound came in: the watcher scans now rather than stand back.
    std::atomic<bool> urgent_{false};
    // What left the engine on its way to the completion queues, the queues awaiting a retry, and
    // the drains out (the stand-back gate).
    delivery delivery_;
    // The watcher thread and its loop (after every part it uses: destroyed, with no thread
    // left, before them).
    reactor_watcher watcher_{*this};
};

GPU_ASYNC_ASIO_NAMESPACE_END
} // namespace detail
} // namespace gpu_async

#if GPU_ASYNC_HEADER_ONLY
#include <gpu_async/asio/impl/completion_queue.ipp>
#include <gpu_async/asio/impl/reactor_service.ipp>
#include <gpu_async/asio/impl/reactor_watcher.ipp>
#endif

#endif // GPU_ASYNC_ASIO_DETAIL_REACTOR_SERVICE_HPP
