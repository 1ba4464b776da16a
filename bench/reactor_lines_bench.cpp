// SPDX-License-Identifier: BSL-1.0
//
// reactor_lines_bench: store-to-handler latency of one ringing producer while the reactor also
// watches L other lines (8 pending waits each), for L = 0, 16, 128, 512, under io_context::run()
// (the service's watcher thread) and under run_fill() (the calling thread is the waiter).
// Reports percentiles. Usage: reactor_lines_bench [samples per row, default 2000]
//
#include <gpu_async/gpu_completion_port.hpp>
#include <gpu_async/run_fill.hpp>

#include "common/stats.hpp"

#include <boost/asio/io_context.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

namespace asio = boost::asio;
using gpu_async::completion_line;
using gpu_async::memory_descriptor;

namespace {

gpu_async::bench::summary run_row(std::size_t other_lines, bool fill, std::size_t samples) {
    asio::io_context ctx;
    gpu_async::gpu_completion_port port(ctx);
    std::vector<std::unique_ptr<completion_line>> idle(other_lines);
    for (auto& l : idle) {
        l = std::make_unique<completion_line>();
        for (std::size_t s = 0; s < 8; ++s)
            port.async_wait(memory_descriptor(*l, *gpu_async::slot_id::at(s), 1),
                            [](boost::system::error_code) {});
    }
    completion_line probe;
    std::atomic<std::uint64_t> stored_at{0};
    std::atomic<std::uint64_t> handled{0};
    std::vector<std::uint64_t> lat;
    lat.reserve(samples);
    std::function<void(std::uint64_t)> arm = [&](std::uint64_t k) {
        port.async_wait(memory_descriptor(probe, *gpu_async::slot_id::at(0), k),
                        [&, k](boost::system::error_code ec) {
                            if (ec) return;
                            lat.push_back(gpu_async::bench::now_ns() - stored_at.load());
                            handled.store(k, std::memory_order_release);
                            if (k < samples)
                                arm(k + 1);
                            else
                                port.cancel(); // the idle waits end: out of work
                        });
    };
    arm(1);
    std::thread producer([&] {
        for (std::uint64_t k = 1; k <= samples; ++k) {
            // Let the waiter settle into its park before the store.
            const std::uint64_t until = gpu_async::bench::now_ns() + 50'000;
            while (gpu_async::bench::now_ns() < until)
                std::this_thread::yield();
            stored_at.store(gpu_async::bench::now_ns());
            probe.words[0].store(k, std::memory_order_release);
            port.bell().ring();
            while (handled.load(std::memory_order_acquire) != k)
                std::this_thread::yield();
        }
    });
    if (fill)
        gpu_async::run_fill(ctx);
    else
        ctx.run();
    producer.join();
    return gpu_async::bench::summarize(lat);
}

} // namespace

int main(int argc, char** argv) {
    const std::size_t samples = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 2000;
    std::printf("store-to-handler latency, one ringing producer, %zu samples per row\n", samples);
    std::printf("%-8s %-12s %10s %10s %10s %10s\n", "mode", "other lines", "p50", "p90", "p99",
                "max");
    for (bool fill : {false, true}) {
        for (std::size_t lines : {0u, 16u, 128u, 512u}) {
            const auto s = run_row(lines, fill, samples);
            std::printf("%-8s %-12zu %10s %10s %10s %10s\n", fill ? "run_fill" : "run", lines,
                        gpu_async::bench::format_ns(s.p50).c_str(),
                        gpu_async::bench::format_ns(s.p90).c_str(),
                        gpu_async::bench::format_ns(s.p99).c_str(),
                        gpu_async::bench::format_ns(s.max).c_str());
        }
    }
    return 0;
}
