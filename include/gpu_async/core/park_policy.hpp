// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The park policy: what the thread that waits for a scan engine does next, and how
/// long it waits between two scans.
///
/// Sans-I/O, as the wait machine is: every decision is a function of what the caller saw (its
/// clock, the engine's bounds, counts and flags), so it replays on virtual time. The threads
/// that act on it are runners that decide nothing themselves: the reactor service's watcher
/// thread, `run_fill`'s caller, the std_watcher's thread and the FILL executor's `turn` read the
/// clock, scan, park and deliver as `next` says.
///
/// One pass of a waiter:
/// 1. `next` at the top of a pass: post the drains whose post failed (and wait one park bound if
///    some still fail); idle while a caller drives the engine (FILL); stand back while drains are
///    out (their ends scan on the executor's thread); else scan.
/// 2. A stand-back lasts `stand_back_window`: rounds of one bound (the park bound, shortened to
///    the tightest registration bound and the earliest deadline) while the drains make progress,
///    at most `stand_back_bounds` park bounds in all.
/// 3. `next` after the scan: something found, hand it out and pass again; words watched, park
///    for the bound (`park_for`: never past a deadline), or, when every pending wait has a learnt
///    rhythm, sleep to the earliest expected completion less a margin and poll from there
///    (`predicted_sleep`); only deadlines left, sleep to the earliest; nothing, idle until a
///    registration rings.
#ifndef GPU_ASYNC_CORE_PARK_POLICY_HPP
#define GPU_ASYNC_CORE_PARK_POLICY_HPP

#include <gpu_async/core/time.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace gpu_async {

/// See the header comment. Stateless: every member is a pure function.
struct park_policy {
    /// The longest stand-back, in park bounds (a drain scans only when the bell rang).
    static constexpr std::uint64_t stand_back_bounds = 10;
    /// At most this many pending waits are looked through for the earliest expected completion;
    /// with more the waiter steps (a look per park would cost more than the steps it saves).
    static constexpr std::size_t predict_max_pending = 256;

    /// What a waiter sees when it asks the policy what to do next. Each runner fills in what
    /// it has (a runner with no drains or no FILL caller leaves those false).
    struct view {
        bool scanned = false;       ///< false: the top of a pass; true: just after a scan
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

    /// At the top of a pass: retries first, then stay out while a caller drives, then stand
    /// back while drains are out, else scan. After a scan: hand out what it found before any
    /// park; park while words are watched; sleep to a deadline when only deadlines remain; else
    /// idle.
    static constexpr step next(const view& v) noexcept {
        if (!v.scanned) {
            if (v.retries) return step::post_retries;
            if (v.caller_drives) return step::idle;
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
    static stand_back_window stand_back(mono_ns now, dur_ns park_bound, Bound&& bound) {
        const std::uint64_t pb = park_bound.ns;
        const dur_ns most{pb > ~std::uint64_t{0} / stand_back_bounds ? ~std::uint64_t{0}
                                                                     : pb * stand_back_bounds};
        return {bound(park_bound), now.after(bound(most))};
    }

    /// Whether a stand-back goes on after a round: the drains ran within it (their progress
    /// count moved), nothing ended it, and its window is open.
    static constexpr bool stand_back_again(std::uint64_t progress_before,
                                           std::uint64_t progress_after, bool over, mono_ns now,
                                           mono_ns until) noexcept {
        return progress_after != progress_before && !over && now < until;
    }

    /// A predicted park: sleep `sleep`, then poll for `poll` (see predicted_sleep).
    struct predicted_park {
        dur_ns sleep;
        dur_ns poll;
        friend constexpr bool operator==(const predicted_park&, const predicted_park&) = default;
    };

    /// Twice the device poll interval (saturating): the shortest predicted sleep worth taking and
    /// the longest poll after one.
    static constexpr dur_ns two_polls(dur_ns device_poll) noexcept {
        const std::uint64_t p = device_poll.ns;
        return dur_ns{p > ~std::uint64_t{0} / 2 ? ~std::uint64_t{0} : 2 * p};
    }

    /// Whether a park of `bound` can step: a device poll interval shorter than it. Otherwise a
    /// park sleeps the whole bound, with or without a prediction.
    static constexpr bool polls_within(dur_ns device_poll, dur_ns bound) noexcept {
        return device_poll.ns < bound.ns;
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
    static std::optional<predicted_park> predicted_sleep(mono_ns now, dur_ns bound,
                                                         dur_ns device_poll, std::size_t pending,
                                                         bool predicting, Expected&& expected) {
        if (pending == 0 || pending > predict_max_pending || !predicting ||
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
