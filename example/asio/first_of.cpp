// SPDX-License-Identifier: BSL-1.0
// Await the first of several: two GPU waits (two simulated streams) and a timer. Whichever
// completes first wins; the others are cancelled (per-operation cancellation) and complete with
// operation_aborted. Twice: with make_parallel_group(...).async_wait(wait_for_one(), ...), and
// with the awaitable operator ||. Then a deadline: the timer wins over work that takes too long.
//
// The context runs on one thread (the cancellation of the losers is emitted on it).
#include <gpu_async/asio/error.hpp>
#include <gpu_async/device/sim_device.hpp>
#include <gpu_async/gpu_completion_port.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <variant>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

const char* const names[] = {"copy A", "copy B", "timer"};

const char* text(const boost::system::error_code& ec) {
    return ec ? (ec == asio::error::operation_aborted ? "cancelled" : "failed") : "done";
}

// The same step launched on two streams; the first copy to finish is the one used.
//! [first-of-group]
void first_of_group(gpu_async::gpu_completion_port& port, gpu_async::sim_stream& a,
                    gpu_async::sim_stream& b, asio::steady_timer& timer, std::size_t& winner) {
    const auto done_a = a.descriptor_for(a.enqueue(std::chrono::milliseconds(2000)));
    const auto done_b = b.descriptor_for(b.enqueue(std::chrono::milliseconds(2)));
    timer.expires_after(10s);
    asio::experimental::make_parallel_group(port.async_wait(done_a, asio::deferred),
                                            port.async_wait(done_b, asio::deferred),
                                            timer.async_wait(asio::deferred))
        .async_wait(asio::experimental::wait_for_one(),
                    [&winner](std::array<std::size_t, 3> order, boost::system::error_code ec_a,
                              boost::system::error_code ec_b, boost::system::error_code ec_t) {
                        winner = order[0]; // the others were cancelled
                        std::printf("group: %s first (A %s, B %s, timer %s)\n", names[order[0]],
                                    text(ec_a), text(ec_b), text(ec_t));
                    });
}
//! [first-of-group]

//! [first-of-operators]
asio::awaitable<std::size_t> first_of_operators(gpu_async::gpu_completion_port& port,
                                                gpu_async::sim_stream& a, gpu_async::sim_stream& b,
                                                std::chrono::milliseconds deadline) {
    using namespace asio::experimental::awaitable_operators;
    const auto done_a = a.descriptor_for(a.enqueue(std::chrono::milliseconds(2000)));
    const auto done_b = b.descriptor_for(b.enqueue(std::chrono::milliseconds(3)));
    asio::steady_timer timer(co_await asio::this_coro::executor, deadline);
    // The first to succeed wins; the others are cancelled and awaited.
    const std::variant<std::monostate, std::monostate, std::monostate> first = co_await (
        port.async_wait(done_a, asio::use_awaitable) ||
        port.async_wait(done_b, asio::use_awaitable) || timer.async_wait(asio::use_awaitable));
    co_return first.index();
}
//! [first-of-operators]

} // namespace

int main() {
    asio::io_context ctx(1);
    gpu_async::gpu_completion_port port(ctx);
    gpu_async::sim_device device;
    auto a = device.make_stream(); // owns the stream: dropping it gives it back
    auto b = device.make_stream(); // owns the stream: dropping it gives it back
    a->set_doorbell(port.shared_bell());
    b->set_doorbell(port.shared_bell());
    asio::steady_timer timer(ctx);

    std::size_t group_winner = 99;
    first_of_group(port, *a, *b, timer, group_winner);

    std::size_t operators_winner = 99, deadline_winner = 99;
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
            operators_winner = co_await first_of_operators(port, *a, *b, 10s);
            std::printf("operator ||: %s first\n", names[operators_winner]);
            // A deadline: both copies take 2 s at least (queued behind the work above), the
            // timer 5 ms.
            deadline_winner = co_await first_of_operators(port, *a, *a, 5ms);
            std::printf("operator || with a 5 ms deadline: %s first\n", names[deadline_winner]);
        },
        asio::detached);

    ctx.run_for(30s);
    const bool ok = ctx.stopped() && group_winner == 1 && operators_winner == 1 &&
                    deadline_winner == 2 && port.cancel() == 0;
    std::printf("%s\n", ok ? "ok" : "unexpected order");
    return ok ? 0 : 1;
}
