// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief A completion line's life: made, watched, faulted, retired, reused.
///
/// A reactor reads the words of every line it has waits on. The owner of a line (the simulated
/// device, a mapped CUDA or HIP line, the Metal mirror, your own code) must therefore not free
/// the line while a reactor may still read it. `retire_line(line)` tells every reactor of the
/// process to end its waits on `line` (operation_aborted, exactly once) and returns only once
/// none of them will read the line again. The library's line owners call it when a line goes
/// (a stream given back, a device destroyed, mapped_line::close()); call it yourself before
/// freeing a line you own while waits on it may be pending.
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
/// Reactors register themselves (`detail::add_line_watcher`).
///
/// Locks (every one is ranked in <gpu_async/host/ranked_mutex.hpp>, which checks the order in
/// debug builds): the registry's lock is only held to read or change its lists and to pin what
/// it is about to ask (a reactor, a health query), never while a reactor or a query is asked, so
/// a retirement may start from a reactor's callback while another retirement waits for that
/// callback; removing a reactor, or unwatching a line's health, waits for its pins with no lock
/// held. A reactor's locks are not held while it asks the registry (a retirement, a fault, a
/// health query), nor is a device's. The side table's shard locks are leaves, taken alone for an
/// update or a thread's first look at a line (later looks read its state, an atomic, through a
/// per-thread cache).
#ifndef GPU_ASYNC_LINE_RETIREMENT_HPP
#define GPU_ASYNC_LINE_RETIREMENT_HPP

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/detail/config.hpp>
#include <gpu_async/core/time.hpp>

#include <cstddef>
#include <cstdint>

namespace gpu_async {

namespace detail {

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
    /// Ends every wait on `line` (operation_aborted); after it returns the watcher does not read
    /// `line` again. Must not wait for a callback while holding a lock that a callback may take.
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
/// The line-life epoch: never 0, 64 bits (it never comes back), it moves (after the change)
/// whenever a line is adopted or retired or a slot retired or faulted. A reactor that judged a
/// descriptor (descriptor_status) after reading epoch `e` need not judge it again while the
/// epoch is still `e`. Lock-free.
GPU_ASYNC_DECL std::uint64_t line_life_epoch() noexcept;
/// Number of registered watchers (for tests and diagnostics).
GPU_ASYNC_DECL std::size_t line_watcher_count() noexcept;
/// Unregisters `w`; waits (holding no lock) until no retirement or fault is asking `w`.
/// Thread-safe; not from inside `w`'s own retire_line or fault_slot.
GPU_ASYNC_DECL void remove_line_watcher(line_watcher& w) noexcept;

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

/// Ends every pending wait on `line` in every reactor of the process (operation_aborted) and
/// returns once no reactor reads `line` any more; advances the line's generation first (if it
/// was adopted), so descriptors made before are stale from then on. Call it before freeing a
/// line while waits on it may be pending. Thread-safe, also from a handler or a watcher's
/// callback; not from inside a reactor's own lock. Allocates nothing.
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

/// How often, at most, the process runs the health queries by default: 10 ms.
inline constexpr dur_ns default_fault_backstop = dur_ns::from_ms(10);

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
/// clock (steady_clock, as wordwait_now_ns()). Due when no run has happened yet, or when `now_ns`
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
#include <gpu_async/impl/line_retirement.ipp>
#endif

#endif // GPU_ASYNC_LINE_RETIREMENT_HPP
