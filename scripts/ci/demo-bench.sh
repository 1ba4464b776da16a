#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# scripts/ci/demo-bench.sh: runs the demo (~3 s, and ~2 s on a Vulkan device) and the benchmark
# in --quick mode (a few seconds, its Vulkan cell included) from a Release build, so neither can
# rot. The Vulkan runs need a Vulkan driver (CI installs lavapipe) and fail without one. Fails only on a build failure, a crash or a
# non-zero exit; never on a timing. Reuses build/ when it exists (builds only the two targets).
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${GPU_ASYNC_BUILD_DIR:-build}"
if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DGPU_ASYNC_BUILD_EXAMPLES=ON \
        -DGPU_ASYNC_BUILD_BENCHMARKS=ON
fi
cmake --build "$build" -j2 --target gpu-async-demo gpu-async-bench wait-memory-bench

echo "== gpu-async-demo --duration 3"
timeout 60 "$build/example/gpu-async-demo" --duration 3 --connections 8
echo "== gpu-async-demo --duration 1 --wait fill --json"
timeout 60 "$build/example/gpu-async-demo" --duration 1 --connections 4 --wait fill --json
echo "== gpu-async-demo --device vulkan --duration 2"
timeout 60 "$build/example/gpu-async-demo" --device vulkan --duration 2 --connections 4
echo "== wait-memory-bench --max 10000"
mem=$(timeout 120 "$build/bench/wait-memory-bench" --max 10000)
echo "$mem"
[ "$(grep -c '^| [0-9]' <<<"$mem")" = 2 ] || { echo "wait-memory-bench: expected 2 rows" >&2; exit 1; }
echo "== gpu-async-bench --quick"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
plot=none
command -v gnuplot >/dev/null 2>&1 && plot="$out/bench.png"
timeout 120 "$build/bench/gpu-async-bench" --quick --csv "$out/bench.csv" --plot "$plot" \
    | tee "$out/bench.txt"
test -s "$out/bench.csv"
test -s "$out/bench-cdf.csv"
test -s "$out/bench-throughput.csv"
test -s "$out/bench-vulkan.csv" # the Vulkan cell: written only where a Vulkan device worked
# The CDF (and so the plot) covers every cell the table has.
cells_table=$(tail -n +2 "$out/bench.csv" | cut -d, -f1,2 | sort -u)
cells_cdf=$(tail -n +2 "$out/bench-cdf.csv" | cut -d, -f1,2 | sort -u)
[ "$cells_table" = "$cells_cdf" ] || { echo "CDF cells differ: $cells_cdf vs $cells_table" >&2; exit 1; }
if [ "$plot" != none ]; then
    test -s "$plot"
    grep -q "^plot: $plot" "$out/bench.txt"
else
    echo "(gnuplot not installed: plot not drawn)"
fi
# Chosen cells and jitter: exactly the cells asked for; malformed values exit 2 with the usage.
timeout 60 "$build/bench/gpu-async-bench" --sections latency --cells 50:2,20:3 --jitter 5 \
    --seconds 0.05 --only ours-fill --csv "$out/cells.csv" --plot none | tee "$out/cells.txt"
grep -q "^work jitter: +-5 %" "$out/cells.txt"
[ "$(tail -n +2 "$out/cells.csv" | cut -d, -f1,2 | sort -u | tr '\n' ' ')" = "20,3 50,2 " ]
for bad in "--cells 5:0" "--cells x" "--cells 5:3," "--jitter 91"; do
    set +e
    # shellcheck disable=SC2086 # the option and its value are two words
    "$build/bench/gpu-async-bench" $bad >"$out/bad.txt" 2>&1
    rc=$?
    set -e
    [ "$rc" = 2 ] || { echo "gpu-async-bench $bad: exit $rc, expected 2" >&2; exit 1; }
    grep -q "^usage: gpu-async-bench" "$out/bad.txt"
done
echo "demo-bench.sh: ok"
