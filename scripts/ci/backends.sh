#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# scripts/ci/backends.sh: compile the CUDA-, HIP- and Vulkan-dependent parts on a machine without a
# GPU, then build the real-device tests (test/gpu, test/metal) and run them to their clean skip.
#
#  1. HIP: installs Debian's libamdhip64-dev (ROCm 5.2 headers; it pulls no Boost) and compiles
#     test/abi/hip_abi.cpp with g++ and clang++ (-Werror, __HIP_PLATFORM_AMD__), with the HIP
#     header after and before <gpu_async/device/hip.hpp>: the backend's own declarations of the
#     HIP ABI (types, statuses, flags, entry-point signatures) must match the vendor's.
#  2. CUDA: where /usr/local/cuda exists (the CUDA toolkit; no driver needed), compiles
#     test/abi/cuda_abi.cpp the same way against cuda.h; elsewhere says it skipped.
#  3. Vulkan: compiles test/abi/vulkan_abi.cpp with g++ and clang++ (-Werror) against Debian's
#     libvulkan-dev (vulkan_core.h; installed where missing): the backend's own declarations of
#     the Vulkan ABI (handles, values, structure layouts, entry-point signatures) must match the
#     vendor's. (The Vulkan tests themselves run on a real driver, lavapipe, in the unit suite.)
#  4. test/gpu: configures with -DGPU_ASYNC_BUILD_GPU_TESTS=ON (nvcc compiles the trapping
#     kernel when the toolkit exists), builds gpu_async_gpu_tests with g++ and clang++ under
#     -Werror, and runs each: without a driver it must print "skipped: ..." and exit 0; with one
#     it runs the device tests and must pass. The GPU benchmark (bench/gpu_bench.cpp) is built
#     and run the same way (a clean skip without a driver, a table with one).
#  5. test/metal: the Metal device tests (-DGPU_ASYNC_BUILD_METAL_TESTS=ON), plain C++ that loads
#     the Objective-C runtime and Metal.framework at run time, are built with g++ and clang++
#     under -Werror, must link neither, and must print "skipped: ..." and exit 0 off Apple
#     systems.
#
# Runs from the repository root. Environment: BACKENDS_BUILD_DIR (default build-ci-backends),
# BACKENDS_GXX_TREE and BACKENDS_CLANG_TREE (a build folder of that compiler configured with
# -DGPU_ASYNC_BUILD_GPU_TESTS=ON -DGPU_ASYNC_BUILD_METAL_TESTS=ON and the benchmarks, used instead
# of configuring one: .ci/run passes the README's test build),
# BACKENDS_JOBS (default 2), BACKENDS_TIMEOUT_S (per build or run, default 600).
set -euo pipefail

cd "$(dirname "$0")/../.."
build="${BACKENDS_BUILD_DIR:-build-ci-backends}"
jobs="${BACKENDS_JOBS:-2}"
limit="${BACKENDS_TIMEOUT_S:-600}"
start=$(date +%s)
say() { echo "backends.sh [$(($(date +%s) - start))s]: $*"; }

need=()
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v clang++ >/dev/null 2>&1 || need+=(clang)
command -v cmake >/dev/null 2>&1 || need+=(cmake)
dpkg -s libboost1.81-dev >/dev/null 2>&1 || dpkg -s libboost-dev >/dev/null 2>&1 ||
    need+=(libboost1.81-dev)
