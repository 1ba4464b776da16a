#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# scripts/perf-report.sh: doc/performance.md, regenerated from one run of gpu-async-bench.
#
#   bash scripts/perf-report.sh [gpu-async-bench options]   build, run once, rewrite the report
#   bash scripts/perf-report.sh --from-run                   rewrite the report from the run
#                                                            already in bench/results/latest/
#
# The run is scripts/bench.sh into bench/results/latest/ (a Release build in build-bench/, then
# gpu-async-bench with its default cells unless options say otherwise): the table as text with the
# machine's description (gpu-async-bench.md), the CSV files and the plot. The report is written
# from those files alone: the machine, the commands, one table per cell, the ratios against the
# alternatives, the throughput and executor-kind tables, the plot, and conclusions whose numbers
# are computed from the CSV files. The layout depends on nothing else, so the same run always gives
# the same report. Every file must be there (the plot too, which needs gnuplot) and every CSV must
# have the columns this script reads; otherwise it stops with an error and leaves the report as it
# was. The report needs every strategy and every section: --only and --sections are refused.
#
# --quick (a few seconds) checks the script; its report says so. Environment: GPU_ASYNC_JOBS
# (build parallelism, default 2), GPU_ASYNC_BENCH_BUILD (default build-bench).
set -euo pipefail
cd "$(dirname "$0")/.."
run=bench/results/latest
doc=doc/performance.md

die() {
    echo "perf-report.sh: $*" >&2
    exit 1
}

if [ "${1:-}" = "--from-run" ]; then
    [ $# = 1 ] || die "--from-run takes no other argument"
    [ -f "$run/args.txt" ] || die "no run in $run (missing $run/args.txt); run without --from-run"
else
    for a in "$@"; do
        case "$a" in
        --only | --only=* | --sections | --sections=* | --csv | --csv=* | --plot | --plot=*)
            die "'$a' is not for a report (it needs every strategy and section, its CSV and plot)"
            ;;
        esac
    done
    rm -rf "$run"
    mkdir -p "$run"
    printf '%s\n' "$*" >"$run/args.txt"
    bash scripts/bench.sh "$run" "$@"
    # The heap a pending wait costs and the time of cancel(), up to 1e6 waits (1e4 with --quick).
    build="${GPU_ASYNC_BENCH_BUILD:-build-bench}"
    cmake --build "$build" -j"${GPU_ASYNC_JOBS:-2}" --target wait-memory-bench
    max=1000000
    case " $* " in *" --quick "*) max=10000 ;; esac
    "$build/bench/wait-memory-bench" --max "$max" >"$run/wait-memory.md"
    # The CDF keeps about 50 points per strategy and cell (the first and the last among them):
    # the plot is drawn already, and the full curve would put megabytes into the repository.
    cdf="$run/gpu-async-bench-cdf.csv"
    awk -F, 'NR == FNR { if (FNR > 1) n[$1 "," $2 "," $3]++; next }
        FNR == 1 { print; next }
        { k = $1 "," $2 "," $3; i[k]++; s = int((n[k] + 49) / 50); if (s < 1) s = 1
          if (i[k] == 1 || i[k] == n[k] || i[k] % s == 0) print }' "$cdf" "$cdf" >"$cdf.thin"
    mv "$cdf.thin" "$cdf"
fi

args=$(cat "$run/args.txt")
for f in gpu-async-bench.md gpu-async-bench.csv gpu-async-bench-cdf.csv \
    gpu-async-bench-throughput.csv gpu-async-bench-executors.csv gpu-async-bench-vulkan.csv \
    gpu-async-bench.png wait-memory.md; do
    [ -s "$run/$f" ] || die "missing or empty: $run/$f (gnuplot draws the .png: apt-get install gnuplot-nox)"
