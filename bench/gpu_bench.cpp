// SPDX-License-Identifier: BSL-1.0
//
// bench/gpu_bench.cpp: GPU completion strategies side by side on a real CUDA device.
//
// Every round enqueues the same work (a cuMemsetD8Async of 64 MiB) on one stream, then waits for
// it with one strategy, and measures the time from the end of the enqueue to the moment the
// waiting code runs (its handler, or the return of its blocking call), and the process CPU time
// per wait (every thread: the reactor's watcher, the driver's own threads):
//
//   ours: port (service)        cuStreamWriteValue64 to a mapped line; gpu_completion_port
//                               async_wait on its descriptor; io_context::run()
//   ours: port (run_fill)       the same, with gpu_async::run_fill() (the caller is the waiter)
//   ours: plan flag (port)      async_wait(cuda_source, "flag:park_us=100,backstop_us=1000")
//   cuStreamSynchronize (spin)  the context's scheduling set to CU_CTX_SCHED_SPIN
//   cuStreamSynchronize (block) the context's scheduling set to CU_CTX_SCHED_BLOCKING_SYNC
//   cuEventQuery poller         an event recorded behind the work, queried until done
//   cuLaunchHostFunc -> post    a host function behind the work posts the handler to the
//                               io_context; io_context::run()
//
// (The driver API equivalents of cudaStreamSynchronize, cudaEventQuery and cudaLaunchHostFunc:
// nothing links libcuda or libcudart.) Prints a markdown table; scripts/gpu-check.sh collects it.
// Without a CUDA driver it prints "skipped: no CUDA driver" and exits 0.
//
// Usage: gpu_bench [--rounds N] [--mib M]
//
#include <gpu_async/device/cuda.hpp>

#include <gpu_async/core/wait_plan.hpp>
#include <gpu_async/gpu_completion_port.hpp>
#include <gpu_async/run_fill.hpp>

#include "common/stats.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/error_code.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace {

namespace asio = boost::asio;
using namespace gpu_async;
using gpu_async::bench::now_ns;
using gpu_async::bench::process_cpu_ns;

struct row {
    std::string name;
    bench::summary latency;
    double cpu_per_wait_ns = 0;
    std::string note;
};

[[noreturn]] void fail(const char* what, const std::string& why) {
    std::printf("FAILED: %s: %s\n", what, why.c_str());
    std::exit(1);
}

struct bench_state {
    const cuda_driver* driver = nullptr;
    cuda::stream_t stream = nullptr;
    cuda::deviceptr_t buffer = 0;
    std::size_t bytes = 0;
    int rounds = 0;

    const cuda::entry_points& api() const { return driver->api(); }
    void ok(cuda::status_t st, const char* call) const {
        if (st != cuda::success) fail(call, driver->status_name(st));
    }
    void enqueue_work() const {
        ok(api().memset_d8_async(buffer, 0x5a, bytes, stream), "cuMemsetD8Async");
    }
};

/// Runs `rounds` measured rounds (after 10 unmeasured ones) of: enqueue the work, then `wait`,
/// which returns the time its waiting code ran.
row measure(const bench_state& b, std::string name, const std::function<std::uint64_t()>& wait) {
    for (int i = 0; i < 10; ++i) {
        b.enqueue_work();
        static_cast<void>(wait());
    }
    std::vector<std::uint64_t> samples;
    samples.reserve(static_cast<std::size_t>(b.rounds));
    const std::uint64_t cpu0 = process_cpu_ns();
    for (int i = 0; i < b.rounds; ++i) {
        b.enqueue_work();
        const std::uint64_t t0 = now_ns();
        const std::uint64_t t1 = wait();
        samples.push_back(t1 > t0 ? t1 - t0 : 0);
    }
    const std::uint64_t cpu1 = process_cpu_ns();
    b.ok(b.api().stream_synchronize(b.stream), "cuStreamSynchronize");
    row r;
    r.name = std::move(name);
    r.latency = bench::summarize(std::move(samples));
    r.cpu_per_wait_ns = static_cast<double>(cpu1 - cpu0) / static_cast<double>(b.rounds);
    return r;
}

} // namespace

