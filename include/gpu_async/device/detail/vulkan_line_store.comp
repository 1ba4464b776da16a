// SPDX-License-Identifier: BSL-1.0
// The Vulkan backend's store (<gpu_async/device/vulkan.hpp>): one invocation stores the slot's
// next sequence number into its word of the completion line, as one 64-bit atomic store, so the
// host's 64-bit loads never see half of it. Device scope and release semantics: the store is
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

// What to store where: the number as two 32-bit halves (push constants of 12 bytes).
layout(push_constant) uniform store_args {
    uint value_lo;
    uint value_hi;
    uint slot;
} args;

void main() {
    const uint64_t value = (uint64_t(args.value_hi) << 32) | uint64_t(args.value_lo);
    atomicStore(line_.words[args.slot & 7u], value, gl_ScopeDevice, gl_StorageSemanticsBuffer,
                gl_SemanticsRelease);
}
