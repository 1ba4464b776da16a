// SPDX-License-Identifier: BSL-1.0
// Cancelling GPU waits: per operation (a cancellation signal, any of terminal, partial or
// total), and every wait of a port at once (cancel()).
#include <gpu_async/device/sim_device.hpp>
#include <gpu_async/gpu_completion_port.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <chrono>
#include <cstdio>

int main() {
    namespace asio = boost::asio;
    asio::io_context ctx;
    gpu_async::sim_device device({1, true}); // manual: the work never runs unless stepped
    // After the device: the port is destroyed first and cancels its waits.
    gpu_async::gpu_completion_port port(ctx);
    auto stream = device.make_stream(); // owns the stream: dropping it gives it back
    const std::uint64_t seq = stream->enqueue(std::chrono::milliseconds(1));

    int aborted = 0;
    auto report = [&](const char* what) {
        return [&aborted, what](boost::system::error_code ec) {
            std::printf("%s: %s\n", what, ec.message().c_str());
            aborted += ec == asio::error::operation_aborted;
        };
    };
    asio::cancellation_signal signal;
    port.async_wait(stream->descriptor_for(seq),
                    asio::bind_cancellation_slot(signal.slot(), report("per-operation")));
    port.async_wait(stream->descriptor_for(seq), report("port-wide #1"));
    port.async_wait(stream->descriptor_for(seq), report("port-wide #2"));

    asio::post(ctx, [&] {
        signal.emit(asio::cancellation_type::terminal);
        std::printf("cancel() cancelled %zu waits\n", port.cancel());
    });
    ctx.run_for(std::chrono::seconds(10));
    return aborted == 3 ? 0 : 1;
}
