// SPDX-License-Identifier: BSL-1.0
// The README's "CUDA and HIP": a line that signals the port's doorbell, and an event the user
// records behind their work, awaited through the port. Without a CUDA driver the program says so
// and exits 0 (nothing links libcuda); test/gpu runs the same steps on a GPU.
#include <gpu_async/device/cuda.hpp>
#include <gpu_async/gpu_completion_port.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdio>

namespace asio = boost::asio;

// `stream` and `event` are the application's (cuStreamCreate, cuEventCreate), in the current
// context.
asio::awaitable<void> step(gpu_async::gpu_completion_port& port, gpu_async::cuda::stream_t stream,
                           gpu_async::cuda::event_t event) {
    //! [cuda-event]
    // The process's driver: load() opens libcuda once and gives a result holding a pointer to
    // it (errc::unavailable without a driver; value() then throws).
    const gpu_async::cuda_driver& driver = *gpu_async::cuda_driver::load().value();
    auto line = gpu_async::cuda_line::create(driver).value(); // on the current context's device
    // Optional: each store then also signals the port's doorbell.
    if (auto e = line.attach_doorbell(port.shared_bell()))
        std::printf("no doorbell stores: %s\n", e->message().c_str());
    auto waiter = gpu_async::cuda_event_waiter::create(line, *gpu_async::slot_id::at(0)).value();
    // Launch work on your stream (kernels, copies, cuGraphLaunch), then record your event:
    driver.api().event_record(event, stream);
    co_await port.async_wait(waiter.await_event(event).value(), asio::use_awaitable);
    // The event is still yours: record it again, or cuEventDestroy it.
    //! [cuda-event]
}

int main() {
    const auto driver = gpu_async::cuda_driver::load();
    if (!driver.has_value()) {
        std::printf("skipped: %s\n", driver.error().message().c_str());
        return 0;
    }
    // With a driver the example only compiles here: the stream, the work and the event are the
    // application's (test/gpu runs real ones).
    asio::io_context ctx;
    gpu_async::gpu_completion_port port(ctx);
    static_cast<void>(&step);
    std::printf("CUDA driver %d loaded\n", driver.value()->version());
    return 0;
}
