// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/reactor_service.hpp: the reactor service that watches completion lines for every
// gpu_completion_port of one execution context.
//
// Design (DESIGN.md section 4, "one waiter, many lines"):
//
// - One service per execution context (io_context, thread_pool, ...), found through
//   asio::use_service. It owns a doorbell (<gpu_async/doorbell.hpp>): host producers (the
//   simulated device, test threads) store to their line and then ring the service's doorbell
//   (bell()); GPU producers may store to the doorbell's line as well.
// - One waiter: a watcher thread of the service's own, started lazily at the first pending wait,
//   joined while run_fill() drives the context (the run_fill thread is then the waiter; the
//   watcher restarts when the last run_fill returns with waits pending), and joined on shutdown
//   and before fork (it restarts lazily in the parent and the child). The waiter parks on the
//   doorbell only, so its wake latency is that of one futex (or one user-mode monitor on the
//   doorbell's line, where the CPU has one) whatever the number of lines watched.
// - A wake scans only lines with pending waits (a dense vector of them), and within a line only
//   the slots with pending waits (a bit mask), comparing each slot's word with the slot's cached
//   earliest target: one load per watched slot, no map access unless something completed. Each
//   slot keeps its waits in a multimap sorted by target (in wrapping order from an anchor), so a
//   completion pops exactly the waits that completed: O(log n) each. Registration, cancellation
//   and completion are O(log n). (Measured by bench/reactor_lines_bench: the store-to-handler
//   latency with 512 other lines watched stays within a few microseconds of that with none.)
// - Every park is bounded by the park bound (default_park_bound, 100 us, settable per service and
//   per registration) so producers that do not ring (GPUs) are seen within one bound, and by the
//   earliest registration deadline.
// - Completions are handed to the executor (posted) with no lock held. A cancellation only
//   unlinks the wait under the lock and posts its completion: it never races the completion,
//   because exactly one of (completion scan, cancellation, shutdown) unlinks a wait.
// - shutdown() destroys pending waits without invoking their handlers.
//
#ifndef GPU_ASYNC_REACTOR_SERVICE_HPP
#define GPU_ASYNC_REACTOR_SERVICE_HPP

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/time.hpp>
#include <gpu_async/detail/config.hpp>
#include <gpu_async/doorbell.hpp>
#include <gpu_async/wordwait.hpp>

#include <boost/asio/error.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/system/error_code.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

namespace gpu_async {

namespace asio = boost::asio;

/// The default bound of one park of the reactor's waiter: 100 us. Producers that do not ring the
/// service's doorbell (GPU streams) are seen within one bound.
inline constexpr dur_ns default_park_bound = dur_ns::from_us(100);

class reactor_service;

namespace detail {

class reactor_op;
struct reactor_port;

/// One slot's pending waits, sorted by (target - anchor) so the earliest target is first.
using reactor_slot_map = std::multimap<std::uint64_t, reactor_op*>;
using reactor_deadline_map = std::multimap<std::chrono::steady_clock::time_point, reactor_op*>;

/// A pending wait as the reactor sees it. The concrete operation (a handler, its work guards and
/// its allocator) derives from it; the reactor calls `complete` (hand the completion to the
/// executor; called with no lock held, at most once) or, at shutdown, `destroy` (free it without
/// invoking anything).
class reactor_op {
public:
    using complete_fn = void (*)(reactor_op*);
    using destroy_fn = void (*)(reactor_op*);

    reactor_op(const memory_descriptor& d, complete_fn c, destroy_fn x) noexcept
        : descriptor_(d)
        , complete_(c)
        , destroy_(x) {}
    reactor_op(const reactor_op&) = delete;
    reactor_op& operator=(const reactor_op&) = delete;

    const memory_descriptor& descriptor() const noexcept { return descriptor_; }

    /// Set by the reactor before `complete`: empty (reached), operation_aborted (cancelled) or
    /// timed_out (a registration deadline passed first).
    boost::system::error_code ec;

    /// Hands the completion to the executor. Consumes the op, also when it throws (posting
    /// failed: the op has been destroyed without invoking anything).
    void complete() { complete_(this); }
    void destroy() { destroy_(this); }

protected:
    ~reactor_op() = default;

private:
    friend class gpu_async::reactor_service;
    enum class state : std::uint8_t { fresh, cancelled_early, registered, finished };

    memory_descriptor descriptor_;
    complete_fn complete_;
    destroy_fn destroy_;
    state state_ = state::fresh;
    std::uint64_t bound_ns_ = 0; // 0: the service's park bound
    std::optional<std::chrono::steady_clock::time_point> deadline_;
    reactor_port* owner_ = nullptr;
    reactor_op* prev_ = nullptr; // in the owner's list
    reactor_op* next_ = nullptr;
    reactor_op* next_ready_ = nullptr;
    void* line_ = nullptr;
    reactor_slot_map::iterator slot_pos_{};
    reactor_deadline_map::iterator deadline_pos_{};
};

/// The per-port state the service keeps (a list of the port's pending waits).
struct reactor_port {
    reactor_op* head = nullptr;
    std::size_t count = 0;
};

} // namespace detail

/// The reactor service of one execution context. See the header comment for its design.
///
/// Thread safety: every member function may be called from any thread.
class reactor_service : public asio::execution_context::service {
public:
    using key_type = reactor_service;
    inline static asio::execution_context::id id;

