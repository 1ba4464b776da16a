// SPDX-License-Identifier: BSL-1.0
//
// test/gpu/kernels.hpp: kernels the real-device tests launch, compiled by nvcc from kernels.cu
// (built only when CMake finds a CUDA compiler: GPU_ASYNC_GPU_TESTS_HAVE_KERNELS is then 1).
//
// The launchers take a CUstream (= cudaStream_t) as void* so this header needs no CUDA header;
// they return the cudaError_t of the launch as an int (0: launched).
//
#ifndef GPU_ASYNC_TEST_GPU_KERNELS_HPP
#define GPU_ASYNC_TEST_GPU_KERNELS_HPP

extern "C" {

/// One thread spins for `cycles` clock cycles, then executes a trap: the stream's context fails
/// with a sticky launch error while the host is already waiting.
int gpu_async_test_launch_spin_then_trap(void* stream, long long cycles);

} // extern "C"

#endif // GPU_ASYNC_TEST_GPU_KERNELS_HPP
