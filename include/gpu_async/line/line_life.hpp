// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief A completion line's life: adopted, retired (the line or one slot), faulted, reused.
///
/// A reactor reads the words of every line it has waits on. The owner of a line (the simulated
/// device, a mapped CUDA or HIP line, the Metal mirror, your own code) must therefore not free
/// the line while a reactor may still read it. `retire_line(line)` tells every reactor of the
/// process to end its waits on `line` (exactly once: success where the word reached the target,
/// else operation_aborted) and returns only once none of them will read the line again. The
/// library's line owners call it when a line goes (a stream given back, a device destroyed,
/// mapped_line::close()); call it yourself before freeing a line you own while waits on it may be
/// pending.
///
/// Lines the library hands out also have a generation (`adopt_line`), and so does each of their
/// slots: their descriptors carry the slot's, retiring the line (or the slot alone,
/// `retire_slot`) advances it, and a wait whose descriptor's generation is no longer its slot's
/// ends with errc::stale_descriptor when it begins, before anything reads the line. The
/// generations live in a side table that is never freed, keyed by the line's address, so a
/// descriptor of a destroyed device (or of a line whose memory a new line reuses) is caught
/// without touching the freed memory. A descriptor without a generation (a line you allocate)
/// is never checked: your line's life is yours.
///
/// A line owner that learns that the stream storing into a slot faulted (it will store nothing
/// more) calls `fault_slot(line, slot)`: every pending wait on that slot ends with
/// errc::device_fault, and so does every later wait on it, until the line or the slot is
/// retired.
///
/// The reactors told of each retirement and fault are the line watchers
/// (<gpu_async/line/detail/line_watchers.hpp>); how an owner learns of a fault its driver tells no
/// one is <gpu_async/line/line_health.hpp>. Locks: lock_rank in
/// <gpu_async/wait/detail/ranked_mutex.hpp>.
#ifndef GPU_ASYNC_LINE_LINE_LIFE_HPP
#define GPU_ASYNC_LINE_LINE_LIFE_HPP

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/detail/config.hpp>

#include <cstdint>

namespace gpu_async {

namespace detail {

/// The line-life epoch: never 0, 64 bits (it never comes back), it moves (after the change)
/// whenever a line is adopted or retired or a slot retired or faulted. A reactor that judged a
/// descriptor (descriptor_status) after reading epoch `e` need not judge it again while the
/// epoch is still `e`. Lock-free.
GPU_ASYNC_DECL std::uint64_t line_life_epoch() noexcept;

} // namespace detail

// line_status (what a reactor does with a descriptor) is in <gpu_async/core/completion_line.hpp>.

/// Gives a line the library hands out (or yours, if you want its descriptors checked) its next
/// generation, never 0, with no faulted slot, and every slot the same generation; stamp it into
/// the line's descriptors (memory_descriptor's four-argument constructor), or, on a line whose
/// slots are retired one by one (retire_slot), stamp slot_generation(). The first generation of
/// an address is 1; every later one, of the line or any of its slots, is higher: generations
/// are 64-bit counters per line that stop at max_generation, which is never live (2^56
/// retirements of one line, far beyond any program's life, would make its descriptors stale
/// for good rather than live again). Thread-safe; may throw std::bad_alloc (the side table
/// grows by one entry per line address).
GPU_ASYNC_DECL std::uint64_t adopt_line(const completion_line& line);

/// The current generation of `line`: 0 for a line never adopted. Thread-safe.
GPU_ASYNC_DECL std::uint64_t line_generation(const completion_line& line) noexcept;

/// The current generation of `slot` of `line`, which descriptors of the slot carry: the line's
/// generation, or a later one once the slot was retired alone (retire_slot); 0 for a line never
/// adopted. Thread-safe.
GPU_ASYNC_DECL std::uint64_t slot_generation(const completion_line& line, slot_id slot) noexcept;

/// The status of `d` now: live for a descriptor without a generation or of its slot's current
/// generation (slot_generation) without a fault on the slot. Reads the side table only, never
/// the line. Thread-safe; lock-free once the calling thread has looked at the line (the first
/// look takes one of the side table's leaf locks).
GPU_ASYNC_DECL line_status descriptor_status(const memory_descriptor& d) noexcept;

/// The library's line life, for whatever reads lines and is not told of retirements: its
/// descriptor_status and line-life epoch. Pass it to a FILL reactor you drive yourself
/// (`reactor r(library_line_life());`); std_idle and the io_uring idle hand it to the FILL
/// executor's reactor as it runs, and the reactor service and std_watcher judge with it.
inline line_life_functions library_line_life() noexcept {
    return {&descriptor_status, &detail::line_life_epoch};
}

/// Ends every pending wait on `line` in every reactor of the process and returns once no
/// reactor reads `line` any more: with success where the slot's word has reached the target
/// (what the line's streams stored before it went: call this while the memory is still valid,
/// before it is freed or reset), else with operation_aborted. Advances the line's generation
/// first (if it was adopted), so descriptors made before are stale from then on; a wait that
/// starts during the call on such a descriptor reads the word as the retirement does. Call it
/// before freeing a line while waits on it may be pending. Thread-safe, also from a handler or
/// a watcher's callback; not from inside a reactor's own lock. Allocates nothing.
GPU_ASYNC_DECL void retire_line(const completion_line& line) noexcept;

/// For a line shared slot by slot, when the stream storing into `slot` goes while the line
/// stays: ends every pending wait on the slot in every reactor, with success where the slot's
/// word has reached the target (what the stream stored before it went: call this before the
/// word is reset for a next stream), else with operation_aborted. For an adopted line, gives the
/// slot a later generation with no fault, so the slot's descriptors made before are stale from
/// then on (a later stream on the slot starts clean) while the other slots' stay live. Descriptors
/// of the slot made after it must carry slot_generation(), not the line's (which the slot no longer
/// has). Thread-safe, as retire_line; allocates nothing.
GPU_ASYNC_DECL void retire_slot(const completion_line& line, slot_id slot) noexcept;

/// retire_slot(line, slot) only if the slot is still at `generation` (its slot_generation):
/// what an owner that decided under its own lock to retire a stream's slot calls after letting
/// the lock go, so that a stream made on the slot meanwhile is not retired in its place.
/// Returns whether it retired the slot. Thread-safe, as retire_line.
GPU_ASYNC_DECL bool retire_slot(const completion_line& line, slot_id slot,
                                std::uint64_t generation) noexcept;

/// Ends every pending wait on `slot` of `line`, in every reactor, with errc::device_fault (its
/// stream faulted and will store nothing more). For an adopted line the fault is also recorded:
/// later waits on the slot end so at once, without reading the line, until the line or the slot
/// is retired, or the line adopted again. Thread-safe, as retire_line.
GPU_ASYNC_DECL void fault_slot(const completion_line& line, slot_id slot) noexcept;

/// fault_slot(line, slot) only if the slot is still at `generation` (its slot_generation): the
/// stream of that generation faulted. An owner that learns of a fault under its own lock and
/// reports it after letting the lock go calls this, so that a fault of a stream given back
/// meanwhile never lands on the next stream made on the slot. Returns whether it faulted the
/// slot. Thread-safe, as retire_line.
GPU_ASYNC_DECL bool fault_slot(const completion_line& line, slot_id slot,
                               std::uint64_t generation) noexcept;

} // namespace gpu_async

#if GPU_ASYNC_HEADER_ONLY
#include <gpu_async/line/impl/line_life.ipp>
#endif

#endif // GPU_ASYNC_LINE_LINE_LIFE_HPP