done
check_header() {
    local have
    have=$(head -n 1 "$run/$1")
    [ "$have" = "$2" ] || die "$run/$1: columns '$have', expected '$2'"
    [ "$(wc -l <"$run/$1")" -gt 1 ] || die "$run/$1: no rows"
}
check_header gpu-async-bench.csv "work_us,pending,strategy,samples,p50_ns,p90_ns,p99_ns,max_ns,mean_ns,cpu_s_per_s,device_cpu_s_per_s,completions_per_s,p50_vs_ours,p99_vs_ours,cpu_vs_ours"
check_header gpu-async-bench-cdf.csv "work_us,pending,strategy,fraction,latency_us"
check_header gpu-async-bench-throughput.csv "pending,mode,completions_per_s,cpu_s_per_s,fraction_of_post_loop"
check_header gpu-async-bench-executors.csv "executor,doorbell,samples,p50_ns,p99_ns,max_ns,cpu_s_per_s,note"
check_header gpu-async-bench-vulkan.csv "device,strategy,work_us,samples,p50_ns,p99_ns,max_ns,cpu_s_per_s,note"
for key in '^kernel: ' '^Model name:' '^CPU\(s\):' '^word wait path: ' '^work jitter: ' \
    '^load average at start: ' '^load average at the end: '; do
    grep -Eq "$key" "$run/gpu-async-bench.md" || die "$run/gpu-async-bench.md: no line matching '$key'"
