#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# scripts/ci/asio-newer.sh: the port's layer against a newer standalone Asio than Debian 12's
# (1.22): Debian 13's libasio-dev (Asio 1.30), whose headers are fetched with a private apt
# configuration (the system's sources, lists, cache and installed packages stay as they are) and
# unpacked into a build folder, never installed. The code that only a newer Asio compiles
# (immediate executors: GPU_ASYNC_HAS_IMMEDIATE_EXECUTOR) runs there: the check fails where those
# tests report themselves skipped.
#
#   scripts/ci/asio-newer.sh --include-dir   fetch the headers (once) and print their folder, for
#                                            -DGPU_ASYNC_ASIO_INCLUDE_DIR=...
#   scripts/ci/asio-newer.sh                 the whole check in a tree of its own: configure
#                                            (clang++ -O0, -Werror), build only the standalone
#                                            flavour's tests (gpu_async_asio_standalone_tests),
#                                            run their suites, check the immediate executor's ran
#   ASIO_NEWER_TREE=DIR scripts/ci/asio-newer.sh
#                                            a tree configured with that folder, whose suites
#                                            ctest has run (.ci/run: the ThreadSanitizer tree):
#                                            checks its Asio's version and that the immediate
#                                            executor's cases ran
#
# Environment: ASIO_NEWER_DIR (where the headers and the private apt state go, default
# build-ci-asio130), ASIO_NEWER_SUITE (default trixie), ASIO_NEWER_MIRROR (default: the Debian
# mirror of the system's sources, else http://deb.debian.org/debian), ASIO_NEWER_JOBS (default
# nproc).
set -euo pipefail
cd "$(dirname "$0")/../.."
dir="${ASIO_NEWER_DIR:-build-ci-asio130}"
suite="${ASIO_NEWER_SUITE:-trixie}"
jobs="${ASIO_NEWER_JOBS:-$(nproc)}"
start=$(date +%s)
say() { echo "asio-newer.sh [$(($(date +%s) - start))s]: $*" >&2; }

# The headers, fetched once into $dir/asio (dpkg -x: files only, nothing registered).
include_dir="$PWD/$dir/asio/usr/include"
if [ ! -f "$include_dir/asio.hpp" ]; then
    mirror="${ASIO_NEWER_MIRROR:-}"
    if [ -z "$mirror" ]; then
        # The host the system already fetches Debian from (one-line or deb822 sources).
        mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
            /etc/apt/sources.list.d/*.sources 2>/dev/null |
            grep -Eo 'https?://[^ ]*/debian/?( |$)' | head -n1 | tr -d ' ') || true
        mirror="${mirror%/}"
        [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
    fi
    apt_dir="$dir/apt"
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite main" \
        >"$apt_dir/sources.list"
    apt_opts=(-qq -o "Dir::Etc::SourceList=$PWD/$apt_dir/sources.list"
        -o Dir::Etc::SourceParts=/dev/null -o "Dir::State::Lists=$PWD/$apt_dir/lists"
        -o "Dir::Cache=$PWD/$apt_dir/cache" -o Dir::State::Status=/dev/null
        -o APT::Sandbox::User=root)
    say "fetching libasio-dev from $mirror $suite"
    timeout 300 apt-get "${apt_opts[@]}" update >&2
    rm -f "$apt_dir"/libasio-dev_*.deb
    (cd "$apt_dir" && timeout 300 apt-get "${apt_opts[@]}" download libasio-dev >&2)
    rm -rf "$dir/asio"
    dpkg -x "$apt_dir"/libasio-dev_*.deb "$dir/asio"
fi
if [ "${1:-}" = --include-dir ]; then
    echo "$include_dir"
    exit 0
fi

tree="${ASIO_NEWER_TREE:-}"
if [ -z "$tree" ]; then
    tree="$dir/tree"
    cxx=g++
    command -v clang++ >/dev/null 2>&1 && cxx=clang++
    generator="Unix Makefiles"
    command -v ninja >/dev/null 2>&1 && generator=Ninja
    # -O0 and no precompiled header: the fastest build of one unity translation unit.
    cmake -S . -B "$tree" -G "$generator" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER="$cxx" \
        -DCMAKE_CXX_FLAGS_DEBUG=-O0 -DGPU_ASYNC_WERROR=ON -DGPU_ASYNC_PCH=OFF \
        -DGPU_ASYNC_BUILD_EXAMPLES=OFF -DGPU_ASYNC_BUILD_BENCHMARKS=OFF \
        -DGPU_ASYNC_ASIO_INCLUDE_DIR="$include_dir" >/dev/null
    say "building gpu_async_asio_standalone_tests with $cxx"
    timeout 900 cmake --build "$tree" -j"$jobs" --target gpu_async_asio_standalone_tests
    ctest --test-dir "$tree" --output-on-failure -j"$jobs" -R '^asio_standalone\.'
fi

used=$(sed -n 's/^GPU_ASYNC_ASIO_INCLUDE_DIR:[A-Z]*=//p' "$tree/CMakeCache.txt")
version=$(sed -n 's/^#define ASIO_VERSION \([0-9]*\).*/\1/p' "$used/asio/version.hpp" 2>/dev/null)
say "$tree: standalone Asio ${version:-?} ($used)"
if [ "${version:-0}" -lt 102800 ]; then
    echo "asio-newer.sh: $tree: expected Asio 1.28 or later (immediate executors)" >&2
    exit 1
fi

# The immediate executor's cases ran, not skipped (Boost.Test skips a case whose enable_if is
# false, and says so; run by name, such a case runs empty: "did not check any assertions").
exe="$tree/test/gpu_async_asio_standalone_tests"
for t in an_immediate_executor_completes_a_finished_wait_there \
    an_immediate_completion_leaves_the_context_running; do
    out=$("$exe" --run_test="gpu_completion_port_tests/$t" --log_level=test_suite \
        --color_output=no 2>&1) || {
        echo "$out"
        exit 1
    }
    if ! grep -q "Leaving test case \"$t\"" <<<"$out" ||
        grep -q -e "/$t\" is skipped" -e "did not check any assertions" <<<"$out"; then
        echo "$out"
        echo "asio-newer.sh: $t did not run against Asio $version" >&2
        exit 1
    fi
done
say "the immediate executor's cases ran against Asio $version"
