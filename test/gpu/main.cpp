// SPDX-License-Identifier: BSL-1.0
//
// test/gpu/main.cpp: real-device tests of the CUDA backend (gpu_async_gpu_tests).
//
// Built only with -DGPU_ASYNC_BUILD_GPU_TESTS=ON. Without a CUDA driver or device it prints
// "skipped: no CUDA driver (...)" and exits 0, so it can run anywhere. With one, it runs:
//
//   store_seen_by_line_and_port   a stream's store reaches the line, and a gpu_completion_port's
//                                 async_wait on the descriptor completes (io_context, run_for)
//   memset_then_wait_each_plan    a 256 MiB cuMemsetD8Async, then a wait with each plan (block,
//                                 poll, flag, flag+predict) through the wait machine's inline
//                                 driver, printing the wait time and the kind
//   memset_then_port_wait_each_plan
//                                 the same through gpu_completion_port::async_wait(source, plan)
//   destruction_waits_for_stores  closing a line right after enqueuing work and a store returns
//                                 only once the work and the store have finished
//   doorbell_signalled_by_device  a line with the port's doorbell attached: a store behind a
//                                 memset reaches the port, and the device stored its signal into
//                                 the doorbell's device word (word 1)
//   event_awaited_through_port    the user records an event after a memset on their own stream;
//                                 a cuda_event_waiter awaits it (cuStreamWaitEvent on its own
//                                 stream, then the store and the doorbell's); the port's wait
//                                 completes only once the memset is done; the event stays ours
//   device_error_reaches_waiter   a kernel that traps while the host parks: the backstop query
//                                 reports errc::device_fault (needs nvcc; last, since a trap
//                                 poisons the context), and the line then leaks on purpose
//
// Each result row is also printed as "RESULT|..." for scripts/gpu-check.sh. Exit status: 0 when
// every case passed or the run was skipped, 1 otherwise.
//
#include <gpu_async/device/cuda.hpp>

#include <gpu_async/core/estimator.hpp>
#include <gpu_async/core/wait_machine.hpp>
#include <gpu_async/core/wait_plan.hpp>
#include <gpu_async/gpu_completion_port.hpp>
#include <gpu_async/host/std_clock.hpp>

#if GPU_ASYNC_GPU_TESTS_HAVE_KERNELS
#include "kernels.hpp"
#endif

#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace asio = boost::asio;
using namespace gpu_async;

// --- a tiny harness ---------------------------------------------------------------------------

int failures = 0;

void check(bool ok, const char* what, const std::string& detail = {}) {
    std::printf("  %s %s%s%s\n", ok ? "ok  " : "FAIL", what, detail.empty() ? "" : ": ",
                detail.c_str());
    if (!ok) ++failures;
}

struct gpu {
    const cuda_driver* driver = nullptr;
    cuda::context_t context = nullptr;
    cuda::device_t device = 0;

    const cuda::entry_points& api() const { return driver->api(); }
    bool ok(cuda::status_t st, const char* call) const {
        if (st == cuda::success) return true;
        check(false, call, driver->status_name(st));
        return false;
    }
};

cuda::stream_t make_stream(const gpu& g) {
    cuda::stream_t s = nullptr;
    if (!g.ok(g.api().stream_create(&s, cuda::stream_non_blocking), "cuStreamCreate")) return {};
    return s;
}

// --- cases ----------------------------------------------------------------------------------

void store_seen_by_line_and_port(const gpu& g) {
    std::printf("store_seen_by_line_and_port\n");
    auto line = cuda_line::create(*g.driver);
    if (!line.has_value()) return check(false, "cuda_line::create", line.error().message());
    cuda::stream_t stream = make_stream(g);
    if (stream == nullptr) return;

    // The line: the store lands, and a park on the line sees it.
    auto stored = line.value().store(*slot_id::at(0), stream);
    if (!stored.has_value()) return check(false, "store", stored.error().message());
    const memory_descriptor d = stored.value();
    bool seen = false;
    for (int i = 0; i < 50000 && !seen; ++i) // bounded: at most 5 s of 100 us parks
        seen = word_wait::probe().park(
            d.line(), [&] { return d.is_complete(); }, dur_ns::from_us(100));
    check(seen, "the line's word reached the stored sequence");

    // The port: async_wait on the descriptor of a second store completes through the io_context.
    asio::io_context io;
    gpu_completion_port port(io);
    auto second = line.value().store(*slot_id::at(1), stream);
    if (!second.has_value()) return check(false, "store", second.error().message());
    std::optional<boost::system::error_code> result;
    port.async_wait(second.value(), [&](boost::system::error_code ec) { result = ec; });
    io.run_for(std::chrono::seconds(5));
    check(result.has_value() && !*result, "gpu_completion_port::async_wait completed",
          result ? result->message() : "timed out after 5 s");

    g.ok(g.api().stream_synchronize(stream), "cuStreamSynchronize");
    g.ok(g.api().stream_destroy(stream), "cuStreamDestroy");
    const auto closed = line.value().close();
    check(!closed.has_value(), "close", closed ? closed->message() : "");
}

