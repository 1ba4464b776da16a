// SPDX-License-Identifier: BSL-1.0
// Awaiting the first of several GPU waits and a timer: make_parallel_group with wait_for_one, and
// the awaitable operator ||, over <gpu_async/gpu_completion_port.hpp> on a manual simulated
// device (nothing completes unless stepped) and a one-thread io_context.
#include <gpu_async/gpu_completion_port.hpp>

#include <gpu_async/asio/error.hpp>
#include <gpu_async/device/sim_device.hpp>

#include "common/io_context_fixture.hpp"
#include "common/manual_device.hpp"

#include "common/asio.hpp"
#include <boost/test/unit_test.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <optional>
#include <variant>

namespace unit_asio_first_of {

using gpu_async::error_code;
using gpu_async::gpu_completion_port;
using gpu_async::sim_device;
using gpu_async::sim_stream;
using gpu_async::test::manual;
using gpu_async::test::run_to_completion;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;

namespace {

// Two streams of a manual device, each with one item queued, a port and a timer.
struct two_copies {
    asio::io_context ctx{1};
    gpu_completion_port port{ctx};
    sim_device dev{manual()};
    gpu_async::sim_stream_handle a_handle = dev.make_stream();
    sim_stream& a = *a_handle;
    gpu_async::sim_stream_handle b_handle = dev.make_stream();
    sim_stream& b = *b_handle;
    gpu_async::memory_descriptor done_a = a.descriptor_for(a.enqueue(gpu_async::dur_ns{}));
    gpu_async::memory_descriptor done_b = b.descriptor_for(b.enqueue(gpu_async::dur_ns{}));
    asio::steady_timer timer{ctx};
};

struct group_result {
    std::array<std::size_t, 3> order{};
    error_code a, b, t;
};

// The group of the two waits and the timer, waiting for one, with `meanwhile` posted; runs the
// context to completion.
std::optional<group_result> run_group(two_copies& f, std::function<void()> meanwhile = {}) {
    std::optional<group_result> out;
    asio::experimental::make_parallel_group(f.port.async_wait(f.done_a, asio::deferred),
                                            f.port.async_wait(f.done_b, asio::deferred),
                                            f.timer.async_wait(asio::deferred))
        .async_wait(
            asio::experimental::wait_for_one(),
            [&out](std::array<std::size_t, 3> order, error_code a, error_code b, error_code t) {
                BOOST_TEST(!out.has_value()); // exactly once
                out = group_result{order, a, b, t};
            });
    if (meanwhile) asio::post(f.ctx, meanwhile);
    run_to_completion(f.ctx);
    return out;
}

// Awaits `race()` (operands joined with ||) in a coroutine on `f.ctx`, with `meanwhile` posted,
// and runs the context to completion: the index of the operand that won.
template <class Race>
std::optional<std::size_t> first_of(two_copies& f, Race race,
                                    std::function<void()> meanwhile = {}) {
    std::optional<std::size_t> winner;
    asio::co_spawn(
        f.ctx,
        [&]() -> asio::awaitable<void> {
            const auto first = co_await race();
            winner = first.index();
        },
        asio::detached);
    if (meanwhile) asio::post(f.ctx, meanwhile);
    run_to_completion(f.ctx);
    return winner;
}

} // namespace

BOOST_AUTO_TEST_SUITE(first_of_suite)

BOOST_AUTO_TEST_CASE(group_the_second_copy_finishes_first) {
    two_copies f;
    f.timer.expires_after(1h);
    const auto r = run_group(f, [&f] { f.dev.step(f.b); });
    BOOST_TEST_REQUIRE(r.has_value());
    BOOST_TEST(r->order[0] == 1u);
    BOOST_TEST(!r->b);
    BOOST_TEST((r->a == asio::error::operation_aborted));
    BOOST_TEST((r->t == asio::error::operation_aborted));
    BOOST_TEST(f.port.cancel() == 0u); // the loser's wait is gone
    BOOST_TEST(!f.done_a.is_complete());
}

BOOST_AUTO_TEST_CASE(group_the_timer_ends_both_waits) {
    two_copies f;
    f.timer.expires_after(1ms);
    const auto r = run_group(f);
    BOOST_TEST_REQUIRE(r.has_value());
    BOOST_TEST(r->order[0] == 2u);
    BOOST_TEST(!r->t);
    BOOST_TEST((r->a == asio::error::operation_aborted));
    BOOST_TEST((r->b == asio::error::operation_aborted));
    BOOST_TEST(f.port.cancel() == 0u);
    // The work itself is not undone: stepping it later completes the descriptors.
    f.dev.step_all();
    BOOST_TEST(f.done_a.is_complete());
    BOOST_TEST(f.done_b.is_complete());
}

BOOST_AUTO_TEST_CASE(group_both_already_complete_the_first_listed_wins) {
    two_copies f;
    f.dev.step_all(); // both stored before the group starts: each completes through post
    f.timer.expires_after(1h);
    const auto r = run_group(f);
    BOOST_TEST_REQUIRE(r.has_value());
    BOOST_TEST(r->order[0] != 2u);
    BOOST_TEST((r->t == asio::error::operation_aborted));
    BOOST_TEST(f.port.cancel() == 0u);
}

BOOST_AUTO_TEST_CASE(operators_the_first_copy_wins_and_the_others_are_cancelled) {
    two_copies f;
    f.timer.expires_after(1h);
    const auto winner = first_of(
        f,
        [&f] {
            return f.port.async_wait(f.done_a, asio::use_awaitable) ||
                   f.port.async_wait(f.done_b, asio::use_awaitable) ||
                   f.timer.async_wait(asio::use_awaitable);
        },
        [&f] { f.dev.step(f.a); });
    BOOST_TEST_REQUIRE(winner.has_value());
    BOOST_TEST(*winner == 0u);
    BOOST_TEST(f.port.cancel() == 0u);
}

BOOST_AUTO_TEST_CASE(operators_a_deadline) {
    two_copies f;
    f.timer.expires_after(1ms);
    const auto winner = first_of(f, [&f] {
        return f.port.async_wait(f.done_a, asio::use_awaitable) ||
               f.timer.async_wait(asio::use_awaitable);
    });
    BOOST_TEST_REQUIRE(winner.has_value());
    BOOST_TEST(*winner == 1u);
    BOOST_TEST(f.port.cancel() == 0u);
}

// || waits for the first success: a copy whose device work faults (the plan-driven wait reports
// it) does not end the race; the other copy wins.
BOOST_AUTO_TEST_CASE(operators_a_faulted_copy_does_not_win) {
    two_copies f;
    f.a.enqueue_fault();
    f.timer.expires_after(1h);
    const auto winner = first_of(
        f,
        [&f] {
            return f.port.async_wait(f.a, gpu_async::wait_plan::recommended(), "copy",
                                     asio::use_awaitable) ||
                   f.port.async_wait(f.done_b, asio::use_awaitable) ||
                   f.timer.async_wait(asio::use_awaitable);
        },
        [&f] { f.dev.step_all(); }); // a: its item, then the fault; b: its item
    BOOST_TEST_REQUIRE(winner.has_value());
    BOOST_TEST(*winner == 1u);
    BOOST_TEST((f.a.error() == gpu_async::errc::device_fault));
    BOOST_TEST(f.port.cancel() == 0u);
}

// With every operation failing, || throws multiple_exceptions; the first is the device fault,
// as its code.
BOOST_AUTO_TEST_CASE(operators_every_copy_fails_the_fault_is_thrown) {
    two_copies f;
    f.a.enqueue_fault();
    std::optional<error_code> thrown;
    asio::co_spawn(
        f.ctx,
        [&]() -> asio::awaitable<void> {
            try {
                co_await (f.port.async_wait(f.a, gpu_async::wait_plan::recommended(), "copy",
                                            asio::use_awaitable) ||
                          f.port.async_wait(f.a, gpu_async::wait_plan::poll().value(), "copy",
                                            asio::use_awaitable));
            } catch (const asio::multiple_exceptions& all) {
                try {
                    std::rethrow_exception(all.first_exception());
                } catch (const gpu_async::system_error& e) {
                    thrown = e.code();
                }
            }
        },
        asio::detached);
    asio::post(f.ctx, [&] { f.dev.step_all(); });
    run_to_completion(f.ctx);
    BOOST_TEST_REQUIRE(thrown.has_value());
    BOOST_TEST((*thrown == gpu_async::errc::device_fault));
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_asio_first_of
