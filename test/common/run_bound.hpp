// SPDX-License-Identifier: BSL-1.0
//
// test/common/run_bound.hpp: the one bound of every test wait for something that must happen.
//
#ifndef GPU_ASYNC_TEST_COMMON_RUN_BOUND_HPP
#define GPU_ASYNC_TEST_COMMON_RUN_BOUND_HPP

#include <chrono>

namespace gpu_async::test {

/// The bound every test run gets: generous (sanitizers, a loaded 2-core machine); a test that
/// needs it has hung.
inline constexpr std::chrono::seconds run_bound{30};

} // namespace gpu_async::test

#endif // GPU_ASYNC_TEST_COMMON_RUN_BOUND_HPP
