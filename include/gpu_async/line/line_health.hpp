// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The lines' health queries: how a line owner learns of a fault its driver tells no one.
///
/// An owner learns of a fault by asking its driver, and asynchronous faults (a GPU context's
/// sticky error) are not told to anyone: no store comes, and the caller's stream may be gone.
/// So an owner may register a health query for each line it owns (`watch_line_health`, after
/// adopt_line; `unwatch_line_health` before retire_line): a status query, in the line's context,
/// through something the owner holds (not the caller's stream), that calls fault_slot for the
/// slots it finds faulted. Reactors run every registered query (`detail::query_line_health`)
/// from their waiter loops while they have waits pending, at most once per fault backstop
/// (`fault_backstop()`, default_fault_backstop unless set) in the whole process. A fault
/// therefore reaches the descriptor waits on a watched line within about one fault backstop plus
/// the reactor's park bound, while a reactor with pending waits runs. The library's mapped CUDA
/// and HIP lines and the Metal mirror register one.
///
/// Locks: lock_rank in <gpu_async/wait/detail/ranked_mutex.hpp>.
#ifndef GPU_ASYNC_LINE_LINE_HEALTH_HPP
#define GPU_ASYNC_LINE_LINE_HEALTH_HPP

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/detail/config.hpp>
#include <gpu_async/core/time.hpp>
#include <gpu_async/core/wait_tuning.hpp>
#include <gpu_async/line/line_life.hpp>

#include <cstdint>

namespace gpu_async {

/// A line owner's status query for one line (see watch_line_health).
class line_health {
public:
    /// Asks the line's driver, without blocking, whether the context or stream that stores into
    /// `line` faulted; when it did, calls `fault_slot(line, s)` for each affected slot (which
    /// first completes the waits whose target was already stored, then ends the rest with
    /// errc::device_fault). Runs on a reactor's thread with no registry lock and none of the
    /// reactor's locks held, never concurrently with another query of the process; must not
    /// call unwatch_line_health for its own line.
    virtual void query(const completion_line& line) noexcept = 0;

protected:
    line_health() = default;
    line_health(const line_health&) = default;
    line_health& operator=(const line_health&) = default;
    ~line_health() = default;
};

/// How often, at most, the process runs the health queries by default
/// (wait_tuning::fault_backstop, 10 ms).
inline constexpr dur_ns default_fault_backstop = default_wait_tuning.fault_backstop;

/// Registers `h` as the health query of `line` until unwatch_line_health(line): `h` must stay
/// alive until then. A line owner calls it after adopt_line. Thread-safe; may throw
/// std::bad_alloc.
GPU_ASYNC_DECL void watch_line_health(const completion_line& line, line_health& h);

/// Unregisters the health query of `line` (every one registered for it). After it returns no
/// query of `line` runs or is running: it waits, holding no lock, for a query of `line` running
/// on another thread. A line owner calls it before retire_line and before freeing its query.
/// Thread-safe; not from inside that line's own query. Does nothing for a line not watched.
GPU_ASYNC_DECL void unwatch_line_health(const completion_line& line) noexcept;

/// Sets the fault backstop: the shortest time between two runs of the health queries in the
/// process (dur_ns::zero(): at every call; dur_ns::max(): never, which turns the queries off).
/// Thread-safe.
GPU_ASYNC_DECL void set_fault_backstop(dur_ns backstop) noexcept;

/// The fault backstop: default_fault_backstop unless set_fault_backstop changed it.
GPU_ASYNC_DECL dur_ns fault_backstop() noexcept;

namespace detail {

/// Runs every registered health query, if they are due: for reactors, from their waiter loops
/// while waits are pending, with none of their own locks held; `now_ns` is their monotonic
/// clock (steady_clock, as detail::mono_now()). Due when no run has happened yet, or when `now_ns`
/// is at least one fault backstop away from the last run's `now_ns` (on either side: a clock
/// behind the last run by a whole backstop, such as a test's virtual time, counts as due too).
/// Process-wide: of the callers that find them due, one runs them, the others return false at
/// once (an atomic, no lock), and no two runs overlap. A caller that finds a run under way
/// leaves its turn due: the first call after that run takes it. Each query is pinned and run with
/// no registry lock held. Returns true when this call ran the queries; false at once when no line
/// is watched or the backstop is dur_ns::max().
GPU_ASYNC_DECL bool query_line_health(std::uint64_t now_ns) noexcept;

/// query_line_health() at the steady clock's now, read only when a line is watched: what a
/// reactor calls before it parks. Returns whether the queries ran.
GPU_ASYNC_DECL bool query_line_health() noexcept;

/// Whether any line has a health query (one atomic read): a reactor may skip the call when not.
GPU_ASYNC_DECL bool line_health_watched() noexcept;

} // namespace detail

} // namespace gpu_async

#if GPU_ASYNC_HEADER_ONLY
#include <gpu_async/line/impl/line_health.ipp>
#endif

#endif // GPU_ASYNC_LINE_LINE_HEALTH_HPP
