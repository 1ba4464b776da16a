// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The std host: a monotonic clock over the process clock, a timer that sleeps the calling
/// thread, the blocking wait (the `naive` executor kind), and a watcher thread that completes
/// waiters of any runtime. The FILL executor's idle on it is <gpu_async/fill/std_idle.hpp>.
///
/// One header per component, all included here:
/// - <gpu_async/host/std_clock.hpp>: `std_clock`, `std_timer`.
/// - <gpu_async/host/wait_blocking.hpp>: `wait_blocking`, `std_plan_capabilities`.
/// - <gpu_async/host/std_watcher.hpp>: `std_watcher`, `watch_handle`.
///
/// Host layer: std threads and the word wait; no Boost, no Asio.
#ifndef GPU_ASYNC_HOST_STD_HOST_HPP
#define GPU_ASYNC_HOST_STD_HOST_HPP

#include <gpu_async/host/std_clock.hpp>
#include <gpu_async/host/std_watcher.hpp>
#include <gpu_async/host/wait_blocking.hpp>

#endif // GPU_ASYNC_HOST_STD_HOST_HPP
