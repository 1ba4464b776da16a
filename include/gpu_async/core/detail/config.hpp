// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/core/detail/config.hpp: build configuration macros.
//
// Header-only by default. Define GPU_ASYNC_SEPARATE_COMPILATION in every translation unit and
// compile <gpu_async/src.hpp> in exactly one of them (the CMake target gpu_async::compiled does
// this) to move the non-template code into one compiled unit, as Asio and Boost.MySQL do.
//
// This header uses the preprocessor only, so the core may include it.
//
#ifndef GPU_ASYNC_CORE_DETAIL_CONFIG_HPP
#define GPU_ASYNC_CORE_DETAIL_CONFIG_HPP

#if defined(GPU_ASYNC_SEPARATE_COMPILATION)
#define GPU_ASYNC_DECL
#define GPU_ASYNC_HEADER_ONLY 0
#else
#define GPU_ASYNC_DECL inline
#define GPU_ASYNC_HEADER_ONLY 1
#endif

#include <gpu_async/version.hpp>

#endif // GPU_ASYNC_CORE_DETAIL_CONFIG_HPP