void memset_then_wait_each_plan(const gpu& g) {
    std::printf("memset_then_wait_each_plan (256 MiB cuMemsetD8Async, then a wait)\n");
    constexpr std::size_t bytes = std::size_t{256} << 20;
    const char* predict = "+predict:margin_us=150,min_sleep_us=20,max_sleep_us=50000,window=8";
    const std::vector<std::string> plans = {"block", "poll", "flag:park_us=100,backstop_us=1000",
                                            std::string("flag:park_us=100,backstop_us=1000") +
                                                predict};
    auto line = cuda_line::create(*g.driver);
    if (!line.has_value()) return check(false, "cuda_line::create", line.error().message());
    cuda::stream_t stream = make_stream(g);
    if (stream == nullptr) return;
    cuda::deviceptr_t buffer = 0;
    if (!g.ok(g.api().mem_alloc(&buffer, bytes), "cuMemAlloc")) return;
    auto source = cuda_source::create(line.value(), *slot_id::at(0), stream);
    if (!source.has_value()) return check(false, "cuda_source::create", source.error().message());

    std_clock clock;
    std_timer timer;
    point_table<int> estimates;
    std::printf("  %-95s %-9s %10s %10s %6s %9s\n", "plan", "kind", "wait_us", "slept_us", "parks",
                "backstops");
    int key = 0;
    for (const std::string& text : plans) {
        auto plan = wait_plan::parse(text);
        if (!plan.has_value()) return check(false, "wait_plan::parse", plan.error().message());
        ++key;
        // Five rounds per plan, so the predicting plan has samples to predict from.
        for (int round = 1; round <= 5; ++round) {
            if (!g.ok(g.api().memset_d8_async(buffer, static_cast<unsigned char>(round), bytes,
                                              stream),
                      "cuMemsetD8Async"))
                return;
            std::optional<std::uint64_t> sleep;
            if (plan.value().predict()) sleep = estimates.sleep_ns(key, *plan.value().predict());
            const wait_result r = run_wait(source.value(), plan.value(), sleep, clock, timer);
            if (!r.has_value()) return check(false, text.c_str(), r.message());
            const wait_report& rep = r.value();
            if (plan.value().predict() && rep.outcome)
                estimates.observe(key, *plan.value().predict(), *rep.outcome);
            // The authority: after the wait, the stream must be idle.
            const bool idle = g.api().stream_query(stream) == cuda::success;
            if (!idle) check(false, "stream idle after the wait", text);
            std::printf("  %-95s %-9s %10.1f %10.1f %6u %9u\n", text.c_str(),
                        std::string(to_string(rep.kind)).c_str(),
                        static_cast<double>(rep.total.ns) / 1e3,
                        static_cast<double>(rep.slept.ns) / 1e3, rep.parks, rep.backstop_queries);
            std::printf("RESULT|%s|%d|%s|%.1f|%.1f|%u|%u\n", text.c_str(), round,
                        std::string(to_string(rep.kind)).c_str(),
                        static_cast<double>(rep.total.ns) / 1e3,
                        static_cast<double>(rep.slept.ns) / 1e3, rep.parks, rep.backstop_queries);
        }
    }
    check(true, "every plan waited for the memset and the stream was idle after each wait");
    g.ok(g.api().mem_free(buffer), "cuMemFree");
    g.ok(g.api().stream_destroy(stream), "cuStreamDestroy");
}

