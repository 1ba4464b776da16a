#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# scripts/ci/fresh-deps.sh: the README's test build used only what scripts/install-deps.sh
# installs. On a new Debian 12 machine, the README's commands have only that list (and what its
# packages depend on) beside the base system; on a machine where more is installed, a package
# missing from the list would go unnoticed. So every file the build tree used from the system is
# traced to its Debian package, which must be in the list, a dependency of it (recursively), or
# of the base system (Priority: required):
#   - the headers its compiles read (Ninja's dependency log, or make's .d files),
#   - the shared objects its programs link (ldd),
#   - the shared objects the demo loads at run time on Vulkan (the loader and lavapipe: LD_DEBUG),
#   - curl, which example_demo_http_curl runs.
# Prints each package used that the list misses, with a file of it, and fails.
#   scripts/ci/fresh-deps.sh [BUILD_DIR]   (default build: the README's test command's folder)
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build}"
root=$PWD
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The packages a new machine has after the README's command: the list, what it depends on
# (Depends and Pre-Depends, recursively; no Recommends: install-deps.sh installs none), and the
# base system.
bash scripts/install-deps.sh --list >"$tmp/list"
apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
    --no-replaces --no-enhances $(cat "$tmp/list") 2>/dev/null |
    sed -E 's/^ *(\|?(Pre)?Depends: )?//; s/[<>]//g; s/:[a-z0-9]+$//' |
    sort -u >"$tmp/have"
dpkg-query -W -f='${Package} ${Priority} ${Essential}\n' |
    awk '$2 == "required" || $3 == "yes" { print $1 }' >>"$tmp/have"
sort -u -o "$tmp/have" "$tmp/have"

# The files used, outside the source and build folders.
{
    if [ -f "$build/build.ninja" ]; then
        ninja -C "$build" -t deps | sed -n 's/^    //p'
    else
        find "$build" -name '*.d' -exec cat {} + | tr ' \\' '\n\n' | grep '^/'
    fi
    find "$build" -type f -executable -exec sh -c 'ldd "$1" 2>/dev/null || true' sh {} \; |
        sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p'
    if [ -x "$build/example/gpu-async-demo" ]; then
        LD_DEBUG=libs LD_DEBUG_OUTPUT="$tmp/ld" timeout 60 "$build/example/gpu-async-demo" \
            --device vulkan --duration 1 --connections 2 >/dev/null || true
        cat "$tmp"/ld.* | sed -n 's/.*calling init: \(\/.*\)$/\1/p'
    fi
    command -v curl || true
} | grep '^/' | grep -v -e "^$root/" -e "^$PWD/$build/" | sort -u >"$tmp/files"

# Each file's package, from dpkg's file lists (also under the other half of merged /usr: dpkg
# records /lib/... for files that ldd names /usr/lib/..., and the other way round).
awk 'FNR == NR { want[$0] = 1; a = $0; sub("^/usr/", "/", a); want[a] = 1; want["/usr" $0] = 1
                 next }
     FNR == 1 { pkg = FILENAME; sub(".*/", "", pkg); sub("[.]list$", "", pkg); sub(":.*", "", pkg) }
     ($0 in want) { print pkg "\t" $0 }' "$tmp/files" /var/lib/dpkg/info/*.list |
    sort -u >"$tmp/owners"

missing=$(awk -F'\t' 'FNR == NR { have[$1] = 1; next } !($1 in have) && !seen[$1]++ {
    print "  " $1 " (e.g. " $2 ")" }' "$tmp/have" "$tmp/owners")
echo "fresh-deps.sh: $(wc -l <"$tmp/files") files used from the system, from" \
    "$(cut -f1 "$tmp/owners" | sort -u | wc -l) packages"
if [ -n "$missing" ]; then
    echo "fresh-deps.sh: the README's build used packages that scripts/install-deps.sh neither" \
        "lists nor pulls in; a new machine lacks them:" >&2
    echo "$missing" >&2
    exit 1
fi
echo "fresh-deps.sh: each is in scripts/install-deps.sh's list, a dependency of it, or required"
