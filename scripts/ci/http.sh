#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# scripts/ci/http.sh: drives the demo's HTTP mode with a real HTTP load generator, ApacheBench
# (Debian: apache2-utils). It starts gpu-async-demo --http --server-only on a free port, runs
# `ab -k -l -n 2000 -c 8` against GET /work?us=20 (keep-alive; -l: the JSON timings vary in
# length, which ab otherwise counts as failures), stops the demo with SIGINT and compares counts,
# never speeds: ab's complete requests equal the demo's own count of HTTP responses and of
# requests answered with device work; ab reports 0 failed and no non-2xx responses, every request
# kept alive; the demo saw 8 connections, none failed. Build folder: $1, else
# $GPU_ASYNC_BUILD_DIR, else build/; configured if missing, and the demo built there.
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-${GPU_ASYNC_BUILD_DIR:-build}}"
requests=${HTTP_REQUESTS:-2000}
concurrency=${HTTP_CONCURRENCY:-8}
if ! command -v ab >/dev/null 2>&1; then
    echo "http.sh: ab is not installed (Debian: apache2-utils)" >&2
    exit 1
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DGPU_ASYNC_BUILD_EXAMPLES=ON
fi
cmake --build "$build" -j2 --target gpu-async-demo
demo="$build/example/gpu-async-demo"

out="$(mktemp -d)"
pid=
cleanup() {
    if [ -n "$pid" ]; then kill -KILL "$pid" 2>/dev/null || true; fi
    rm -rf "$out"
}
trap cleanup EXIT
fail() {
    echo "http.sh: $*" >&2
    for f in demo.err demo.out ab.txt; do
        [ -s "$out/$f" ] && { echo "--- $f:" >&2; cat "$out/$f" >&2; }
    done
    exit 1
}

echo "== gpu-async-demo --http --server-only, driven by ab -k -l -n $requests -c $concurrency"
"$demo" --http --server-only --port 0 --json >"$out/demo.out" 2>"$out/demo.err" &
pid=$!
port=
for _ in $(seq 100); do
    port=$(sed -n 's|^gpu-async-demo: serving HTTP on http://127\.0\.0\.1:\([0-9]*\)/ .*|\1|p' \
        "$out/demo.err")
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || fail "the demo exited before serving"
    sleep 0.1
done
[ -n "$port" ] || fail "no 'serving HTTP on' line from the demo within 10 s"
url="http://127.0.0.1:$port/work?us=20"
timeout 120 ab -k -l -q -n "$requests" -c "$concurrency" "$url" >"$out/ab.txt" ||
    fail "ab failed"
grep -E '^(Server Software|Document Path|Complete requests|Failed requests|Non-2xx|Keep-Alive requests)' \
    "$out/ab.txt" || true

kill -INT "$pid"
for _ in $(seq 200); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
kill -0 "$pid" 2>/dev/null && fail "SIGINT did not stop the demo within 20 s"
rc=0
wait "$pid" || rc=$?
pid=
[ "$rc" = 0 ] || fail "the demo exited $rc after SIGINT"
grep -q 'SIGINT after [0-9.]* s: stopping, summary so far' "$out/demo.err" ||
    fail "the demo did not report the SIGINT"
summary=$(cat "$out/demo.out")

# ab's counts.
ab_count() { sed -n "s/^$1: *\([0-9]*\).*/\1/p" "$out/ab.txt"; }
complete=$(ab_count "Complete requests")
failed=$(ab_count "Failed requests")
keepalive=$(ab_count "Keep-Alive requests")
non2xx=$(ab_count "Non-2xx responses") # the line is absent when there are none
# The demo's own counts, from its --json summary.
json_count() { echo "$summary" | sed -n "s/.*$1\([0-9]*\).*/\1/p"; }
served=$(json_count '"requests":')
responses=$(json_count '"http":{"responses":')
not2xx=$(json_count '"not_2xx":')
connections=$(json_count '"http":{[^}]*"connections":')
demo_failed=$(json_count '"failed_connections":')

echo "ab: $complete complete, $failed failed, ${non2xx:-0} non-2xx, $keepalive kept alive"
echo "demo: $responses HTTP responses, $served requests answered with device work," \
    "$not2xx not 2xx, $connections connections"
[ "$complete" = "$requests" ] || fail "ab completed $complete of $requests requests"
[ "$failed" = 0 ] || fail "ab counted $failed failed requests"
[ -z "$non2xx" ] || [ "$non2xx" = 0 ] || fail "ab counted $non2xx non-2xx responses"
[ "$keepalive" = "$complete" ] || fail "ab kept $keepalive of $complete requests alive"
[ "$responses" = "$complete" ] || fail "the demo sent $responses responses, ab completed $complete"
[ "$served" = "$complete" ] || fail "the demo answered $served requests, ab completed $complete"
[ "$not2xx" = 0 ] || fail "the demo sent $not2xx responses other than 2xx"
[ "$connections" = "$concurrency" ] ||
    fail "the demo accepted $connections connections, ab used $concurrency (keep-alive)"
[ "$demo_failed" = 0 ] || fail "the demo counted $demo_failed failed connections"
echo "http.sh: ok"
