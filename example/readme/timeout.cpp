// SPDX-License-Identifier: BSL-1.0
// The README's "Timeouts and cancellation": awaiting simulated device work with a deadline (the
// awaitable operator ||, Boost 1.81's experimental awaitable operators), and cancelling a wait
// from elsewhere (a cancellation signal bound to the wait). Written for every Asio the library
// supports: no as_tuple, which Asio 1.22 (Debian 12's standalone libasio-dev) has only in
// asio::experimental.
#include <gpu_async/device/sim_device.hpp>
#include <gpu_async/gpu_completion_port.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>

namespace asio = boost::asio;
using namespace std::chrono_literals;
//! [timeout]
using namespace asio::experimental::awaitable_operators; // operator ||

// Launches `work` on the stream and awaits it for at most `deadline`: true when the work was
// done in time. The loser of || is cancelled; a timed-out wait ends, the device work does not.
asio::awaitable<bool> with_timeout(gpu_async::gpu_completion_port& port,
                                   gpu_async::sim_stream& stream, std::chrono::microseconds work,
                                   std::chrono::milliseconds deadline) {
    const auto done = stream.descriptor_for(stream.enqueue(work));
    asio::steady_timer timer(co_await asio::this_coro::executor, deadline);
    const auto first = co_await (port.async_wait(done, asio::use_awaitable) ||
                                 timer.async_wait(asio::use_awaitable));
    co_return first.index() == 0;
}

// Launches long work and awaits it until `signal` is emitted: true when the wait was cancelled
// (it ends with operation_aborted; redirect_error gives the code instead of an exception).
asio::awaitable<bool> until_cancelled(gpu_async::gpu_completion_port& port,
                                      gpu_async::sim_stream& stream,
                                      asio::cancellation_signal& signal) {
    const auto done = stream.descriptor_for(stream.enqueue(10s));
    gpu_async::error_code ec; // boost::system::error_code (std::error_code: standalone Asio)
    co_await port.async_wait(
        done,
        asio::bind_cancellation_slot(signal.slot(), asio::redirect_error(asio::use_awaitable, ec)));
    co_return ec == asio::error::operation_aborted;
}
//! [timeout]

int main() {
    asio::io_context ctx;
    gpu_async::sim_device device;             // before the port (see Lifetimes)
    gpu_async::gpu_completion_port port(ctx); // destroyed first, cancelling what is left
    auto stream = device.make_stream();
    auto other = device.make_stream();
    stream->set_doorbell(port.shared_bell());
    other->set_doorbell(port.shared_bell());

    bool in_time = false, timed_out = false, cancelled = false;
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
            in_time = co_await with_timeout(port, *stream, 500us, 1s);        // true
            const bool late = co_await with_timeout(port, *stream, 5s, 10ms); // false
            timed_out = !late;
        },
        asio::detached);

    asio::cancellation_signal signal;
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
            cancelled = co_await until_cancelled(port, *other, signal);
        },
        asio::detached);
    asio::steady_timer later(ctx, 20ms); // then cancel the long wait, from a handler
    later.async_wait([&](auto) { signal.emit(asio::cancellation_type::terminal); });

    ctx.run(); // returns once every task is done
    std::printf("in time: %d, timed out: %d, cancelled: %d\n", in_time, timed_out, cancelled);
    return in_time && timed_out && cancelled ? 0 : 1;
}
