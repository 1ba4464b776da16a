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

#include <gpu_async/asio_flavour.hpp>

#if !defined(GPU_ASYNC_STANDALONE_ASIO)
#include <gpu_async/impl/boost_error.ipp>
#endif
#include <gpu_async/impl/completion_queue.ipp>
#include <gpu_async/impl/cuda.ipp>
#include <gpu_async/impl/error.ipp>
#include <gpu_async/impl/hip.ipp>
#include <gpu_async/impl/line_health.ipp>
#include <gpu_async/impl/line_life.ipp>
#include <gpu_async/impl/line_watchers.ipp>
#include <gpu_async/impl/mapped_line.ipp>
#include <gpu_async/impl/metal.ipp>
#include <gpu_async/impl/reactor_service.ipp>
#include <gpu_async/impl/reactor_watcher.ipp>
#include <gpu_async/impl/run_fill.ipp>
#include <gpu_async/impl/sim_device.ipp>
#include <gpu_async/impl/vulkan.ipp>
#include <gpu_async/impl/wait_fd.ipp>
#include <gpu_async/impl/wordwait.ipp>

#endif // GPU_ASYNC_SRC_HPP