    GPU_ASYNC_DECL explicit reactor_service(asio::execution_context& ctx);
    GPU_ASYNC_DECL ~reactor_service() override;

    /// The doorbell host producers ring after their store (any thread).
    doorbell& bell() noexcept { return bell_; }

    /// The bound of one park when no registration asks for less (default_park_bound).
    dur_ns park_bound() const noexcept { return {park_bound_ns_.load(std::memory_order_relaxed)}; }
    /// Sets the park bound; zero is taken as 1 ns. Applies from the waiter's next park.
    GPU_ASYNC_DECL void park_bound(dur_ns bound) noexcept;

    /// Number of waits registered and not yet completed, cancelled or destroyed.
    GPU_ASYNC_DECL std::size_t pending() const;

    /// Number of `port`'s waits still registered.
    GPU_ASYNC_DECL std::size_t pending(const detail::reactor_port& port) const;

    /// Whether the watcher thread is running (for tests and diagnostics).
    GPU_ASYNC_DECL bool watcher_running() const;

    // --- used by the I/O objects -------------------------------------------------------------

    /// What start() did with an op, and so what its caller must do with it.
    enum class start_result : std::uint8_t {
        registered, ///< pending: the service completes, cancels or destroys it
        finished,   ///< not registered, `ec` set: the caller calls `complete()` (never inline)
        dropped     ///< the service has shut down: the caller calls `destroy()`
    };

    /// Starts `op` for `port` (may be null): registers it, unless its descriptor is already
    /// complete, a cancellation came first or its deadline has passed (`finished`), or the
    /// service has shut down (`dropped`); in those cases the op stays the caller's, who then
    /// completes or destroys it outside every lock. `bound` (zero: the service's) bounds the
    /// waiter's parks while it is pending; `deadline`, when given, completes it with
    /// asio::error::timed_out. Throws std::system_error when the watcher thread cannot be
    /// started (nothing registered; the op stays the caller's).
    [[nodiscard]] GPU_ASYNC_DECL start_result
    start(detail::reactor_port* port, detail::reactor_op* op, dur_ns bound = {},
          std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);

    /// Cancels one wait: when it is still registered it is unlinked and completed with
    /// operation_aborted; when it has not been started yet, it completes aborted at start;
    /// otherwise nothing happens (also after shutdown, when `op` may already be destroyed: it is
    /// not accessed then). Returns whether this call cancelled it.
    GPU_ASYNC_DECL bool cancel(detail::reactor_op* op);

    /// Cancels every registered wait of `port`; returns how many. If posting a completion throws,
    /// the others are still completed, that wait is destroyed uninvoked, and the first exception
    /// propagates.
    GPU_ASYNC_DECL std::size_t cancel(detail::reactor_port& port);

    // --- FILL mode (run_fill) ----------------------------------------------------------------

    /// While at least one FILL driver is active, the watcher thread stands down and the drivers
    /// are the waiters.
    GPU_ASYNC_DECL void begin_fill();
    GPU_ASYNC_DECL void end_fill();

    /// Scans the lines once and completes what is due; returns how many completed.
    GPU_ASYNC_DECL std::size_t poll_ready();

    /// Parks the caller on the doorbell until it rings past `seen` (a bell().count() read before
    /// the caller's last poll_ready), at most `bound` and at most to the earliest deadline.
    GPU_ASYNC_DECL void park(std::uint64_t seen, dur_ns bound);

private:
    struct slot_waits {
        detail::reactor_slot_map waits;
        std::uint64_t anchor = 0;
    };
    struct line_waits {
        // Read by every scan, so first and together: a scan touches one cache line of this
        // record per watched line and one word per watched slot, not the maps.
        const completion_line* line = nullptr;
        std::uint32_t mask = 0;                        // slots with waits
        std::array<std::uint64_t, line_words> front{}; // earliest target per slot with waits
        std::size_t count = 0;                         // waits on this line
        std::size_t active_pos = 0;                    // index in active_
        std::array<slot_waits, line_words> slots{};
    };

    GPU_ASYNC_DECL void shutdown() override;
    GPU_ASYNC_DECL void notify_fork(asio::execution_context::fork_event event) override;

    void link_locked(detail::reactor_port* port, detail::reactor_op* op);
    void unlink_locked(detail::reactor_op* op);
    detail::reactor_op* collect_locked(std::chrono::steady_clock::time_point now, std::size_t& n);
    dur_ns bound_locked(std::chrono::steady_clock::time_point now, dur_ns bound) const;
    void start_thread_locked();
    void stop_thread();
    void watcher_main();
    void park_on_bell(std::uint64_t seen, dur_ns bound);
    static void complete_all(detail::reactor_op* list);

    doorbell bell_;
    std::atomic<std::uint64_t> park_bound_ns_{default_park_bound.ns};
    mutable std::mutex mutex_;
    std::unordered_map<const completion_line*, line_waits> lines_;
    std::vector<line_waits*> active_;
    detail::reactor_deadline_map deadlines_;
    std::map<std::uint64_t, std::size_t> bounds_; // per-registration bounds in use
    std::size_t pending_ = 0;
    std::size_t fill_ = 0;
    bool stop_ = false;
    bool shut_down_ = false;
    std::thread thread_;
};

} // namespace gpu_async

#if GPU_ASYNC_HEADER_ONLY
#include <gpu_async/impl/reactor_service.ipp>
#endif

#endif // GPU_ASYNC_REACTOR_SERVICE_HPP
