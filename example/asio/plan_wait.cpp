// SPDX-License-Identifier: BSL-1.0
// The plan-driven wait: the same readback point awaited five times with the flag plan and a
// prediction. The first waits park on the completion word; once the point has learned how long
// the work takes, the wait sleeps most of it on a timer first ("late" or a short park).
#include <gpu_async/device/sim_device.hpp>
#include <gpu_async/gpu_completion_port.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>

namespace asio = boost::asio;

asio::awaitable<void> waits(gpu_async::gpu_completion_port& port, gpu_async::sim_stream& stream,
                            const gpu_async::wait_plan& plan, int& ok) {
    for (int i = 0; i < 5; ++i) {
        stream.enqueue(std::chrono::milliseconds(2));
        const gpu_async::wait_report r =
            co_await port.async_wait(stream, plan, "decode.readback", asio::use_awaitable);
        const auto predicted = port.prediction_ns("decode.readback", *plan.predict());
        std::printf("wait %d: %-9s total %6llu us, slept %6llu us, parks %3u, prediction %llu us\n",
                    i, std::string(gpu_async::to_string(r.kind)).c_str(),
                    static_cast<unsigned long long>(r.total.count() / 1000),
                    static_cast<unsigned long long>(r.slept.count() / 1000), r.parks,
                    static_cast<unsigned long long>(predicted.value_or(0) / 1000));
        ++ok;
    }
}

int main() {
    const auto plan = gpu_async::wait_plan::parse(
        "flag:park_us=100,backstop_us=1000+predict:margin_us=150,min_sleep_us=20,"
        "max_sleep_us=50000,window=8");
    if (!plan.has_value()) {
        std::printf("%s\n", plan.error().message().c_str());
        return 1;
    }
    std::printf("plan: %s\n", plan.value().label().c_str());
    asio::io_context ctx;
    gpu_async::sim_device device;
    // After the device: the port is destroyed first and cancels its waits.
    gpu_async::gpu_completion_port port(ctx);
    auto stream = device.make_stream(); // owns the stream: dropping it gives it back
    stream->set_doorbell(port.shared_bell());
    int ok = 0;
    asio::co_spawn(ctx, waits(port, *stream, plan.value(), ok), [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
    });
    ctx.run_for(std::chrono::seconds(10));
    return ok == 5 ? 0 : 1;
}
