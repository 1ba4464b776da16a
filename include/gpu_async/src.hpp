// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The separately compiled unit.
///
/// Include it in exactly one translation unit of a program built with
/// GPU_ASYNC_SEPARATE_COMPILATION defined everywhere (the CMake target gpu_async::compiled does
/// this for you); every other translation unit then compiles only declarations and templates.
#ifndef GPU_ASYNC_SRC_HPP
#define GPU_ASYNC_SRC_HPP

#if !defined(GPU_ASYNC_SEPARATE_COMPILATION)
#error "gpu_async/src.hpp is for builds that define GPU_ASYNC_SEPARATE_COMPILATION"
#endif

#include <gpu_async/asio/detail/flavour.hpp>

#if !defined(GPU_ASYNC_STANDALONE_ASIO)
#include <gpu_async/asio/impl/boost_error.ipp>
#endif
#include <gpu_async/asio/impl/completion_queue.ipp>
#include <gpu_async/asio/impl/reactor_service.ipp>
#include <gpu_async/asio/impl/reactor_watcher.ipp>
#include <gpu_async/asio/impl/run_fill.ipp>
#include <gpu_async/core/impl/error.ipp>
#include <gpu_async/device/impl/cuda.ipp>
#include <gpu_async/device/impl/hip.ipp>
#include <gpu_async/device/impl/mapped_line.ipp>
#include <gpu_async/device/impl/metal.ipp>
#include <gpu_async/device/impl/sim_device.ipp>
#include <gpu_async/device/impl/vulkan.ipp>
#include <gpu_async/host/impl/wait_fd.ipp>
#include <gpu_async/line/impl/line_health.ipp>
#include <gpu_async/line/impl/line_life.ipp>
#include <gpu_async/line/impl/line_watchers.ipp>
#include <gpu_async/wait/impl/wordwait.ipp>

#endif // GPU_ASYNC_SRC_HPP
