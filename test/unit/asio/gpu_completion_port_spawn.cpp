// SPDX-License-Identifier: BSL-1.0
// Tests of <gpu_async/gpu_completion_port.hpp> with the yield_context token (asio::spawn), built
// where Boost.Context is installed.
#include <gpu_async/gpu_completion_port.hpp>

#include "common/io_context_fixture.hpp"

#include <boost/test/unit_test.hpp>

#if defined(GPU_ASYNC_TEST_HAVE_BOOST_CONTEXT)

#include <boost/asio/io_context.hpp>
#include <boost/asio/spawn.hpp>

#include <thread>

namespace unit_asio_gpu_completion_port_spawn {

namespace asio = boost::asio;
using boost::system::error_code;

BOOST_AUTO_TEST_SUITE(gpu_completion_port_spawn_tests)

BOOST_AUTO_TEST_CASE(yield_context) {
    asio::io_context ctx;
    gpu_async::gpu_completion_port port(ctx);
    gpu_async::completion_line line;
    const auto s0 = *gpu_async::slot_id::at(0);
    bool done = false;
    std::size_t cancelled = 0;
    asio::spawn(
        ctx,
        [&](asio::yield_context yield) {
            port.async_wait(gpu_async::memory_descriptor(line, s0, 1), yield); // throws on error
            // Runs once this coroutine is suspended in the next wait.
            asio::post(ctx, [&] { cancelled = port.cancel(); });
            error_code ec;
            port.async_wait(gpu_async::memory_descriptor(line, s0, 2), yield[ec]);
            BOOST_TEST(ec == asio::error::operation_aborted);
            done = true;
        },
        [](std::exception_ptr e) {
            if (e) std::rethrow_exception(e);
        });
    std::thread producer([&] {
        line.words[0].store(1, std::memory_order_release);
        port.bell().ring();
    });
    gpu_async::test::run_to_completion(ctx);
    producer.join();
    BOOST_TEST(done);
    BOOST_TEST(cancelled == 1u);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_asio_gpu_completion_port_spawn

#endif
