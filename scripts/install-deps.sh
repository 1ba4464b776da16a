#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# Installs the Debian 12 packages gpu_async needs to build, test and run its demo: the one list
# of what the README's commands (scripts/demo.sh, scripts/test.sh) need on a new machine. CI runs
# the README's test command first, before it installs anything of its own, so a package missing
# here fails CI. Never Debian's default Boost 1.74 (libboost-*-dev): it conflicts with 1.81 and
# removes it.
#
#   scripts/install-deps.sh            install what is missing (apt-get update only then)
#   scripts/install-deps.sh --always   apt-get update and install unconditionally (CI)
#   scripts/install-deps.sh PKG...     also install these packages
#   scripts/install-deps.sh --list     print the list, one a line, and install nothing
set -euo pipefail

always=0
list=0
extra=()
for a in "$@"; do
    case "$a" in
    --always) always=1 ;;
    --list) list=1 ;;
    *) extra+=("$a") ;;
    esac
done

# What each is for, beyond the compiler and Boost 1.81 (headers, Boost.Test, b2, the demo's
# options and JSON, Boost.Context for the yield_context tests):
#   liburing-dev         the io_uring host, its tests and the demo's io-uring executor
#   libasio-dev          the port's tests against standalone Asio
#   libuv1-dev           example_libuv_server (the fd wait under libuv)
#   libvulkan-dev        the Vulkan headers: the build checks the backend's ABI declarations
#   libvulkan1, mesa-vulkan-drivers
#                        the Vulkan loader and lavapipe (Vulkan on the CPU): the Vulkan tests and
#                        the demo's --device vulkan runs need a device
#   curl                 example_demo_http_curl drives the demo's HTTP server (skipped without)
packages=(
    ca-certificates cmake make g++ pkg-config
    libboost1.81-dev libboost-test1.81-dev libboost1.81-tools-dev
    libboost-program-options1.81-dev libboost-json1.81-dev libboost-context1.81-dev
    liburing-dev libasio-dev libuv1-dev
    libvulkan-dev libvulkan1 mesa-vulkan-drivers
    curl
    "${extra[@]}"
)

if [ "$list" = 1 ]; then
    printf '%s\n' "${packages[@]}"
    exit 0
fi

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
