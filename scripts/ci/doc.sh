#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# scripts/ci/doc.sh: builds the API reference with Doxygen (doc/Doxyfile) from the public headers'
# doc comments; any Doxygen warning fails it (WARN_AS_ERROR). Installs doxygen where it is
# missing (as root, Debian). HTML in $GPU_ASYNC_DOC_OUT (default build-doc/html).
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v doxygen >/dev/null 2>&1; then
    bash scripts/install-deps.sh doxygen
fi
out="${GPU_ASYNC_DOC_OUT:-build-doc}"
version=$(sed -n 's/^#define GPU_ASYNC_VERSION_STRING "\(.*\)"$/\1/p' include/gpu_async/version.hpp)
rm -rf "$out"
mkdir -p "$out"
echo "doc.sh: doxygen $(doxygen --version), gpu_async $version -> $out/html"
GPU_ASYNC_VERSION="$version" GPU_ASYNC_DOC_OUT="$out" doxygen doc/Doxyfile
# The pages a reader starts from are there.
for page in index.html classgpu__async_1_1basic__gpu__completion__port.html \
    classgpu__async_1_1wait__plan.html namespacegpu__async.html version_8hpp.html; do
    test -s "$out/html/$page" || { echo "doc.sh: $page missing" >&2; exit 1; }
done
grep -q "$version" "$out/html/index.html" || { echo "doc.sh: no version on the index" >&2; exit 1; }
echo "doc.sh: ok ($(ls "$out/html" | wc -l) files)"
