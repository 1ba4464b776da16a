// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/wait/detail/bell_waiter.hpp: how a watcher thread waits between two scans of its lines,
// and how it is started. One implementation for every watcher of the library: the Asio reactor
// service's thread (and run_fill's park), and std_watcher's.
//
// The wait is a park on one doorbell (<gpu_async/wait/doorbell.hpp>) until it rings, a device
// stores its signal into the doorbell's line, or a bound passes. Its shape is the park policy's
// (park_policy::park, spin_for_rings, predicted_sleep: <gpu_async/core/park_policy.hpp>): on the
// user-mode monitor where the CPU has one; without one, a spin (longer while rings come densely)
// then a futex sleep, in device-poll steps while device producers store into the doorbell (a
// futex does not see a device's store); or, when its owner predicts the next completion,
// park_predicted() sleeps to a margin before it, then polls the device word for a short budget.
// This class measures the ring rate and carries the shape out; it holds no timing of its own.
//
// Host layer: std threads, the word wait and the doorbell; no Boost, no Asio.
//
#ifndef GPU_ASYNC_WAIT_DETAIL_BELL_WAITER_HPP
#define GPU_ASYNC_WAIT_DETAIL_BELL_WAITER_HPP

#include <gpu_async/core/park_policy.hpp>
#include <gpu_async/core/time.hpp>
#include <gpu_async/core/wait_tuning.hpp>
#include <gpu_async/wait/detail/spin.hpp>
#include <gpu_async/wait/detail/timer_slack.hpp>
#include <gpu_async/wait/doorbell.hpp>
#include <gpu_async/wait/wordwait.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <optional>
#include <thread>
#include <utility>

namespace gpu_async {

/// The default device poll interval of a watcher without a user-mode monitor
/// (wait_tuning::device_poll; see the port's device_poll()).
inline constexpr dur_ns default_device_poll = default_wait_tuning.device_poll;

namespace detail {

/// Starts a watcher thread running `main`, with its timer slack shortened first (so that parks
/// of a few tens of microseconds stay that short).
template <class Main>
std::thread start_watcher_thread(Main&& main) {
    return std::thread([fn = std::forward<Main>(main)]() mutable {
        shorten_timer_slack();
        fn();
    });
}

/// The wait of one watcher thread between two scans (see the header comment). The knobs are
/// atomics: set from any thread, read by the waiter.
class bell_waiter {
public:
    explicit bell_waiter(const word_wait& ww = word_wait::probe()) noexcept
        : ww_(&ww) {}
    bell_waiter(const bell_waiter&) = delete;
    bell_waiter& operator=(const bell_waiter&) = delete;

    /// The word wait the park uses on the doorbell's line (fallback: the futex).
    const word_wait& word_wait_used() const noexcept { return *ww_; }
    bool has_monitor() const noexcept { return ww_->path() != word_wait_path::fallback; }

    /// Parks until `bell` rang since its count was `seen`, a device stored its signal, or
    /// `bound` passed. `watching`: waits are pending (with device producers and no monitor, the
    /// park then sleeps in device-poll steps). Call from the watcher thread only.
    void park(const doorbell& bell, std::uint64_t seen, dur_ns bound, bool watching = true) {
        auto rang = [&bell, seen] { return bell.count() != seen || bell.device_signaled(); };
        const bool monitor = has_monitor();
        const mono_ns now = monitor || bound.ns == 0 ? mono_ns{} : mono_now();
        if (!monitor && bound.ns != 0) measure_rings(bell, now);
        const park_policy::park_shape shape = park_policy::park(
            bound, monitor, watching, bell.device_producers() != 0, spin(), device_poll());
        switch (shape.kind) {
        case park_policy::park_kind::none:
            return;
        case park_policy::park_kind::monitor:
            ww_->park(bell.line(), rang, bound);
            return;
        case park_policy::park_kind::sleep:
            bell.wait(rang, bound, shape.spin);
            return;
        case park_policy::park_kind::steps:
            break;
        }
        const mono_ns end = now.after(bound);
        for (dur_ns s = shape.spin;; s = dur_ns{}) {
            const mono_ns t = mono_now();
            if (t >= end) return;
            if (bell.wait(rang, min(shape.step, end.since(t)), s)) return;
        }
    }

    /// The predicted park of a waiter without a user-mode monitor (see the reactor service's
    /// completion rhythm): sleeps `sleep` on the doorbell's futex (a ring ends it, a device's
    /// store cannot, which is why the sleep ends a margin before the predicted completion), then
    /// polls the doorbell in a pause loop for up to `budget` (a ring or the device's signal ends
    /// it). Returns true when the device had signalled by the end of the sleep: what the next
    /// scan finds completed came before its prediction (a late sample). Call from the waiting
    /// thread only (the watcher, or run_fill's).
    bool park_predicted(const doorbell& bell, std::uint64_t seen, dur_ns sleep, dur_ns budget) {
        auto rang = [&bell, seen] { return bell.count() != seen || bell.device_signaled(); };
        if (rang()) return false;
        if (bell.wait([&bell, seen] { return bell.count() != seen; }, sleep, dur_ns{}))
            return false;
        if (bell.device_signaled()) return true;
        spin_until(rang, mono_now().after(budget));
        return false;
    }

    /// The spin before a futex sleep now: wait_tuning::spin, or busy_spin while dense.
    dur_ns spin() const noexcept { return dur_ns{spin_ns_.load(std::memory_order_relaxed)}; }
    /// True while rings come densely (the waiter spins wait_tuning::busy_spin).
    bool dense() const noexcept { return park_policy::dense(spin()); }

    /// The device poll interval (zero is taken as 1 ns).
    void device_poll(dur_ns interval) noexcept {
        device_poll_ns_.store(interval.ns == 0 ? 1 : interval.ns, std::memory_order_relaxed);
    }
    dur_ns device_poll() const noexcept {
        return dur_ns{device_poll_ns_.load(std::memory_order_relaxed)};
    }

private:
    const word_wait* ww_;
    std::atomic<std::uint64_t> spin_ns_{default_wait_tuning.spin.ns};
    std::atomic<std::uint64_t> device_poll_ns_{default_device_poll.ns};
    std::atomic<std::uint64_t> rate_t0_ns_{0};  // the ring-rate window's start
    std::atomic<std::uint64_t> rate_rings0_{0}; // the ring count then

    // Ends the ring-rate window when it is over: the policy sets the spin from its rate.
    void measure_rings(const doorbell& bell, mono_ns now) noexcept {
        const park_policy::ring_window w{mono_ns{rate_t0_ns_.load(std::memory_order_relaxed)},
                                         rate_rings0_.load(std::memory_order_relaxed)};
        const std::uint64_t rings = bell.count();
        const std::optional<dur_ns> next = park_policy::spin_for_rings(now, w, rings, spin());
        if (!next) return;
        spin_ns_.store(next->ns, std::memory_order_relaxed);
        rate_t0_ns_.store(now.ns, std::memory_order_relaxed);
        rate_rings0_.store(rings, std::memory_order_relaxed);
    }
};

} // namespace detail
} // namespace gpu_async

#endif // GPU_ASYNC_WAIT_DETAIL_BELL_WAITER_HPP
