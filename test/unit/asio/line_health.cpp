// SPDX-License-Identifier: BSL-1.0
// The line owners' health queries, end to end through the port: a plain descriptor wait
// (gpu_completion_port::async_wait) on an owned CUDA or HIP line, or on a Metal source's mirror,
// ends with errc::device_fault once the fake context reports a sticky fault, and completes
// normally while the context stays healthy and the store lands. No test calls the queries
// itself: the reactor's own waiter runs them, its watcher thread under io_context::run_for, the
// calling thread under run_fill.
//
// The fakes serve one thread at a time. Every call a test makes into a fake (creating the line,
// enqueueing the store, setting the sticky status) happens before the wait starts the reactor's
// waiter; while the wait is pending only the waiter calls the fake (through the queries); the
// io_context is destroyed (its watcher joined) before the test reads the fake or closes the line.
#include <gpu_async/gpu_completion_port.hpp>

#include "common/asio.hpp"
#include "common/fake_cuda_driver.hpp"
#include "common/fake_hip_driver.hpp"
#include "common/fake_metal_runtime.hpp"
#include "common/fault_recorder.hpp"
#include "common/io_context_fixture.hpp"
#include "common/run_fill_bounded.hpp"
#include "common/slots.hpp"

#include <gpu_async/device/cuda.hpp>
#include <gpu_async/device/hip.hpp>
#include <gpu_async/device/metal.hpp>
#include <gpu_async/line/detail/line_watchers.hpp>
#include <gpu_async/line/line_health.hpp>
#include <gpu_async/line/line_life.hpp>
#include <gpu_async/run_fill.hpp>

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

namespace unit_asio_line_health {

using gpu_async::completion_line;
using gpu_async::dur_ns;
using gpu_async::errc;
using gpu_async::error_code;
using gpu_async::gpu_completion_port;
using gpu_async::line_status;
using gpu_async::memory_descriptor;
using gpu_async::test::backstop_scope;
using gpu_async::test::slot;

namespace {

/// Who runs the reactor: its watcher thread (the test's thread in io_context::run_for), or the
/// test's thread in run_fill (no watcher).
enum class waiter { watcher, fill };

/// A health query of a line of its own, beside the line owners' ones: it counts the runs of the
/// process's queries, notes whether any ran on a thread other than the test's, and at the
/// `land_at`-th run (never when 0) lands a store, as the device would: `value` into `word`,
/// with no call into a fake. The runs are one at a time, so by the n-th one every query of the
/// n - 1 runs before it has returned.
class health_spy final : public gpu_async::line_health {
public:
    explicit health_spy(int land_at = 0, std::atomic<std::uint64_t>* word = nullptr,
                        std::uint64_t value = 0)
        : word_(word)
        , value_(value)
        , land_at_(land_at) {
        gpu_async::watch_line_health(own_, *this);
    }
    ~health_spy() { gpu_async::unwatch_line_health(own_); }
    health_spy(const health_spy&) = delete;
    health_spy& operator=(const health_spy&) = delete;

    void query(const completion_line&) noexcept override {
        if (std::this_thread::get_id() != test_thread_) off_thread_.store(true);
        const int n = runs_.fetch_add(1) + 1;
        if (n == land_at_) word_->store(value_, std::memory_order_release);
    }

