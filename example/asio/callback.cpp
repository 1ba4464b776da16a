// SPDX-License-Identifier: BSL-1.0
// Await simulated GPU work with a callback: three streams finish at 2, 4 and 6 ms; one
// completion port (on one io_context) waits for all three.
#include <gpu_async/device/sim_device.hpp>
#include <gpu_async/gpu_completion_port.hpp>

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdio>

int main() {
    namespace asio = boost::asio;
    asio::io_context ctx;
    gpu_async::sim_device device;
    // After the device: the port is destroyed first and cancels its waits.
    gpu_async::gpu_completion_port port(ctx);
    const auto start = std::chrono::steady_clock::now();
    int done = 0;
    std::vector<gpu_async::sim_stream_handle> streams; // each stream lives as long as its handle
    for (int i = 1; i <= 3; ++i) {
        gpu_async::sim_stream& stream = *streams.emplace_back(device.make_stream());
        stream.set_doorbell(port.shared_bell()); // a host producer rings after its store
        const std::uint64_t seq = stream.enqueue(std::chrono::milliseconds(2 * i));
        port.async_wait(stream.descriptor_for(seq), [&, i](boost::system::error_code ec) {
            const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                std::chrono::steady_clock::now() - start);
            std::printf("stream %d: %s after %lld us\n", i, ec ? ec.message().c_str() : "done",
                        static_cast<long long>(us.count()));
            done += !ec;
        });
    }
    ctx.run_for(std::chrono::seconds(10));
    return done == 3 ? 0 : 1;
}
