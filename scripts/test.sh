#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# Builds and runs every test: the unit suite and the examples, through ctest.
# Installs the Debian packages it lacks. Build folder: build/ (override with BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
build=${BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPU_ASYNC_BUILD_TESTS=ON \
    -DGPU_ASYNC_BUILD_EXAMPLES=ON -DGPU_ASYNC_BUILD_BENCHMARKS=ON
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" --output-on-failure -j1
