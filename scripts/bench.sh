#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# scripts/bench.sh: the one command that reproduces the performance figures.
#
# Builds gpu-async-bench in Release (build-bench/), runs the full benchmark (about 3 minutes on
# 2 cores) and writes the table, the CSV files and the plot into a folder.
#
#   scripts/bench.sh [out-dir]          (default: bench/results)
#
# Needs gnuplot for the plot (apt-get install -y gnuplot-nox); without it the table and CSV are
# still written. Extra arguments after the folder go to gpu-async-bench (e.g. --quick).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-bench/results}"
shift || true
build="${GPU_ASYNC_BENCH_BUILD:-build-bench}"
jobs="${GPU_ASYNC_JOBS:-2}"

if ! command -v gnuplot >/dev/null 2>&1; then
    echo "bench.sh: gnuplot not found; installing gnuplot-nox (or run without the plot)" >&2
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get install -y gnuplot-nox >/dev/null || echo "bench.sh: could not install gnuplot" >&2
    fi
fi

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DGPU_ASYNC_BUILD_TESTS=OFF \
    -DGPU_ASYNC_BUILD_EXAMPLES=ON -DGPU_ASYNC_BUILD_BENCHMARKS=ON >/dev/null
cmake --build "$build" -j"$jobs" --target gpu-async-bench gpu-async-demo

mkdir -p "$out"
{
    echo "# gpu-async-bench, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo '```'
    lscpu | head -20
    echo "kernel: $(uname -r)"
    echo '```'
    echo
    "$build/bench/gpu-async-bench" --csv "$out/gpu-async-bench.csv" \
        --plot "$out/gpu-async-bench.png" "$@"
} | tee "$out/gpu-async-bench.md"
echo "bench.sh: results in $out (gpu-async-bench.md, .csv, -cdf.csv, -throughput.csv, .png)"
