#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# scripts/gpu-check.sh: the one GPU command. On a machine with an NVIDIA GPU and driver it builds
# the project with CUDA (test/gpu, and the GPU benchmark when the tree has one), runs the
# real-device tests and the benchmark, and writes into the folder named by $OUT (default
# ./out/gpu-check):
#
#   gpu-check.log   what this script did, with timings
#   machine.txt     GPU, driver, CPU and toolkit of the run
#   build.log       configure and build output
#   gpu-tests.log   output of gpu_async_gpu_tests (every case of test/gpu/main.cpp: stores seen by
#                   the line and the port, each wait plan, close after stores, the doorbell's
#                   device signal, an event the user records awaited through the port, a device
#                   error reaching the waiter)
#   bench-gpu.log   output of the GPU benchmark (when built)
#   results.md      the results table (wait per plan: kind, wait time, sleep, parks, backstops)
#
# Where no CUDA driver exists it writes a results.md that says "skipped: no CUDA driver" and
# exits 0 without building (GPU_CHECK_FORCE=1 builds and runs anyway: the test program then
# skips by itself). Exit status: 0 when everything passed or the check skipped; 1 otherwise.
# Bounded: each build and run has a timeout; on an H200 machine it takes a few minutes.
#
# Environment: OUT (results folder), GPU_CHECK_BUILD_DIR (default build-gpu-check),
# GPU_CHECK_JOBS (default: nproc), GPU_CHECK_FORCE (build without a driver),
# CUDA_ROOT (default /usr/local/cuda).
set -uo pipefail

cd "$(dirname "$0")/.."
root=$(pwd)
out="${OUT:-$root/out/gpu-check}"
build="${GPU_CHECK_BUILD_DIR:-$root/build-gpu-check}"
jobs="${GPU_CHECK_JOBS:-$(nproc)}"
cuda_root="${CUDA_ROOT:-/usr/local/cuda}"
mkdir -p "$out"
start=$(date +%s)
: >"$out/gpu-check.log"
log() { echo "gpu-check [$(($(date +%s) - start))s]: $*" | tee -a "$out/gpu-check.log"; }
results="$out/results.md"

finish() { # status message
    log "$2"
    echo "" >>"$results"
    echo "$2 (in $(($(date +%s) - start)) s)" >>"$results"
    exit "$1"
}

{
    echo "# gpu-check results"
    echo ""
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "- commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
} >"$results"

# --- machine ----------------------------------------------------------------------------------
{
    echo "cpu: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1) ($(nproc) cores)"
    if command -v nvidia-smi >/dev/null 2>&1; then
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 |
            sed 's/^/gpu: /'
    else
        echo "gpu: nvidia-smi not found"
    fi
    if [ -x "$cuda_root/bin/nvcc" ]; then
        echo "nvcc: $("$cuda_root/bin/nvcc" --version | sed -n 's/.*release /release /p')"
    else
        echo "nvcc: not found under $cuda_root"
    fi
    lib=$(ldconfig -p 2>/dev/null | grep -m1 'libcuda\.so\.1' | sed 's/.*=> //')
    echo "libcuda: ${lib:-not found}"
} >"$out/machine.txt"
sed 's/^/- /' "$out/machine.txt" >>"$results"
log "machine: $(tr '\n' ';' <"$out/machine.txt")"

have_driver=0
if ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then have_driver=1; fi
for d in /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib64 /usr/local/nvidia/lib64; do
    [ -e "$d/libcuda.so.1" ] && have_driver=1
done
if [ "$have_driver" = 0 ] && [ "${GPU_CHECK_FORCE:-0}" != 1 ]; then
    finish 0 "skipped: no CUDA driver (libcuda.so.1 not found); nothing was built"
fi

# --- prerequisites (no network is assumed: say what is missing) --------------------------------
missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v c++ >/dev/null 2>&1 || missing+=("a C++20 compiler")
[ -f /usr/include/boost/asio.hpp ] || [ -n "${BOOST_ROOT:-}" ] || missing+=("Boost 1.81 headers")
if ((${#missing[@]})); then
    finish 1 "FAILED: missing ${missing[*]} (on Debian 12: scripts/install-deps.sh)"
fi

# --- build ------------------------------------------------------------------------------------
cuda_args=()
[ -x "$cuda_root/bin/nvcc" ] && cuda_args+=(-DCMAKE_CUDA_COMPILER="$cuda_root/bin/nvcc")
bench=OFF
[ -f "$root/bench/gpu_bench.cpp" ] && bench=ON
log "configure ($build, benchmarks $bench)"
if ! timeout 300 cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DGPU_ASYNC_BUILD_GPU_TESTS=ON -DGPU_ASYNC_BUILD_TESTS=OFF -DGPU_ASYNC_BUILD_EXAMPLES=OFF \
    -DGPU_ASYNC_BUILD_BENCHMARKS="$bench" "${cuda_args[@]}" >"$out/build.log" 2>&1; then
    finish 1 "FAILED: configure (see build.log)"
fi
targets=(gpu_async_gpu_tests)
if [ "$bench" = ON ] && cmake --build "$build" --target help 2>/dev/null |
    grep -q 'gpu_bench'; then
    targets+=(gpu_bench)
fi
log "build ${targets[*]} (-j$jobs)"
if ! timeout 420 cmake --build "$build" -j"$jobs" --target "${targets[@]}" >>"$out/build.log" 2>&1; then
    finish 1 "FAILED: build (see build.log)"
fi

# --- real-device tests ------------------------------------------------------------------------
log "run gpu_async_gpu_tests"
timeout 240 "$build/test/gpu/gpu_async_gpu_tests" >"$out/gpu-tests.log" 2>&1
tests_rc=$?
if grep -q '^skipped:' "$out/gpu-tests.log"; then
    finish 0 "$(grep -m1 '^skipped:' "$out/gpu-tests.log")"
fi
{
    echo ""
    echo "## Wait after a 256 MiB cuMemsetD8Async, per plan (gpu_async_gpu_tests)"
    echo ""
    echo "| plan | round | kind | wait (us) | slept (us) | parks | backstop queries |"
    echo "|---|---:|---|---:|---:|---:|---:|"
    grep '^RESULT|' "$out/gpu-tests.log" | cut -d'|' -f2- | sed 's/|/ | /g; s/^/| /; s/$/ |/'
    echo ""
    echo "## Cases"
    echo ""
    grep -E '^  (ok  |FAIL) ' "$out/gpu-tests.log" | sed 's/^  /- /'
} >>"$results"

# --- benchmark --------------------------------------------------------------------------------
bench_rc=0
if [[ " ${targets[*]} " == *" gpu_bench "* ]]; then
    log "run gpu_bench"
    bench_bin=$(find "$build/bench" -name gpu_bench -type f -perm -u+x | head -1)
    timeout 240 "$bench_bin" >"$out/bench-gpu.log" 2>&1
    bench_rc=$?
    {
        echo ""
        echo "## GPU benchmark (gpu_bench)"
        echo ""
        grep '^|' "$out/bench-gpu.log" || echo "(no table; see bench-gpu.log)"
    } >>"$results"
else
    log "no GPU benchmark in this tree"
fi

if [ "$tests_rc" -ne 0 ]; then finish 1 "FAILED: gpu_async_gpu_tests exited $tests_rc"; fi
if [ "$bench_rc" -ne 0 ]; then finish 1 "FAILED: gpu_bench exited $bench_rc"; fi
finish 0 "passed"
