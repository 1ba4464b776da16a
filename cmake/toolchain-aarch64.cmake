# SPDX-License-Identifier: BSL-1.0
# Cross toolchain for aarch64 Linux with Debian's cross compilers (g++-aarch64-linux-gnu).
#   cmake -S test/aarch64 -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64.cmake
# Programs run under qemu-user: qemu-aarch64 -L /usr/aarch64-linux-gnu <program>
# (CMAKE_CROSSCOMPILING_EMULATOR makes ctest do that).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(GPU_ASYNC_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${GPU_ASYNC_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${GPU_ASYNC_CROSS_TRIPLE}-g++)

set(CMAKE_FIND_ROOT_PATH /usr/${GPU_ASYNC_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-L;/usr/${GPU_ASYNC_CROSS_TRIPLE})
