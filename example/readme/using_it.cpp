// SPDX-License-Identifier: BSL-1.0
// The README's "Using it": a whole program that awaits one piece of simulated GPU work.
//! [using-it]
#include <gpu_async/device/sim_device.hpp> // or <gpu_async/device/cuda.hpp> on a GPU
#include <gpu_async/gpu_completion_port.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>

namespace asio = boost::asio;

asio::awaitable<void> step(gpu_async::gpu_completion_port& port, gpu_async::sim_stream& stream) {
    const std::uint64_t seq = stream.enqueue(std::chrono::microseconds(500));  // launch work
    co_await port.async_wait(stream.descriptor_for(seq), asio::use_awaitable); // await it
    std::printf("step done\n");
}

int main() {
    asio::io_context ctx;                     // any execution context
    gpu_async::sim_device device;             // a software GPU: streams on worker threads
    gpu_async::gpu_completion_port port(ctx); // after the device: destroyed first
    auto stream = device.make_stream();       // owns the stream: dropping it gives it back
    stream->set_doorbell(port.shared_bell()); // the stream rings the reactor after each store
    asio::co_spawn(ctx, step(port, *stream), asio::detached);
    ctx.run(); // returns when the step is done
}
//! [using-it]
