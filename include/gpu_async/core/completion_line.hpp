// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The completion line, its slots and the memory descriptor.
///
/// A GPU stream stores an increasing 64-bit sequence number into one word of a completion line
/// behind its work. A memory descriptor names (line, slot, target) and is complete once the word
/// has reached the target in wrapping order. Standard library only.
#ifndef GPU_ASYNC_CORE_COMPLETION_LINE_HPP
#define GPU_ASYNC_CORE_COMPLETION_LINE_HPP

#include <array>
#include <atomic>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace gpu_async {

/// Number of 64-bit words in one completion line.
inline constexpr std::size_t line_words = 8;

/// Size and alignment of a completion line in bytes: the monitor granule of the cores we park on.
inline constexpr std::size_t line_bytes = 64;

/// Exactly 64 bytes, 64-byte aligned: eight atomic 64-bit words, all zero when made.
///
/// Any store to the line wakes the one waiter parked on it, so one waiter watches up to eight
/// streams. Not copyable and not movable: devices hold its address.
struct alignas(line_bytes) completion_line {
    std::array<std::atomic<std::uint64_t>, line_words> words{};

    completion_line() noexcept = default;
    completion_line(const completion_line&) = delete;
    completion_line& operator=(const completion_line&) = delete;
};

static_assert(sizeof(completion_line) == line_bytes, "a completion line is exactly 64 bytes");
static_assert(alignof(completion_line) == line_bytes, "a completion line is 64-byte aligned");
static_assert(std::atomic<std::uint64_t>::is_always_lock_free,
              "the completion words must be lock-free 64-bit atomics");

/// A word index within a line, checked once to be in 0..7.
class slot_id {
public:
    /// The slot at index `i`, or an empty optional when `i >= line_words`.
    static constexpr std::optional<slot_id> at(std::size_t i) noexcept {
        if (i >= line_words) return std::nullopt;
        return slot_id(static_cast<std::uint8_t>(i));
    }

    /// The word index, always below `line_words`.
    constexpr std::size_t index() const noexcept { return index_; }

    friend constexpr bool operator==(slot_id, slot_id) noexcept = default;
    friend constexpr auto operator<=>(slot_id, slot_id) noexcept = default;

private:
    friend class memory_descriptor;
    constexpr explicit slot_id(std::uint8_t i) noexcept
        : index_(i) {}
    std::uint8_t index_;
};

/// True when `word` has reached `target` in wrapping order: `word - target` (mod 2^64) is
/// below 2^63. A word that has gone past the target still counts as reached.
constexpr bool sequence_reached(std::uint64_t word, std::uint64_t target) noexcept {
    return word - target < (std::uint64_t{1} << 63);
}

/// Acquire-loads the slot's word and tests it against `target`. Once this returns true,
/// everything the producer wrote before its release store is visible to the caller.
inline bool reached(const completion_line& line, slot_id slot, std::uint64_t target) noexcept {
    return sequence_reached(line.words[slot.index()].load(std::memory_order_acquire), target);
}

/// The largest generation a descriptor can carry: 2^56 - 1. A line's generations only move
/// forward and stop there (<gpu_async/line/line_life.hpp>): a generation never comes back.
inline constexpr std::uint64_t max_generation = (std::uint64_t{1} << 56) - 1;

namespace detail {
/// The generation a line owner issues after `issued` (its last): one more, up to
/// max_generation, where it stays. max_generation is never live (descriptor_status finds it
/// stale), so a line or slot that ran out of generations has only stale descriptors: no
/// descriptor ever becomes live again, at any rate of retirements.
constexpr std::uint64_t next_generation(std::uint64_t issued) noexcept {
    return issued >= max_generation ? max_generation : issued + 1;
}
} // namespace detail

/// Names one completion: the word `slot` of `line` reaching `target`.
///
/// A descriptor does not own its line: the line must outlive every descriptor and every wait
/// that refers to it, unless the line is one the library hands out (a simulated stream's, a
/// mapped CUDA or HIP line, the Metal mirror). Those descriptors also carry the line's
/// generation (never 0): retiring the line advances it, and a wait whose generation is stale
/// when it begins ends with errc::stale_descriptor without reading the line (the generations
/// live in a side table that outlives the lines: <gpu_async/line/line_life.hpp>). A
/// descriptor made without a generation (0: a line you allocate) is never checked.
class memory_descriptor {
public:
    constexpr memory_descriptor(const completion_line& line, slot_id slot,
                                std::uint64_t target) noexcept
        : line_(&line)
        , target_(target)
        , tag_(slot.index()) {}

    /// A descriptor of a line the library handed out, at the line's generation `generation`
    /// (at most max_generation: the bits above it are dropped).
    constexpr memory_descriptor(const completion_line& line, slot_id slot, std::uint64_t target,
                                std::uint64_t generation) noexcept
        : line_(&line)
        , target_(target)
        , tag_(((generation & max_generation) << 8) | slot.index()) {}