void memset_then_port_wait_each_plan(const gpu& g) {
    std::printf("memset_then_port_wait_each_plan (the same, through gpu_completion_port)\n");
    constexpr std::size_t bytes = std::size_t{256} << 20;
    const std::vector<std::string> plans = {
        "block", "poll", "flag:park_us=100,backstop_us=1000",
        "flag:park_us=100,backstop_us=1000+predict:margin_us=150,min_sleep_us=20,"
        "max_sleep_us=50000,window=8"};
    auto line = cuda_line::create(*g.driver);
    if (!line.has_value()) return check(false, "cuda_line::create", line.error().message());
    cuda::stream_t stream = make_stream(g);
    if (stream == nullptr) return;
    cuda::deviceptr_t buffer = 0;
    if (!g.ok(g.api().mem_alloc(&buffer, bytes), "cuMemAlloc")) return;
    auto source = cuda_source::create(line.value(), *slot_id::at(0), stream);
    if (!source.has_value()) return check(false, "cuda_source::create", source.error().message());
    asio::io_context io;
    gpu_completion_port port(io);
    bool all_ok = true;
    for (const std::string& text : plans) {
        auto plan = wait_plan::parse(text);
        if (!plan.has_value()) return check(false, "wait_plan::parse", plan.error().message());
        for (int round = 1; round <= 5; ++round) {
            if (!g.ok(g.api().memset_d8_async(buffer, static_cast<unsigned char>(round), bytes,
                                              stream),
                      "cuMemsetD8Async"))
                return;
            std::optional<boost::system::error_code> ec;
            wait_report rep;
            port.async_wait(source.value(), plan.value(), text,
                            [&](boost::system::error_code e, wait_report r) {
                                ec = e;
                                rep = r;
                            });
            io.restart();
            io.run_for(std::chrono::seconds(10));
            if (!ec || *ec) {
                all_ok = false;
                check(false, text.c_str(), ec ? ec->message() : "no completion within 10 s");
                break;
            }
            std::printf("RESULT|port %s|%d|%s|%.1f|%.1f|%u|%u\n", text.c_str(), round,
                        std::string(to_string(rep.kind)).c_str(),
                        static_cast<double>(rep.total.ns) / 1e3,
                        static_cast<double>(rep.slept.ns) / 1e3, rep.parks, rep.backstop_queries);
        }
    }
    check(all_ok, "every plan completed through the port");
    g.ok(g.api().stream_synchronize(stream), "cuStreamSynchronize");
    g.ok(g.api().mem_free(buffer), "cuMemFree");
    g.ok(g.api().stream_destroy(stream), "cuStreamDestroy");
}

void destruction_waits_for_stores(const gpu& g) {
    std::printf("destruction_waits_for_stores\n");
    constexpr std::size_t bytes = std::size_t{256} << 20;
    cuda::stream_t stream = make_stream(g);
    if (stream == nullptr) return;
    cuda::deviceptr_t buffer = 0;
    if (!g.ok(g.api().mem_alloc(&buffer, bytes), "cuMemAlloc")) return;
    {
        auto line = cuda_line::create(*g.driver);
        if (!line.has_value()) return check(false, "cuda_line::create", line.error().message());
        for (int i = 0; i < 4; ++i) // about a millisecond of work ahead of the last store
            g.ok(g.api().memset_d8_async(buffer, 0, bytes, stream), "cuMemsetD8Async");
        auto stored = line.value().store(*slot_id::at(0), stream);
        if (!stored.has_value()) return check(false, "store", stored.error().message());
        const auto closed = line.value().close(); // settles the context, then frees
        check(!closed.has_value(), "close settled the context", closed ? closed->message() : "");
        check(g.api().stream_query(stream) == cuda::success,
              "the stream had finished when close returned");
    }
    g.ok(g.api().mem_free(buffer), "cuMemFree");
    g.ok(g.api().stream_destroy(stream), "cuStreamDestroy");
}

