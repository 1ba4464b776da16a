#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# scripts/ci/soak.sh: build the soak program (test/soak/soak.cpp) under AddressSanitizer +
# UndefinedBehaviorSanitizer and under ThreadSanitizer (clang++), and run a short version of it
# under each: SOAK_WAITS waits (default 1000000) over many lines, devices and threads, with
# cancellation from other threads, parallel-group races, port and device teardown, run_fill rounds
# and wrapping lines. Fails on any sanitizer report, any wait not completed exactly once or
# completed early, and any run that does not finish in time. The full soak (10 000 000 waits) and
# its figures: doc/reliability.md.
#
# Runs from the repository root. Environment: SOAK_WAITS, SOAK_SEED (default 1), SOAK_BUILD_DIR
# (prefix of the two build folders, default build-ci-soak), SOAK_ASAN_TREE and SOAK_TSAN_TREE
# (sanitizer build folders configured with -DGPU_ASYNC_BUILD_SOAK=ON to build it in instead, as
# .ci/run does, so the program shares their compiled library), SOAK_JOBS (build parallelism,
# default 2), SOAK_TIMEOUT_S (limit of each build and each run, default 300).
set -euo pipefail

cd "$(dirname "$0")/../.."
waits="${SOAK_WAITS:-1000000}"
seed="${SOAK_SEED:-1}"
build="${SOAK_BUILD_DIR:-build-ci-soak}"
jobs="${SOAK_JOBS:-2}"
limit="${SOAK_TIMEOUT_S:-300}"
start=$(date +%s)
say() { echo "soak.sh [$(($(date +%s) - start))s]: $*"; }

need=()
command -v clang++ >/dev/null 2>&1 || need+=(clang)
command -v cmake >/dev/null 2>&1 || need+=(cmake)
dpkg -s libclang-rt-14-dev >/dev/null 2>&1 || need+=(libclang-rt-14-dev)
dpkg -s libboost-dev >/dev/null 2>&1 || dpkg -s libboost1.81-dev >/dev/null 2>&1 ||
    need+=(libboost1.81-dev)
if ((${#need[@]})); then
    say "installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    timeout "$limit" apt-get update -qq
    timeout "$limit" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:${TSAN_OPTIONS:-}"

for variant in asan:address,undefined:"${SOAK_ASAN_TREE:-}" tsan:thread:"${SOAK_TSAN_TREE:-}"; do
    IFS=: read -r name sanitize dir <<<"$variant"
    if [ -z "$dir" ]; then
        dir="$build-$name"
        say "$name: configure with clang++ (-fsanitize=$sanitize)"
        timeout "$limit" cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Debug \
            -DCMAKE_CXX_COMPILER=clang++ -DGPU_ASYNC_SANITIZE="$sanitize" -DGPU_ASYNC_WERROR=ON \
            -DGPU_ASYNC_BUILD_SOAK=ON -DGPU_ASYNC_BUILD_TESTS=OFF -DGPU_ASYNC_BUILD_EXAMPLES=OFF \
            -DGPU_ASYNC_BUILD_BENCHMARKS=OFF >/dev/null
    fi
    say "$name: build in $dir"
    timeout "$limit" cmake --build "$dir" -j"$jobs" --target gpu_async_soak
    say "$name: run $waits waits"
    status=0
    # The program bounds itself (--seconds-limit); timeout is the backstop.
    timeout --kill-after=10 "$limit" "$dir/test/soak/gpu_async_soak" --waits "$waits" \
        --seed "$seed" --seconds-limit "$((limit - 20))" --progress 30 || status=$?
    if ((status != 0)); then
        echo "soak.sh: the soak failed under $name (exit $status)" >&2
        exit 1
    fi
done
say "done"
