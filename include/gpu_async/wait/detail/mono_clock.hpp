// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The one adapter between the process monotonic clock (std::chrono::steady_clock) and
/// the core's time (mono_ns): every host reads the clock through it (std_clock, the word waits
/// and the doorbell, the reactor service, plan-driven waits, the health queries), so a deadline
/// taken in one place is a deadline in every other.
///
/// Word-wait layer: the standard library's clock only.
#ifndef GPU_ASYNC_WAIT_DETAIL_MONO_CLOCK_HPP
#define GPU_ASYNC_WAIT_DETAIL_MONO_CLOCK_HPP

#include <gpu_async/core/time.hpp>

#include <chrono>
#include <cstdint>
#include <limits>

namespace gpu_async::detail {

/// `t` as the core's time point; a point before the clock's epoch is 0.
inline mono_ns mono_from(std::chrono::steady_clock::time_point t) noexcept {
    const auto ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
    return mono_ns{ns > 0 ? static_cast<std::uint64_t>(ns) : 0};
}

/// The process monotonic clock now, as the core's time point.
inline mono_ns mono_now() noexcept {
    return mono_from(std::chrono::steady_clock::now());
}

/// `t` as a steady_clock time point; a point past what the clock can hold is its last one
/// (mono_ns::max(), "never", stays in the far future).
inline std::chrono::steady_clock::time_point steady_from(mono_ns t) noexcept {
    using rep = std::chrono::nanoseconds::rep;
    constexpr auto max_ns = static_cast<std::uint64_t>(std::numeric_limits<rep>::max());
    return std::chrono::steady_clock::time_point(
        std::chrono::nanoseconds(static_cast<rep>(t.ns < max_ns ? t.ns : max_ns)));
}

} // namespace gpu_async::detail

#endif // GPU_ASYNC_WAIT_DETAIL_MONO_CLOCK_HPP
