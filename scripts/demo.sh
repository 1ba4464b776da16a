#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# Builds and runs the demo (gpu-async-demo): a TCP server on one io_context awaiting simulated GPU
# work with the completion port, driven by its built-in load generator over loopback for about
# ten seconds. Installs the Debian packages it lacks. Shares build/ with scripts/test.sh. Arguments go to the demo (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
build=${BUILD_DIR:-build}
bash scripts/configure.sh "$build" -DGPU_ASYNC_BUILD_EXAMPLES=ON
cmake --build "$build" -j"$(nproc)" --target gpu-async-demo
exec "$build/example/gpu-async-demo" "$@"
