// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/wait/detail/bell_waiter.hpp: how a watcher thread waits between two scans of its lines,
// and how it is started. One implementation for every watcher of the library: the Asio reactor
// service's thread (and run_fill's park), and std_watcher's.
//
// The wait is a park on one doorbell (<gpu_async/wait/doorbell.hpp>) until it rings, a device
// stores its signal into the doorbell's line, or a bound passes:
//
// - Where the CPU has a user-mode monitor (UMWAIT, MONITORX, WFE), the park arms it on the
//   doorbell's line: a ring and any device's store into that line end it at once.
// - Without one, it spins, then sleeps on the doorbell's futex, which only rings end. The spin
//   adapts to the ring rate: while rings come densely (a mean gap of at most busy_gap_ns over a
//   window of a millisecond or more) it lasts up to max_spin_ns, which costs less CPU than a
//   futex wake per ring (a system call for the ringer, 4 to 90 us of wake-up for the waiter on a
//   virtual machine); once the gap widens past twice that, doorbell::spin_ns again.
// - With device producers counted on the doorbell and no monitor, a park while waits are pending
//   sleeps in steps of the device poll interval and looks at the doorbell's device word after
//   each (a futex does not see a device's store), spinning first only at the default poll or a
//   faster one (or while rings are dense); or, when its owner predicts the next
//   completion (the reactor service's completion rhythm), park_predicted() sleeps to a margin
//   before it, then polls the device word in a pause loop for a short budget.
//
// Host layer: std threads, the word wait and the doorbell; no Boost, no Asio.
//
#ifndef GPU_ASYNC_WAIT_DETAIL_BELL_WAITER_HPP
#define GPU_ASYNC_WAIT_DETAIL_BELL_WAITER_HPP

#include <gpu_async/core/time.hpp>
#include <gpu_async/wait/detail/spin.hpp>
#include <gpu_async/wait/detail/timer_slack.hpp>
#include <gpu_async/wait/doorbell.hpp>
#include <gpu_async/wait/wordwait.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <utility>

namespace gpu_async {

/// The default device poll interval of a watcher without a user-mode monitor: 20 us, near the
/// knee where a shorter sleep of a virtual CPU buys little latency and costs a wake-up each time
/// (see the port's device_poll()).
inline constexpr dur_ns default_device_poll = dur_ns::from_us(20);

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
    /// The spin before a futex sleep while rings come densely.
    static constexpr std::uint64_t max_spin_ns = 100000;
    /// The mean gap between rings under which they count as dense.
    static constexpr std::uint64_t busy_gap_ns = 25000;
    /// The park of a watcher with nothing to watch: a registration and a stop ring it; the
    /// bound only caps what a lost ring (none is expected) would cost.
    static constexpr dur_ns idle_bound = dur_ns::from_ms(1000);

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
        if (bound.ns == 0) return;
        auto rang = [&bell, seen] { return bell.count() != seen || bell.device_signaled(); };
        if (has_monitor()) {
            ww_->park(bell.line(), rang, bound);
            return;
        }
        const std::uint64_t now = mono_now().ns;
        const std::uint64_t t0 = rate_t0_ns_.load(std::memory_order_relaxed);
        if (now - t0 >= 1000000) {
            const std::uint64_t rings = bell.count();
            const std::uint64_t n = rings - rate_rings0_.load(std::memory_order_relaxed);
            const std::uint64_t gap = n == 0 ? now - t0 : (now - t0) / n;
            const std::uint64_t spin = spin_ns_.load(std::memory_order_relaxed);
            if (gap <= busy_gap_ns)
                spin_ns_.store(max_spin_ns, std::memory_order_relaxed);
            else if (gap > 2 * busy_gap_ns && spin != doorbell::spin_ns)
                spin_ns_.store(doorbell::spin_ns, std::memory_order_relaxed);
            rate_t0_ns_.store(now, std::memory_order_relaxed);
            rate_rings0_.store(rings, std::memory_order_relaxed);
        }
        const dur_ns spin{spin_ns_.load(std::memory_order_relaxed)};
        if (!watching || bell.device_producers() == 0) {
            bell.wait(rang, bound, spin);
            return;
        }
        const dur_ns step{
            std::max<std::uint64_t>(1, device_poll_ns_.load(std::memory_order_relaxed))};
        const std::uint64_t end = mono_ns{now}.after(bound).ns;
        for (dur_ns s = first_step_spin(spin, dense(), step);; s = dur_ns{}) {
            const std::uint64_t t = mono_now().ns;
            if (t >= end) return;
            if (bell.wait(rang, min(step, dur_ns{end - t}), s)) return;
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
        spin_until(rang, mono_now().after(budget).ns);
        return false;
    }

    /// The spin before the first device-poll step of a park: `spin` while rings come densely or
    /// at the default poll interval or a faster one, none at a slower one. The spin catches a
    /// store that lands just after the scan, for its length at every park; a slower poll is
    /// chosen for CPU. (Measured in the simulator, with and without it: its effect on p50 was
    /// mixed, 0 to 6 us lower in most cells and higher in a few, for up to 15 % more CPU.)
    static constexpr dur_ns first_step_spin(dur_ns spin, bool dense, dur_ns step) noexcept {
        return dense || step.ns <= default_device_poll.ns ? spin : dur_ns{};
    }

    /// The spin before a futex sleep now: doorbell::spin_ns, or max_spin_ns while dense.
    std::uint64_t spin_ns() const noexcept { return spin_ns_.load(std::memory_order_relaxed); }
    /// True while rings come densely (the waiter spins max_spin_ns).
    bool dense() const noexcept { return spin_ns() == max_spin_ns; }

    /// The device poll interval (zero is taken as 1 ns).
    void device_poll(dur_ns interval) noexcept {
        device_poll_ns_.store(interval.ns == 0 ? 1 : interval.ns, std::memory_order_relaxed);
    }
    dur_ns device_poll() const noexcept {
        return dur_ns{device_poll_ns_.load(std::memory_order_relaxed)};
    }

private:
    const word_wait* ww_;
    std::atomic<std::uint64_t> spin_ns_{doorbell::spin_ns};
    std::atomic<std::uint64_t> device_poll_ns_{default_device_poll.ns};
    std::atomic<std::uint64_t> rate_t0_ns_{0};  // the ring-rate window's start
    std::atomic<std::uint64_t> rate_rings0_{0}; // the ring count then
};

} // namespace detail
} // namespace gpu_async

#endif // GPU_ASYNC_WAIT_DETAIL_BELL_WAITER_HPP
