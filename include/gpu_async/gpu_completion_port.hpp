// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief Forwards to <gpu_async/asio/gpu_completion_port.hpp>, where the Asio layer keeps it.
#ifndef GPU_ASYNC_GPU_COMPLETION_PORT_HPP
#define GPU_ASYNC_GPU_COMPLETION_PORT_HPP

#include <gpu_async/asio/gpu_completion_port.hpp>

#endif // GPU_ASYNC_GPU_COMPLETION_PORT_HPP
