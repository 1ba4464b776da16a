// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief Every public header that needs no vendor SDK.
#ifndef GPU_ASYNC_GPU_ASYNC_HPP
#define GPU_ASYNC_GPU_ASYNC_HPP

#include <gpu_async/asio/basic_gpu_completion_port.hpp>
#include <gpu_async/asio/error.hpp>
#include <gpu_async/asio/gpu_completion_port.hpp>
#include <gpu_async/asio/plan_wait.hpp>
#include <gpu_async/asio/run_fill.hpp>
#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/completion_source.hpp>
#include <gpu_async/core/error.hpp>
#include <gpu_async/core/estimator.hpp>
#include <gpu_async/core/park_fallback.hpp>
#include <gpu_async/core/result.hpp>
#include <gpu_async/core/time.hpp>
#include <gpu_async/core/wait_machine.hpp>
#include <gpu_async/core/wait_plan.hpp>
#include <gpu_async/device/cuda.hpp>
#include <gpu_async/device/hip.hpp>
#include <gpu_async/device/mapped_line.hpp>
#include <gpu_async/device/metal.hpp>
#include <gpu_async/device/sim_device.hpp>
#include <gpu_async/device/vulkan.hpp>
#include <gpu_async/fill/executor_kind.hpp>
#include <gpu_async/fill/fill_executor.hpp>
#include <gpu_async/fill/reactor.hpp>
#include <gpu_async/fill/std_idle.hpp>
#include <gpu_async/fill/wait_bands.hpp>
#include <gpu_async/host/std_host.hpp>
#include <gpu_async/host/wait_fd.hpp>
#include <gpu_async/version.hpp>
#include <gpu_async/wait/doorbell.hpp>
#include <gpu_async/wait/wordwait.hpp>

#endif // GPU_ASYNC_GPU_ASYNC_HPP