void doorbell_signalled_by_device(const gpu& g) {
    std::printf("doorbell_signalled_by_device\n");
    constexpr std::size_t bytes = std::size_t{64} << 20;
    asio::io_context io;
    gpu_completion_port port(io);
    auto line = cuda_line::create(*g.driver);
    if (!line.has_value()) return check(false, "cuda_line::create", line.error().message());
    const auto bell = port.shared_bell();
    if (auto e = line.value().attach_doorbell(bell))
        return check(false, "attach_doorbell", e->message());
    cuda::stream_t stream = make_stream(g);
    if (stream == nullptr) return;
    cuda::deviceptr_t buffer = 0;
    if (!g.ok(g.api().mem_alloc(&buffer, bytes), "cuMemAlloc")) return;
    static_cast<void>(bell->take_device_signal());
    g.ok(g.api().memset_d8_async(buffer, 1, bytes, stream), "cuMemsetD8Async");
    auto stored = line.value().store(*slot_id::at(0), stream);
    if (!stored.has_value()) return check(false, "store", stored.error().message());
    std::optional<boost::system::error_code> result;
    port.async_wait(stored.value(), [&](boost::system::error_code ec) { result = ec; });
    io.run_for(std::chrono::seconds(10));
    check(result.has_value() && !*result, "the port saw the store behind the memset",
          result ? result->message() : "timed out after 10 s");
    // The batch stored the completion word first, then the signal: both have landed by now.
    bool signalled = false;
    for (int i = 0; i < 50000 && !signalled; ++i)
        signalled = word_wait::probe().park(
            bell->line(), [&] { return bell->device_signaled(); }, dur_ns::from_us(100));
    check(signalled, "the device stored its signal into the doorbell's device word");
    g.ok(g.api().stream_synchronize(stream), "cuStreamSynchronize");
    g.ok(g.api().mem_free(buffer), "cuMemFree");
    g.ok(g.api().stream_destroy(stream), "cuStreamDestroy");
    const auto closed = line.value().close(); // the last use: unregisters the doorbell's line
    check(!closed.has_value(), "close unregistered the doorbell", closed ? closed->message() : "");
}

void event_awaited_through_port(const gpu& g) {
    std::printf("event_awaited_through_port\n");
    constexpr std::size_t bytes = std::size_t{256} << 20;
    const auto& a = g.api();
    asio::io_context io;
    gpu_completion_port port(io);
    auto line = cuda_line::create(*g.driver);
    if (!line.has_value()) return check(false, "cuda_line::create", line.error().message());
    if (auto e = line.value().attach_doorbell(port.shared_bell()))
        return check(false, "attach_doorbell", e->message());
    auto waiter = cuda_event_waiter::create(line.value(), *slot_id::at(2));
    if (!waiter.has_value())
        return check(false, "cuda_event_waiter::create", waiter.error().message());
    cuda::stream_t user = make_stream(g); // the user's stream, not the waiter's
    if (user == nullptr) return;
    cuda::deviceptr_t buffer = 0;
    if (!g.ok(a.mem_alloc(&buffer, bytes), "cuMemAlloc")) return;
    cuda::event_t event = nullptr;
    if (!g.ok(a.event_create(&event, cuda::event_disable_timing), "cuEventCreate")) return;

    bool all_ok = true;
    for (int round = 1; round <= 3; ++round) {
        g.ok(a.memset_d8_async(buffer, static_cast<unsigned char>(round), bytes, user),
             "cuMemsetD8Async");
        if (!g.ok(a.event_record(event, user), "cuEventRecord")) return;
        auto done = waiter.value().await_event(event);
        if (!done.has_value()) return check(false, "await_event", done.error().message());
        std::optional<boost::system::error_code> result;
        bool work_done = false;
        port.async_wait(done.value(), [&](boost::system::error_code ec) {
            result = ec;
            work_done = a.event_query(event) == cuda::success; // the event's work had finished
        });
        io.restart();
        io.run_for(std::chrono::seconds(10));
        if (!result || *result || !work_done) {
            all_ok = false;
            check(false, "the port's wait on the event",
                  !result   ? "no completion within 10 s"
                  : *result ? result->message()
                            : "completed before the event's work");
            break;
        }
    }
    check(all_ok, "three events recorded after a memset on the user's stream, each awaited");

    // Another context current: refused with the coded error, nothing enqueued.
    cuda::context_t previous = nullptr;
    g.ok(a.ctx_pop_current(&previous), "cuCtxPopCurrent");
    auto none = waiter.value().await_event(event);
    check(!none.has_value() && none.error().code() == errc::no_domain,
          "with no current context await_event is refused (no_domain)",
          none.has_value() ? "it was accepted" : none.error().message());
    g.ok(a.ctx_push_current(previous), "cuCtxPushCurrent");

    const auto closed_waiter = waiter.value().close();
    check(!closed_waiter.has_value(), "the waiter destroyed its stream",
          closed_waiter ? closed_waiter->message() : "");
    // The event is still the user's: it is alive, and the user destroys it.
    check(a.event_query(event) == cuda::success, "the user's event outlived the waiter");
    g.ok(a.event_destroy(event), "cuEventDestroy");
    g.ok(a.stream_synchronize(user), "cuStreamSynchronize");
    g.ok(a.mem_free(buffer), "cuMemFree");
    g.ok(a.stream_destroy(user), "cuStreamDestroy");
    const auto closed = line.value().close();
    check(!closed.has_value(), "close", closed ? closed->message() : "");
}

