// SPDX-License-Identifier: BSL-1.0
// Real device work for the Vulkan tests, the demo and the benchmark (test/common/vulkan_work.hpp,
// bench/common/vulkan_spin.hpp): one invocation adds 1 to
// `spins` the requested number of times, then counts its run. Each add is an atomic, so the
// compiler cannot fold the loop. Keep the iterations below 65536: llvmpipe (lavapipe) ends any
// shader loop after 65535 iterations: longer work is several dispatches. Work is held back by
// a semaphore its submission waits for (test/common/vulkan_work.hpp), not by a loop.
//
// scripts/ci/shaders.sh compiles it into the words of vulkan_spin_spirv.hpp.
#version 460

layout(local_size_x = 1) in;

layout(set = 0, binding = 0) buffer work_words {
    uint spins; // iterations run, summed over the runs
    uint runs;  // runs finished
} work;

layout(push_constant) uniform spin_args {
    uint iterations;
} args;

void main() {
    for (uint i = 0u; i < args.iterations; ++i)
        atomicAdd(work.spins, 1u);
    atomicAdd(work.runs, 1u);
}
