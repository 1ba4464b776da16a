// SPDX-License-Identifier: BSL-1.0
//
// test/common/run_fill_bounded.hpp: run_fill() under a watchdog, so a hang fails the test
// instead of hanging it.
//
#ifndef GPU_ASYNC_TEST_COMMON_RUN_FILL_BOUNDED_HPP
#define GPU_ASYNC_TEST_COMMON_RUN_FILL_BOUNDED_HPP

#include <gpu_async/run_fill.hpp>

#include "common/io_context_fixture.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace gpu_async::test {

/// Runs run_fill(ctx) with a watchdog: if it has not returned within `bound`, the watchdog
/// stops the context and the test fails. Returns run_fill's count.
inline std::size_t run_fill_bounded(asio::io_context& ctx, gpu_async::fill_options opt = {},
                                    std::chrono::nanoseconds bound = gpu_async::test::run_bound) {
    std::mutex m;
    std::condition_variable cv;
    bool finished = false, fired = false;
    std::thread watchdog([&] {
        std::unique_lock lk(m);
        if (!cv.wait_for(lk, bound, [&] { return finished; })) {
            fired = true;
            ctx.stop();
        }
    });
    std::size_t n = 0;
    try {
        n = gpu_async::run_fill(ctx, opt);
    } catch (...) {
        {
            std::lock_guard lk(m);
            finished = true;
        }
        cv.notify_all();
        watchdog.join();
        throw;
    }
    {
        std::lock_guard lk(m);
        finished = true;
    }
    cv.notify_all();
    watchdog.join();
    BOOST_TEST_REQUIRE(!fired, "run_fill did not return within the bound");
    return n;
}

} // namespace gpu_async::test

#endif // GPU_ASYNC_TEST_COMMON_RUN_FILL_BOUNDED_HPP
