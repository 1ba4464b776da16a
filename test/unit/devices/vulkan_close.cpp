// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/asio/vulkan_close.hpp>
#include <gpu_async/device/vulkan.hpp>

#include <gpu_async/asio/error.hpp>
#include <gpu_async/gpu_completion_port.hpp>

#include "common/fake_vulkan_driver.hpp"
#include "common/io_context_fixture.hpp"
#include "common/slots.hpp"
#include "common/vulkan_work.hpp"

#include "common/asio.hpp"
#include <boost/test/unit_test.hpp>

#include <cstddef>
#include <future>
#include <memory>
#include <optional>
#include <thread>

namespace unit_devices_vulkan_close {

// Closing a Vulkan line without blocking: the line's destructor, vulkan_line::start_close() and
// gpu_async::async_close hand the line to its device, which frees it once its stores landed.
// Against the fake driver (test/common/fake_vulkan_driver.hpp), where the test decides when a
// store lands, and on a real driver (lavapipe on CI), where the event loop runs meanwhile.

using namespace gpu_async;
using namespace gpu_async::test::vulkan_fake;
using gpu_async::test::run_to_completion;
using gpu_async::test::slot;

namespace {

/// Records a store on `s` into a caller's command buffer that has not run yet.
vulkan::command_buffer_t record_pending(fake_vulkan& state, vulkan_line& line, slot_id s) {
    const vulkan::command_buffer_t cb = state.caller_command_buffer();
    auto d = line.record_store(s, cb);
    BOOST_TEST_REQUIRE(d.has_value());
    BOOST_TEST_REQUIRE(!d.value().is_complete());
    return cb;
}

} // namespace

BOOST_AUTO_TEST_SUITE(vulkan_close_faults)

// Dropping a line whose store has not landed returns at once: the device holds the line (its
// memory alive, nothing waited for) and frees it at the first settle after the store landed.
BOOST_FIXTURE_TEST_CASE(dropping_a_line_hands_it_to_the_device, fixture) {
    rig r(*this);
    const vulkan::command_buffer_t cb = record_pending(state, *r.line, slot(3));
    state.calls.clear();
    r.line.reset(); // the store never landed: a blocking close would wait its settle timeout
    BOOST_TEST(state.count_calls("vkWaitSemaphores") == 0u);
    BOOST_TEST(state.count_calls("vkQueueWaitIdle") == 0u);
    BOOST_TEST(r.device->open_lines() == 0u);
    BOOST_TEST(r.device->closing_lines() == 1u);
    BOOST_TEST(state.count("VkDeviceMemory") == 1u);
    BOOST_TEST(r.device->settle_closed_lines() == 1u); // still not landed
    state.run(cb);
    BOOST_TEST(r.device->settle_closed_lines() == 0u);
    BOOST_TEST(r.device->kept_lines() == 1u); // recorded: kept for the caller's command buffer
    r.device->release_closed_lines();
    BOOST_TEST(state.count("VkDeviceMemory") == 0u);
    r.device.reset();
    BOOST_TEST(state.live.empty());
}

// A line whose batch was submitted behind the caller's semaphore, dropped before the batch
// ran: freed once the batch signalled, without draining the queue; its semaphore and command
// pool go to the device's next line.
BOOST_FIXTURE_TEST_CASE(a_dropped_awaiting_line_gives_its_batch_objects_to_the_next, fixture) {
    rig r(*this);
    const vulkan::semaphore_t sem = state.caller_semaphore();
    BOOST_TEST_REQUIRE(r.line->await_semaphore(slot(1), sem, 1).has_value());
    const std::size_t semaphores = state.count("VkSemaphore");
    state.calls.clear();
    r.line.reset();
    BOOST_TEST(r.device->closing_lines() == 1u);
    state.signal(sem, 1);
    BOOST_TEST(r.device->settle_closed_lines() == 0u);
    BOOST_TEST(state.count_calls("vkQueueWaitIdle") == 0u);
    BOOST_TEST(state.count("VkDeviceMemory") == 0u); // not recorded: freed, not kept
    BOOST_TEST(state.count("VkSemaphore") == semaphores);
    auto next = vulkan_line::create(*r.device);
    BOOST_TEST_REQUIRE(next.has_value());
    BOOST_TEST(state.count("VkSemaphore") == semaphores); // the first line's, again
    BOOST_TEST(next.value().submitted() == 1u);
    auto d = next.value().await_semaphore(slot(1), sem, 2);
    BOOST_TEST_REQUIRE(d.has_value());
    state.signal(sem, 2);
    BOOST_TEST(d.value().is_complete());
    BOOST_TEST(!next.value().close().has_value());
    r.device.reset();
    BOOST_TEST(state.live.empty());
}

// async_close with a callback: never invoked inline, not before the store landed (the io_context
// runs its other handlers meanwhile), then with success; the line was taken over at the call.
BOOST_FIXTURE_TEST_CASE(async_close_completes_once_the_store_landed, fixture) {
    rig r(*this);
    const vulkan::command_buffer_t cb = record_pending(state, *r.line, slot(0));
    asio::io_context ctx;
    std::optional<gpu_async::error_code> got;
    gpu_async::async_close(*r.line, ctx, [&](gpu_async::error_code ec) { got = ec; });
    BOOST_TEST(!r.line->is_open());
    BOOST_TEST(!got.has_value()); // never from within the call
    bool ran_meanwhile = false;
    asio::post(ctx, [&] {
        ran_meanwhile = !got.has_value();
        state.run(cb); // the store lands while the close is pending
    });
    run_to_completion(ctx);
    BOOST_TEST(ran_meanwhile);
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(!*got);
    BOOST_TEST(r.device->closing_lines() == 0u);
    BOOST_TEST(r.device->kept_lines() == 1u);
}

// A line settled at once still completes through the executor; a closed line completes too.
BOOST_FIXTURE_TEST_CASE(async_close_of_a_settled_or_closed_line_is_posted, fixture) {
    rig r(*this);
    asio::io_context ctx;
    int ends = 0;
    gpu_async::async_close(*r.line, ctx.get_executor(), [&](gpu_async::error_code ec) {
        BOOST_TEST(!ec);
        ++ends;
    });
    gpu_async::async_close(*r.line, ctx, [&](gpu_async::error_code ec) { // moved from by then
        BOOST_TEST(!ec);
        ++ends;
    });
    BOOST_TEST(ends == 0);
    run_to_completion(ctx);
    BOOST_TEST(ends == 2);
    BOOST_TEST(state.count("VkDeviceMemory") == 0u);
}

// Terminal cancellation ends the wait with operation_aborted; the device goes on settling the
// line and frees it once the store landed.
BOOST_FIXTURE_TEST_CASE(a_cancelled_async_close_leaves_the_line_to_the_device, fixture) {
    rig r(*this);
    const vulkan::command_buffer_t cb = record_pending(state, *r.line, slot(2));
    asio::io_context ctx;
    asio::cancellation_signal signal;
    std::optional<gpu_async::error_code> got;
    gpu_async::async_close(
        *r.line, ctx,
        asio::bind_cancellation_slot(signal.slot(), [&](gpu_async::error_code ec) { got = ec; }));
    asio::post(ctx, [&] { signal.emit(asio::cancellation_type::terminal); });
    run_to_completion(ctx);
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(*got == asio::error::operation_aborted);
    BOOST_TEST(r.device->closing_lines() == 1u);
    state.run(cb);
    BOOST_TEST(r.device->settle_closed_lines() == 0u);
    BOOST_TEST(r.device->kept_lines() == 1u);
}

// A store that never lands: past the settle timeout the line leaks, and async_close says why.
BOOST_FIXTURE_TEST_CASE(async_close_reports_a_leak_past_the_settle_timeout, fixture) {
    vulkan_line_options options;
    options.settle_timeout = dur_ns::from_ms(20);
    rig r(*this, options);
    static_cast<void>(record_pending(state, *r.line, slot(4)));
    asio::io_context ctx;
    std::optional<gpu_async::error_code> got;
    gpu_async::async_close(*r.line, ctx, [&](gpu_async::error_code ec) { got = ec; });
    run_to_completion(ctx);
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(*got == errc::backend);
    BOOST_TEST(r.device->closing_lines() == 0u);
    BOOST_TEST(state.count("VkDeviceMemory") == 1u); // leaked, never freed
}

// The other tokens: use_future (a thread runs the context), use_awaitable, and deferred, which
// takes the line at the call and closes it when launched, or as a dropped line when not.
BOOST_FIXTURE_TEST_CASE(async_close_takes_any_token, fixture) {
    rig r(*this);
    auto second = vulkan_line::create(*r.device);
    auto third = vulkan_line::create(*r.device);
    auto fourth = vulkan_line::create(*r.device);
    BOOST_TEST_REQUIRE((second.has_value() && third.has_value() && fourth.has_value()));
    asio::io_context ctx;
    std::future<void> f = gpu_async::async_close(*r.line, ctx, asio::use_future);
    bool awaited = false;
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
            co_await gpu_async::async_close(second.value(), co_await asio::this_coro::executor,
                                            asio::use_awaitable);
            awaited = true;
        },
        asio::detached);
    auto op = gpu_async::async_close(third.value(), ctx, asio::deferred);
    BOOST_TEST(!third.value().is_open());
    bool launched = false;
    std::move(op)([&](gpu_async::error_code ec) { launched = !ec; });
    {
        auto dropped = gpu_async::async_close(fourth.value(), ctx, asio::deferred);
    } // never launched: closed as a dropped line
    std::thread runner([&] { ctx.run_for(gpu_async::test::run_bound); });
    BOOST_TEST((f.wait_for(gpu_async::test::run_bound) == std::future_status::ready));
    runner.join();
    BOOST_TEST(ctx.stopped());
    f.get();
    BOOST_TEST(awaited);
    BOOST_TEST(launched);
    BOOST_TEST(r.device->open_lines() == 0u);
    BOOST_TEST(state.count("VkDeviceMemory") == 0u);
}

