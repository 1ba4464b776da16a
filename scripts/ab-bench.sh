#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# scripts/ab-bench.sh: an A/B comparison of the completion path of two gpu-async-bench binaries,
# run alternately in one sitting, with a verdict per figure: is B within 10 % of A?
#
#   scripts/ab-bench.sh --base BIN_A --change BIN_B [--rounds N] [--out DIR] [options]
#
# BIN_A and BIN_B are gpu-async-bench executables (the target of that name, built in Release from
# two trees: e.g. a base commit in a git worktree and the current tree). The runs alternate
# A B, B A, A B, ... so that a drift of the machine (heat, other work) falls on both alike. Each
# run of a binary is two invocations of it:
#   latency      --sections latency --cells CELLS [--only TEXT] --seconds S: the strategies of
#                --only (default: every ours- strategy, the port under the reactor service's
#                watcher thread and under run_fill, their plan-driven, device-poll and ringing
#                variants) at each cell: p50, p99 and max store-to-handler latency, completions
#                per second and CPU seconds per second (process less the simulated device)
#   throughput   --sections throughput: completions per second and CPU through one io_context
#                thread at 64, 4096 and 65536 pending (ours-service, ours-fill and a bare
#                asio::post loop, which does not use the library and so shows the machine's drift)
# and the CPU time (user + system) of each invocation as a whole.
#
# Options:
#   --rounds N       runs of each binary (default 5)
#   --out DIR        results folder (default bench/results/ab in this tree); DIR/runs/ is replaced
#   --cells LIST     latency cells, work_us:pending,... (default 1000:64,100:64,1000:4096)
#   --only LIST      the latency strategies, whole names, comma-separated (e.g.
#                    ours-service,ours-fill; default: every ours- strategy). The bench picks
#                    strategies by substring, so it gets the names' common prefix and may run
#                    more; the report keeps the named ones
#   --seconds S      measured seconds per strategy and cell (default 0.4; 0.25 s warm-up before)
#   --quick          a smoke test of this script: --seconds 0.05 unless given, and the bench's
#                    --quick (0.05 s warm-up, 0.1 s per throughput row); figures are noise
#   --report-only    rewrite DIR/ab.csv and DIR/ab.md from the runs already in DIR/runs/
#
# Writes DIR/ab.csv (every figure of every run: round, slot, side, section, cell, strategy,
# metric, value), DIR/ab-summary.csv and DIR/ab.md (per cell and metric: median of A, median of B,
# B/A, within 10 % yes/no, and each side's spread over its runs), with the machine and the exact
# commands; DIR/runs/ keeps each invocation's CSV and output. Needs bash, awk and python3.
# With the defaults one run of a binary takes about 40 s, a full run (5 rounds) about 7 minutes.
set -euo pipefail

die() {
    echo "ab-bench.sh: $*" >&2
    exit 2
}

root=$(cd "$(dirname "$0")/.." && pwd)
base=
change=
rounds=5
out=
cells=1000:64,100:64,1000:4096
only=
seconds=
quick=0
report_only=0
# A command line to paste back: arguments as they are where the shell would read them so.
quote() {
    local a sep=
    for a in "$@"; do
        case "$a" in
        '' | *[!A-Za-z0-9_./:,=+@%-]*) printf "%s%q" "$sep" "$a" ;;
        *) printf '%s%s' "$sep" "$a" ;;
        esac
        sep=' '
    done
}
invocation=$(quote "$0" "$@")

need_value() { if [ $# -lt 2 ] || [ -z "$2" ]; then die "$1 needs a value"; fi; }
while [ $# -gt 0 ]; do
    case "$1" in
    --base) need_value "$@"; base=$2; shift 2 ;;
    --change) need_value "$@"; change=$2; shift 2 ;;
    --rounds) need_value "$@"; rounds=$2; shift 2 ;;
    --out) need_value "$@"; out=$2; shift 2 ;;
    --cells) need_value "$@"; cells=$2; shift 2 ;;
    --only) need_value "$@"; only=$2; shift 2 ;;
    --seconds) need_value "$@"; seconds=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --report-only) report_only=1; shift ;;
    -h | --help) sed -n '3,/^set -e/{/^set -e/d;p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
    esac
done

command -v python3 >/dev/null 2>&1 || die "needs python3"
out=${out:-$root/bench/results/ab}
mkdir -p "$out"
out=$(cd "$out" && pwd)
runs=$out/runs