void device_error_reaches_waiter(const gpu& g) {
    std::printf("device_error_reaches_waiter\n");
#if GPU_ASYNC_GPU_TESTS_HAVE_KERNELS
    auto line = cuda_line::create(*g.driver);
    if (!line.has_value()) return check(false, "cuda_line::create", line.error().message());
    cuda::stream_t stream = make_stream(g);
    if (stream == nullptr) return;
    auto source = cuda_source::create(line.value(), *slot_id::at(0), stream);
    if (!source.has_value()) return check(false, "cuda_source::create", source.error().message());
    // About 20 ms of spinning at ~2 GHz, then a trap: the wait is parked by then.
    if (int st = gpu_async_test_launch_spin_then_trap(stream, 40'000'000); st != 0)
        return check(false, "launch spin_then_trap", "cudaError " + std::to_string(st));
    std_clock clock;
    std_timer timer;
    const wait_plan plan = wait_plan::recommended();
    const wait_result r = run_wait(source.value(), plan, std::nullopt, clock, timer);
    const bool faulted =
        !r.has_value() && (r.error() == errc::device_fault || r.error() == errc::driver_status);
    check(faulted, "the wait failed with the device's error",
          r.has_value() ? std::string("it succeeded")
                        : r.message() + (source.value().last_error()
                                             ? " / " + source.value().last_error()->message()
                                             : std::string()));
    // The context is poisoned: settling fails, so the line leaks its page and its reference.
    const auto closed = line.value().close();
    check(closed.has_value() && line.value().mapped().leaked(),
          "close reported the failed settle and leaked the page",
          closed ? closed->message() : "close succeeded");
#else
    std::printf("  skipped: built without a CUDA compiler (the trapping kernel needs nvcc)\n");
#endif
}

} // namespace

int main() {
    auto loaded = cuda_driver::load();
    if (!loaded.has_value()) {
        std::printf("skipped: no CUDA driver (%s)\n", loaded.error().message().c_str());
        return 0;
    }
    gpu g;
    g.driver = loaded.value();
    int count = 0;
    if (g.api().device_get_count(&count) != cuda::success || count == 0) {
        std::printf("skipped: no CUDA device\n");
        return 0;
    }
    const auto& a = g.api();
    if (a.stream_create == nullptr || a.stream_destroy == nullptr || a.mem_alloc == nullptr ||
        a.mem_free == nullptr || a.memset_d8_async == nullptr || a.event_create == nullptr ||
        a.event_record == nullptr || a.event_query == nullptr || a.event_destroy == nullptr) {
        std::printf("FAIL: the driver lacks a stream or memory entry point the tests need\n");
        return 1;
    }
    if (!g.ok(a.device_get(&g.device, 0), "cuDeviceGet")) return 1;
    if (auto e = g.driver->check_device(g.device)) {
        std::printf("skipped: CUDA device 0 cannot own a line (%s)\n", e->message().c_str());
        return 0;
    }
    if (!g.ok(a.device_primary_ctx_retain(&g.context, g.device), "cuDevicePrimaryCtxRetain") ||
        !g.ok(a.ctx_set_current(g.context), "cuCtxSetCurrent"))
        return 1;
    std::printf("CUDA driver %d, %d device(s); word wait: %s\n", g.driver->version(), count,
                std::string(word_wait::probe().name()).c_str());

    store_seen_by_line_and_port(g);
    memset_then_wait_each_plan(g);
    memset_then_port_wait_each_plan(g);
    destruction_waits_for_stores(g);
    doorbell_signalled_by_device(g);
    event_awaited_through_port(g);
    device_error_reaches_waiter(g); // last: a trap poisons the context

    std::printf("%s: %d failure(s)\n", failures == 0 ? "passed" : "FAILED", failures);
    return failures == 0 ? 0 : 1;
}
