// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/core/completion_rhythm.hpp: when a watched slot's next completion is expected.
//
// A GPU that stores its completion word without ringing anything is seen only when its waiter
// looks. Without a user-mode monitor the waiter looks in steps (a sleep per step), so a completion
// waits up to one step to be seen. Most GPU work runs in a rhythm, though: a decode step, a frame,
// a solver iteration takes about as long as the last few did. A slot_rhythm learns that rhythm
// from what the waiter already sees, and poll_schedule() turns the rhythms of the slots with
// pending waits into the waiter's next move: sleep until shortly before the earliest expected
// completion, then poll (a pause loop, one line read per pass) through its window, and outside
// every window sleep in steps as before. A slot whose completions do not come in a rhythm (their
// spread exceeds the poll budget) is never polled for: it costs no CPU beyond the steps.
//
// The interval. A slot's interval starts when its first wait is registered after the slot last
// advanced (launch, then wait) or, when a wait was still pending then, at that advance (a
// pipelined stream); it ends when a scan finds the slot's word advanced. A scan knows only that
// the advance happened after the waiter's last look that found nothing: the interval ends there,
// a lower bound, and a completion known only within more than the caller's precision (seen
// after a long sleep) is no sample at all. The window uses the shortest and the longest but one
// of the last `window` samples.
//
// Sans-I/O: the caller passes every time point (mono_ns); nothing here reads a clock, blocks or
// locks. Standard library only.
//
#ifndef GPU_ASYNC_CORE_COMPLETION_RHYTHM_HPP
#define GPU_ASYNC_CORE_COMPLETION_RHYTHM_HPP

#include <gpu_async/core/time.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>

namespace gpu_async {

/// When a slot's next advance is expected: no earlier than `earliest`, no later than `latest`.
struct expected_window {
    mono_ns earliest;
    mono_ns latest;
    friend constexpr bool operator==(const expected_window&, const expected_window&) = default;
};

/// The completion rhythm of one watched slot. See the header comment.
class slot_rhythm {
public:
    /// The samples kept (the last ones).
    static constexpr std::size_t window = 8;
    /// No window is expected before this many samples.
    static constexpr std::size_t min_samples = 4;

    /// A wait was registered on the slot at `now`. Starts the interval unless one runs (a wait
    /// registered since the slot last advanced, or none registered yet).
    constexpr void armed(mono_ns now) noexcept {
        if (running_) return;
        ref_ = now.ns;
        running_ = true;
    }

    /// A scan at `seen` found the slot's word advanced (waits reached); the waiter had last looked
    /// and found nothing new at `after`, so the advance happened in (max(after, start), seen],
    /// where start is the running interval's start. When that span is at most `precision` the
    /// interval ends with one sample at its lower end (the window then opens no later than it
    /// should); a completion known less precisely (seen a long sleep late) teaches nothing. The
    /// next interval starts there either way (a later registration restarts it). Several calls
    /// with one `seen` (several waits reached by one scan) count once.
    constexpr void advanced(mono_ns seen, mono_ns after, dur_ns precision) noexcept {
        if (has_seen_ && seen.ns == last_seen_) return;
        const std::uint64_t lower = std::min(std::max(after.ns, ref_), seen.ns);
        if ((running_ || has_ref_) && lower >= ref_ && seen.ns - lower <= precision.ns)
            push(lower - ref_);
        ref_ = lower;
        has_ref_ = true;
        running_ = false;
        last_seen_ = seen.ns;
        has_seen_ = true;
    }

    /// As advanced(now, now, 0): the advance was seen at `now`, exactly.
    constexpr void advanced(mono_ns now) noexcept { advanced(now, now, dur_ns{}); }

    /// How many samples are held (at most `window`).
    constexpr std::size_t samples() const noexcept { return count_; }

    /// When the slot's next advance is expected: [start + shortest, start + longest] of the last
    /// samples but the longest one (one completion seen late, an outlier, does not widen the
    /// window), where start is the interval's start. None before min_samples samples, before
    /// any interval started, or when those samples spread more than `max_spread` (no rhythm).
    constexpr std::optional<expected_window> expected(dur_ns max_spread) const noexcept {
        if (count_ < min_samples || !has_ref_) return std::nullopt;
        std::uint64_t lo = std::numeric_limits<std::uint64_t>::max();
        std::uint64_t hi = 0;  // the longest
        std::uint64_t hi2 = 0; // the longest but one
        for (std::size_t i = 0; i < count_; ++i) {
            lo = std::min(lo, ring_[i]);
            if (ring_[i] >= hi) {
                hi2 = hi;
                hi = ring_[i];
            } else {
                hi2 = std::max(hi2, ring_[i]);
            }
        }
        hi = hi2;
        if (hi - lo > max_spread.ns) return std::nullopt;
        return expected_window{mono_ns{sat_add(ref_, lo)}, mono_ns{sat_add(ref_, hi)}};
    }

private:
    static constexpr std::uint64_t sat_add(std::uint64_t a, std::uint64_t b) noexcept {
        return a > std::numeric_limits<std::uint64_t>::max() - b
                   ? std::numeric_limits<std::uint64_t>::max()
                   : a + b;
    }
    constexpr void push(std::uint64_t sample) noexcept {
        ring_[next_] = sample;
        next_ = (next_ + 1) % window;
        count_ = std::min(count_ + 1, window);
    }

