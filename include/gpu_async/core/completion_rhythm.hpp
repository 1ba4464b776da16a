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
#include <gpu_async/core/time.hpp>
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

/// What a waiter that sleeps to predictions learns from its scans: a completion_rhythm, and
/// whether the scan it is about to make follows a predicted sleep that the device outran (its
/// samples are then "between" the look before the sleep and this one). Sans-I/O: the caller
/// passes the times (the waiter's clock) and serializes the calls.
class rhythm_learner {
public:
    /// A wait started at `started` (none: started while nothing was predicted: not learnt) on
    /// `d` was found complete by a look at `now`. Never throws: without memory for the line's
    /// record the sample is dropped (the waiter steps for it).
    void learn(const memory_descriptor& d, std::optional<mono_ns> started, mono_ns now,
               const deadline_plan& plan) noexcept {
        if (!started) return;
        const std::uint64_t took = now > *started ? now.since(*started).ns : 0;
        try {
            if (late_ && *started < slept_from_)
                rhythm_.observe_between(d.line(), d.slot(), slept_from_.since(*started).ns, took,
                                        plan);
            else
                rhythm_.observe(d.line(), d.slot(), took, plan);
        } catch (...) {
        }
    }
    /// The wait's expected completion less the margin (plan), or none when its slot has no
    /// rhythm yet or it was not started predicted.
    std::optional<mono_ns> expected(const memory_descriptor& d, std::optional<mono_ns> started,
                                    const deadline_plan& plan) const {
        if (!started) return std::nullopt;
        const std::optional<std::uint64_t> s = rhythm_.sleep_ns(d.line(), d.slot(), plan);
        if (!s) return std::nullopt;
        return started->after(dur_ns{*s});
    }
    /// A predicted sleep that began at `from` ended with a completion signalled during it.
    void slept_late(mono_ns from) noexcept {
        late_ = true;
        slept_from_ = from;
    }
    /// A scan ended: only the first after a late sleep learns "between".
    void scanned() noexcept { late_ = false; }

    const completion_rhythm& rhythm() const noexcept { return rhythm_; }
    void forget(const completion_line& line) { rhythm_.forget(line); }

private:
    completion_rhythm rhythm_;
    bool late_ = false;
    mono_ns slept_from_;
};

} // namespace gpu_async

#endif // GPU_ASYNC_CORE_COMPLETION_RHYTHM_HPP
