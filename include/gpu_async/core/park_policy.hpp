// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The park policy: the one place that decides how a thread waits for a scan engine:
/// what it does next, and how long and in what shape it waits between two scans.
///
/// Sans-I/O, as the wait machine is: every decision is a function of what the caller saw (its
/// clock, the engine's bounds, counts and flags) and of the timing (`wait_tuning`), so it
/// replays on virtual time. The threads that act on it are runners that decide nothing
/// themselves: the reactor service's watcher thread, `run_fill`'s caller, the std_watcher's
/// thread and the FILL executor's `turn` read the clock, scan, park and deliver as it says, and
/// the doorbell's and the stand-back gate's waits take their spins and steps from it.
///
/// One pass of a waiter:
/// 1. `next` at the top of a pass: post the drains whose post failed (and wait one park bound if
///    some still fail); idle while a caller drives the engine (FILL) or nothing is registered;
///    stand back while drains are out (`drain_scans`: their ends scan on the executor's
///    thread); else scan.
/// 2. A stand-back lasts `stand_back_window`: rounds of one bound (the park bound, shortened to
///    the tightest registration bound and the earliest deadline) while the drains make progress,
///    at most `wait_tuning::stand_back_bounds` park bounds in all; each round waits as
///    `stand_back_round` says.
/// 3. `next` after the scan: something found, hand it out and pass again; words watched, park
///    for the bound (`park_for`: never past a deadline), or, when every pending wait has a learnt
///    rhythm, sleep to the earliest expected completion less a margin and poll from there
///    (`predicted_sleep`); only deadlines left, sleep to the earliest; nothing, idle until a
///    registration rings (`urgent` says when a registration rings at once).
/// 4. The park itself, as `park` shapes it: on the monitor, or a spin (`spin_for_rings`: longer
///    while rings come densely) then a futex sleep, in device-poll steps while a device's store
///    must be looked for.
#ifndef GPU_ASYNC_CORE_PARK_POLICY_HPP
#define GPU_ASYNC_CORE_PARK_POLICY_HPP

#include <gpu_async/core/time.hpp>
#include <gpu_async/core/wait_tuning.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace gpu_async {

/// See the header comment. Stateless: every member is a pure function of what the caller saw
/// and of the timing (`wait_tuning`, the library's by default).
struct park_policy {

    /// What a waiter sees when it asks the policy what to do next. Each runner fills in what
    /// it has (a runner with no drains or no FILL caller leaves those false).
    struct view {
        bool scanned = false;       ///< false: the top of a pass; true: just after a scan
        bool empty = false;         ///< nothing registered or ending: no scan can find anything
        bool retries = false;       ///< drains whose post failed wait to be posted again
        bool caller_drives = false; ///< a run_fill caller is the waiter: the thread stays out
        bool drains_out = false;    ///< drains are out, and their ends scan on the executor
        bool found = false;         ///< the scan found waits to hand out
        bool pending = false;       ///< waits whose words are watched remain
        bool deadlines = false;     ///< deadlines remain with no word watched (alarms)
    };

    /// What a waiter does next: the one decision of every waiting thread (the service's
    /// watcher thread, run_fill's caller, the std_watcher's thread, the FILL executor's turn).
    enum class step : std::uint8_t {
        post_retries, ///< post the drains whose post failed first
        idle,         ///< nothing to read: wait for a ring (FILL's turn: return, nothing due)
        stand_back,   ///< drains are out: let their ends scan (stand_back_window)
        scan,         ///< take registrations in and scan
        deliver,      ///< hand out what the scan found, then pass again at once
        park,         ///< park on the lines for the bound (or sleep as predicted_sleep says)
        sleep,        ///< no word watched, deadlines left: sleep to the earliest
    };

    /// At the top of a pass: retries first, then stay out while a caller drives or nothing is
    /// registered, then stand back while drains are out, else scan. After a scan: hand out what
    /// it found before any park; park while words are watched; sleep to a deadline when only
    /// deadlines remain; else idle.
    static constexpr step next(const view& v) noexcept {
        if (!v.scanned) {
            if (v.retries) return step::post_retries;
            if (v.caller_drives || v.empty) return step::idle;
            if (v.drains_out) return step::stand_back;
            return step::scan;
        }
        if (v.found) return step::deliver;
        if (v.pending) return step::park;
        return v.deadlines ? step::sleep : step::idle;
    }

    /// The park at `now` for `bound`, shortened to the earliest deadline (never past one).
    static constexpr dur_ns park_for(mono_ns now, dur_ns bound,
                                     std::optional<mono_ns> earliest) noexcept {
        return earliest ? min(bound, earliest->since(now)) : bound;
    }

