// SPDX-License-Identifier: BSL-1.0
// What the standalone Asio flavour adds to the port's tests: handlers receive std::error_code,
// the registry's category is native in it, and the Asio layer lives in its own inline namespace.
#include <gpu_async/gpu_completion_port.hpp>

#include "common/asio.hpp"
#include "common/io_context_fixture.hpp"

#include <gpu_async/device/sim_device.hpp>

#include <boost/test/unit_test.hpp>

#include <optional>
#include <string>
#include <system_error>
#include <type_traits>

#if !defined(GPU_ASYNC_STANDALONE_ASIO)
#error "this file tests the standalone Asio flavour"
#endif

namespace unit_asio_standalone_asio {

BOOST_AUTO_TEST_SUITE(standalone_asio_suite)

static_assert(std::is_same_v<gpu_async::error_code, std::error_code>);
static_assert(std::is_same_v<gpu_async::system_error, std::system_error>);
// The Asio layer is declared in the flavour's inline namespace: a Boost-flavour translation unit
// names other entities, so the two never share a definition.
static_assert(
    std::is_same_v<gpu_async::gpu_completion_port,
                   gpu_async::standalone_asio::basic_gpu_completion_port<::asio::any_io_executor>>);

BOOST_AUTO_TEST_CASE(a_device_fault_reaches_the_handler_as_a_native_standard_code) {
    ::asio::io_context ctx;
    gpu_async::gpu_completion_port port(ctx.get_executor());
    gpu_async::sim_device::options manual;
    manual.manual = true;
    gpu_async::sim_device dev(manual);
    auto stream = dev.make_stream();
    stream->enqueue_fault();
    const auto plan = gpu_async::wait_plan::parse("flag:park_us=100,backstop_us=1000");
    BOOST_TEST_REQUIRE(plan.has_value());
    std::optional<std::error_code> got;
    port.async_wait(*stream, plan.value(), "fault",
                    [&](std::error_code ec, gpu_async::wait_report) { got = ec; });
    ::asio::post(ctx, [&] { dev.step_all(); });
    BOOST_TEST(gpu_async::test::run_to_completion(ctx) > 0u);
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(&got->category() == &gpu_async::gpu_async_category());
    BOOST_TEST(got->value() == static_cast<int>(gpu_async::errc::device_fault));
    BOOST_TEST((*got == gpu_async::errc::device_fault));
    BOOST_TEST(std::string(got->category().name()) == "gpu_async");
}

BOOST_AUTO_TEST_CASE(a_cancelled_wait_ends_with_asio_operation_aborted) {
    ::asio::io_context ctx;
    gpu_async::gpu_completion_port port(ctx.get_executor());
    gpu_async::completion_line line{};
    const auto desc = gpu_async::memory_descriptor(line, *gpu_async::slot_id::at(0), 1);
    std::optional<std::error_code> got;
    port.async_wait(desc, [&](std::error_code ec) { got = ec; });
    port.cancel();
    BOOST_TEST(gpu_async::test::run_to_completion(ctx) > 0u);
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST((*got == ::asio::error::operation_aborted));
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_asio_standalone_asio