    int runs() const { return runs_.load(); }
    bool ran_off_the_test_thread() const { return off_thread_.load(); }

private:
    completion_line own_;
    std::atomic<std::uint64_t>* word_;
    std::uint64_t value_;
    int land_at_;
    std::thread::id test_thread_ = std::this_thread::get_id();
    std::atomic<int> runs_{0};
    std::atomic<bool> off_thread_{false};
};

/// Waits on `d` through a port of a fresh io_context run by `w`, bounded; returns how the wait
/// ended. The io_context is gone (its watcher joined) when this returns.
std::optional<error_code> wait_through_the_port(const memory_descriptor& d, waiter w) {
    std::optional<error_code> ended;
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    if (w == waiter::watcher) {
        port.async_wait(d, [&](error_code ec) { ended = ec; });
        gpu_async::test::run_to_completion(ctx);
    } else {
        // Started from inside run_fill: the reactor never starts its watcher thread.
        asio::post(ctx, [&] { port.async_wait(d, [&](error_code ec) { ended = ec; }); });
        gpu_async::test::run_fill_bounded(ctx);
    }
    return ended;
}

/// Checks who ran the queries: the watcher thread, or the test's own (run_fill).
void check_the_waiter_ran_them(const health_spy& spy, waiter w) {
    BOOST_TEST(spy.runs() >= 1);
    BOOST_TEST(spy.ran_off_the_test_thread() == (w == waiter::watcher));
}

/// Waits for `pending` through the port, the health queries run by its waiter every `backstop`
/// (a spy counting their runs); it must end with device_fault and leave its slot faulted.
void expect_the_fault_to_end(const memory_descriptor& pending, waiter w, dur_ns backstop) {
    std::optional<error_code> ended;
    {
        backstop_scope b(backstop);
        health_spy spy;
        ended = wait_through_the_port(pending, w);
        check_the_waiter_ran_them(spy, w);
    }
    BOOST_TEST_REQUIRE(ended.has_value());
    BOOST_TEST((*ended == errc::device_fault));
    BOOST_TEST((gpu_async::descriptor_status(pending) == line_status::faulted));
}

// --- CUDA ---------------------------------------------------------------------------------------

using cuda_fixture = gpu_async::test::cuda_fake::fixture;

void cuda_sticky_fault_ends_the_wait(gpu_async::test::cuda_fake::fake_cuda& state,
                                     const gpu_async::cuda_driver& d, waiter w, dur_ns backstop) {
    auto line = gpu_async::cuda_line::create_on(d, 0);
    BOOST_TEST_REQUIRE(line.has_value());
    state.land_stores = false; // the store never lands: only the fault can end the wait
    auto stored = line.value().store(slot(0), state.stream(0));
    BOOST_TEST_REQUIRE(stored.has_value());
    const memory_descriptor pending = stored.value();
    state.sticky = gpu_async::cuda::error_launch_failed;
    state.calls.clear();
    expect_the_fault_to_end(pending, w, backstop);
    BOOST_TEST(state.count_prefix("cuStreamQuery 2") >= 1u); // the line's own probe, asked
    BOOST_TEST(!pending.is_complete());
}

void cuda_healthy_context_lets_the_store_complete_the_wait(
    gpu_async::test::cuda_fake::fake_cuda& state, const gpu_async::cuda_driver& d, waiter w,
    dur_ns backstop) {
    auto line = gpu_async::cuda_line::create_on(d, 0);
    BOOST_TEST_REQUIRE(line.has_value());
    state.land_stores = false; // enqueued; it lands only after the queries ran
    auto stored = line.value().store(slot(0), state.stream(0));
    BOOST_TEST_REQUIRE(stored.has_value());
    const memory_descriptor pending = stored.value();
    BOOST_TEST_REQUIRE(state.stores.size() == 1u);
    const auto& s = state.stores.back();
    auto* word = reinterpret_cast<std::atomic<std::uint64_t>*>(
        static_cast<std::uintptr_t>(s.address - gpu_async::test::cuda_fake::device_offset));
    BOOST_TEST_REQUIRE((word == &pending.word()));
    BOOST_TEST_REQUIRE(!pending.is_complete());
    state.calls.clear();
    constexpr int land_at = 3; // two whole runs of the queries first, the wait pending
    std::optional<error_code> ended;
    {
        backstop_scope b(backstop);
        health_spy spy(land_at, word, s.value);
        ended = wait_through_the_port(pending, w);
        check_the_waiter_ran_them(spy, w);
        BOOST_TEST(spy.runs() >= land_at);
    }
    BOOST_TEST_REQUIRE(ended.has_value());
    BOOST_TEST(!*ended);
    BOOST_TEST((gpu_async::descriptor_status(pending) == line_status::live));
    BOOST_TEST(state.count_prefix("cuStreamQuery 2") >= std::size_t{land_at - 1});
    BOOST_TEST(pending.is_complete());
}

// --- HIP ----------------------------------------------------------------------------------------

using hip_fixture = gpu_async::test::hip_fake::fixture;

void hip_sticky_fault_ends_the_wait(gpu_async::test::hip_fake::fake_hip& state,
                                    const gpu_async::hip_driver& d, waiter w, dur_ns backstop) {
    auto line = gpu_async::hip_line::create_on(d, 0);
    BOOST_TEST_REQUIRE(line.has_value());
    // The next store of slot 1, not enqueued yet: the wait stays pending until the fault.
    const memory_descriptor last = line.value().mapped().last(slot(1));
    const memory_descriptor pending(last.line(), last.slot(), last.target() + 1, last.generation());
    BOOST_TEST_REQUIRE(!pending.is_complete());
    state.sticky = 719; // hipErrorLaunchFailure
    state.calls.clear();
    expect_the_fault_to_end(pending, w, backstop);
    BOOST_TEST(state.count_prefix("hipStreamQuery 2") >= 1u); // the line's own probe, asked
}

// --- Metal --------------------------------------------------------------------------------------

struct metal_fixture {
    gpu_async::test::fake_metal_runtime fake;
    std::unique_ptr<gpu_async::metal_runtime> rt;
    metal_fixture() {
        auto r = gpu_async::metal_runtime::from_api(fake.api());
        BOOST_TEST_REQUIRE(r.has_value());
        rt = std::move(r).value();
    }
    gpu_async::metal_source source() {
        auto dev = gpu_async::metal_device::create_system_default(*rt);
        BOOST_TEST_REQUIRE(dev.has_value());
        auto s = gpu_async::metal_source::create(dev.value());
        BOOST_TEST_REQUIRE(s.has_value());
        fake.calls.clear();
        return std::move(s).value();
    }
};

void metal_failed_buffer_ends_the_wait(metal_fixture& f, waiter w, dur_ns backstop) {
    gpu_async::metal_source s = f.source();
    const gpu_async::metal::object_t cb = f.fake.command_buffer();
    s.encode_signal(cb); // target 1, never signalled
    const memory_descriptor pending = s.descriptor();
    BOOST_TEST_REQUIRE(!pending.is_complete());
    gpu_async::test::fake_metal_runtime::of(cb).status =
        gpu_async::metal::command_buffer_status_error;
    f.fake.calls.clear();
    expect_the_fault_to_end(pending, w, backstop);
    BOOST_TEST(f.fake.count("status cb1") >= 1u);
}

} // namespace

BOOST_AUTO_TEST_SUITE(line_health_port_suite)

BOOST_FIXTURE_TEST_CASE(a_cuda_sticky_fault_ends_a_wait_through_the_watcher, cuda_fixture) {
    auto d = driver();
    cuda_sticky_fault_ends_the_wait(state, *d, waiter::watcher, dur_ns::zero());
}

BOOST_FIXTURE_TEST_CASE(a_cuda_sticky_fault_ends_a_wait_under_run_fill, cuda_fixture) {
    auto d = driver();
    cuda_sticky_fault_ends_the_wait(state, *d, waiter::fill, dur_ns::from_ms(1));
}

BOOST_FIXTURE_TEST_CASE(a_healthy_cuda_context_lets_the_store_end_a_wait_through_the_watcher,
                        cuda_fixture) {
    auto d = driver();
    cuda_healthy_context_lets_the_store_complete_the_wait(state, *d, waiter::watcher,
                                                          dur_ns::zero());
}

BOOST_FIXTURE_TEST_CASE(a_healthy_cuda_context_lets_the_store_end_a_wait_under_run_fill,
                        cuda_fixture) {
    auto d = driver();
    cuda_healthy_context_lets_the_store_complete_the_wait(state, *d, waiter::fill,
                                                          dur_ns::from_ms(1));
}

BOOST_FIXTURE_TEST_CASE(a_hip_sticky_fault_ends_a_wait_through_the_watcher, hip_fixture) {
    auto d = driver();
    hip_sticky_fault_ends_the_wait(state, *d, waiter::watcher, dur_ns::from_ms(1));
}

BOOST_FIXTURE_TEST_CASE(a_hip_sticky_fault_ends_a_wait_under_run_fill, hip_fixture) {
    auto d = driver();
    hip_sticky_fault_ends_the_wait(state, *d, waiter::fill, dur_ns::zero());
}

BOOST_FIXTURE_TEST_CASE(a_failed_metal_buffer_ends_a_mirror_wait_through_the_watcher,
                        metal_fixture) {
    metal_failed_buffer_ends_the_wait(*this, waiter::watcher, dur_ns::zero());
}

BOOST_FIXTURE_TEST_CASE(a_failed_metal_buffer_ends_a_mirror_wait_under_run_fill, metal_fixture) {
    metal_failed_buffer_ends_the_wait(*this, waiter::fill, dur_ns::from_ms(1));
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_asio_line_health
