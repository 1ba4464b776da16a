#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# scripts/ci/shaders.sh: the SPIR-V words checked in beside each GLSL compute shader are what
# glslangValidator makes of the GLSL, so neither the build nor a program needs a shader compiler
# (the Vulkan backend passes the words to vkCreateShaderModule as they are).
#
#   scripts/ci/shaders.sh            check: compile each shader into a temporary header and diff
#                                    it with the checked-in one (fails on any difference)
#   scripts/ci/shaders.sh --update   rewrite the checked-in headers (after editing a shader)
#
# Each shader is compiled with `glslangValidator -V --target-env vulkan1.2` (SPIR-V 1.5) and,
# where spirv-val is installed (spirv-tools), validated for Vulkan 1.2. The words depend on the
# glslang version (its generator word and code): the headers are made with Debian 12's
# glslang-tools (11:12.0.0), which CI installs. Installs glslang-tools where it is missing (as
# root, Debian).
set -euo pipefail
cd "$(dirname "$0")/../.."

update=0
[ "${1:-}" = "--update" ] && update=1

if ! command -v glslangValidator >/dev/null 2>&1; then
    bash scripts/install-deps.sh glslang-tools
fi

# GLSL source | checked-in header | namespace | array name
shaders=(
    "include/gpu_async/device/detail/vulkan_line_store.comp|include/gpu_async/device/detail/vulkan_line_store_spirv.hpp|gpu_async::detail|vulkan_line_store_spirv"
    "bench/common/vulkan_spin.comp|bench/common/vulkan_spin_spirv.hpp|gpu_async::bench|vulkan_spin_spirv"
)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "shaders.sh: $(glslangValidator --version | head -1)"

# header <glsl> <header> <namespace> <name> <words file>: the header's text on stdout.
header() {
    local glsl=$1 out=$2 ns=$3 name=$4 words=$5
    local guard
    guard=$(echo "$out" | sed 's|^include/||; s|^test/|gpu_async_test/|; s|^bench/|gpu_async_bench/|' | tr 'a-z/.' 'A-Z__')
    cat <<EOF
// SPDX-License-Identifier: BSL-1.0
//
// The SPIR-V of $(basename "$glsl"), made by scripts/ci/shaders.sh
// (glslangValidator -V --target-env vulkan1.2). Do not edit: change the GLSL and run
// scripts/ci/shaders.sh --update; CI checks that these words are what the GLSL compiles to.
//
#ifndef $guard
#define $guard

#include <cstdint>

namespace $ns {

// clang-format off
inline constexpr std::uint32_t ${name}[] = {
EOF
    # Eight words a line, as glslang prints them.
    grep -o '0x[0-9a-f]\{8\}' "$words" | paste -sd, | sed 's/,/, /g' | fold -s -w 96 |
        sed 's/ *$//; s/^/    /'
    cat <<EOF
};
// clang-format on

} // namespace $ns

#endif // $guard
EOF
}

failed=0
for entry in "${shaders[@]}"; do
    IFS='|' read -r glsl out ns name <<<"$entry"
    base=$(basename "$glsl" .comp)
    glslangValidator -V --target-env vulkan1.2 -o "$tmp/$base.spv" "$glsl" >/dev/null
    glslangValidator -V --target-env vulkan1.2 -x -o "$tmp/$base.txt" "$glsl" >/dev/null
    if command -v spirv-val >/dev/null 2>&1; then
        spirv-val --target-env vulkan1.2 "$tmp/$base.spv"
    fi
    header "$glsl" "$out" "$ns" "$name" "$tmp/$base.txt" >"$tmp/$base.hpp"
    if [ "$update" = 1 ]; then
        cp "$tmp/$base.hpp" "$out"
        echo "shaders.sh: wrote $out"
    elif ! diff -u "$out" "$tmp/$base.hpp"; then
        echo "shaders.sh: $out is not what $glsl compiles to (scripts/ci/shaders.sh --update)" >&2
        failed=1
    else
        echo "shaders.sh: $out matches $glsl"
    fi
done
exit "$failed"
