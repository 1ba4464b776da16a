// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief A completion line's life, its watchers and its health, in one include.
///
/// - <gpu_async/line_life.hpp>: adoption, generations, retiring a line or a slot, faults
///   (`adopt_line`, `retire_line`, `retire_slot`, `fault_slot`, `descriptor_status`).
/// - <gpu_async/line_watchers.hpp>: the registry of the reactors told of them
///   (`detail::line_watcher`, `detail::add_line_watcher`).
/// - <gpu_async/line_health.hpp>: the owners' health queries (`line_health`,
///   `watch_line_health`, `set_fault_backstop`).
#ifndef GPU_ASYNC_LINE_RETIREMENT_HPP
#define GPU_ASYNC_LINE_RETIREMENT_HPP

#include <gpu_async/line_health.hpp>
#include <gpu_async/line_life.hpp>
#include <gpu_async/line_watchers.hpp>

#endif // GPU_ASYNC_LINE_RETIREMENT_HPP