    /// How long a stand-back may last: rounds of `round` while the drains make progress, until
    /// `until` at the latest.
    struct stand_back_window {
        dur_ns round;
        mono_ns until;
        friend constexpr bool operator==(const stand_back_window&,
                                         const stand_back_window&) = default;
    };

    /// The window of a stand-back starting at `now`; `bound(b)` shortens a bound `b` to the
    /// tightest registration bound and the earliest deadline (scan_engine::bound at now).
    template <class Bound>
    static stand_back_window stand_back(mono_ns now, dur_ns park_bound, Bound&& bound,
                                        const wait_tuning& t = default_wait_tuning) {
        return {bound(park_bound), now.after(bound(park_bound * t.stand_back_bounds))};
    }

    /// One round of a stand-back's wait: spin first (the first round only, at most
    /// `stand_back_spin`), then, only while rings come densely (a drain's end is near
    /// otherwise), sleep on the gate in rounds of at most `round` (the device poll interval
    /// while a device's store must be looked for: a futex sleep does not see it).
    struct stand_back_wait {
        dur_ns spin;
        bool sleep;
        dur_ns round;
        friend constexpr bool operator==(const stand_back_wait&, const stand_back_wait&) = default;
    };

    /// The wait of a stand-back round: `first`, the first round; `spin`, the waiter's spin now
    /// (see spin_for_rings); `device_steps`, device producers store into the doorbell and no
    /// user-mode monitor sees their stores.
    static constexpr stand_back_wait
    stand_back_round(bool first, dur_ns spin, bool device_steps, dur_ns device_poll,
                     const wait_tuning& t = default_wait_tuning) noexcept {
        return {first ? min(spin, t.stand_back_spin) : dur_ns{}, dense(spin, t),
                device_steps ? min(max(device_poll, dur_ns{1}), t.longest_sleep) : t.longest_sleep};
    }

    /// Whether a stand-back goes on after a round: the drains ran within it (their progress
    /// count moved), nothing ended it, and its window is open.
    static constexpr bool stand_back_again(std::uint64_t progress_before,
                                           std::uint64_t progress_after, bool over, mono_ns now,
                                           mono_ns until) noexcept {
        return progress_after != progress_before && !over && now < until;
    }

    /// How a park between two scans is carried out (see park_shape).
    enum class park_kind : std::uint8_t {
        none,    ///< a zero bound: do not park
        monitor, ///< arm the user-mode monitor on the doorbell's line for the bound
        sleep,   ///< spin `spin`, then sleep on the doorbell's futex for the rest of the bound
        steps,   ///< spin `spin`, then sleep in steps of `step`, looking at the device's word
    };
    struct park_shape {
        park_kind kind;
        dur_ns spin;
        dur_ns step;
        friend constexpr bool operator==(const park_shape&, const park_shape&) = default;
    };

    /// The park of `bound`: on the monitor where the CPU has one (a ring and a device's store
    /// end it); without one, a spin of `spin` then a futex sleep, which only rings end, or, while
    /// waits are pending (`watching`) and device producers store into the doorbell, sleeps in
    /// steps of the device poll interval with a look at the device's word after each. The spin
    /// before the first step: `spin` while rings come densely or at the default poll interval
    /// or a faster one, none at a slower one (a slower poll is chosen for CPU).
    static constexpr park_shape park(dur_ns bound, bool monitor, bool watching,
                                     bool device_producers, dur_ns spin, dur_ns device_poll,
                                     const wait_tuning& t = default_wait_tuning) noexcept {
        if (bound.ns == 0) return {park_kind::none, {}, {}};
        if (monitor) return {park_kind::monitor, {}, bound};
        if (!watching || !device_producers) return {park_kind::sleep, spin, bound};
        const dur_ns step = max(device_poll, dur_ns{1});
        const bool spin_first = dense(spin, t) || step <= t.device_poll;
        return {park_kind::steps, spin_first ? spin : dur_ns{}, step};
    }

    /// A window of the ring rate: when it began and the doorbell's count then.
    struct ring_window {
        mono_ns start;
        std::uint64_t rings = 0;
    };

    /// The spin before a futex sleep, decided again once `ring_rate_window` has passed since
    /// `w` began: `busy_spin` when the rings of the window came at a mean gap of at most
    /// `busy_gap`, back to `spin` once the gap is wider than twice that, else as it is. None:
    /// the window is still open.
    static constexpr std::optional<dur_ns>
    spin_for_rings(mono_ns now, ring_window w, std::uint64_t rings, dur_ns spin_now,
                   const wait_tuning& t = default_wait_tuning) noexcept {
        const std::uint64_t span = now.ns - w.start.ns;
        if (span < t.ring_rate_window.ns) return std::nullopt;
        const std::uint64_t n = rings - w.rings;
        const std::uint64_t gap = n == 0 ? span : span / n;
        if (gap <= t.busy_gap.ns) return t.busy_spin;
        if (gap - t.busy_gap.ns > t.busy_gap.ns) return t.spin;
        return spin_now;
    }

