// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief What a waiter learns of each watched slot's completions.
///
/// A GPU stream that stores its word only (no host ring) is seen by a waiter without a user-mode
/// monitor only when it looks. Looking often costs a wake-up each time; looking rarely costs
/// latency. But a stream's work has a rhythm: the time from a wait's registration to its
/// completion repeats from one wait of a slot to the next. A completion_rhythm keeps, per (line,
/// slot), a point_estimate of that time (<gpu_async/core/estimator.hpp>: the minimum of the last
/// `window` samples, so a sleep to it rarely oversleeps and a late sample never raises it), and
/// tells the waiter how long after a registration it may sleep before it must look again.
///
/// Samples. observe(): the completion was seen by a look, `took` after the wait's start (an upper
/// bound: at most a step late while the waiter steps, more when a ring ended a long sleep; the
/// minimum over the window absorbs the late ones). observe_between(): the first look after
/// a sleep to a prediction found it done, so it came after the look before the sleep and before
/// the prediction: the middle of that span is taken (a bisection: a rhythm that shortened is
/// found again in a few waits, and a wrong guess costs wake-ups, not a lost completion).
///
/// Size. At most max_lines lines are remembered; past that the table starts over (a waiter
/// without samples looks in steps again, as before it learnt). forget() drops a line whose memory
/// is going away (its owner retires it), so a new line at the same address starts cold.
///
/// Sans-I/O and standard library only: it never reads a clock (the caller passes durations) and
/// holds no lock (its owner serializes access).
#ifndef GPU_ASYNC_CORE_COMPLETION_RHYTHM_HPP
#define GPU_ASYNC_CORE_COMPLETION_RHYTHM_HPP

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/estimator.hpp>
#include <gpu_async/core/wait_plan.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <unordered_map>

namespace gpu_async {

/// Per (line, slot), how long after its registration a wait is seen to complete. See the header
/// comment.
class completion_rhythm {
public:
    /// Lines remembered before the table starts over.
    static constexpr std::size_t max_lines = 1024;

    /// Learns what one wait on `slot` of `line` showed: registered, then seen complete by a look
    /// `took_ns` later. `plan.window` samples are kept.
    void observe(const completion_line& line, slot_id slot, std::uint64_t took_ns,
                 const deadline_plan& plan) {
        point(line, slot).observe(plan, outcome::exact(took_ns));
    }

    /// Learns what one wait showed when the first look after a sleep to a prediction found it
    /// complete: it was not `after_ns` after its start (the look before the sleep) and was
    /// `by_ns` after it. The sample is the middle of [after_ns, min(by_ns, prediction)].
    void observe_between(const completion_line& line, slot_id slot, std::uint64_t after_ns,
                         std::uint64_t by_ns, const deadline_plan& plan) {
        point_estimate& e = point(line, slot);
        const std::optional<std::uint64_t> p = e.prediction_ns(point_estimate::window_of(plan));
        const std::uint64_t hi = p ? std::min(by_ns, *p) : by_ns;
        const std::uint64_t lo = std::min(after_ns, hi);
        e.observe(plan, outcome::exact(lo + (hi - lo) / 2));
    }

    /// How long after a wait's registration on (line, slot) the waiter may sleep before it must
    /// look: point_estimate::sleep_ns (the prediction less plan.margin, none under
    /// plan.min_sleep, at most plan.max_sleep), or none for a slot without samples.
    std::optional<std::uint64_t> sleep_ns(const completion_line& line, slot_id slot,
                                          const deadline_plan& plan) const {
        const auto it = lines_.find(&line);
        if (it == lines_.end()) return std::nullopt;
        return it->second[slot.index()].sleep_ns(plan);
    }

    /// The estimate of (line, slot), or none when the line has none.
    const point_estimate* estimate(const completion_line& line, slot_id slot) const {
        const auto it = lines_.find(&line);
        return it == lines_.end() ? nullptr : &it->second[slot.index()];
    }

    /// Drops what was learnt of `line` (its memory is going away).
    void forget(const completion_line& line) { lines_.erase(&line); }
    /// Drops everything.
    void clear() noexcept { lines_.clear(); }
    /// Lines with samples.
    std::size_t lines() const noexcept { return lines_.size(); }

private:
    point_estimate& point(const completion_line& line, slot_id slot) {
        auto it = lines_.find(&line);
        if (it == lines_.end()) {
            if (lines_.size() >= max_lines) lines_.clear();
            it = lines_.try_emplace(&line).first;
        }
        return it->second[slot.index()];
    }

    std::unordered_map<const completion_line*, std::array<point_estimate, line_words>> lines_;
};

} // namespace gpu_async

#endif // GPU_ASYNC_CORE_COMPLETION_RHYTHM_HPP
