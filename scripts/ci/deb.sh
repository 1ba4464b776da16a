#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# scripts/ci/deb.sh: the Debian package. Builds libgpu-async-reactor-dev with CPack (headers, CMake
# package, compiled library), checks its contents, installs it (apt-get install ./x.deb, as root),
# builds and runs test/consumer against /usr (header-only and compiled), then removes the package
# again so later steps see no installed copy. Without root it stops after the contents check.
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${GPU_ASYNC_DEB_BUILD:-build-ci-deb}"
package=libgpu-async-reactor-dev
version=$(sed -n 's/^#define GPU_ASYNC_VERSION_STRING "\(.*\)"$/\1/p' include/gpu_async/version.hpp)
arch=$(dpkg --print-architecture)
deb="$build/${package}_${version}_${arch}.deb"

rm -rf "$build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
    -DGPU_ASYNC_BUILD_TESTS=OFF -DGPU_ASYNC_BUILD_EXAMPLES=OFF -DGPU_ASYNC_BUILD_BENCHMARKS=OFF
cmake --build "$build" -j2
(cd "$build" && cpack -G DEB)
test -s "$deb" || { echo "deb.sh: $deb was not made" >&2; exit 1; }

dpkg-deb --info "$deb"
contents=$(dpkg-deb --contents "$deb")
for f in ./usr/include/gpu_async/gpu_completion_port.hpp ./usr/include/gpu_async/version.hpp \
    ./usr/include/gpu_async/asio/error.hpp "./usr/lib/$(gcc -print-multiarch)/libgpu_async.a" \
    "./usr/lib/$(gcc -print-multiarch)/cmake/gpu_async/gpu_async-config.cmake" \
    "./usr/lib/$(gcc -print-multiarch)/cmake/gpu_async/gpu_async-config-version.cmake" \
    "./usr/share/doc/$package/copyright"; do
    grep -qF " $f" <<<"$contents" || { echo "deb.sh: $f is not in the package" >&2; exit 1; }
done
[ "$(dpkg-deb --field "$deb" Version)" = "$version" ] || { echo "deb.sh: wrong version" >&2; exit 1; }
# Any Boost from 1.81 on satisfies it, not only Debian 12's.
depends=$(dpkg-deb --field "$deb" Depends)
for alt in "libboost1.81-dev" "libboost1.83-dev" "libboost-dev (>= 1.81)"; do
    grep -qF "$alt" <<<"$depends" || { echo "deb.sh: Depends lacks '$alt': $depends" >&2; exit 1; }
done

if [ "$(id -u)" -ne 0 ]; then
    echo "deb.sh: not root: package built and checked, not installed"
    exit 0
fi
if dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    echo "deb.sh: $package is already installed; remove it first" >&2
    exit 1
fi
remove() { DEBIAN_FRONTEND=noninteractive apt-get remove -y "$package" >/dev/null || true; }
trap remove EXIT
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "./$deb"

for mode in OFF ON; do
    consumer="$build-consumer-$mode"
    rm -rf "$consumer"
    # No prefix given: CMake finds the package under /usr.
    cmake -S test/consumer -B "$consumer" -DCONSUMER_USE_COMPILED=$mode
    grep -q "gpu_async_DIR:PATH=/usr/lib/" "$consumer/CMakeCache.txt" ||
        { echo "deb.sh: the consumer did not find the package under /usr" >&2; exit 1; }
    cmake --build "$consumer" -j2
    "$consumer/consumer"
done

remove
trap - EXIT
if [ -e /usr/include/gpu_async ]; then
    echo "deb.sh: /usr/include/gpu_async is still there after removing the package" >&2
    exit 1
fi
echo "deb.sh: ok ($deb installed, consumer built against /usr, removed)"