    constexpr const completion_line& line() const noexcept { return *line_; }
    constexpr slot_id slot() const noexcept {
        return slot_id(static_cast<std::uint8_t>(tag_ & 0xff));
    }
    constexpr std::uint64_t target() const noexcept { return target_; }
    /// The line's generation when the descriptor was made; 0 for a line the library does not
    /// own (then never checked).
    constexpr std::uint64_t generation() const noexcept { return tag_ >> 8; }

    /// The word this descriptor watches.
    const std::atomic<std::uint64_t>& word() const noexcept { return line_->words[slot().index()]; }

    /// Acquire load of the word, tested in wrapping order against the target.
    bool is_complete() const noexcept { return reached(*line_, slot(), target_); }

    friend constexpr bool operator==(const memory_descriptor& a,
                                     const memory_descriptor& b) noexcept {
        return a.line_ == b.line_ && a.target_ == b.target_ && a.tag_ == b.tag_;
    }

private:
    const completion_line* line_;
    std::uint64_t target_;
    std::uint64_t tag_; // the generation above the slot's index (low byte): 24 bytes in all
};

static_assert(sizeof(memory_descriptor) == 24, "a descriptor is a pointer, a target and a slot");

/// What a reactor does with a descriptor before it reads the line (the line's owner decides:
/// gpu_async::descriptor_status in <gpu_async/line/line_life.hpp>).
enum class line_status : std::uint8_t {
    live,    ///< wait for it
    stale,   ///< end the wait with errc::stale_descriptor: the line was retired
    faulted, ///< end the wait with errc::device_fault: the slot's stream faulted
    /// The slot's stream was given back and its retirement is still on its way to the
    /// reactors: the slot's word holds only what that stream stored (its owner lets no next
    /// stream store before the retirement is done), so a checked read decides the wait now:
    /// reached, it completes; else it ends as the retirement would end it.
    retiring,
};

/// Whether a wait on `d`, its line's status `st`, ends before it is watched: its line was
/// retired, or its slot's stream faulted before storing its target (what the stream stored
/// before its fault still completes; reads the word only then).
inline bool ends_unwatched(line_status st, const memory_descriptor& d) noexcept {
    return st == line_status::stale ||
           ((st == line_status::faulted || st == line_status::retiring) && !d.is_complete());
}

/// A line owner's judgement of descriptors, handed to whatever reads lines: how a descriptor's
/// line and slot stand before the line is read (`status`), and a counter that moves whenever a
/// status may have changed (`epoch`; none: every read judges). The library's lines answer
/// through gpu_async::library_line_life() (<gpu_async/line/line_life.hpp>); with no status function
/// every descriptor is live, as for lines the caller owns.
struct line_life_functions {
    line_status (*status)(const memory_descriptor&) noexcept = nullptr;
    std::uint64_t (*epoch)() noexcept = nullptr;
};

/// What a checked read of a descriptor's word found (read_checked).
enum class line_read : std::uint8_t {
    pending,    ///< live, its word below the target
    reached,    ///< its word reached the target while its line's life stood still
    faulted,    ///< its slot's stream faulted before storing the target
    stale,      ///< stale before anything was read: the line was not read
    retired,    ///< live when first judged, stale after the read: what was read does not count
    given_back, ///< its slot's stream was given back before it stored the target
};

/// Reads `d`'s word as a seqlock reader does: judges its status (`status`, the line owner's
/// descriptor_status), reads the word, and judges again; the read counts only if the status
/// did not move across it. A slot retired and reused between a judgement and a read (a new
/// stream storing numbers an old descriptor waits for) thus never completes an old descriptor.
/// A fault seen after the read reads the word again (what the stream stored before its fault
/// still completes), and so does a give-back seen after the read: a read that a retiring status
/// follows was of the given-back stream's word (no next stream stores before the retirement is
/// done), and a read between two retiring judgements decides, reached or given_back. With no
/// status function every descriptor is live. Reads the line only after a judgement that found
/// it not stale; at most four reads (live, faulted, retiring, stale is the only way a slot's
/// status moves for one generation).
inline line_read read_checked(const memory_descriptor& d,
                              line_status (*status)(const memory_descriptor&) noexcept) noexcept {
    if (status == nullptr || d.generation() == 0)
        return d.is_complete() ? line_read::reached : line_read::pending;
    line_status st = status(d);
    if (st == line_status::stale) return line_read::stale;
    bool faulted = st == line_status::faulted;
    for (;;) {
        const bool done = d.is_complete();
        const line_status again = status(d);
        if (again == line_status::stale) return line_read::retired;
        if (again == st || (done && again == line_status::retiring)) {
            if (done) return line_read::reached;
            if (faulted) return line_read::faulted;
            return st == line_status::retiring ? line_read::given_back : line_read::pending;
        }
        // live -> faulted, or a give-back seen after the read: read once more, after the change
        // was seen (a store that came before it still counts).
        faulted = faulted || again == line_status::faulted;
        st = again;
    }
}

} // namespace gpu_async

#endif // GPU_ASYNC_CORE_COMPLETION_LINE_HPP
