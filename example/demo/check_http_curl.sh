#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# Checks gpu-async-demo --http --server-only driven by curl, as a user drives it by hand: a
# request's JSON timings (work_us as asked, the work's completion after 250 us, the handler after
# the completion), the default work, keep-alive (two URLs, one connection), the error statuses
# (400, 404, 405); then SIGINT stops the demo (exit 0) and its JSON summary counts exactly those
# requests: 7 responses, 4 answered with device work, 3 not 2xx, 6 connections.
# Exit 77 (skipped) where curl is not installed. Run as: bash check_http_curl.sh <gpu-async-demo>
set -euo pipefail
demo=$1
if ! command -v curl >/dev/null 2>&1; then
    echo "curl is not installed: skipped"
    exit 77
fi
tmp=$(mktemp -d)
pid=
cleanup() {
    if [ -n "$pid" ]; then kill -KILL "$pid" 2>/dev/null || true; fi
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
    echo "check_http_curl: $*" >&2
    echo "--- demo stderr:" >&2
    cat "$tmp/err" >&2 || true
    exit 1
}

"$demo" --http --server-only --port 0 --json >"$tmp/out" 2>"$tmp/err" &
pid=$!
port=
for _ in $(seq 100); do
    port=$(sed -n 's|^gpu-async-demo: serving HTTP on http://127\.0\.0\.1:\([0-9]*\)/ .*|\1|p' "$tmp/err")
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || fail "the demo exited before serving"
    sleep 0.1
done
[ -n "$port" ] || fail "no 'serving HTTP on' line within 10 s"
url="http://127.0.0.1:$port"
get() { curl -sS --max-time 10 "$@"; }

# One request: 200 and its timings, in nanoseconds since the request was read.
reply=$(get -w '\n%{http_code}\n' "$url/work?us=250")
echo "curl $url/work?us=250 -> $reply"
[ "$(echo "$reply" | tail -n 1)" = 200 ] || fail "GET /work?us=250: not 200"
echo "$reply" | grep -q '"work_us":250,' || fail "GET /work?us=250: no \"work_us\":250"
times=$(echo "$reply" | sed -n 's/.*"times_ns":{"received":0,"launched":\([0-9]*\),"completed":\([0-9]*\),"handler":\([0-9]*\)}.*/\1 \2 \3/p')
[ -n "$times" ] || fail "GET /work?us=250: no times_ns"
read -r launched completed handler <<<"$times"
# The launch call may return after the work completed (a slow host), so only these two hold.
if [ "$completed" -lt 250000 ] || [ "$handler" -lt "$completed" ]; then
    fail "GET /work?us=250: times out of order: launched $launched, completed $completed, handler $handler"
fi

# The default work (--work-us, 100), and keep-alive: the second URL reuses the first's connection.
connects=$(get -o /dev/null -o /dev/null -w '%{num_connects} ' "$url/work" "$url/work?us=10")
[ "$connects" = "1 0 " ] || fail "two URLs in one curl: new connections '$connects', expected '1 0 '"
get "$url/work" | grep -q '"work_us":100,' || fail "GET /work: not the default 100 us"

# Errors: a bad parameter, a path that is not there, a method other than GET.
[ "$(get -o /dev/null -w '%{http_code}' "$url/work?us=abc")" = 400 ] || fail "us=abc: not 400"
[ "$(get -o /dev/null -w '%{http_code}' "$url/nothing")" = 404 ] || fail "/nothing: not 404"
[ "$(get -o /dev/null -w '%{http_code}' -X POST "$url/work")" = 405 ] || fail "POST: not 405"

# SIGINT: the summary counts what curl sent.
kill -INT "$pid"
for _ in $(seq 200); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
kill -0 "$pid" 2>/dev/null && fail "SIGINT did not stop the demo within 20 s"
rc=0
wait "$pid" || rc=$?
pid=
[ "$rc" = 0 ] || fail "exit $rc after SIGINT"
summary=$(cat "$tmp/out")
echo "summary: $summary"
echo "$summary" | grep -q '"stopped_by":"SIGINT"' || fail "the summary does not say SIGINT"
echo "$summary" | grep -q '"requests":4,' || fail "the summary does not count 4 requests answered"
echo "$summary" | grep -q '"http":{"responses":7,"not_2xx":3,"connections":6}' ||
    fail "the summary does not count 7 responses, 3 not 2xx, 6 connections"
echo "check_http_curl: ok"
