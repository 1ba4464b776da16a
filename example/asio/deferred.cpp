// SPDX-License-Identifier: BSL-1.0
// A lazy wait with asio::deferred: the operation (descriptor included) is built first and
// launched later, here chained with a second wait.
#include <gpu_async/device/sim_device.hpp>
#include <gpu_async/gpu_completion_port.hpp>

#include <boost/asio/deferred.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdio>

int main() {
    namespace asio = boost::asio;
    asio::io_context ctx;
    gpu_async::sim_device device;
    // After the device: the port is destroyed first and cancels its waits.
    gpu_async::gpu_completion_port port(ctx);
    auto stream = device.make_stream(); // owns the stream: dropping it gives it back
    stream->set_doorbell(port.shared_bell());
    const std::uint64_t first = stream->enqueue(std::chrono::milliseconds(1));
    const std::uint64_t second = stream->enqueue(std::chrono::milliseconds(1));

    // Nothing starts here: the descriptors travel inside the deferred operations.
    auto both = port.async_wait(
        stream->descriptor_for(first), asio::deferred([&](boost::system::error_code ec) {
            std::printf("first: %s\n", ec ? ec.message().c_str() : "done");
            return port.async_wait(stream->descriptor_for(second), asio::deferred);
        }));
    int rc = 1;
    std::move(both)([&](boost::system::error_code ec) {
        std::printf("second: %s\n", ec ? ec.message().c_str() : "done");
        rc = ec ? 1 : 0;
    });
    ctx.run_for(std::chrono::seconds(10));
    return rc;
}
