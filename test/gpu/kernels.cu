// SPDX-License-Identifier: BSL-1.0
// test/gpu/kernels.cu: the only CUDA C++ of the GPU tests (nvcc 13 cannot compile Asio's
// coroutine headers, so everything else stays in .cpp files).
#include "kernels.hpp"

#include <cuda_runtime.h>

namespace {

__global__ void spin_then_trap(long long cycles) {
    const long long start = clock64();
    while (clock64() - start < cycles) {
    }
    __trap();
}

} // namespace

extern "C" int gpu_async_test_launch_spin_then_trap(void* stream, long long cycles) {
    spin_then_trap<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(cycles);
    return static_cast<int>(cudaGetLastError());
}
