// SPDX-License-Identifier: BSL-1.0
// The translation unit that owns the examples' and benchmarks' precompiled header (see
// gpu_async_asio_pch in the top-level CMakeLists.txt); it defines nothing.
