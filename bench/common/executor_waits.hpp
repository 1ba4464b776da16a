// SPDX-License-Identifier: BSL-1.0
//
// bench/common/executor_waits.hpp: store-to-wake latency and waiter CPU of one thread waiting for
// simulated-device work with an executor kind (naive: the std host's blocking wait; gpu-reactor
// and io-uring: one FILL wait on an idle). Shared by bench/uring_bench.cpp and gpu-async-bench.
// Not part of the library.
//
//     gpu_async::bench::device_waits(rounds, work_us, stream, [&](sim_stream& s) {
//         return gpu_async::bench::fill_wait_once(idle, s, plan, table);
//     });
//
#ifndef GPU_ASYNC_BENCH_COMMON_EXECUTOR_WAITS_HPP
#define GPU_ASYNC_BENCH_COMMON_EXECUTOR_WAITS_HPP

#include "stats.hpp"

#include <gpu_async/core/estimator.hpp>
#include <gpu_async/core/wait_plan.hpp>
#include <gpu_async/device/sim_device.hpp>
#include <gpu_async/fill/fill_executor.hpp>
#include <gpu_async/fill/std_idle.hpp>
#include <gpu_async/host/std_host.hpp>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpu_async::bench {

/// The samples of one run of device waits.
struct wake_samples {
    std::vector<std::uint64_t> latency; ///< waiter's return minus the device's store, ns
    std::uint64_t cpu_ns = 0;           ///< the waiting thread's CPU over the waits
    std::uint64_t waited_ns = 0;        ///< wall time from each enqueue to the waiter's return
    std::string note;                   ///< "WAIT FAILED" when a wait failed (the run stops)

    /// The waiting thread's CPU seconds per waited second.
    double cpu_per_s() const {
        return waited_ns == 0 ? 0.0 : static_cast<double>(cpu_ns) / static_cast<double>(waited_ns);
    }
};

/// `rounds` device waits on `s`: each enqueues an item of `work_us` (it records the time just
/// before its store) and runs `wait_one(s)` (one wait to its end on this thread; false: failed).
template <class WaitOne>
wake_samples device_waits(int rounds, std::uint64_t work_us, sim_stream& s, WaitOne wait_one) {
    wake_samples r;
    std::atomic<std::uint64_t> stored_at{0};
    std::uint64_t cpu = 0;
    for (int i = 0; i < rounds; ++i) {
        const std::uint64_t start = now_ns();
        const std::uint64_t cpu0 = thread_cpu_ns();
        s.enqueue([&] { stored_at.store(now_ns(), std::memory_order_release); },
                  dur_ns::from_us(work_us));
        if (!wait_one(s)) {
            r.note = "WAIT FAILED";
            static_cast<void>(s.block()); // the item must not outlive `stored_at`
            break;
        }
        const std::uint64_t woke = now_ns();
        cpu += thread_cpu_ns() - cpu0;
        const std::uint64_t st = stored_at.load(std::memory_order_acquire);
        r.latency.push_back(woke > st ? woke - st : 0);
        r.waited_ns += woke - start;
    }
    r.cpu_ns = cpu;
    return r;
}

/// One wait for `s` (the naive kind): the std host's blocking wait with `plan`, its prediction
/// from `table`.
inline bool naive_wait_once(sim_stream& s, const wait_plan& plan, point_table<int>& table) {
    return wait_blocking(s, plan, table, 0).has_value();
}

/// One wait for `s` as a task of a fresh FILL executor run on `idle` (std_idle: gpu-reactor;
/// uring_idle: io-uring), with `plan`, its prediction from (and outcome fed to) `table`.
template <class Idle>
bool fill_wait_once(Idle& idle, sim_stream& s, const wait_plan& plan, point_table<int>& table) {
    const std_clock clk;
    fill_executor ex;
    bool ok = false;
    std::optional<std::uint64_t> sleep;
    if (plan.predict()) sleep = table.sleep_ns(0, *plan.predict());
    auto task = [&]() -> fill_task<> {
        auto r = co_await fill_wait(ex.get_reactor(), s, plan, sleep, clk);
        ok = r.has_value();
        if (ok && plan.predict() && r.value().outcome)
            table.observe(0, *plan.predict(), *r.value().outcome);
    };
    ex.spawn(task());
    return ex.run(idle).has_value() && ok;
}

} // namespace gpu_async::bench

#endif // GPU_ASYNC_BENCH_COMMON_EXECUTOR_WAITS_HPP