int main(int argc, char** argv) {
    int rounds = 200;
    std::size_t mib = 64;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--rounds") == 0)
            rounds = std::atoi(argv[i + 1]);
        else if (std::strcmp(argv[i], "--mib") == 0)
            mib = static_cast<std::size_t>(std::atoi(argv[i + 1]));
    }
    if (rounds <= 0 || mib == 0) fail("arguments", "usage: gpu_bench [--rounds N] [--mib M]");

    auto loaded = cuda_driver::load();
    if (!loaded.has_value()) {
        std::printf("skipped: no CUDA driver (%s)\n", loaded.error().message().c_str());
        return 0;
    }
    bench_state b;
    b.driver = loaded.value();
    b.rounds = rounds;
    b.bytes = mib << 20;
    const auto& a = b.api();
    int count = 0;
    if (a.device_get_count(&count) != cuda::success || count == 0) {
        std::printf("skipped: no CUDA device\n");
        return 0;
    }
    if (a.stream_create == nullptr || a.mem_alloc == nullptr || a.memset_d8_async == nullptr)
        fail("driver", "lacks cuStreamCreate, cuMemAlloc or cuMemsetD8Async");
    cuda::context_t context = nullptr;
    cuda::device_t device = 0;
    b.ok(a.device_get(&device, 0), "cuDeviceGet");
    if (auto e = b.driver->check_device(device)) {
        std::printf("skipped: CUDA device 0 cannot own a line (%s)\n", e->message().c_str());
        return 0;
    }
    b.ok(a.device_primary_ctx_retain(&context, device), "cuDevicePrimaryCtxRetain");
    b.ok(a.ctx_set_current(context), "cuCtxSetCurrent");
    b.ok(a.stream_create(&b.stream, cuda::stream_non_blocking), "cuStreamCreate");
    b.ok(a.mem_alloc(&b.buffer, b.bytes), "cuMemAlloc");
    auto line = cuda_line::create(*b.driver);
    if (!line.has_value()) fail("cuda_line::create", line.error().message());
    const slot_id slot = *slot_id::at(0);

    std::vector<row> rows;

    {
        asio::io_context io;
        gpu_completion_port port(io);
        // One port wait behind the stream's work, the context driven by `drive`.
        auto port_wait = [&](auto drive) {
            return [&, drive] {
                auto d = line.value().store(slot, b.stream);
                if (!d.has_value()) fail("store", d.error().message());
                std::uint64_t t = 0;
                port.async_wait(d.value(), [&](boost::system::error_code ec) {
                    t = now_ns();
                    if (ec) fail("async_wait", ec.message());
                });
                io.restart();
                drive();
                return t;
            };
        };
        rows.push_back(measure(b, "ours: port (service)", port_wait([&] { io.run(); })));
        rows.push_back(measure(b, "ours: port (run_fill)", port_wait([&] { run_fill(io); })));
        auto source = cuda_source::create(line.value(), *slot_id::at(1), b.stream);
        if (!source.has_value()) fail("cuda_source::create", source.error().message());
        const wait_plan plan = wait_plan::recommended();
        rows.push_back(measure(b, "ours: plan " + plan.label() + " (port)", [&] {
            std::uint64_t t = 0;
            port.async_wait(source.value(), plan, "bench",
                            [&](boost::system::error_code ec, wait_report) {
                                t = now_ns();
                                if (ec) fail("async_wait(source)", ec.message());
                            });
            io.restart();
            io.run();
            return t;
        }));
    }

    const std::pair<unsigned, const char*> schedules[] = {
        {cuda::ctx_sched_spin, "cuStreamSynchronize (spin)"},
        {cuda::ctx_sched_blocking_sync, "cuStreamSynchronize (blocking sync)"}};
    for (const auto& [flags, name] : schedules) {
        if (a.ctx_set_flags == nullptr) {
            rows.push_back(row{
                name, {}, 0, "n/a: cuGetProcAddress found no cuCtxSetFlags (CUDA 12.1 or later)"});
            continue;
        }
        b.ok(a.ctx_set_flags(flags), "cuCtxSetFlags");
        rows.push_back(measure(b, name, [&] {
            b.ok(a.stream_synchronize(b.stream), "cuStreamSynchronize");
            return now_ns();
        }));
    }
    if (a.ctx_set_flags != nullptr) b.ok(a.ctx_set_flags(0), "cuCtxSetFlags");

    if (a.event_create != nullptr && a.event_record != nullptr && a.event_query != nullptr) {
        cuda::event_t event = nullptr;
        b.ok(a.event_create(&event, cuda::event_disable_timing), "cuEventCreate");
        rows.push_back(measure(b, "cuEventQuery poller", [&] {
            b.ok(a.event_record(event, b.stream), "cuEventRecord");
            for (;;) {
                const cuda::status_t st = a.event_query(event);
                if (st == cuda::success) return now_ns();
                if (st != cuda::error_not_ready) b.ok(st, "cuEventQuery");
            }
        }));
        if (a.event_destroy != nullptr) b.ok(a.event_destroy(event), "cuEventDestroy");
    } else {
        rows.push_back(row{"cuEventQuery poller", {}, 0, "n/a: the driver lacks cuEvent*"});
    }

    if (a.launch_host_func != nullptr) {
        struct host_call {
            asio::io_context io;
            std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard;
            std::uint64_t t = 0;
        } call;
        rows.push_back(measure(b, "cuLaunchHostFunc -> post", [&] {
            call.guard.emplace(call.io.get_executor());
            b.ok(a.launch_host_func(
                     b.stream,
                     [](void* p) {
                         auto* c = static_cast<host_call*>(p);
                         asio::post(c->io, [c] {
                             c->t = now_ns();
                             c->guard.reset();
                         });
                     },
                     &call),
                 "cuLaunchHostFunc");
            call.io.restart();
            call.io.run();
            return call.t;
        }));
    } else {
        rows.push_back(row{"cuLaunchHostFunc -> post", {}, 0, "n/a: the driver lacks it"});
    }

    double reference = 0;
    for (const row& r : rows)
        if (r.name == "cuStreamSynchronize (blocking sync)") reference = r.latency.p50;
    std::printf("\nGPU wait strategies: %d rounds of a %zu MiB cuMemsetD8Async, then the wait "
                "(time from the end of the enqueue to the waiting code; CPU of the process per "
                "wait)\n\n",
                rounds, mib);
    std::printf("| strategy | p50 | p90 | p99 | max | p50 / blocking sync | CPU per wait |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
    for (const row& r : rows) {
        if (!r.note.empty()) {
            std::printf("| %s | %s | | | | | |\n", r.name.c_str(), r.note.c_str());
            continue;
        }
        char ratio[32] = "";
        if (reference > 0) std::snprintf(ratio, sizeof ratio, "%.2f", r.latency.p50 / reference);
        std::printf(
            "| %s | %s | %s | %s | %s | %s | %s |\n", r.name.c_str(),
            bench::format_ns(r.latency.p50).c_str(), bench::format_ns(r.latency.p90).c_str(),
            bench::format_ns(r.latency.p99).c_str(), bench::format_ns(r.latency.max).c_str(), ratio,
            bench::format_ns(r.cpu_per_wait_ns).c_str());
    }

    b.ok(a.mem_free(b.buffer), "cuMemFree");
    b.ok(a.stream_destroy(b.stream), "cuStreamDestroy");
    if (auto e = line.value().close()) fail("close", e->message());
    return 0;
}