done

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
prog=$(
    cat <<'AWK'
function fail(msg) { print "perf-report.sh: " msg > "/dev/stderr"; failed = 1; exit 1 }
function us(ns) { return sprintf("%.1f", ns / 1000) }
function x(v) { return sprintf("%.2fx", v) }
function rate(v) {
    if (v >= 1e6) return sprintf("%.2f M/s", v / 1e6)
    if (v >= 1e3) return sprintf("%.1f k/s", v / 1e3)
    return sprintf("%.0f /s", v)
}
function grouped(n,    s, out) {
    s = sprintf("%.0f", n); out = ""
    while (length(s) > 3) { out = " " substr(s, length(s) - 2) out; s = substr(s, 1, length(s) - 3) }
    return s out
}
function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
# The row of strategy s in cell c, or a failure naming what is missing.
function row(c, s) {
    if (!((c, s) in idx)) fail("cell " cellname[c] " has no row for " s " (was --only given?)")
    return idx[c, s]
}
function lscpu(key) { return (key in cpu) ? cpu[key] : "unknown" }
FILENAME ~ /gpu-async-bench\.md$/ {
    if ($0 ~ /^[A-Za-z][A-Za-z0-9 ()-]*:/ && !($0 ~ /^(word wait path|load average|work jitter|kernel|CSV|plot|\+predict plan):/)) {
        k = $0; sub(/:.*/, "", k); val = $0; sub(/^[^:]*:/, "", val); cpu[k] = trim(val)
    }
    if ($0 ~ /^kernel: /) { kernel = $0; sub(/^kernel: /, "", kernel) }
    if ($0 ~ /^word wait path: /) {
        settings = $0; sub(/^word wait path: /, "", settings)
        path = settings; sub(/;.*/, "", path)
        settings = settings; sub(/^[^;]*; /, "", settings)
    }
    if ($0 ~ /^work jitter: /) { jitter = $0; sub(/^work jitter: /, "", jitter) }
    if ($0 ~ /^\+predict plan: /) { predict = $0; sub(/^\+predict plan: /, "", predict) }
    if ($0 ~ /^load average at start: /) { load0 = $0; sub(/^load average at start: /, "", load0) }
    if ($0 ~ /^load average at the end: /) { load1 = $0; sub(/^load average at the end: /, "", load1) }
    if ($0 ~ /^# gpu-async-bench --quick/) quick = 1
    next
}
FILENAME ~ /gpu-async-bench\.csv$/ {
    if (FNR == 1) next
    split($0, f, ",")
    key = f[1] ":" f[2]
    if (!(key in cellof)) { ncell++; cellof[key] = ncell; cellname[ncell] = key; work[ncell] = f[1]; pend[ncell] = f[2] }
    c = cellof[key]
    n = ++nrow[c]
    strat[c, n] = f[3]; idx[c, f[3]] = n
    for (i = 4; i <= 15; i++) v[c, n, i] = f[i] + 0
    if (f[11] + 0 > devcpu[c]) devcpu[c] = f[11] + 0
    next
}
FILENAME ~ /-throughput\.csv$/ {
    if (FNR == 1) next
    split($0, f, ",")
    ntp++; tp_p[ntp] = f[1]; tp_m[ntp] = f[2]; tp_r[ntp] = f[3] + 0; tp_c[ntp] = f[4] + 0; tp_f[ntp] = f[5] + 0
    tpi[f[1], f[2]] = ntp
    next
}
FILENAME ~ /-executors\.csv$/ {
    if (FNR == 1) next
    line = $0
    for (i = 1; i <= 7; i++) { p = index(line, ","); e[i] = substr(line, 1, p - 1); line = substr(line, p + 1) }
    gsub(/^"|"$/, "", line)
    nex++; ex_n[nex] = e[1]; ex_d[nex] = e[2]; ex_s[nex] = e[3] + 0; ex_50[nex] = e[4] + 0
    ex_99[nex] = e[5] + 0; ex_mx[nex] = e[6] + 0; ex_c[nex] = e[7] + 0; ex_note[nex] = line
    next
}
FILENAME ~ /-vulkan\.csv$/ {
    if (FNR == 1) next
    # "device",strategy,work_us,samples,p50,p99,max,cpu,"note"
    line = $0
    p = index(substr(line, 2), "\""); vk_dev = substr(line, 2, p - 1); line = substr(line, p + 3)
    for (i = 1; i <= 7; i++) { p = index(line, ","); e[i] = substr(line, 1, p - 1); line = substr(line, p + 1) }
    gsub(/^"|"$/, "", line)
    nvk++; vk_n[nvk] = e[1]; vk_w = e[2] + 0; vk_s[nvk] = e[3] + 0; vk_50[nvk] = e[4] + 0
    vk_99[nvk] = e[5] + 0; vk_mx[nvk] = e[6] + 0; vk_c[nvk] = e[7] + 0; vk_note[nvk] = line
    vki[e[1]] = nvk
    next
}
END {
    if (failed) exit 1
    if (ncell == 0) fail("no latency cell in the run")
    # Columns of a row: 4 samples, 5 p50, 6 p90, 7 p99, 8 max, 9 mean, 10 cpu, 11 device cpu,
    # 12 completions/s, 13-15 ratios to ours-service.
    # A cell is saturated when no strategy completes half of what its N items could offer
    # (N per work duration): there the latency is a queue and completions per second the figure.
    ref = 0; nun = 0
    for (c = 1; c <= ncell; c++) {
        best = 0
        for (n = 1; n <= nrow[c]; n++) if (v[c, n, 12] > best) best = v[c, n, 12]
        sat[c] = best < 0.5 * pend[c] * 1e6 / work[c]
        if (!sat[c]) { un[++nun] = c; if (work[c] == 1000 && !ref) ref = c }
    }
    if (!ref && nun) { ref = un[1]; for (k = 2; k <= nun; k++) if (work[un[k]] > work[ref]) ref = un[k] }

    print "# Performance"
    print ""
    print "<!-- Generated by scripts/perf-report.sh from " run "/; edit the script, not this file. -->"
    print ""
    print "One run of `gpu-async-bench` (`bench/gpu_async_bench.cpp`): the ways of waiting for GPU work"
    print "side by side on the simulated device, with store-to-handler latency percentiles, CPU time and"
    print "ratios. The run's files are in [" run "/](../" run "/); earlier runs are data"
    print "files indexed in [bench/results/README.md](../bench/results/README.md); the one run on a GPU"
    print "so far is [bench/results/gpu-h200.md](../bench/results/gpu-h200.md)."
    if (quick) {
        print ""
        print "**This report is from a `--quick` run** (short runs): a check of the script, not figures to"
        print "quote. `bash scripts/perf-report.sh` without options makes the full report."
    }

    print ""
    print "## Conclusions"
    print ""
    if (ref) {
        r = ref; f1 = row(r, "ours-fill"); s1 = row(r, "ours-service")
        printf "- At %s us of work with %s waits pending, `run_fill` (ours-fill) ran a wait's handler %s us\n", work[r], pend[r], us(v[r, f1, 5])
        printf "  after the device's store at the median and %s us at p99, for %.3f CPU s/s; the reactor\n", us(v[r, f1, 7]), v[r, f1, 10]
        printf "  service with its watcher thread (ours-service) %s us and %s us, for %.3f CPU s/s.\n", us(v[r, s1, 5]), us(v[r, s1, 7]), v[r, s1, 10]
        nalt = split("callback-thread-post timer-poll-50us sleep-watcher-20us spin-poll-thread timer-poll-1ms", alt, " ")
        split("the callback thread (callback-thread-post, as `cudaLaunchHostFunc`)|the 50 us timer poller|the sleeping watcher|the spinning poller|the 1 ms timer poller", altname, "|")
        print "- In that cell, `run_fill`'s p50 and CPU as multiples of each alternative's (below 1:"
        printf "  `run_fill` lower):"
        for (k = 1; k <= nalt; k++) {
            a = row(r, alt[k])
            printf "%s\n  %s %s and %s", (k == 1 ? "" : ";"), altname[k], x(v[r, f1, 5] / v[r, a, 5]), x(v[r, f1, 10] / v[r, a, 10])
        }
        print "."
        lo = 0; fast = 0
        for (n = 1; n <= nrow[r]; n++) {
            if (!lo || v[r, n, 10] < v[r, lo, 10]) lo = n
            if (!fast || v[r, n, 5] < v[r, fast, 5]) fast = n
        }
        printf "- The least CPU in that cell: %s, %.3f CPU s/s at p50 %s us;\n", strat[r, lo], v[r, lo, 10], us(v[r, lo, 5])
        printf "  the lowest p50: %s, %s us for %.3f CPU s/s.\n", strat[r, fast], us(v[r, fast, 5]), v[r, fast, 10]
        d5 = row(r, "ours-fill-dp5"); d1 = row(r, "ours-fill-dp1ms"); rg = row(r, "ours-fill-ringing")
        printf "- The device poll knob moves `run_fill` there from p50 %s us at %.3f CPU s/s (a 5 us poll)\n", us(v[r, d5, 5]), v[r, d5, 10]
        printf "  to %s us at %.3f (a 1 ms poll and park bound); a ringing producer instead of a store-only\n", us(v[r, d1, 5]), v[r, d1, 10]
        printf "  one gives %s us at %.3f.\n", us(v[r, rg, 5]), v[r, rg, 10]
        wl = 0; wc = 0
        for (k = 1; k <= nun; k++) {
            c = un[k]; a = row(c, "ours-fill"); b = row(c, "ours-service")
            if (v[c, a, 5] < v[c, b, 5]) wl++
            if (v[c, a, 10] < v[c, b, 10]) wc++
        }
        printf "- `run_fill` had a lower p50 than the service in %d of the %d unsaturated cells, and a lower\n", wl, nun
        printf "  CPU in %d.\n", wc
    }
    for (c = 1; c <= ncell; c++) {
        if (!sat[c]) continue
        a = row(c, "ours-service"); b = row(c, "ours-fill"); best = 0
        for (n = 1; n <= nrow[c]; n++) if (!best || v[c, n, 12] > v[c, best, 12]) best = n
        printf "- At %s pending and %s us of work the loop is saturated, so completions per second are the\n", grouped(pend[c]), work[c]
        printf "  figure: ours-service %s, `run_fill` %s; the most, %s,\n", rate(v[c, a, 12]), rate(v[c, b, 12]), strat[c, best]
        printf "  %s.\n", rate(v[c, best, 12])
    }
    if (ntp) {
        if (!((64, "ours-service") in tpi) || !((65536, "ours-fill") in tpi)) fail("throughput: missing the 64 or 65536 rows")
        printf "- Through one io_context thread with host stores, the service completed 1/%.1f and `run_fill`\n", 1 / tp_f[tpi[64, "ours-service"]]
        printf "  1/%.1f of a bare `asio::post` loop's rate at 64 pending, and 1/%.1f and 1/%.1f at 65 536.\n", 1 / tp_f[tpi[64, "ours-fill"]], 1 / tp_f[tpi[65536, "ours-service"]], 1 / tp_f[tpi[65536, "ours-fill"]]
    }
    if (nex) {
        printf "- One waiting thread, one item at a time, no ring (executor kinds):"
        k2 = 0
        for (k = 1; k <= nex; k++) {
            if (ex_d[k] != "none") continue
            if (ex_s[k] == 0) printf "%s\n  `%s` %s", (k2++ ? ";" : ""), ex_n[k], ex_note[k]
            else printf "%s\n  `%s` p50 %s us at %.3f CPU s/s", (k2++ ? ";" : ""), ex_n[k], us(ex_50[k]), ex_c[k]
        }
        print "."
    }
    print "- All of this is the simulated device on the machine below. With a user-mode monitor a"
    print "  device's store ends the waiter's park at once; this machine's word wait ran its path"
    if (path ~ /^fallback/) printf "  `%s`, so that is not measured here.\n", path
    else printf "  `%s`, so it is measured here.\n", path
    print "  Compare strategies within a cell rather than across runs."

    print ""
    print "## The machine"
    print ""
    print "| | |"
    print "|---|---|"
    printf "| CPU | %s; %s CPUs, %s thread(s) per core, %s socket(s) |\n", lscpu("Model name"), lscpu("CPU(s)"), lscpu("Thread(s) per core"), lscpu("Socket(s)")
    printf "| virtualization | %s |\n", ("Hypervisor vendor" in cpu) ? cpu["Hypervisor vendor"] " guest" : "none reported"
    fl = " " lscpu("Flags") " "
    printf "| user-mode monitor | WAITPKG (UMWAIT): %s; MONITORX: %s; word wait path: %s |\n", (index(fl, " waitpkg ") ? "yes" : "no"), (index(fl, " monitorx ") ? "yes" : "no"), path
    printf "| kernel | %s |\n", kernel
    printf "| load average (1, 5, 15 min) | %s at the start, %s at the end |\n", load0, load1
    print ""
    print "The whole `lscpu` summary is at the top of [gpu-async-bench.md](../" run "/gpu-async-bench.md)."

    print ""
    print "## The commands"
    print ""
    print "```sh"
    print "# builds, runs the benchmark once into " run "/, rewrites this file"
    printf "bash scripts/perf-report.sh%s\n", (args == "" ? "" : " " args)
    print "```"
    print ""
    print "which runs `scripts/bench.sh` (a Release build in `build-bench/`), that is:"
    print ""
    print "```sh"
    printf "bash scripts/bench.sh %s%s\n", run, (args == "" ? "" : " " args)
    printf "build-bench/bench/gpu-async-bench --csv %s/gpu-async-bench.csv --plot %s/gpu-async-bench.png%s\n", run, run, (args == "" ? "" : " " args)
    print "```"
    print ""
    printf "Settings of the run: %s; work jitter %s; the `+predict` plan `%s`.\n", settings, jitter, predict

    print ""
    print "## What is measured"
    print ""
    print "One cell is a work duration and a pending count N: N streams of the simulated device (one worker"
    print "thread) each keep one item in flight; an item takes the work duration (uniform jitter, so"
    print "completions come out of order), records the time just before the stream's store, and the"
    print "handler, on the one io_context thread, records the **store-to-handler latency** and launches the"
    print "stream's next item. **CPU s/s** is the process's CPU time less the simulated device's thread, per"
    print "second of wall time (it can exceed 1). The device is **store-only** for our strategies, as a GPU"
    print "line with the doorbell attached: it stores the completion word and the doorbell's word 1, and"
    print "rings nothing."
    print ""
    print "| strategy | what it is |"
    print "|---|---|"
    print "| ours-service | `async_wait(descriptor)`, `io_context::run`, the reactor service's watcher thread, device poll 20 us |"
    print "| ours-service-steps | the same with the completion rhythm off (`port.predicts(false)`) |"
    print "| ours-service+predict, ours-fill+predict | the plan-driven wait with the `+predict` plan above |"
    print "| ours-fill | `async_wait(descriptor)` under `run_fill` (no watcher thread), device poll 20 us |"
    print "| ours-service-dp10/50/100, ours-fill-dp5/25/50/100 | the device poll knob (`port.device_poll`) at 5 to 100 us |"
    print "| ours-service-dp1ms, ours-fill-dp1ms | device poll and park bound 1 ms: the knob's low-CPU end |"
    print "| ours-service-ringing, ours-fill-ringing | the device rings the doorbell instead (a host producer) |"
    print "| callback-post-idealized | the device thread posts the handler itself at the store: `cudaLaunchHostFunc` without its callback thread or cost |"
    print "| callback-thread-post | the device wakes a driver-like callback thread that posts the handler (the shape of `cudaLaunchHostFunc`) |"
    print "| timer-poll-50us, timer-poll-1ms | an `asio::steady_timer` scans the pending words every 50 us or 1 ms (ad hoc pollers) |"
    print "| blocking-cv-thread | a thread blocks on each wait in order, then posts the handler (blocking sync) |"
    print "| spin-poll-thread | a thread spins over the pending words and posts the handlers |"
    print "| sleep-watcher-20us | a thread sleeps 20 us between passes over the pending words |"
    print ""
    print "How to read it: the idealized callback is not the GPU comparison (on a GPU a driver thread runs"
    print "the callback and the stream waits for it; `bench/gpu_bench.cpp`, run by `scripts/gpu-check.sh`,"
    print "measures that). The max column is one sample. Strategies that need a thread of their own compete"
    print "with the device thread on a machine with few cores. In a saturated cell the latency is the queue"
    print "in front of the io_context thread, so read completions per second there."

    print ""
    print "## Latency and CPU per cell"
    print ""
    print "Latency in microseconds from the device's store to the handler; the last three columns divide"
    print "each row by ours-service in the same cell. The plot: per cell, the latency CDF and CPU against"
    print "p50 (open) and p99 (filled)."
    print ""
    print "![latency CDF and CPU against p50 and p99, per cell](../" run "/gpu-async-bench.png)"
    for (c = 1; c <= ncell; c++) {
        print ""
        printf "### %s us of work, %s pending\n", work[c], grouped(pend[c])
        print ""
        print "| strategy | p50 us | p99 us | max us | CPU s/s | completions/s | p50 vs ours-service | p99 vs ours-service | CPU vs ours-service |"
        print "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
        for (n = 1; n <= nrow[c]; n++)
            printf "| %s | %s | %s | %s | %.3f | %s | %s | %s | %s |\n", strat[c, n], us(v[c, n, 5]), us(v[c, n, 7]), us(v[c, n, 8]), v[c, n, 10], grouped(v[c, n, 12]), x(v[c, n, 13]), x(v[c, n, 14]), x(v[c, n, 15])
        print ""
        printf "Simulated device CPU, not counted above: up to %.3f s/s.\n", devcpu[c]
    }

    if (nun) {
        print ""
        print "## Against the alternatives"
        print ""
        print "`run_fill`'s p50 and CPU as multiples of each alternative's, per unsaturated cell (below 1:"
        print "`run_fill` lower). A cell is saturated when no strategy completes half of what its N items"
        print "could offer; the saturated ones are in the tables above."
        print ""
        hdr = "| alternative |"; sep = "|---|"
        for (k = 1; k <= nun; k++) { hdr = hdr " " work[un[k]] " us, " pend[un[k]] " pending: p50 / CPU |"; sep = sep "---:|" }
        print hdr
        print sep
        nalt = split("callback-post-idealized callback-thread-post timer-poll-50us timer-poll-1ms blocking-cv-thread spin-poll-thread sleep-watcher-20us", alt, " ")
        for (j = 1; j <= nalt; j++) {
            line = "| " alt[j] " |"
            for (k = 1; k <= nun; k++) {
                c = un[k]; a = row(c, alt[j]); b = row(c, "ours-fill")
                line = line " " x(v[c, b, 5] / v[c, a, 5]) " / " x(v[c, b, 10] / v[c, a, 10]) " |"
            }
            print line
        }
    }

    print ""
    print "## Completions per second through one io_context thread"
    print ""
    if (!ntp) fail("no throughput rows")
    {
        print "Host stores, no device: each handler re-arms its wait, then stores (and rings) on the"
        print "io_context thread itself; the bare `asio::post` loop is the ceiling."
        print ""
        print "| pending | mode | completions/s | CPU s/s | of a bare post loop |"
        print "|---:|---|---:|---:|---:|"
        for (k = 1; k <= ntp; k++)
            printf "| %s | %s | %s | %.3f | 1/%.1f |\n", grouped(tp_p[k]), tp_m[k], grouped(tp_r[k]), tp_c[k], (tp_f[k] > 0 ? 1 / tp_f[k] : 0)
    }

    print ""
    print "## Executor kinds"
    print ""
    if (!nex) fail("no executor-kind rows")
    {
        print "One thread waits for one simulated-device item at a time with each executor kind and the"
        print "recommended flag plan; CPU is the waiting thread's per waited second."
        print ""
        print "| executor | doorbell | p50 us | p99 us | max us | CPU s/s | note |"
        print "|---|---|---:|---:|---:|---:|---|"
        for (k = 1; k <= nex; k++)
            printf "| %s | %s | %s | %s | %s | %.3f | %s |\n", ex_n[k], ex_d[k], us(ex_50[k]), us(ex_99[k]), us(ex_mx[k]), ex_c[k], ex_note[k]
    }

    print ""
    print "## Vulkan on a real driver"
    print ""
    if (!nvk) fail("no Vulkan rows")
    if (!("ours-service" in vki) || !("wait-thread-post" in vki) || !("busy-poll" in vki)) fail("the Vulkan cell lacks a row")
    {
        printf "Real compute work on the Vulkan device `%s`: one submission at a time of the spin\n", vk_dev
        printf "shader for %d us with the line's store recorded behind it, awaited each way; latency from\n", vk_w
        print "just before `vkQueueSubmit` to the handler, so the work itself is in every row and the rows"
        print "differ by the wake. CPU is the process's per waited second, including the device's threads"
        print "(on lavapipe the work runs on the CPU: about one core). The port's rows attach the port's"
        print "doorbell to their line, as the README tells users to (ours-service-no-bell: without it); the"
        print "rows take turns round by round. Measured by the same run, after the sections above"
        print "(`--sections vulkan` runs it alone; `--vulkan-rounds` sets the rounds per row)."
        print ""
        print "| strategy | samples | p50 us | p99 us | max us | CPU s/s | note |"
        print "|---|---:|---:|---:|---:|---:|---|"
        for (k = 1; k <= nvk; k++)
            printf "| %s | %d | %s | %s | %s | %.3f | %s |\n", vk_n[k], vk_s[k], us(vk_50[k]), us(vk_99[k]), us(vk_mx[k]), vk_c[k], vk_note[k]
        o = vki["ours-service"]; t = vki["wait-thread-post"]; b = vki["busy-poll"]
        print ""
        printf "- The port under `run()` (ours-service) answered at %s us at the median and %s us at p99\n", us(vk_50[o]), us(vk_99[o])
        printf "  against %s / %s us for a thread in `vkWaitSemaphores` posting to the io_context, and\n", us(vk_50[t]), us(vk_99[t])
        printf "  %s / %s us for a busy poll of the counter, which took %.3f CPU s/s to the port's %.3f.\n", us(vk_50[b]), us(vk_99[b]), vk_c[b], vk_c[o]
    }
}
AWK
)
awk -v run="$run" -v args="$args" "$prog" "$run/gpu-async-bench.md" "$run/gpu-async-bench.csv" \
    "$run/gpu-async-bench-throughput.csv" "$run/gpu-async-bench-executors.csv" \
    "$run/gpu-async-bench-vulkan.csv" >"$tmp"
[ -s "$tmp" ] || die "the report came out empty"
grep -q '^| pending | port: heap bytes per wait |' "$run/wait-memory.md" ||
    die "$run/wait-memory.md: not the table wait-memory-bench writes"
{
    echo
    echo "## Heap per pending wait"
    echo
    echo "\`wait-memory-bench\`: malloc's bytes in use per pending descriptor wait on one port (its"
    echo "operation and its place in the reactor's table), with eight waits to a line (one per slot)"
    echo "and with a line to each wait (the line's record, about 200 bytes, is then the wait's alone),"
    echo "beside a \`steady_timer\` wait with the same small handler, and the time of \`port.cancel()\`"
    echo "(eight to a line) against cancelling as many timers."
    echo
    cat "$run/wait-memory.md"
} >>"$tmp"
cp "$tmp" "$doc"
echo "perf-report.sh: $doc rewritten from $run ($(wc -l <"$doc") lines)"
