#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# scripts/update-ci-times.sh: doc/ci.md's "Step times" table, regenerated from the log of one run
# of .ci/run.
#
#   bash scripts/update-ci-times.sh LOG [DOC] [--note TEXT]
#
# .ci/run ends with a markdown table of its steps and their seconds (its `table` function). This
# copies the last such table in LOG, as printed, between the markers `<!-- ci-steps begin -->` and
# `<!-- ci-steps end -->` of DOC (default doc/ci.md), under a sentence saying where it came from:
# the log's date and, with --note, what you say about the run (the machine, a warm package
# cache, ...). Everything outside the markers is left as it was.
#
# A log without a complete table (a run cut off before its end) or of a failed run (its table
# stops at the failing step, and .ci/run adds "CI FAILED in the step: ...") is refused, and DOC is
# left as it was: the table must list every step of a whole run.
#
# Not in scripts/ci/: .ci/run runs every script there as a CI step.
set -euo pipefail

usage() {
    sed -n '6p' "$0" | sed 's/^#   //' >&2
    exit 2
}

note=""
args=()
while [ $# -gt 0 ]; do
    case "$1" in
    --note)
        [ $# -ge 2 ] || usage
        note=$2
        shift 2
        ;;
    -h | --help) usage ;;
    -*) usage ;;
    *)
        args+=("$1")
        shift
        ;;
    esac
done
if [ ${#args[@]} -lt 1 ] || [ ${#args[@]} -gt 2 ]; then usage; fi
log=${args[0]}
doc=${args[1]:-"$(dirname "$0")/../doc/ci.md"}
[ -r "$log" ] || { echo "update-ci-times: cannot read the log $log" >&2; exit 1; }
[ -w "$doc" ] || { echo "update-ci-times: cannot write $doc" >&2; exit 1; }

begin='<!-- ci-steps begin -->'
end='<!-- ci-steps end -->'
if [ "$(grep -cxF "$begin" "$doc")" != 1 ] || [ "$(grep -cxF "$end" "$doc")" != 1 ] ||
    [ "$(grep -nxF "$begin" "$doc" | cut -d: -f1)" -ge "$(grep -nxF "$end" "$doc" | cut -d: -f1)" ]; then
    echo "update-ci-times: $doc needs one line '$begin' and, after it, one line '$end'" >&2
    exit 1
fi

# The last table of the log: from its header line to the end of the log.
header_at=$(grep -nxF '| step | seconds |' "$log" | tail -n 1 | cut -d: -f1 || true)
if [ -z "$header_at" ]; then
    echo "update-ci-times: no step table in $log (a run cut off before its end?); $doc unchanged" >&2
    exit 1
fi
rest=$(tail -n +"$header_at" "$log")
if grep -q '^CI FAILED in the step: ' <<<"$rest"; then
    echo "update-ci-times: $log is a failed run ($(grep -m1 '^CI FAILED' <<<"$rest")): its table" \
        "lacks the later steps; $doc unchanged" >&2
    exit 1
fi
# Header, separator, one row per step, the total: nothing else until the table ends.
table=$(awk 'NR == 1 || NR == 2 { print; next } /^\| / { print; if ($0 ~ /^\| total \|/) exit; next } { exit }' <<<"$rest")
if [ "$(sed -n 2p <<<"$table")" != '|---|---:|' ] ||
    ! tail -n 1 <<<"$table" | grep -qE '^\| total \| [0-9]+ \|$' ||
    [ "$(wc -l <<<"$table")" -lt 4 ]; then
    echo "update-ci-times: the table in $log is incomplete (no total row); $doc unchanged" >&2
    exit 1
fi
bad=$(sed -n '3,$p' <<<"$table" | grep -vE '^\| .+ \| [0-9]+ \|$' || true)
if [ -n "$bad" ]; then
    echo "update-ci-times: rows of the table in $log that are not '| step | seconds |':" >&2
    echo "$bad" >&2
    exit 1
fi

day=$(date -r "$log" +%Y-%m-%d)
sentence="The closing table of one whole run of \`.ci/run\` (its log of $day), as it printed it,"
sentence+=" copied in by \`bash scripts/update-ci-times.sh LOG\`"
if [ -n "$note" ]; then
    sentence+=": $note"
fi
case "$sentence" in
*[.:]) ;;
*) sentence+=":" ;;
esac

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
{
    sed -n "1,/^$begin\$/p" "$doc"
    printf '\n%s\n\n%s\n\n' "$(fold -s -w 99 <<<"$sentence" | sed 's/ *$//')" "$table"
    sed -n "/^$end\$/,\$p" "$doc"
} >"$tmp"
cat "$tmp" >"$doc"
echo "update-ci-times: $doc: $(($(wc -l <<<"$table") - 3)) steps, $(tail -n 1 <<<"$table" | cut -d' ' -f4) s in all"
