// SPDX-License-Identifier: BSL-1.0
//
// test/metal/main.cpp: device tests of the Metal backend (gpu_async_metal_tests), for a Mac.
//
// Built only with -DGPU_ASYNC_BUILD_METAL_TESTS=ON. Plain C++: the Objective-C runtime and
// Metal.framework are loaded at run time, so it builds anywhere; without them, or without a
// Metal device, it prints "skipped: ..." and exits 0. With one, each case fills a 256 MiB private
// buffer with a blit encoder and encodes the event's next value behind the fill, then:
//
//   query_sees_the_signal       queries until done; signaledValue is the target afterwards
//   park_sees_the_signal        parks of 100 ms (waitUntilSignaledValue:timeoutMS: where the OS
//                               has it) until one sees the target
//   block_returns_after_fill    block() returns once the fill's command buffer has signalled
//   wait_each_plan              the wait machine's inline driver (run_wait) with block, poll,
//                               flag (1 ms parks: the OS wait; 100 us parks: the poll) and
//                               flag+predict, five rounds each, printing the wait time and kind
//   port_wait_each_plan         the same through gpu_completion_port::async_wait(source, plan)
//   host_signal_ends_a_wrapped_wait
//                               an event the program made itself, wrapped, and signalled from
//                               another thread with setSignaledValue:
//
// Command buffer faults are tested against the fake runtime only (test/unit/devices/metal.cpp): a
// buffer fails here only after a GPU time-out of several seconds.
//
// Each result row is also printed as "RESULT|...". Exit status: 0 when every case passed or the
// run was skipped, 1 otherwise.
//
#include <gpu_async/device/metal.hpp>

#include <gpu_async/core/estimator.hpp>
#include <gpu_async/core/wait_machine.hpp>
#include <gpu_async/core/wait_plan.hpp>
#include <gpu_async/gpu_completion_port.hpp>
#include <gpu_async/host/std_host.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

namespace asio = boost::asio;
using namespace gpu_async;

int failures = 0;

void check(bool ok, const char* what, const std::string& detail = {}) {
    std::printf("  %s %s%s%s\n", ok ? "ok  " : "FAIL", what, detail.empty() ? "" : ": ",
                detail.c_str());
    if (!ok) ++failures;
}

/// NSRange, passed by value to fillBuffer:range:value:.
struct ns_range {
    metal::uinteger_t location;
    metal::uinteger_t length;
};

constexpr metal::uinteger_t fill_bytes = metal::uinteger_t{256} << 20;
constexpr metal::uinteger_t storage_mode_private = 2u << 4; ///< MTLResourceStorageModePrivate

/// A device, its command queue and a private buffer to fill, owned (released once each).
class gpu {
public:
    gpu(const metal_runtime& rt, metal_device device)
        : rt_(&rt)
        , device_(std::move(device))
        , queue_(rt.send<metal::object_t>(device_.native_handle(), "newCommandQueue"))
        , buffer_(rt.send<metal::object_t>(device_.native_handle(), "newBufferWithLength:options:",
                                           fill_bytes, storage_mode_private)) {}
    gpu(const gpu&) = delete;
    gpu& operator=(const gpu&) = delete;
    ~gpu() {
        rt_->release(buffer_);
        rt_->release(queue_);
    }

    bool ready() const { return queue_ != nullptr && buffer_ != nullptr; }
    const metal_runtime& runtime() const { return *rt_; }
    const metal_device& device() const { return device_; }

    /// Commits a command buffer that fills the buffer with `value`, then signals `source`'s
    /// next value; returns that value.
    std::uint64_t submit_fill(metal_source& source, std::uint8_t value) const {
        const auto& a = rt_->api();
        void* pool = a.autorelease_pool_push != nullptr ? a.autorelease_pool_push() : nullptr;
        const metal::object_t cb = rt_->send<metal::object_t>(queue_, "commandBuffer"); // +0
        const metal::object_t blit = rt_->send<metal::object_t>(cb, "blitCommandEncoder");
        rt_->send<void>(blit, "fillBuffer:range:value:", buffer_, ns_range{0, fill_bytes}, value);
        rt_->send<void>(blit, "endEncoding");
        const std::uint64_t target = source.encode_signal(cb); // retains cb while watched
        rt_->send<void>(cb, "commit");
        if (pool != nullptr) a.autorelease_pool_pop(pool);
        return target;
    }

private:
    const metal_runtime* rt_;
    metal_device device_;
    metal::object_t queue_;
    metal::object_t buffer_;
};