// The device's end settles the lines it still holds, waiting for their stores.
BOOST_FIXTURE_TEST_CASE(the_device_settles_what_it_holds_at_its_end, fixture) {
    rig r(*this);
    const vulkan::command_buffer_t cb = record_pending(state, *r.line, slot(5));
    auto closing = r.line->start_close();
    BOOST_TEST_REQUIRE(closing != nullptr);
    BOOST_TEST(!closing->done());
    state.run(cb); // the caller's command buffer runs; nobody settles until the device goes
    r.device.reset();
    BOOST_TEST(closing->done());
    BOOST_TEST(!closing->error().has_value());
    BOOST_TEST(state.live.empty());
}

BOOST_AUTO_TEST_SUITE_END()

// --- a real device -----------------------------------------------------------------------------

BOOST_AUTO_TEST_SUITE(vulkan_close_suite,
                      *boost::unit_test::precondition(gpu_async::test::vulkan_device_here))

// The close of a line whose store waits behind a gate: the io_context thread runs a handler
// while the close is pending (a blocking close would hold it until the store landed), and that
// handler opens the gate.
BOOST_AUTO_TEST_CASE(async_close_leaves_the_event_loop_running) {
    auto device = gpu_async::test::make_vulkan_device();
    gpu_async::test::spin_work work(*device);
    BOOST_TEST_REQUIRE(work.ok(), work.error());
    auto made = vulkan_line::create(*device);
    BOOST_TEST_REQUIRE(made.has_value());
    vulkan_line line = std::move(made).value();
    auto cb = work.begin();
    work.spin(cb, 1000);
    BOOST_TEST_REQUIRE(line.record_store(slot(0), cb).has_value());
    work.submit_gated(cb);
    asio::io_context ctx;
    std::optional<gpu_async::error_code> got;
    gpu_async::async_close(line, ctx, [&](gpu_async::error_code ec) { got = ec; });
    bool ran_meanwhile = false;
    asio::post(ctx, [&] {
        ran_meanwhile = !got.has_value();
        work.open();
    });
    run_to_completion(ctx);
    BOOST_TEST(ran_meanwhile);
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(!*got);
    BOOST_TEST(work.runs() == 1u);
    BOOST_TEST(device->kept_lines() == 1u);
    BOOST_TEST(work.wait_idle());
    device->release_closed_lines();
    BOOST_TEST(device->kept_lines() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_devices_vulkan_close
