// SPDX-License-Identifier: BSL-1.0
// The Vulkan backend's store (<gpu_async/device/vulkan.hpp>): one invocation stores the slot's
// next sequence number into its word of the completion line, as one 64-bit atomic store, so the
// host's 64-bit loads never see half of it; then, when the line has a doorbell, rings it: stores
// doorbell::device_signal (1) into the doorbell's device word, after the completion, so a reactor
// parked on the doorbell wakes at once. Device scope and release semantics: the store is
// ordered after the invocation's earlier memory accesses; the barrier the backend records before
// the dispatch orders it after the caller's work.
//
// scripts/ci/shaders.sh compiles it (glslangValidator -V --target-env vulkan1.2) into the words
// of vulkan_line_store_spirv.hpp and checks that the checked-in words are what it makes.
#version 460
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_shader_atomic_int64 : require
#extension GL_KHR_memory_scope_semantics : require

layout(local_size_x = 1) in;

// The line: eight 64-bit words (binding 0 of set 0, the line's buffer).
layout(set = 0, binding = 0) buffer line_words {
    uint64_t words[8];
} line_;

// The doorbell's imported host page(s) (binding 1): its device word is bell_.words[args.bell].
// Without a doorbell the binding is the line's buffer again and args.bell is no_bell.
layout(set = 0, binding = 1) buffer bell_words {
    uint64_t words[];
} bell_;

// What to store where: the number as two 32-bit halves, the slot, and the index of the
// doorbell's device word in binding 1 (push constants of 16 bytes).
layout(push_constant) uniform store_args {
    uint value_lo;
    uint value_hi;
    uint slot;
    uint bell;
} args;

const uint no_bell = 0xffffffffu;

void main() {
    const uint64_t value = (uint64_t(args.value_hi) << 32) | uint64_t(args.value_lo);
    atomicStore(line_.words[args.slot & 7u], value, gl_ScopeDevice, gl_StorageSemanticsBuffer,
                gl_SemanticsRelease);
    // Release again: a waiter that takes the signal and then scans sees the completion.
    if (args.bell != no_bell)
        atomicStore(bell_.words[args.bell], uint64_t(1), gl_ScopeDevice,
                    gl_StorageSemanticsBuffer, gl_SemanticsRelease);
}