    std::array<std::uint64_t, window> ring_{};
    std::size_t next_ = 0;
    std::size_t count_ = 0;
    std::uint64_t ref_ = 0;       // the running interval's start, or the last advance
    std::uint64_t last_seen_ = 0; // the scan time of the last advance
    bool has_ref_ = false;
    bool running_ = false;
    bool has_seen_ = false;
};

/// The waiter's next move, from poll_schedule().
struct poll_move {
    enum class kind_type : std::uint8_t {
        poll,  ///< poll (a pause loop over the line) until `until`
        sleep, ///< sleep until `until` (a ring or a device's doorbell store may end it sooner)
    };
    kind_type kind;
    mono_ns until;
    friend constexpr bool operator==(const poll_move&, const poll_move&) = default;
};

/// Merges expected windows into the one the waiter acts on next: the earliest-starting window
/// that has not ended by `now` (windows are widened by `margin` before their start and after
/// their end). Feed it one entry per watched slot (its window, or add_unpredicted()), then call
/// move().
class poll_schedule {
public:
    /// `step`: the longest sleep outside every window (the device poll interval). `margin`: how
    /// much earlier than a window's start polling begins, and how much later than its end it
    /// stops (covers the sleep's wake-up latency). `budget`: the longest one window is polled.
    constexpr poll_schedule(mono_ns now, dur_ns step, dur_ns margin, dur_ns budget) noexcept
        : now_(now)
        , step_(step)
        , margin_(margin)
        , budget_(budget) {}

    /// Takes one slot's window into account.
    constexpr void add(const expected_window& w) noexcept {
        const std::uint64_t from = w.earliest.ns > margin_.ns ? w.earliest.ns - margin_.ns : 0;
        std::uint64_t to = w.latest.ns > std::numeric_limits<std::uint64_t>::max() - margin_.ns
                               ? std::numeric_limits<std::uint64_t>::max()
                               : w.latest.ns + margin_.ns;
        if (to - from > budget_.ns) to = from + budget_.ns;
        if (to <= now_.ns) {
            // Over: the slot is late (polled through, or out of rhythm): polled in steps.
            unpredicted_ = true;
            return;
        }
        if (!best_ || from < best_from_) {
            best_ = true;
            best_from_ = from;
            best_to_ = to;
        }
    }

    /// Takes into account a watched slot with no window (no rhythm learnt, or none): it is
    /// polled in steps.
    constexpr void add_unpredicted() noexcept { unpredicted_ = true; }

    /// Poll now when `now` lies in the chosen window (until its end). Otherwise sleep: until the
    /// chosen window's start when every slot added has a window ahead; else for one step, or
    /// until that start if it comes first. With nothing added, one step.
    constexpr poll_move move() const noexcept {
        const std::uint64_t step_end =
            now_.ns > std::numeric_limits<std::uint64_t>::max() - step_.ns
                ? std::numeric_limits<std::uint64_t>::max()
                : now_.ns + step_.ns;
        if (!best_) return {poll_move::kind_type::sleep, mono_ns{step_end}};
        if (best_from_ <= now_.ns) return {poll_move::kind_type::poll, mono_ns{best_to_}};
        if (!unpredicted_) return {poll_move::kind_type::sleep, mono_ns{best_from_}};
        return {poll_move::kind_type::sleep, mono_ns{std::min(best_from_, step_end)}};
    }

    /// True when some slot added had no window ahead (add_unpredicted, or a window over).
    constexpr bool any_unpredicted() const noexcept { return unpredicted_; }

    /// The chosen window, widened and clipped to the budget, if any.
    constexpr std::optional<expected_window> chosen() const noexcept {
        if (!best_) return std::nullopt;
        return expected_window{mono_ns{best_from_}, mono_ns{best_to_}};
    }

private:
    mono_ns now_;
    dur_ns step_;
    dur_ns margin_;
    dur_ns budget_;
    bool best_ = false;
    bool unpredicted_ = false;
    std::uint64_t best_from_ = 0;
    std::uint64_t best_to_ = 0;
};

} // namespace gpu_async

#endif // GPU_ASYNC_CORE_COMPLETION_RHYTHM_HPP
