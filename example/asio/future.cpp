// SPDX-License-Identifier: BSL-1.0
// Await simulated GPU work with asio::use_future: the io_context runs on a thread of its own; the
// main thread blocks on the future.
#include <gpu_async/device/sim_device.hpp>
#include <gpu_async/gpu_completion_port.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <chrono>
#include <cstdio>
#include <future>
#include <thread>

int main() {
    namespace asio = boost::asio;
    asio::io_context ctx;
    gpu_async::sim_device device;
    // After the device: the port is destroyed first and cancels its waits.
    gpu_async::gpu_completion_port port(ctx);
    auto stream = device.make_stream(); // owns the stream: dropping it gives it back
    stream->set_doorbell(port.shared_bell());
    const std::uint64_t seq = stream->enqueue(std::chrono::milliseconds(3));
    std::future<void> f = port.async_wait(stream->descriptor_for(seq), asio::use_future);
    std::thread runner([&] { ctx.run_for(std::chrono::seconds(10)); });
    const bool ready = f.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
    int rc = 1;
    if (ready) {
        try {
            f.get();
            std::printf("sequence %llu stored: the work is done\n",
                        static_cast<unsigned long long>(seq));
            rc = 0;
        } catch (const boost::system::system_error& e) {
            std::printf("wait failed: %s\n", e.what());
        }
    }
    runner.join();
    return rc;
}
