// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The park policy: what the thread that waits for a scan engine does next, and how
/// long it waits between two scans.
///
/// Sans-I/O, as the wait machine is: every decision is a function of what the caller saw (its
/// clock, the engine's bounds, counts and flags), so it replays on virtual time. The thread
/// that acts on it (a watcher thread, `run_fill`'s caller, the std_watcher's thread) reads the
/// clock, parks and scans; the policy only decides.
///
/// One pass of a waiter:
/// 1. `before_scan`: post the drains whose post failed (and wait one park bound if some still
///    fail); idle while a caller drives the engine (FILL); stand back while drains are out (their
///    ends scan on the executor's thread); else scan.
/// 2. A stand-back lasts `stand_back_window`: rounds of one bound (the park bound, shortened to
///    the tightest registration bound and the earliest deadline) while the drains make progress,
///    at most `stand_back_bounds` park bounds in all.
/// 3. After the scan, `between_scans`: nothing pending and nothing found, idle until a
///    registration rings; something found, hand it out and pass again; else park for the bound,
///    or, when every pending wait has a learnt rhythm, sleep to the earliest expected completion
///    less a margin and poll from there (`predicted_sleep`).
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

    /// What a waiter does at the top of a pass.
    enum class step : std::uint8_t {
        post_retries, ///< post the drains whose post failed first
        idle,         ///< a caller drives the engine: wait for a ring, reading no line
        stand_back,   ///< drains are out: let their ends scan (stand_back_window)
        scan,         ///< take registrations in and scan
    };

    /// The step at the top of a pass, from what the waiter sees under its lock.
    static constexpr step before_scan(bool retries, bool caller_drives, bool drains_out) noexcept {
        if (retries) return step::post_retries;
        if (caller_drives) return step::idle;
        if (drains_out) return step::stand_back;
        return step::scan;
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

    /// What a waiter does after a scan.
    enum class after : std::uint8_t {
        idle,    ///< nothing pending: wait for a ring, reading no line
        deliver, ///< hand out what the scan found, then pass again at once
        park,    ///< park for the bound (or sleep as predicted_sleep says)
    };

    static constexpr after between_scans(bool found, bool pending) noexcept {
        if (found) return after::deliver;
        return pending ? after::park : after::idle;
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
