#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# Installs the Debian 12 packages gpu_async needs to build, test and run its demo.
# Never Debian's default Boost 1.74 (libboost-*-dev): it conflicts with 1.81 and removes it.
#
#   scripts/install-deps.sh            install what is missing (apt-get update only then)
#   scripts/install-deps.sh --always   apt-get update and install unconditionally (CI)
#   scripts/install-deps.sh PKG...     also install these packages
set -euo pipefail

always=0
extra=()
for a in "$@"; do
    if [ "$a" = "--always" ]; then always=1; else extra+=("$a"); fi
done

packages=(
    ca-certificates cmake make g++ pkg-config
    libboost1.81-dev libboost-test1.81-dev libboost1.81-tools-dev
    libboost-program-options1.81-dev libboost-json1.81-dev libboost-context1.81-dev
    liburing-dev libasio-dev
    "${extra[@]}"
)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ "$always" = 1 ] || [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "install-deps: missing packages: ${missing[*]}; run as root (or with sudo)" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends "${packages[@]}"
fi
