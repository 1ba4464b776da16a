// SPDX-License-Identifier: BSL-1.0
// The README's "Metal": a source over a new MTLSharedEvent, a command buffer's signal, and the
// wait through the port. Off Apple systems the runtime does not load: the program says so and
// exits 0 (nothing links libobjc or Metal).
#include <gpu_async/device/metal.hpp>
#include <gpu_async/gpu_completion_port.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdio>

namespace asio = boost::asio;

// Encodes the signal into `command_buffer` (an id<MTLCommandBuffer> the caller made and commits).
asio::awaitable<void> step(gpu_async::gpu_completion_port& port,
                           gpu_async::metal::object_t command_buffer,
                           const gpu_async::wait_plan& plan) {
    //! [metal]
    auto runtime = gpu_async::metal_runtime::load(); // errc::unavailable off Apple systems
    auto device = gpu_async::metal_device::create_system_default(*runtime.value());
    auto source = gpu_async::metal_source::create(device.value()).value(); // a new event, at 0
    source.encode_signal(command_buffer); // encodeSignalEvent:value: of the next value; watches it
    // commit the command buffer, then:
    co_await port.async_wait(source, plan, "step", asio::use_awaitable);
    //! [metal]
}

int main() {
    const auto runtime = gpu_async::metal_runtime::load();
    if (!runtime.has_value()) {
        std::printf("skipped: %s\n", runtime.error().message().c_str());
        return 0;
    }
    // On an Apple system the example only compiles here: making and committing a command buffer
    // is the application's (test/metal runs a real one).
    asio::io_context ctx;
    gpu_async::gpu_completion_port port(ctx);
    static_cast<void>(&step);
    std::printf("Metal runtime loaded\n");
    return 0;
}
