// SPDX-License-Identifier: BSL-1.0
// Tests of <gpu_async/asio/basic_gpu_completion_port.hpp> alone: a descriptor wait compiles and
// runs without the plan-driven wait's machinery, which the header must not pull in.
#include <gpu_async/asio/basic_gpu_completion_port.hpp>

// The point of the light header: none of the plan machinery came with it. (The estimator and
// wait plans do: the reactor's per-slot rhythm is built on them.)
#if defined(GPU_ASYNC_PLAN_WAIT_HPP) || defined(GPU_ASYNC_DETAIL_PLAN_WAIT_OP_HPP) ||              \
    defined(GPU_ASYNC_CORE_WAIT_MACHINE_HPP) || defined(GPU_ASYNC_CORE_WAIT_BANDS_HPP) ||          \
    defined(GPU_ASYNC_CORE_PARK_FALLBACK_HPP)
#error "<gpu_async/asio/basic_gpu_completion_port.hpp> includes the plan-driven wait's headers"
#endif

#include "common/io_context_fixture.hpp"
#include "common/slots.hpp"

#include "common/asio.hpp"
#include <boost/test/unit_test.hpp>

#include <cstddef>
#include <memory>
#include <thread>
#include <type_traits>
#include <utility>

using gpu_async::completion_line;
using gpu_async::error_code;
using gpu_async::gpu_completion_port;
using gpu_async::memory_descriptor;
using gpu_async::test::run_to_completion;
using gpu_async::test::slot;

namespace gpu_async::test {
// basic_gpu_completion_port_feed.cpp, which sees the plan machinery.
std::size_t feed_point_table(gpu_completion_port& port, asio::io_context& ctx);
} // namespace gpu_async::test

BOOST_AUTO_TEST_SUITE(basic_gpu_completion_port_tests)

BOOST_AUTO_TEST_CASE(descriptor_wait_with_the_light_header_only) {
    static_assert(std::is_same_v<gpu_completion_port,
                                 gpu_async::basic_gpu_completion_port<asio::any_io_executor>>);
    static_assert(std::is_nothrow_move_constructible_v<gpu_completion_port>);

    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line;
    error_code got = asio::error::would_block;
    port.async_wait(memory_descriptor(line, slot(2), 5), [&](error_code ec) { got = ec; });
    BOOST_TEST(port.pending() == 1u);
    std::thread producer([&] {
        line.words[2].store(5, std::memory_order_release);
        port.bell().ring(); // a host producer rings after its store
    });
    run_to_completion(ctx);
    producer.join();
    BOOST_TEST(!got);
    BOOST_TEST(port.shared_bell().get() == &port.bell());
}

BOOST_AUTO_TEST_CASE(cancel_move_and_destroy_with_the_light_header_only) {
    asio::io_context ctx;
    completion_line line;
    error_code first = asio::error::would_block;
    error_code second = asio::error::would_block;
    {
        gpu_completion_port a(ctx);
        a.async_wait(memory_descriptor(line, slot(0), 1), [&](error_code ec) { first = ec; });
        BOOST_TEST(a.cancel() == 1u);
        a.async_wait(memory_descriptor(line, slot(0), 1), [&](error_code ec) { second = ec; });
        gpu_completion_port b(std::move(a));
        BOOST_TEST(b.pending() == 1u);
    } // ~b cancels the moved wait
    run_to_completion(ctx);
    BOOST_TEST(first == asio::error::operation_aborted);
    BOOST_TEST(second == asio::error::operation_aborted);
}

BOOST_AUTO_TEST_CASE(destroys_a_port_whose_point_table_exists) {
    // The table is created where the plan machinery is seen; this file cannot name its type, yet
    // destroys the port (and with it the table) here.
    asio::io_context ctx;
    auto port = std::make_unique<gpu_completion_port>(ctx);
    BOOST_TEST(gpu_async::test::feed_point_table(*port, ctx) == 1u);
    gpu_completion_port moved(std::move(*port));
    port.reset();
    completion_line line;
    line.words[1].store(3, std::memory_order_release);
    error_code got = asio::error::would_block;
    moved.async_wait(memory_descriptor(line, slot(1), 3), [&](error_code ec) { got = ec; });
    ctx.restart();
    run_to_completion(ctx);
    BOOST_TEST(!got);
}

BOOST_AUTO_TEST_SUITE_END()
