// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/wait/detail/futex.hpp: the Linux futex calls the doorbell uses, on shared (not private)
// futexes: private io_uring futex waits can miss wakes from shared ones on some kernels, and a
// doorbell's word may live in memory another process or a device also maps.
//
#ifndef GPU_ASYNC_WAIT_DETAIL_FUTEX_HPP
#define GPU_ASYNC_WAIT_DETAIL_FUTEX_HPP

#include <cstdint>
#include <limits>

#if defined(__linux__)
#define GPU_ASYNC_HAS_FUTEX 1
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#else
#define GPU_ASYNC_HAS_FUTEX 0
#endif

namespace gpu_async::detail {

#if GPU_ASYNC_HAS_FUTEX

/// FUTEX_WAIT (shared) on `word` while it holds `expected`, for at most `timeout_ns` (relative,
/// CLOCK_MONOTONIC). Returns at a wake, a value mismatch, a signal or the timeout.
inline void futex_wait(const std::uint32_t* word, std::uint32_t expected,
                       std::uint64_t timeout_ns) noexcept {
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(timeout_ns / 1000000000u);
    ts.tv_nsec = static_cast<long>(timeout_ns % 1000000000u);
    ::syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, nullptr, 0);
}

/// FUTEX_WAKE (shared): wakes every thread waiting on `word`.
inline void futex_wake_all(const std::uint32_t* word) noexcept {
    ::syscall(SYS_futex, word, FUTEX_WAKE, std::numeric_limits<int>::max(), nullptr, nullptr, 0);
}

#endif // GPU_ASYNC_HAS_FUTEX

} // namespace gpu_async::detail

#endif // GPU_ASYNC_WAIT_DETAIL_FUTEX_HPP
