// SPDX-License-Identifier: BSL-1.0
// test/abi/cuda_abi.cpp: <gpu_async/device/cuda.hpp>'s own CUDA declarations against cuda.h.
// Compiled (not run) by scripts/ci/backends.sh where /usr/local/cuda exists.
#include <gpu_async/device/cuda.hpp>

#include "abi_check.hpp"

#include <cuda.h>

#include <cstddef>
#include <type_traits>

namespace c = gpu_async::cuda;
using ep = gpu_async::cuda::entry_points;

static_assert(CUDA_VERSION >= 12000, "the backend resolves the CUDA 12.0 ABI");

static_assert(std::is_same_v<c::stream_t, CUstream>);
static_assert(std::is_same_v<c::context_t, CUcontext>);
static_assert(std::is_same_v<c::device_t, CUdevice>);
static_assert(std::is_same_v<c::deviceptr_t, CUdeviceptr>);
static_assert(std::is_same_v<c::event_t, CUevent>);
static_assert(std::is_same_v<c::host_fn_t, CUhostFn>);
static_assert(sizeof(c::status_t) == sizeof(CUresult));

static_assert(c::success == CUDA_SUCCESS);
static_assert(c::error_invalid_value == CUDA_ERROR_INVALID_VALUE);
static_assert(c::error_not_initialized == CUDA_ERROR_NOT_INITIALIZED);
static_assert(c::error_no_device == CUDA_ERROR_NO_DEVICE);
static_assert(c::error_invalid_context == CUDA_ERROR_INVALID_CONTEXT);
static_assert(c::error_not_found == CUDA_ERROR_NOT_FOUND);
static_assert(c::error_not_ready == CUDA_ERROR_NOT_READY);
static_assert(c::error_launch_failed == CUDA_ERROR_LAUNCH_FAILED);
static_assert(c::error_not_supported == CUDA_ERROR_NOT_SUPPORTED);
static_assert(c::attribute_can_map_host_memory == CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY);
static_assert(c::attribute_can_use_64_bit_stream_mem_ops ==
              CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS);
static_assert(c::memhostalloc_portable == CU_MEMHOSTALLOC_PORTABLE);
static_assert(c::memhostalloc_devicemap == CU_MEMHOSTALLOC_DEVICEMAP);
static_assert(c::memhostregister_portable == CU_MEMHOSTREGISTER_PORTABLE);
static_assert(c::memhostregister_devicemap == CU_MEMHOSTREGISTER_DEVICEMAP);
static_assert(c::stream_mem_op_write_value_64 == CU_STREAM_MEM_OP_WRITE_VALUE_64);
static_assert(c::stream_write_value_default == CU_STREAM_WRITE_VALUE_DEFAULT);
static_assert(c::stream_non_blocking == CU_STREAM_NON_BLOCKING);
static_assert(c::ctx_sched_spin == CU_CTX_SCHED_SPIN);
static_assert(c::ctx_sched_blocking_sync == CU_CTX_SCHED_BLOCKING_SYNC);
static_assert(c::event_disable_timing == CU_EVENT_DISABLE_TIMING);
static_assert(c::get_proc_address_default == CU_GET_PROC_ADDRESS_DEFAULT);
static_assert(c::proc_address_success == CU_GET_PROC_ADDRESS_SUCCESS);
static_assert(c::proc_address_symbol_not_found == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
static_assert(c::proc_address_version_not_sufficient == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);

// cuGetProcAddress is cuGetProcAddress_v2 in CUDA 12+ headers (flags and a symbol status).
static_assert(std::is_same_v<c::get_proc_address_fn,
                             gpu_async::abi::norm_fn<decltype(&cuGetProcAddress_v2)>::type>);

// The header's names are macros for the ABI versions cuGetProcAddress(name, 12000) returns
// (cuMemHostGetDevicePointer_v2, cuCtxPushCurrent_v2, cuStreamWriteValue64_v2, ...).
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, init, cuInit);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, driver_get_version, cuDriverGetVersion);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, get_error_name, cuGetErrorName);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, device_get_count, cuDeviceGetCount);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, device_get, cuDeviceGet);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, device_get_attribute, cuDeviceGetAttribute);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, ctx_get_current, cuCtxGetCurrent);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, ctx_set_current, cuCtxSetCurrent);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, ctx_get_device, cuCtxGetDevice);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, ctx_push_current, cuCtxPushCurrent);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, ctx_pop_current, cuCtxPopCurrent);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, ctx_synchronize, cuCtxSynchronize);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, device_primary_ctx_retain, cuDevicePrimaryCtxRetain);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, device_primary_ctx_release, cuDevicePrimaryCtxRelease);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, mem_host_alloc, cuMemHostAlloc);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, mem_host_get_device_pointer, cuMemHostGetDevicePointer);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, mem_free_host, cuMemFreeHost);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, stream_get_ctx, cuStreamGetCtx);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, stream_query, cuStreamQuery);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, stream_synchronize, cuStreamSynchronize);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, stream_write_value64, cuStreamWriteValue64);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, stream_create, cuStreamCreate);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, stream_destroy, cuStreamDestroy);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, mem_alloc, cuMemAlloc);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, mem_free, cuMemFree);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, memset_d8_async, cuMemsetD8Async);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, ctx_set_flags, cuCtxSetFlags);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, event_create, cuEventCreate);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, event_record, cuEventRecord);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, event_query, cuEventQuery);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, event_destroy, cuEventDestroy);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, launch_host_func, cuLaunchHostFunc);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, mem_host_register, cuMemHostRegister);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, mem_host_unregister, cuMemHostUnregister);
GPU_ASYNC_ABI_SAME_SIGNATURE(ep, stream_wait_event, cuStreamWaitEvent);

