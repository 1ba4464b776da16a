#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# aarch64 CI step: cross-builds the library and the word-wait, doorbell and simulated-device unit
# tests with Debian's g++-aarch64-linux-gnu and runs them under qemu-aarch64 (qemu-user), which
# exercises the LDXR + WFE park loop. Runs from the repository root; bounded in time.
#   scripts/ci/aarch64.sh [build-dir]     (default: build-aarch64)
set -euo pipefail

build_dir=${1:-build-aarch64}
jobs=${GPU_ASYNC_JOBS:-2}

need=()
command -v aarch64-linux-gnu-g++ >/dev/null || need+=(g++-aarch64-linux-gnu)
command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
if [ ${#need[@]} -ne 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    timeout 120 apt-get update -qq || true
    timeout 300 apt-get install -y -qq "${need[@]}"
fi

timeout 120 cmake -S test/aarch64 -B "$build_dir" \
    -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/toolchain-aarch64.cmake" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG"
timeout 480 cmake --build "$build_dir" -j"$jobs"

echo "== file: $(file -b "$build_dir/gpu_async_aarch64_tests" | cut -d, -f1-2)"
# GPU_ASYNC_QEMU=1: qemu-user runs WFE as a yield, so the bound-only WFE test may run.
GPU_ASYNC_QEMU=1 timeout 300 qemu-aarch64 -L /usr/aarch64-linux-gnu \
    "$build_dir/gpu_async_aarch64_tests" --log_level=message --report_level=short