    /// Whether a spin of `spin` is the dense-ring one.
    static constexpr bool dense(dur_ns spin, const wait_tuning& t = default_wait_tuning) noexcept {
        return spin >= t.busy_spin;
    }

    /// Whether a registration pushed at `now` must wake the waiter at once rather than wait for
    /// its next scan (at the latest one park bound away): its deadline comes within one park
    /// bound, or it asks for a bound tighter than the park bound (zero: none asked).
    static constexpr bool urgent(dur_ns bound, std::optional<mono_ns> deadline, mono_ns now,
                                 dur_ns park_bound) noexcept {
        const bool tighter = bound.ns != 0 && bound < park_bound;
        const bool soon = deadline && deadline->since(now) < park_bound;
        return tighter || soon;
    }

    /// Whether the end of a drain scans on the executor's thread: only when something rang
    /// since the last scan (a handler's producer, most likely) or a device signalled; the
    /// watcher stands back meanwhile (step::stand_back), so each scan has one thread.
    static constexpr bool drain_scans(bool rang_since_scan, bool device_signaled) noexcept {
        return rang_since_scan || device_signaled;
    }

    /// Whether a caller that runs handlers (run_fill) scans between two of them: one park bound
    /// since its last scan, so however busy its queue stays the lines are read that often.
    static constexpr bool scan_due(mono_ns now, mono_ns last_scan, dur_ns park_bound) noexcept {
        return now.since(last_scan) >= park_bound;
    }

    /// A predicted park: sleep `sleep`, then poll for `poll` (see predicted_sleep).
    struct predicted_park {
        dur_ns sleep;
        dur_ns poll;
        friend constexpr bool operator==(const predicted_park&, const predicted_park&) = default;
    };

    /// Twice the device poll interval (saturating): the shortest predicted sleep worth taking and
    /// the longest poll after one.
    static constexpr dur_ns two_polls(dur_ns device_poll) noexcept { return device_poll * 2; }

    /// Whether a park of `bound` can step: a device poll interval shorter than it. Otherwise a
    /// park sleeps the whole bound, with or without a prediction.
    static constexpr bool polls_within(dur_ns device_poll, dur_ns bound) noexcept {
        return device_poll.ns < bound.ns;
    }

    /// Whether a waiter predicts completions (learns rhythms, sleeps to them): turned on (`on`),
    /// device producers store into the doorbell, no user-mode monitor sees their stores (a
    /// monitor sees a store at once: nothing to predict), and the park can step.
    static constexpr bool predicts(bool on, bool device_producers, bool monitor, dur_ns device_poll,
                                   dur_ns bound) noexcept {
        return on && device_producers && !monitor && polls_within(device_poll, bound);
    }

    /// The park between two scans at `now` with `pending` waits, bounded by `bound`, when
    /// predictions apply (`predicting`: the waiter learns rhythms, device producers ring the
    /// doorbell, no user-mode monitor sees their stores) and the park can step. `expected(f)`
    /// calls f(std::optional<mono_ns>) with each pending wait's expected completion less the
    /// margin (none: not learnt, it may complete at any time). None: park for the bound,
    /// stepping. Otherwise sleep to the earliest expected completion and poll for up to two
    /// device poll intervals (within the bound), or, when that sleep passes the bound, sleep
    /// the whole bound without polling (the scan there looks, the next park predicts again).
    template <class Expected>
    static std::optional<predicted_park>
    predicted_sleep(mono_ns now, dur_ns bound, dur_ns device_poll, std::size_t pending,
                    bool predicting, Expected&& expected,
                    const wait_tuning& t = default_wait_tuning) {
        if (pending == 0 || pending > t.predict_max_pending || !predicting ||
            !polls_within(device_poll, bound))
            return std::nullopt;
        // A sleep shorter than two steps saves nothing: the first wait due by then settles it.
        const std::uint64_t soon = now.after(two_polls(device_poll)).ns;
        std::uint64_t wake = ~std::uint64_t{0};
        bool step = false;
        expected([&](std::optional<mono_ns> at) {
            if (step) return;
            wake = at ? std::min(wake, at->ns) : 0;
            step = wake <= soon;
        });
        if (step) return std::nullopt;
        const dur_ns sleep{wake - now.ns};
        if (sleep >= bound) return predicted_park{bound, dur_ns{}};
        return predicted_park{sleep, min(two_polls(device_poll), bound - sleep)};
    }
};

} // namespace gpu_async

#endif // GPU_ASYNC_CORE_PARK_POLICY_HPP
