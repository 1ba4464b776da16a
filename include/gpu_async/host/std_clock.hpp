// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The std host's clock and timer: a monotonic clock over the process clock (`std_clock`,
/// mono_ns over std::chrono::steady_clock) and a timer that sleeps the calling thread
/// (`std_timer`).
///
///     std_clock clk;                          // mono_ns over std::chrono::steady_clock
///     std_timer tmr;                          // sleeps the calling thread
///
/// Host layer: the standard library's clock and thread sleep; no Boost, no Asio.
#ifndef GPU_ASYNC_HOST_STD_CLOCK_HPP
#define GPU_ASYNC_HOST_STD_CLOCK_HPP

#include <gpu_async/core/time.hpp>
#include <gpu_async/wait/detail/mono_clock.hpp>

#include <chrono>
#include <thread>

namespace gpu_async {

/// The process monotonic clock (std::chrono::steady_clock) as mono_ns.
class std_clock {
public:
    mono_ns now() const noexcept { return detail::mono_now(); }

    /// The steady_clock time point of `t` (saturating: mono_ns::max() stays in the far future).
    static std::chrono::steady_clock::time_point to_time_point(mono_ns t) noexcept {
        return detail::steady_from(t);
    }
};

/// A timer that sleeps the calling thread until a point of std_clock. It never returns before
/// the deadline (it sleeps again after an early return); at once when the deadline has passed.
class std_timer {
public:
    void sleep_until(mono_ns at) const {
        const std_clock clk;
        while (clk.now() < at)
            std::this_thread::sleep_until(std_clock::to_time_point(at));
    }
};

static_assert(clock<std_clock>);
static_assert(timer<std_timer>);

} // namespace gpu_async

#endif // GPU_ASYNC_HOST_STD_CLOCK_HPP