[ -f /usr/include/hip/hip_runtime_api.h ] || need+=(libamdhip64-dev)
[ -f /usr/include/vulkan/vulkan_core.h ] || need+=(libvulkan-dev)
if ((${#need[@]})); then
    say "installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    timeout "$limit" apt-get update -qq
    timeout "$limit" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

flags=(-std=c++20 -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion -Werror
    -Iinclude -fsyntax-only)

say "HIP: test/abi/hip_abi.cpp against $(dpkg -s libamdhip64-dev 2>/dev/null |
    sed -n 's/^Version: //p' || echo 'hip_runtime_api.h')"
for cxx in g++ clang++; do
    timeout "$limit" "$cxx" "${flags[@]}" -D__HIP_PLATFORM_AMD__ test/abi/hip_abi.cpp
    timeout "$limit" "$cxx" "${flags[@]}" -D__HIP_PLATFORM_AMD__ \
        -include hip/hip_runtime_api.h test/abi/hip_abi.cpp
    say "HIP ABI check passed ($cxx)"
done

say "Vulkan: test/abi/vulkan_abi.cpp against $(dpkg -s libvulkan-dev 2>/dev/null |
    sed -n 's/^Version: //p' || echo 'vulkan_core.h')"
for cxx in g++ clang++; do
    timeout "$limit" "$cxx" "${flags[@]}" test/abi/vulkan_abi.cpp
    say "Vulkan ABI check passed ($cxx)"
done

cuda_root=/usr/local/cuda
if [ -f "$cuda_root/include/cuda.h" ]; then
    say "CUDA: test/abi/cuda_abi.cpp against $cuda_root/include/cuda.h"
    for cxx in g++ clang++; do
        timeout "$limit" "$cxx" "${flags[@]}" -I"$cuda_root/include" test/abi/cuda_abi.cpp
        timeout "$limit" "$cxx" "${flags[@]}" -I"$cuda_root/include" -include cuda.h \
            test/abi/cuda_abi.cpp
        say "CUDA ABI check passed ($cxx)"
    done
else
    say "CUDA: skipped the CUDA compile: $cuda_root not found (no CUDA toolkit on this machine)"
fi

for variant in g++:"${BACKENDS_GXX_TREE:-}" clang++:"${BACKENDS_CLANG_TREE:-}"; do
    IFS=: read -r cxx dir <<<"$variant"
    if [ -z "$dir" ]; then
        dir="$build-$cxx"
        say "test/gpu: configure with $cxx"
        # Debug: these programs only skip here, and -O0 halves their compile time.
        timeout "$limit" cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Debug \
            -DCMAKE_CXX_COMPILER="$cxx" -DGPU_ASYNC_WERROR=ON -DGPU_ASYNC_BUILD_GPU_TESTS=ON \
            -DGPU_ASYNC_BUILD_METAL_TESTS=ON -DGPU_ASYNC_BUILD_TESTS=OFF \
            -DGPU_ASYNC_BUILD_EXAMPLES=OFF -DGPU_ASYNC_BUILD_BENCHMARKS=ON >/dev/null
    fi
    say "test/gpu: build with $cxx in $dir"
    timeout "$limit" cmake --build "$dir" -j"$jobs" --target gpu_async_gpu_tests gpu_bench \
        gpu_async_metal_tests
    for bin in "$dir/test/gpu/gpu_async_gpu_tests" "$dir/bench/gpu_bench"; do
        if ldd "$bin" | grep -q 'libcuda\.so'; then
            echo "backends.sh: $bin links libcuda; it must load it at run time" >&2
            exit 1
        fi
    done
    say "test/gpu: run ($cxx)"
    out=$(timeout "$limit" "$dir/test/gpu/gpu_async_gpu_tests") || {
        echo "$out"
        echo "backends.sh: gpu_async_gpu_tests failed" >&2
        exit 1
    }
    echo "$out"
    case "$out" in
    skipped:*) say "test/gpu skipped cleanly ($cxx)" ;;
    *"passed: 0 failure(s)"*) say "test/gpu passed on a device ($cxx)" ;;
    *)
        echo "backends.sh: gpu_async_gpu_tests neither skipped nor passed" >&2
        exit 1
        ;;
    esac
    metal="$dir/test/metal/gpu_async_metal_tests"
    if ldd "$metal" | grep -Eq 'libobjc|Metal'; then
        echo "backends.sh: $metal links the Objective-C runtime or Metal; it must load them at run time" >&2
        exit 1
    fi
    say "test/metal: run ($cxx)"
    out=$(timeout "$limit" "$metal") || {
        echo "$out"
        echo "backends.sh: gpu_async_metal_tests failed" >&2
        exit 1
    }
    echo "$out"
    case "$out" in
    skipped:*) say "test/metal skipped cleanly ($cxx)" ;;
    *"passed: 0 failure(s)"*) say "test/metal passed on a Metal device ($cxx)" ;;
    *)
        echo "backends.sh: gpu_async_metal_tests neither skipped nor passed" >&2
        exit 1
        ;;
    esac
    say "bench/gpu_bench: run ($cxx)"
    out=$(timeout "$limit" "$dir/bench/gpu_bench" --rounds 20) || {
        echo "$out"
        echo "backends.sh: gpu_bench failed" >&2
        exit 1
    }
    echo "$out"
    case "$out" in
    skipped:* | *"| strategy |"*) ;;
    *)
        echo "backends.sh: gpu_bench neither skipped nor printed its table" >&2
        exit 1
        ;;
    esac
done
say "done"