std::optional<metal_source> make_source(const gpu& g) {
    auto s = metal_source::create(g.device());
    if (!s.has_value()) {
        check(false, "metal_source::create", s.error().message());
        return std::nullopt;
    }
    return std::move(s).value();
}

// --- cases ----------------------------------------------------------------------------------

void query_sees_the_signal(const gpu& g) {
    std::printf("query_sees_the_signal\n");
    auto s = make_source(g);
    if (!s) return;
    const std::uint64_t target = g.submit_fill(*s, 1);
    query_result q = query_result::pending();
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (q.is_pending() && std::chrono::steady_clock::now() < until) {
        q = s->query();
        if (q.is_pending()) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    check(q.is_done(), "the query said done within 10 s",
          q.is_failed() ? s->last_error()->message() : std::string());
    check(s->last_value() == target, "signaledValue is the encoded value",
          std::to_string(s->last_value()) + " vs " + std::to_string(target));
    check(s->watched() == 0, "the completed command buffer was released");
}

void park_sees_the_signal(const gpu& g) {
    std::printf("park_sees_the_signal\n");
    auto s = make_source(g);
    if (!s) return;
    std::printf("  waitUntilSignaledValue:timeoutMS: %s\n",
                s->has_os_wait() ? "present" : "absent (polls)");
    g.submit_fill(*s, 2);
    bool seen = false;
    for (int i = 0; i < 100 && !seen; ++i) // bounded: at most 10 s of 100 ms parks
        seen = s->park(dur_ns::from_ms(100));
    check(seen, "a park saw the target");
    check(s->query().is_done(), "the query agrees");
}

void block_returns_after_fill(const gpu& g) {
    std::printf("block_returns_after_fill\n");
    auto s = make_source(g);
    if (!s) return;
    g.submit_fill(*s, 3);
    const std::error_code ec = s->block();
    check(!ec, "block() returned without error", ec ? s->last_error()->message() : "");
    check(s->query().is_done(), "the query agrees");
}

const std::vector<std::string>& plans() {
    static const std::vector<std::string> p = {
        "block", "poll", "flag:park_us=1000,backstop_us=10000", "flag:park_us=100,backstop_us=1000",
        "flag:park_us=1000,backstop_us=10000+predict:margin_us=150,min_sleep_us=20,"
        "max_sleep_us=50000,window=8"};
    return p;
}

void print_row(const std::string& where, const std::string& plan, int round, const wait_report& r) {
    std::printf("  %-4s %-92s %-9s %10.1f %10.1f %6u %9u\n", where.c_str(), plan.c_str(),
                std::string(to_string(r.kind)).c_str(), static_cast<double>(r.total.ns) / 1e3,
                static_cast<double>(r.slept.ns) / 1e3, r.parks, r.backstop_queries);
    std::printf("RESULT|%s|%s|%d|%s|%.1f|%.1f|%u|%u\n", where.c_str(), plan.c_str(), round,
                std::string(to_string(r.kind)).c_str(), static_cast<double>(r.total.ns) / 1e3,
                static_cast<double>(r.slept.ns) / 1e3, r.parks, r.backstop_queries);
}

void wait_each_plan(const gpu& g) {
    std::printf("wait_each_plan (a 256 MiB fill, then run_wait)\n");
    auto s = make_source(g);
    if (!s) return;
    const std_clock clock;
    std_timer timer;
    point_table<std::string> estimates;
    for (const std::string& text : plans()) {
        auto plan = wait_plan::parse(text);
        if (!plan.has_value()) return check(false, "wait_plan::parse", plan.error().message());
        for (int round = 1; round <= 5; ++round) {
            g.submit_fill(*s, static_cast<std::uint8_t>(round));
            std::optional<std::uint64_t> sleep;
            if (plan.value().predict()) sleep = estimates.sleep_ns(text, *plan.value().predict());
            const wait_result r = run_wait(*s, plan.value(), sleep, clock, timer);
            if (!r.has_value()) return check(false, text.c_str(), r.message());
            if (plan.value().predict() && r.value().outcome)
                estimates.observe(text, *plan.value().predict(), *r.value().outcome);
            if (!s->query().is_done()) check(false, "done after the wait", text);
            print_row("run", text, round, r.value());
        }
    }
    check(true, "every plan waited for the fill");
}

void port_wait_each_plan(const gpu& g) {
    std::printf("port_wait_each_plan (the same through gpu_completion_port)\n");
    auto s = make_source(g);
    if (!s) return;
    asio::io_context io;
    gpu_completion_port port(io);
    for (const std::string& text : plans()) {
        auto plan = wait_plan::parse(text);
        if (!plan.has_value()) return check(false, "wait_plan::parse", plan.error().message());
        for (int round = 1; round <= 5; ++round) {
            g.submit_fill(*s, static_cast<std::uint8_t>(round));
            std::optional<boost::system::error_code> ec;
            wait_report report;
            port.async_wait(*s, plan.value(), text,
                            [&](boost::system::error_code e, wait_report r) {
                                ec = e;
                                report = r;
                            });
            io.restart();
            io.run_for(std::chrono::seconds(10));
            if (!ec.has_value()) return check(false, text.c_str(), "no completion within 10 s");
            if (*ec) return check(false, text.c_str(), ec->message());
            print_row("port", text, round, report);
        }
    }
    check(true, "every plan completed through the port");
}

void host_signal_ends_a_wrapped_wait(const gpu& g) {
    std::printf("host_signal_ends_a_wrapped_wait\n");
    const metal_runtime& rt = g.runtime();
    const metal::object_t event =
        rt.send<metal::object_t>(g.device().native_handle(), "newSharedEvent"); // +1, ours
    if (event == nullptr) return check(false, "newSharedEvent returned nil");
    {
        auto s = metal_source::wrap(rt, event);
        if (!s.has_value()) {
            rt.release(event);
            return check(false, "metal_source::wrap", s.error().message());
        }
        s.value().set_target(5);
        std::thread signaller([&rt, event] {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            rt.send<void>(event, "setSignaledValue:", std::uint64_t{5});
        });
        const std::error_code ec = s.value().block();
        signaller.join();
        check(!ec, "block() returned once the host signalled");
        check(s.value().last_value() == 5, "signaledValue is 5");
    }
    rt.release(event); // the wrap's own reference went with the source
}

} // namespace

int main() {
    auto loaded = metal_runtime::load();
    if (!loaded.has_value()) {
        std::printf("skipped: no Metal (%s)\n", loaded.error().message().c_str());
        return 0;
    }
    const metal_runtime& rt = *loaded.value();
    auto device = metal_device::create_system_default(rt);
    if (!device.has_value()) {
        std::printf("skipped: no Metal device (%s)\n", device.error().message().c_str());
        return 0;
    }
    std::printf("Metal device: %s\n", device.value().name().c_str());
    gpu g(rt, std::move(device).value());
    if (!g.ready()) {
        std::printf("FAIL: the device made no command queue or no 256 MiB buffer\n");
        return 1;
    }

    query_sees_the_signal(g);
    park_sees_the_signal(g);
    block_returns_after_fill(g);
    wait_each_plan(g);
    port_wait_each_plan(g);
    host_signal_ends_a_wrapped_wait(g);

    std::printf("%s: %d failure(s)\n", failures == 0 ? "passed" : "FAILED", failures);
    return failures == 0 ? 0 : 1;
}