if [ "$report_only" = 0 ]; then
    if [ -z "$base" ] || [ -z "$change" ]; then die "--base BIN_A and --change BIN_B are required"; fi
    for b in "$base" "$change"; do
        if [ ! -f "$b" ] || [ ! -x "$b" ]; then die "not an executable file: $b"; fi
    done
    base=$(readlink -f "$base")
    change=$(readlink -f "$change")
    case "$rounds" in '' | *[!0-9]* | 0) die "--rounds must be a positive integer" ;; esac
    if [ -z "$seconds" ]; then
        seconds=0.4
        [ "$quick" = 1 ] && seconds=0.05
    fi
    quick_arg=()
    [ "$quick" = 1 ] && quick_arg=(--quick)
    # The bench's --only runs every strategy whose name contains its text: given the names'
    # common prefix it runs them all (and maybe more, which the report leaves out).
    bench_only=ours-
    names=()
    if [ -n "$only" ]; then
        case ",$only," in *,,*) die "--only: an empty name in '$only'" ;; esac
        IFS=, read -r -a names <<<"$only"
        bench_only=${names[0]}
        for n in "${names[@]}"; do
            while [ -n "$bench_only" ] && [ "${n#"$bench_only"}" = "$n" ]; do
                bench_only=${bench_only%?}
            done
        done
    fi
    only_arg=()
    [ -n "$bench_only" ] && only_arg=(--only "$bench_only")

    rm -rf "$runs"
    mkdir -p "$runs"
    # Each invocation's exact command, the times of each, and what the report needs to know.
    : >"$runs/commands.txt"
    echo "round,slot,side,section,wall_s,user_s,sys_s" >"$runs/times.csv"
    {
        echo "invocation=$invocation"
        echo "base=$base"
        echo "change=$change"
        echo "base_sha256=$(sha256sum "$base" | cut -d' ' -f1)"
        echo "change_sha256=$(sha256sum "$change" | cut -d' ' -f1)"
        echo "rounds=$rounds"
        echo "cells=$cells"
        echo "only=$bench_only"
        echo "strategies=$only"
        echo "seconds=$seconds"
        echo "quick=$quick"
        echo "started=$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
        echo "load_start=$(cut -d' ' -f1-3 /proc/loadavg)"
        echo "model=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)"
        echo "cpus=$(nproc) online of $(lscpu | sed -n 's/^CPU(s): *//p' | head -n 1)"
        echo "threads_per_core=$(lscpu | sed -n 's/^Thread(s) per core: *//p' | head -n 1)"
        echo "hypervisor=$(lscpu | sed -n 's/^Hypervisor vendor: *//p' | head -n 1)"
        echo "kernel=$(uname -sr)"
        echo "niceness=$(nice)"
        g=/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor
        echo "governor=$([ -r $g ] && cat $g || echo unknown)"
    } >"$runs/meta.txt"

    # One invocation: its exact command into commands.txt, its output into runs/, its wall and CPU
    # times (those of the child, from the subshell's `times`) into times.csv.
    invoke() {
        local round=$1 slot=$2 side=$3 section=$4
        shift 4
        local stem="$runs/r$round-$side-$section"
        printf '%s\n' "$(quote "$@")" >>"$runs/commands.txt"
        local t0 t1 cpu
        t0=$(date +%s.%N)
        # `times` runs in the subshell that ran the bench (in a pipeline it would see no child).
        if ! cpu=$( ("$@" >"$stem.txt" 2>&1 && times) ); then
            echo "ab-bench.sh: failed (output in $stem.txt): $*" >&2
            tail -n 20 "$stem.txt" >&2
            exit 1
        fi
        t1=$(date +%s.%N)
        # `times` prints the children's user and system time as 0m1.234s 0m0.567s.
        echo "$cpu" | tail -n 1 | awk -v r="$round" -v s="$slot" -v side="$side" -v sec="$section" \
            -v t0="$t0" -v t1="$t1" '
            function secs(t,  m) { m = t; sub(/m.*/, "", m); sub(/^[0-9]+m/, "", t); sub(/s$/, "", t)
                                   return m * 60 + t }
            { printf "%s,%s,%s,%s,%.3f,%.3f,%.3f\n", r, s, side, sec, t1 - t0, secs($1), secs($2) }' \
            >>"$runs/times.csv"
    }

    slot=0
    start=$(date +%s)
    for ((r = 1; r <= rounds; r++)); do
        # A B, then B A, then A B, ...: each side runs first in half the rounds.
        order="A B"
        [ $((r % 2)) = 0 ] && order="B A"
        for side in $order; do
            slot=$((slot + 1))
            bin=$base
            [ "$side" = B ] && bin=$change
            t=$(date +%s)
            invoke "$r" "$slot" "$side" latency "$bin" --sections latency --cells "$cells" \
                "${only_arg[@]}" --seconds "$seconds" --plot none \
                --csv "$runs/r$r-$side-latency.csv" "${quick_arg[@]}"
            invoke "$r" "$slot" "$side" throughput "$bin" --sections throughput --plot none \
                --csv "$runs/r$r-$side-throughput.csv" "${quick_arg[@]}"
            # Only the summary CSVs are read; the CDF and the empty tables are dropped.
            rm -f "$runs/r$r-$side-latency-cdf.csv" "$runs/r$r-$side-latency-throughput.csv" \
                "$runs/r$r-$side-throughput-cdf.csv"
            echo "ab-bench.sh: round $r/$rounds, $side ($bin): $(($(date +%s) - t)) s" \
                "(so far $(($(date +%s) - start)) s)" >&2
        done
        # A misspelt name would leave its rows empty in every round: stop after the first.
        if [ "$r" = 1 ] && [ ${#names[@]} -gt 0 ]; then
            ran=$(for f in "$runs"/r1-[AB]-latency.csv; do tail -n +2 "$f"; done | cut -d, -f3 |
                sort -u)
            ran_list=$(paste -sd, <<<"$ran")
            for n in "${names[@]}"; do
                grep -qxF -- "$n" <<<"$ran" ||
                    die "--only: no strategy named '$n' (the bench ran: ${ran_list:-none})"
            done
        fi
    done
    {
        echo "finished=$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
        echo "load_end=$(cut -d' ' -f1-3 /proc/loadavg)"
    } >>"$runs/meta.txt"
fi

if [ ! -f "$runs/meta.txt" ] || [ ! -f "$runs/times.csv" ]; then
    die "no runs in $runs (run without --report-only)"
fi

python3 - "$runs" "$out" <<'PY'
import csv, os, statistics, sys

runs, out = sys.argv[1], sys.argv[2]
meta = {}
with open(os.path.join(runs, "meta.txt")) as f:
    for line in f:
        k, _, v = line.rstrip("\n").partition("=")
        meta[k] = v
times = list(csv.DictReader(open(os.path.join(runs, "times.csv"))))
if not times:
    sys.exit("ab-bench.sh: runs/times.csv has no runs")

# The latency strategies named by --only (none: every one that ran).
wanted = [n for n in meta.get("strategies", "").split(",") if n]

# Every figure of every run: (round, slot, side, section, work_us, pending, strategy, metric, value)
rows = []
LAT = [("p50_us", "p50_ns", 1e-3), ("p99_us", "p99_ns", 1e-3), ("max_us", "max_ns", 1e-3),
       ("completions_per_s", "completions_per_s", 1), ("cpu_s_per_s", "cpu_s_per_s", 1)]
TP = [("completions_per_s", "completions_per_s", 1), ("cpu_s_per_s", "cpu_s_per_s", 1)]


def read(path, need):
    with open(path) as f:
        r = csv.DictReader(f)
        missing = [c for c in need if c not in (r.fieldnames or [])]
        if missing:
            sys.exit(f"ab-bench.sh: {path}: no column {', '.join(missing)}")
        return list(r)


for t in times:
    rd, slot, side, section = t["round"], t["slot"], t["side"], t["section"]
    stem = os.path.join(runs, f"r{rd}-{side}-{section}")
    if section == "latency":
        for row in read(stem + ".csv", ["work_us", "pending", "strategy", "samples"] + [c for _, c, _ in LAT]):
            if wanted and row["strategy"] not in wanted:
                continue
            for metric, col, scale in LAT:
                rows.append((rd, slot, side, "latency", row["work_us"], row["pending"],
                             row["strategy"], metric, float(row[col]) * scale))
    else:
        for row in read(stem + "-throughput.csv", ["pending", "mode"] + [c for _, c, _ in TP]):
            for metric, col, scale in TP:
                rows.append((rd, slot, side, "throughput", "", row["pending"], row["mode"], metric,
                             float(row[col]) * scale))
    cpu = float(t["user_s"]) + float(t["sys_s"])
    rows.append((rd, slot, side, "process", "", "", section + "-run", "cpu_s", cpu))
    rows.append((rd, slot, side, "process", "", "", section + "-run", "wall_s", float(t["wall_s"])))

with open(os.path.join(out, "ab.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["round", "slot", "side", "section", "work_us", "pending", "strategy", "metric", "value"])
    for r in rows:
        w.writerow(r[:-1] + (f"{r[-1]:.6g}",))

# Medians per (section, work_us, pending, strategy, metric) and side, in first-seen order.
keys, vals = [], {}
for rd, slot, side, section, work, pending, strat, metric, v in rows:
    k = (section, work, pending, strat, metric)
    if k not in vals:
        keys.append(k)
        vals[k] = {"A": [], "B": []}
    vals[k][side].append(v)

HIGHER = {"completions_per_s"}  # higher is better; every other metric: lower is better
LABEL = {"p50_us": "p50 latency, us", "p99_us": "p99 latency, us", "max_us": "max latency, us",
         "completions_per_s": "completions per second", "cpu_s_per_s": "CPU s per s",
         "cpu_s": "CPU time of the invocation, s (user + system)", "wall_s": "wall time, s"}


def spread(xs):
    m = statistics.median(xs) if xs else 0
    return (max(xs) - min(xs)) / m * 100 if len(xs) > 1 and m > 0 else None


summary = {}
for k in keys:
    a, b = vals[k]["A"], vals[k]["B"]
    ma = statistics.median(a) if a else None
    mb = statistics.median(b) if b else None
    ratio = mb / ma if ma and mb is not None else None
    if ratio is None:
        verdict = "n/a"
    elif abs(ratio - 1) <= 0.10:
        verdict = "yes"
    else:
        better = ratio > 1 if k[4] in HIGHER else ratio < 1
        verdict = "no (B better)" if better else "no (B worse)"
    summary[k] = (ma, mb, ratio, verdict, spread(a), spread(b), len(a), len(b))

with open(os.path.join(out, "ab-summary.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["section", "work_us", "pending", "strategy", "metric", "better", "a_median",
                "b_median", "ratio_b_over_a", "within_10pct", "a_runs", "b_runs",
                "a_spread_pct", "b_spread_pct"])
    for k in keys:
        ma, mb, ratio, verdict, sa, sb, na, nb = summary[k]
        g = lambda x: "" if x is None else f"{x:.6g}"
        w.writerow(list(k) + ["higher" if k[4] in HIGHER else "lower", g(ma), g(mb), g(ratio),
                              verdict, na, nb, g(sa), g(sb)])


def num(x):
    if x is None:
        return "-"
    if abs(x) >= 1000:
        return f"{x:,.0f}".replace(",", " ")
    return f"{x:.3g}" if abs(x) < 10 else f"{x:.1f}"


def pct(x):
    return "-" if x is None else f"{x:.0f} %"


def table(md, ks, first_col, name):
    md.append(f"| {first_col} | A median | B median | B/A | within 10 % | A spread | B spread |")
    md.append("|---|---:|---:|---:|---|---:|---:|")
    for k in ks:
        ma, mb, ratio, verdict, sa, sb, _, _ = summary[k]
        r = "-" if ratio is None else f"{ratio:.3f}"
        md.append(f"| {name(k)} | {num(ma)} | {num(mb)} | {r} | {verdict} | {pct(sa)} | {pct(sb)} |")
    md.append("")


n_a = sum(1 for t in times if t["side"] == "A" and t["section"] == "latency")
n_b = sum(1 for t in times if t["side"] == "B" and t["section"] == "latency")
md = [f"# A/B: the completion path, A (base) against B (change)", ""]
md.append(f"{meta.get('started', '?')} to {meta.get('finished', '?')}; {n_a} runs of A and {n_b} of B, "
          "alternating A B, B A, A B, ... (each side first in half the rounds)."
          + (" **--quick: a smoke test of the script; the figures are noise.**" if meta.get("quick") == "1" else ""))
md.append("")
md.append("- A: `" + meta.get("base", "?") + "` (sha256 " + meta.get("base_sha256", "?")[:16] + "...)")
md.append("- B: `" + meta.get("change", "?") + "` (sha256 " + meta.get("change_sha256", "?")[:16] + "...)")
md.append("")
md.append("Each figure is the median over a side's runs; B/A is the ratio of the medians; within 10 % "
          "is |B/A - 1| <= 0.10, and a 'no' says which side is better (lower latency and CPU, higher "
          "completions per second). A spread and B spread are (max - min) / median over that side's "
          "runs: a figure whose spread is above 10 % cannot be judged to 10 % by this run. Max "
          "latency is one sample per run and varies most.")
md.append("")

md.append("## Verdict")
md.append("")
for section, title in (("latency", "latency cells"), ("throughput", "throughput"),
                       ("process", "CPU time of the invocations")):
    ks = [k for k in keys if k[0] == section and not (section == "process" and k[4] == "wall_s")]
    if not ks:
        continue
    yes = sum(1 for k in ks if summary[k][3] == "yes")
    worse = [k for k in ks if summary[k][3] == "no (B worse)"]
    better = [k for k in ks if summary[k][3] == "no (B better)"]
    # Clear: both sides repeat to 10 % over their runs, so the difference is not their noise.
    clear = lambda k: all(x is not None and x <= 10 for x in summary[k][4:6])
    worse.sort(key=lambda k: not clear(k))
    md.append(f"- {title}: {yes} of {len(ks)} figures within 10 %; B worse in {len(worse)} "
              f"({sum(map(clear, worse))} clear: both spreads at most 10 %), B better in "
              f"{len(better)} ({sum(map(clear, better))} clear).")
    for k in worse:
        ma, mb, ratio, _, sa, sb, _, _ = summary[k]
        where = (f"work {k[1]} us, {k[2]} pending, " if section == "latency" else
                 f"{k[2]} pending, " if section == "throughput" else "")
        md.append(f"  - B worse{' (clear)' if clear(k) else ''}: {where}{k[3]}, "
                  f"{LABEL.get(k[4], k[4])}: B/A {ratio:.3f} (spread A {pct(sa)}, B {pct(sb)})")
md.append("")

md.append("## Latency cells")
md.append("")
md.append("`gpu-async-bench --sections latency`: store-to-handler latency on the simulated device, "
          "one io_context thread; CPU s per s is the process less the device's threads, per wall "
          f"second; {meta.get('seconds', '?')} s measured per strategy and cell."
          + (f" Strategies (--only): {', '.join(wanted)}." if wanted else ""))
md.append("")
cellset = []
for k in keys:
    if k[0] == "latency" and (k[1], k[2]) not in cellset:
        cellset.append((k[1], k[2]))
for work, pending in cellset:
    md.append(f"### work {work} us, {pending} pending")
    md.append("")
    for metric, _, _ in LAT:
        ks = [k for k in keys if k[0] == "latency" and k[1:3] == (work, pending) and k[4] == metric]
        md.append(f"#### {LABEL[metric]} ({'higher' if metric in HIGHER else 'lower'} is better)")
        md.append("")
        table(md, ks, "strategy", lambda k: k[3])

md.append("## Throughput")
md.append("")
md.append("`gpu-async-bench --sections throughput`: completions per second through one io_context "
          "thread, host stores, no device. asio-post-only does not use the library: its B/A shows "
          "the machine's drift between the sides.")
md.append("")
for metric, _, _ in TP:
    ks = [k for k in keys if k[0] == "throughput" and k[4] == metric]
    md.append(f"### {LABEL[metric]} ({'higher' if metric in HIGHER else 'lower'} is better)")
    md.append("")
    table(md, ks, "pending, mode", lambda k: f"{k[2]}, {k[3]}")

md.append("## CPU and wall time of each invocation")
md.append("")
md.append("Each figure covers the whole process (set-up, warm-up and every strategy); the "
          "measured windows have fixed lengths, so the wall times should match.")
md.append("")
table(md, [k for k in keys if k[0] == "process"], "invocation",
      lambda k: f"{k[3].replace('-run', '')}, {LABEL[k[4]]}")

md.append("## Machine")
md.append("")
md.append("```")
for key in ("model", "cpus", "threads_per_core", "hypervisor", "kernel", "governor", "niceness",
            "load_start", "load_end"):
    md.append(f"{key}: {meta.get(key, '?')}")
md.append("```")
md.append("")
md.append("## Commands")
md.append("")
md.append("```")
md.append(meta.get("invocation", "?").rstrip())
md.append("```")
md.append("")
md.append("Each invocation, in the order run:")
md.append("")
md.append("```")
with open(os.path.join(runs, "commands.txt")) as f:
    md.extend(line.rstrip() for line in f)
md.append("```")
md.append("")
with open(os.path.join(out, "ab.md"), "w") as f:
    f.write("\n".join(md))
print(f"ab-bench.sh: {os.path.join(out, 'ab.md')}, ab.csv, ab-summary.csv")
PY
