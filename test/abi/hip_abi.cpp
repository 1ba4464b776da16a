// SPDX-License-Identifier: BSL-1.0
// test/abi/hip_abi.cpp: <gpu_async/device/hip.hpp>'s own HIP declarations against
// hip_runtime_api.h (AMD platform). Compiled (not run) by scripts/ci/backends.sh against Debian's
// libamdhip64-dev.
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__
#endif
#include <gpu_async/device/hip.hpp>

#include "abi_check.hpp"

#include <hip/hip_runtime_api.h>

#include <type_traits>

namespace h = gpu_async::hip;
using ep = gpu_async::hip::entry_points;

static_assert(std::is_same_v<h::stream_t, hipStream_t>);
static_assert(std::is_same_v<h::context_t, hipCtx_t>);
static_assert(std::is_same_v<h::device_t, hipDevice_t>);
static_assert(std::is_same_v<h::deviceptr_t, hipDeviceptr_t>);
static_assert(std::is_same_v<h::event_t, hipEvent_t>);
static_assert(sizeof(h::status_t) == sizeof(hipError_t));

static_assert(h::success == hipSuccess);
static_assert(h::error_invalid_value == hipErrorInvalidValue);
static_assert(h::error_no_device == hipErrorNoDevice);
static_assert(h::error_invalid_device == hipErrorInvalidDevice);
static_assert(h::error_not_found == hipErrorNotFound);
static_assert(h::error_not_ready == hipErrorNotReady);
static_assert(h::error_launch_failure == hipErrorLaunchFailure);
static_assert(h::host_malloc_mapped == hipHostMallocMapped);
static_assert(h::host_malloc_coherent == hipHostMallocCoherent);
static_assert(h::host_register_portable == hipHostRegisterPortable);
static_assert(h::host_register_mapped == hipHostRegisterMapped);

GPU_ASYNC_ABI_SAME_SIGNATURE(ep, init, hipInit);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, driver_get_version, hipDriverGetVersion);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, get_error_name, hipGetErrorName);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, get_device_count, hipGetDeviceCount);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, get_device, hipGetDevice);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, set_device, hipSetDevice);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, device_primary_ctx_retain, hipDevicePrimaryCtxRetain);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, device_primary_ctx_release, hipDevicePrimaryCtxRelease);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, host_get_device_pointer, hipHostGetDevicePointer);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, host_free, hipHostFree);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, device_synchronize, hipDeviceSynchronize);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, stream_query, hipStreamQuery);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, stream_synchronize, hipStreamSynchronize);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, stream_write_value64, hipStreamWriteValue64);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, stream_create, hipStreamCreate);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, stream_destroy, hipStreamDestroy);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, device_free, hipFree);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, memset_d8_async, hipMemsetD8Async);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, host_register, hipHostRegister);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, host_unregister, hipHostUnregister);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, stream_wait_event, hipStreamWaitEvent);
// hipHostMalloc and hipMalloc have C++ template overloads in the header: pick the C function.
static_assert(
    std::is_same_v<decltype(ep::host_malloc),
                   gpu_async::abi::norm_fn<hipError_t (*)(void**, size_t, unsigned int)>::type>);
static_assert(std::is_same_v<decltype(ep::device_malloc),
                             gpu_async::abi::norm_fn<hipError_t (*)(void**, size_t)>::type>);
[[maybe_unused]] hipError_t (*const host_malloc)(void**, size_t, unsigned int) = &hipHostMalloc;
[[maybe_unused]] hipError_t (*const device_malloc)(void**, size_t) = &hipMalloc;
// hipStreamGetDevice is newer than ROCm 5.2's header (the backend finds it at run time, or
// refuses lines); its ROCm 6 signature is hipError_t (hipStream_t, hipDevice_t*).
static_assert(
    std::is_same_v<decltype(ep::stream_get_device),
                   gpu_async::abi::norm_fn<hipError_t (*)(hipStream_t, hipDevice_t*)>::type>);

int main() {
    return 0;
}
