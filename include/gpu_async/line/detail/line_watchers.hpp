// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The line watchers: the process-wide registry of what reads completion lines.
///
/// Reactors register themselves (`detail::add_line_watcher`) and are told of every retirement
/// and fault of a line's life (<gpu_async/line/line_life.hpp>): `retire_line`, `retire_slot` and
/// `fault_slot` ask each registered watcher in turn, holding no registry lock while they do.
/// Locks: lock_rank in <gpu_async/wait/detail/ranked_mutex.hpp>.
#ifndef GPU_ASYNC_LINE_DETAIL_LINE_WATCHERS_HPP
#define GPU_ASYNC_LINE_DETAIL_LINE_WATCHERS_HPP

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/detail/config.hpp>

#include <cstddef>
#include <cstdint>

namespace gpu_async::detail {

/// A slot's retirement, as its watchers are told of it: the generation its descriptors carried
/// and the one it has from then on.
struct slot_retirement {
    std::uint64_t retired = 0;
    std::uint64_t next = 0;
};

/// Something that reads completion lines (a reactor): told when a line is retired or one of its
/// slots faulted.
class line_watcher {
public:
    /// Ends every wait on `line`: those whose target the slot's word reached complete (the
    /// memory is valid during the call), the rest end operation_aborted; registrations it takes
    /// in then whose descriptors carry the retired generations are read the same way (their
    /// status says `retiring`). After it returns the watcher does not read `line` again. Must not
    /// wait for a callback while holding a lock that a callback may take.
    virtual void retire_line(const completion_line& line) noexcept = 0;

    /// Ends every wait on `slot` of `line` with errc::device_fault: the slot's stream of
    /// generation `generation` faulted. A watcher acts only if, under its own lock, the slot is
    /// still at `generation` (slot_generation): a slot retired since has had its waits ended by
    /// that retirement, and a later stream's waits are not this fault's.
    virtual void fault_slot(const completion_line& line, slot_id slot,
                            std::uint64_t generation) noexcept = 0;

    /// Ends every wait on `slot` of `line`: the stream storing into the slot went; the line and
    /// its other slots live on. Waits whose target the slot's word reached complete, the rest
    /// end operation_aborted. A watcher acts only if, under its own lock, the slot is at
    /// `r.next` (a later retirement visits too and ends them); registrations it takes in then
    /// whose descriptors carry `r.retired` were pending when the slot was retired: their word
    /// is read (the slot's owner retires before a next stream stores) rather than judged stale.
    virtual void retire_slot(const completion_line& line, slot_id slot,
                             slot_retirement r) noexcept = 0;

protected:
    line_watcher() = default;
    line_watcher(const line_watcher&) = default;
    line_watcher& operator=(const line_watcher&) = default;
    ~line_watcher() = default;
};

/// Registers `w` until remove_line_watcher(w). Thread-safe. From the call on, a retirement or
/// fault on another thread may call `w`'s functions: register a whole object (last in the
/// most-derived constructor) and remove it first in its destructor.
GPU_ASYNC_DECL void add_line_watcher(line_watcher& w);
/// Number of registered watchers (for tests and diagnostics).
GPU_ASYNC_DECL std::size_t line_watcher_count() noexcept;
/// Unregisters `w`; waits (holding no lock) until no retirement or fault is asking `w`.
/// Thread-safe; not from inside `w`'s own retire_line or fault_slot.
GPU_ASYNC_DECL void remove_line_watcher(line_watcher& w) noexcept;

} // namespace gpu_async::detail

#if GPU_ASYNC_HEADER_ONLY
#include <gpu_async/line/impl/line_watchers.ipp>
#endif

#endif // GPU_ASYNC_LINE_DETAIL_LINE_WATCHERS_HPP
