#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# Builds and runs every test: the unit suites and the examples, through ctest, in parallel. The
# benchmarks are not tests: scripts/bench.sh builds and runs them (in a folder of their own).
# Installs the Debian packages it lacks. Build folder: build/ (override with BUILD_DIR); the demo
# (scripts/demo.sh) shares it. Further arguments go to CMake, e.g.
#   bash scripts/test.sh -DGPU_ASYNC_WERROR=ON -DGPU_ASYNC_HEADER_CHECK=ON
# Ninja is used where installed (for a new build folder), ccache where installed.
# GPU_ASYNC_LONG_TESTS=1 runs the lost-wake tortures at their full length (1e6 rounds).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
build=${BUILD_DIR:-build}
bash scripts/configure.sh "$build" -DGPU_ASYNC_BUILD_TESTS=ON -DGPU_ASYNC_BUILD_EXAMPLES=ON \
    -DGPU_ASYNC_BUILD_BENCHMARKS=OFF "$@"
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" --output-on-failure -j"$(nproc)"
