// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/device/impl/vulkan.ipp: definitions of the Vulkan backend, its parts in order.
//
#ifndef GPU_ASYNC_IMPL_VULKAN_IPP
#define GPU_ASYNC_IMPL_VULKAN_IPP

// The parts are included from here only, in this order: each uses the ones above it.
#include <gpu_async/device/impl/vulkan_common.ipp>
#include <gpu_async/device/impl/vulkan_device.ipp>
#include <gpu_async/device/impl/vulkan_line.ipp>
#include <gpu_async/device/impl/vulkan_settle.ipp>
#include <gpu_async/device/impl/vulkan_store.ipp>

#endif // GPU_ASYNC_IMPL_VULKAN_IPP
