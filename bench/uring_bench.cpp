// SPDX-License-Identifier: BSL-1.0
//
// bench/uring_bench.cpp: the io-uring executor beside gpu-reactor (std_idle) and naive, on the
// simulated device.
//
// 1. Deadline sleeps: a thread sleep (std_timer) against one IORING_OP_TIMEOUT (uring_idle):
//    overshoot past the deadline, p50/p99/max.
// 2. Device waits: each round enqueues an item of --work-us on a simulated stream (it records the
//    time just before its store) and waits for it with a wait plan; wake latency = the waiter's
//    return minus the store, p50/p99/max; CPU = the waiting thread's CPU seconds per waited
//    second. Executors: naive (the blocking wait on the calling thread), gpu-reactor (FILL on
//    std_idle), io-uring (FILL on uring_idle); with and without a ringing doorbell.
//
//     uring_bench [--rounds N] [--work-us N] [--plan TEXT]
//
#include <gpu_async/core/estimator.hpp>
#include <gpu_async/core/wait_plan.hpp>
#include <gpu_async/device/sim_device.hpp>
#include <gpu_async/fill/fill_executor.hpp>
#include <gpu_async/fill/uring_host.hpp>
#include <gpu_async/host/std_host.hpp>
#include <gpu_async/wait/doorbell.hpp>

#include "common/executor_waits.hpp"
#include "common/stats.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace gpu_async;
namespace gb = gpu_async::bench;

struct config {
    int rounds = 300;
    std::uint64_t work_us = 1000;
    std::string plan = "flag:park_us=100,backstop_us=1000";
};

using row_result = gb::wake_samples;

void print_row(std::string_view name, const row_result& r) {
    const gb::summary s = gb::summarize(r.latency);
    const double cpu_per_s = r.cpu_per_s();
    std::printf("  %-38s p50 %10s  p99 %10s  max %10s  cpu/s %.3f  %s\n", std::string(name).c_str(),
                gb::format_ns(s.p50).c_str(), gb::format_ns(s.p99).c_str(),
                gb::format_ns(s.max).c_str(), cpu_per_s, r.note.c_str());
}

// Deadline-sleep overshoot with a sleeper `sleep(at)`.
template <class Sleep>
row_result sleeps(int rounds, std::uint64_t us, Sleep sleep) {
    row_result r;
    const std_clock clk;
    const std::uint64_t cpu0 = gb::thread_cpu_ns();
    for (int i = 0; i < rounds; ++i) {
        const mono_ns at = clk.now().after(dur_ns::from_us(us));
        sleep(at);
        const mono_ns end = clk.now();
        r.latency.push_back(end.since(at).count());
        r.waited_ns += us * 1000;
    }
    r.cpu_ns = gb::thread_cpu_ns() - cpu0;
    return r;
}

} // namespace

int main(int argc, char** argv) {
    config cfg;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string_view a = argv[i];
        if (a == "--rounds")
            cfg.rounds = std::atoi(argv[i + 1]);
        else if (a == "--work-us")
            cfg.work_us = std::strtoull(argv[i + 1], nullptr, 10);
        else if (a == "--plan")
            cfg.plan = argv[i + 1];
    }
    const auto parsed = wait_plan::parse(cfg.plan);
    if (!parsed.has_value()) {
        std::fprintf(stderr, "%s\n", parsed.error().message().c_str());
        return 2;
    }
    const wait_plan plan = parsed.value();
    auto made = uring_idle::create();
    if (!made.has_value()) {
        std::printf("io_uring unavailable: %s (io-uring rows skipped)\n",
                    made.error().message().c_str());
    }
    std::optional<uring_idle> ring;
    if (made.has_value()) ring.emplace(std::move(made).value());

    std::printf("uring_bench: %d rounds, device items of %llu us, plan %s\n", cfg.rounds,
                static_cast<unsigned long long>(cfg.work_us), plan.label().c_str());
    std::printf("word wait: %s; io_uring futex wait: %s\n",
                std::string(word_wait::probe().name()).c_str(),
                ring ? (ring->futex_supported() ? "yes" : "no") : "n/a");

    std::printf("deadline sleeps (overshoot past the deadline):\n");
    for (std::uint64_t us : {100u, 1000u}) {
        const std::string tag = " " + std::to_string(us) + " us";
        print_row("std_timer (thread sleep)" + tag,
                  sleeps(cfg.rounds, us, [](mono_ns at) { std_timer{}.sleep_until(at); }));
        if (ring) {
            const std::uint64_t failed = ring->failed_ops();
            auto r = sleeps(cfg.rounds, us, [&](mono_ns at) { ring->sleep_until(at); });
            r.note = "failed ops " + std::to_string(ring->failed_ops() - failed);
            print_row("uring_idle (IORING_OP_TIMEOUT)" + tag, r);
        }
    }

    std::printf("device waits (wake latency after the store; waiter CPU per waited second):\n");
    const auto bell_owner = std::make_shared<doorbell>(); // outlives the ring's futex waits on it
    doorbell& bell = *bell_owner;
    for (bool ringing : {false, true}) {
        sim_device dev;
        const std::string suffix = ringing ? " +doorbell" : "";
        std::vector<gpu_async::sim_stream_handle> handles; // the streams live until dev goes
        auto stream = [&]() -> sim_stream& {
            sim_stream& s = *handles.emplace_back(dev.make_stream());
            if (ringing) s.set_doorbell(bell_owner);
            return s;
        };
        {
            point_table<int> table;
            print_row("naive" + suffix,
                      gb::device_waits(cfg.rounds, cfg.work_us, stream(), [&](sim_stream& s) {
                          return gb::naive_wait_once(s, plan, table);
                      }));
        }
        {
            point_table<int> table;
            std_idle idle;
            print_row("gpu-reactor (std_idle)" + suffix,
                      gb::device_waits(cfg.rounds, cfg.work_us, stream(), [&](sim_stream& s) {
                          return gb::fill_wait_once(idle, s, plan, table);
                      }));
        }
        if (ring) {
            point_table<int> table;
            ring->set_doorbell(ringing ? &bell : nullptr);
            const std::uint64_t failed = ring->failed_ops();
            const std::uint64_t futex = ring->futex_parks();
            auto r = gb::device_waits(cfg.rounds, cfg.work_us, stream(), [&](sim_stream& s) {
                return gb::fill_wait_once(*ring, s, plan, table);
            });
            r.note = "futex parks " + std::to_string(ring->futex_parks() - futex) +
                     ", failed ops " + std::to_string(ring->failed_ops() - failed);
            print_row("io-uring (uring_idle)" + suffix, r);
            ring->set_doorbell(nullptr);
        }
    }
    return 0;
}
