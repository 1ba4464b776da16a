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
// - Line retirement: the service is a line watcher (<gpu_async/line_watchers.hpp>); a line
//   owner that retires a line ends its waits here (operation_aborted) before the memory goes.
// - shutdown() first leaves the line watchers (after a retirement asking the service has
//   delivered: nothing posts into the context or reaches the service from a retirement after
//   it), then destroys pending waits without invoking their handlers.
// - The waits live in a scan engine (<gpu_async/core/scan_engine.hpp>); the watcher's steps are
//   the park policy's (<gpu_async/core/park_policy.hpp>). Locks: mutex_ then the registration
//   queue's (asio/detail/registration_queue.hpp), ranked in the hierarchy of
//   <gpu_async/host/ranked_mutex.hpp>.
//
#ifndef GPU_ASYNC_ASIO_REACTOR_SERVICE_HPP
#define GPU_ASYNC_ASIO_REACTOR_SERVICE_HPP

#include <gpu_async/asio/completion_queue.hpp>
#include <gpu_async/asio/reactor_shell.hpp>
#include <gpu_async/asio_flavour.hpp>
#include <gpu_async/core/detail/config.hpp>
#include <gpu_async/core/park_policy.hpp>
#include <gpu_async/core/time.hpp>

#if defined(GPU_ASYNC_STANDALONE_ASIO)
#include <asio/execution_context.hpp>
#else
#include <boost/asio/execution_context.hpp>
#endif

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>

namespace gpu_async::detail {
GPU_ASYNC_ASIO_NAMESPACE_BEGIN

/// The reactor service of one execution context: the locked shell over the scan engine
/// (reactor_shell) and its waiter. See the header comment for its design.
///
/// Thread safety: every member function may be called from any thread.
class reactor_service final : public asio::execution_context::service, public reactor_shell {
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
    /// At most this many pending waits are looked through for the earliest expected completion;
    /// with more the waiter steps (a scan per park would cost more than the steps it saves).
    static constexpr std::size_t predict_max_pending = park_policy::predict_max_pending;

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

private:
    GPU_ASYNC_DECL void shutdown() override;
    GPU_ASYNC_DECL void notify_fork(asio::execution_context::fork_event event) override;

    GPU_ASYNC_DECL void start_thread_locked() override;
    /// Whether waits are registered or queued (under the lock).
    bool waits_locked() const;
    void stop_thread();
    /// The watcher thread: passes of park_policy's steps until stopped.
    void watcher_main();
    /// The watcher's steps (lock held on entry and exit; each releases it while it waits).
    void post_retries_step(std::unique_lock<ranked_mutex>& lk, std::uint64_t seen);
    void idle_step(std::unique_lock<ranked_mutex>& lk, std::uint64_t seen);
    void stand_back_step(std::unique_lock<ranked_mutex>& lk);
    void scan_step(std::unique_lock<ranked_mutex>& lk, std::uint64_t seen);
    /// Parks until a ring or a device's signal, at most `bound` (the shared watcher wait,
    /// <gpu_async/host/detail/bell_waiter.hpp>). `watching`: waits are pending.
    void park_on_bell(std::uint64_t seen, dur_ns bound, bool watching = true) {
        waiter_.park(*bell_, seen, bound, watching);
    }
    /// park_policy::predicted_sleep for the pending waits, their expected completions from the
    /// learnt rhythms.
    std::optional<park_policy::predicted_park> predicted_sleep_locked(std::uint64_t now_ns,
                                                                      dur_ns bound) const;
    /// Parks as park_on_bell, or sleeps and polls as predicted (bell_waiter::park_predicted);
    /// returns whether the next scan's samples are late.
    bool park_between_scans(std::uint64_t seen, dur_ns bound,
                            std::optional<park_policy::predicted_park> sleep);
    /// What ends a stand-back: no drain out, a stop, an urgent registration, a device's signal.
    GPU_ASYNC_DECL bool stand_back_over() const noexcept;

    std::thread thread_;
};

GPU_ASYNC_ASIO_NAMESPACE_END
} // namespace gpu_async::detail

#if GPU_ASYNC_HEADER_ONLY
#include <gpu_async/impl/reactor_service.ipp>
#endif

#endif // GPU_ASYNC_ASIO_REACTOR_SERVICE_HPP
