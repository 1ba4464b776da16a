// SPDX-License-Identifier: BSL-1.0
// Await simulated GPU work in a C++20 coroutine (asio::use_awaitable), next to a timer.
#include <gpu_async/device/sim_device.hpp>
#include <gpu_async/gpu_completion_port.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>

namespace asio = boost::asio;

asio::awaitable<void> batch(gpu_async::gpu_completion_port& port, gpu_async::sim_stream& stream,
                            int& finished) {
    for (int step = 0; step < 3; ++step) {
        const std::uint64_t seq = stream.enqueue(std::chrono::microseconds(500));
        auto [ec] = co_await port.async_wait(stream.descriptor_for(seq),
                                             asio::as_tuple(asio::use_awaitable));
        std::printf("step %d: %s\n", step, ec ? ec.message().c_str() : "done");
        finished += !ec;
    }
}

int main() {
    asio::io_context ctx;
    gpu_async::sim_device device;
    // After the device: the port is destroyed first and cancels its waits.
    gpu_async::gpu_completion_port port(ctx);
    auto stream = device.make_stream(); // owns the stream: dropping it gives it back
    stream->set_doorbell(port.shared_bell());
    int finished = 0;
    asio::co_spawn(ctx, batch(port, *stream, finished), asio::detached);
    asio::steady_timer timer(ctx, std::chrono::milliseconds(1));
    timer.async_wait([](boost::system::error_code) { std::printf("timer fired meanwhile\n"); });
    ctx.run_for(std::chrono::seconds(10));
    return finished == 3 ? 0 : 1;
}