// cuStreamBatchMemOp (cuStreamBatchMemOp_v2 at API version 12000) takes the backend's own
// declaration of CUstreamBatchMemOpParams: the same signature with that type, and the same
// layout of the union and of its writeValue member.
static_assert(
    std::is_same_v<decltype(&cuStreamBatchMemOp),
                   CUresult (*)(CUstream, unsigned, CUstreamBatchMemOpParams*, unsigned)>);
static_assert(
    std::is_same_v<decltype(ep::stream_batch_mem_op),
                   c::status_t (*)(CUstream, unsigned, c::stream_batch_mem_op_params*, unsigned)>);
using params = c::stream_batch_mem_op_params;
using write_params = params::write_value_params;
static_assert(sizeof(params) == sizeof(CUstreamBatchMemOpParams));
static_assert(alignof(params) == alignof(CUstreamBatchMemOpParams));
static_assert(sizeof(CUstreamBatchMemOpType) == sizeof(int));
static_assert(offsetof(params, write_value) == offsetof(CUstreamBatchMemOpParams, writeValue));
static_assert(offsetof(write_params, operation) ==
              offsetof(CUstreamBatchMemOpParams, writeValue.operation) -
                  offsetof(CUstreamBatchMemOpParams, writeValue));
static_assert(offsetof(write_params, address) ==
              offsetof(CUstreamBatchMemOpParams, writeValue.address) -
                  offsetof(CUstreamBatchMemOpParams, writeValue));
static_assert(offsetof(write_params, value64) ==
              offsetof(CUstreamBatchMemOpParams, writeValue.value64) -
                  offsetof(CUstreamBatchMemOpParams, writeValue));
static_assert(offsetof(write_params, flags) ==
              offsetof(CUstreamBatchMemOpParams, writeValue.flags) -
                  offsetof(CUstreamBatchMemOpParams, writeValue));
static_assert(offsetof(write_params, alias) ==
              offsetof(CUstreamBatchMemOpParams, writeValue.alias) -
                  offsetof(CUstreamBatchMemOpParams, writeValue));
static_assert(std::is_same_v<decltype(write_params::address), CUdeviceptr>);
static_assert(std::is_same_v<decltype(write_params::value64), cuuint64_t>);

int main() {
    return 0;
}
