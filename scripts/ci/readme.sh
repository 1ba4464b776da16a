#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# scripts/ci/readme.sh: the README's code is compiled code. Each fenced block of README.md that
# follows a line `<!-- snippet: <file>#<name> -->` must equal, line for line, the region of <file>
# between its two marker lines `//! [<name>]` (C++) or `#! [<name>]` (CMake); the files are
# examples and tests that the build compiles and ctest runs. A ```cpp or ```cmake block without a
# snippet line fails too. With --fix, rewrites the README's blocks from the files instead (from the
# last to the first, so the line numbers stay right).
set -euo pipefail
cd "$(dirname "$0")/../.."
readme=README.md
fix=0
[ "${1:-}" = "--fix" ] && fix=1

# The lines of <file> between the two markers of <name> (exclusive).
region() {
    awk -v name="$2" '
        $0 ~ "^[ \t]*(//|#)! \\[" name "\\][ \t]*$" { inside = !inside; found++; next }
        inside { print }
        END { if (found != 2) exit 3 }' "$1"
}

# The fenced block that starts on line $1 + 1 of the README (without its fences).
block() {
    awk -v start="$1" '
        NR == start + 1 { if ($0 !~ /^```/) exit 4; next }
        NR > start + 1 { if ($0 == "```") exit 0; print }' "$readme"
}

failed=0
checked=0
# Every ```cpp / ```cmake fence must follow a snippet line.
while IFS=: read -r n _; do
    prev=$(sed -n "$((n - 1))p" "$readme")
    if [[ ! "$prev" =~ ^'<!-- snippet: ' ]]; then
        echo "readme.sh: $readme:$n: a code block without a '<!-- snippet: file#name -->' line" >&2
        failed=1
    fi
done < <(grep -nE '^```(cpp|c\+\+|cmake)$' "$readme" || true)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$readme" "$tmp/readme"
while IFS= read -r line; do
    n=${line%%:*}
    spec=$(sed -E 's/^[0-9]+:<!-- snippet: ([^ ]+) -->$/\1/' <<<"$line")
    file=${spec%%#*}
    name=${spec#*#}
    if [ ! -f "$file" ]; then
        echo "readme.sh: $readme:$n: no file $file" >&2
        failed=1
        continue
    fi
    if ! region "$file" "$name" >"$tmp/want"; then
        echo "readme.sh: $readme:$n: $file has no region '$name' (two '//! [$name]' lines)" >&2
        failed=1
        continue
    fi
    if ! block "$n" >"$tmp/have"; then
        echo "readme.sh: $readme:$n: no fenced block after the snippet line" >&2
        failed=1
        continue
    fi
    checked=$((checked + 1))
    if ! diff -u --label "$file#$name" --label "$readme:$n" "$tmp/want" "$tmp/have" >"$tmp/diff"; then
        if [ "$fix" = 1 ]; then
            awk -v start="$n" -v src="$tmp/want" '
                NR == start + 1 { print; while ((getline l < src) > 0) print l; skip = 1; next }
                skip && $0 == "```" { skip = 0 }
                !skip { print }' "$tmp/readme" >"$tmp/readme.new"
            mv "$tmp/readme.new" "$tmp/readme"
            echo "readme.sh: $readme:$n: rewritten from $file#$name"
        else
            cat "$tmp/diff" >&2
            echo "readme.sh: $readme:$n differs from $file#$name (run with --fix)" >&2
            failed=1
        fi
    fi
done < <(grep -nE '^<!-- snippet: [^ ]+#[^ ]+ -->$' "$readme" | tac || true)

if [ "$fix" = 1 ]; then
    cp "$tmp/readme" "$readme"
fi
if [ "$checked" = 0 ]; then
    echo "readme.sh: no snippet checked" >&2
    failed=1
fi
[ "$failed" = 0 ] || exit 1
echo "readme.sh: $checked snippets match their compiled sources"
