// SPDX-License-Identifier: BSL-1.0
//
// test/common/io_context_fixture.hpp: run an io_context for a bounded time and assert that it ran
// out of work (every pending operation completed) within that bound.
//
#ifndef GPU_ASYNC_TEST_COMMON_IO_CONTEXT_FIXTURE_HPP
#define GPU_ASYNC_TEST_COMMON_IO_CONTEXT_FIXTURE_HPP

#include "common/asio.hpp"
#include "common/run_bound.hpp"
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstddef>

namespace gpu_async::test {

/// Runs `ctx` for at most `bound`; asserts that it stopped because it ran out of work.
/// Returns the number of handlers run.
inline std::size_t run_to_completion(asio::io_context& ctx,
                                     std::chrono::nanoseconds bound = run_bound) {
    const std::size_t n = ctx.run_for(bound);
    BOOST_TEST_REQUIRE(ctx.stopped(), "the io_context did not run out of work within the bound");
    return n;
}

/// A fixture owning an io_context.
struct io_context_fixture {
    asio::io_context ctx;

    std::size_t run(std::chrono::nanoseconds bound = run_bound) {
        return run_to_completion(ctx, bound);
    }
};

} // namespace gpu_async::test

#endif // GPU_ASYNC_TEST_COMMON_IO_CONTEXT_FIXTURE_HPP
