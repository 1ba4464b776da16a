// SPDX-License-Identifier: BSL-1.0
// The Vulkan tests' device work (test/unit/devices/vulkan.cpp): one invocation spins for the
// requested number of iterations, or until the host opens the gate, then counts its run. The
// loop's loads are atomic, so the compiler cannot hoist them and the host's store to `open`
// ends the loop.
//
// scripts/ci/shaders.sh compiles it into the words of vulkan_spin_spirv.hpp.
#version 460

layout(local_size_x = 1) in;

layout(set = 0, binding = 0) buffer gate_words {
    uint open;  // set by the host: stop spinning
    uint spins; // iterations run, summed over the runs
    uint runs;  // runs finished
} gate;

layout(push_constant) uniform spin_args {
    uint iterations;
} args;

void main() {
    uint i = 0u;
    for (; i < args.iterations; ++i) {
        if (atomicAdd(gate.open, 0u) != 0u) break;
    }
    atomicAdd(gate.spins, i);
    atomicAdd(gate.runs, 1u);
}
