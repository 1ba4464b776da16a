#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# scripts/ci/fuzz.sh: build the libFuzzer target for the wait-plan and wait-band parsers
# (fuzz/plan_fuzzer.cpp, clang -fsanitize=fuzzer,address,undefined) and run it for a bounded
# number of executions on a copy of the seed corpus. Fails on any crash, leak, sanitizer report
# or round-trip mismatch (the target aborts), and on a run that does not finish.
#
# Runs from the repository root. Environment: FUZZ_RUNS (default 200000), FUZZ_BUILD_DIR
# (default build-fuzz), FUZZ_JOBS (build parallelism, default 2), FUZZ_TIMEOUT_S (whole run,
# default 600).
set -euo pipefail

cd "$(dirname "$0")/../.."
runs="${FUZZ_RUNS:-200000}"
build="${FUZZ_BUILD_DIR:-build-fuzz}"
jobs="${FUZZ_JOBS:-2}"
limit="${FUZZ_TIMEOUT_S:-600}"

need=()
command -v clang++ >/dev/null 2>&1 || need+=(clang)
command -v cmake >/dev/null 2>&1 || need+=(cmake)
dpkg -s libclang-rt-14-dev >/dev/null 2>&1 || need+=(libclang-rt-14-dev)
dpkg -s libboost-dev >/dev/null 2>&1 || dpkg -s libboost1.81-dev >/dev/null 2>&1 || need+=(libboost1.81-dev)
if ((${#need[@]})); then
    echo "fuzz.sh: installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need[@]}" >/dev/null
fi

cmake -S . -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGPU_ASYNC_BUILD_FUZZERS=ON -DGPU_ASYNC_WERROR=ON -DGPU_ASYNC_BUILD_TESTS=OFF \
    -DGPU_ASYNC_BUILD_EXAMPLES=OFF -DGPU_ASYNC_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build "$build" -j"$jobs" --target plan_fuzzer

work="$build/fuzz-run"
rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
cp fuzz/corpus/* "$work/corpus/"

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
status=0
timeout --kill-after=10 "$limit" "$build/fuzz/plan_fuzzer" -runs="$runs" -max_len=512 \
    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -dict=fuzz/plan.dict \
    -artifact_prefix="$work/artifacts/" "$work/corpus" || status=$?
if ((status != 0)); then
    echo "fuzz.sh: plan_fuzzer failed (exit $status); artifacts:" >&2
    ls -la "$work/artifacts" >&2 || true
    exit 1
fi
if compgen -G "$work/artifacts/*" >/dev/null; then
    echo "fuzz.sh: plan_fuzzer left artifacts:" >&2
    ls -la "$work/artifacts" >&2
    exit 1
fi
echo "fuzz.sh: plan_fuzzer ran $runs executions clean"
