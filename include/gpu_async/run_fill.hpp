// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief Forwards to <gpu_async/asio/run_fill.hpp>, where the Asio layer keeps it.
#ifndef GPU_ASYNC_RUN_FILL_HPP
#define GPU_ASYNC_RUN_FILL_HPP

#include <gpu_async/asio/run_fill.hpp>

#endif // GPU_ASYNC_RUN_FILL_HPP
