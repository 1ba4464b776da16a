// SPDX-License-Identifier: BSL-1.0
// The health queries of the lines the library owns, against the fake drivers: a mapped CUDA or
// HIP line queries a stream of its own in its context and faults every slot once the context
// reports a sticky error; the Metal mirror faults its slot once a watched command buffer is in
// error. Each test drives the queries itself (gpu_async::detail::query_line_health at virtual
// times) and hears the faults through a recording line watcher, or through a std_watcher.
#include <gpu_async/device/cuda.hpp>
#include <gpu_async/device/hip.hpp>
#include <gpu_async/device/metal.hpp>

#include <gpu_async/core/error.hpp>
#include <gpu_async/host/std_host.hpp>
#include <gpu_async/line/detail/line_watchers.hpp>
#include <gpu_async/line/line_health.hpp>
#include <gpu_async/line/line_life.hpp>

#include "common/fake_cuda_driver.hpp"
#include "common/fake_hip_driver.hpp"
#include "common/fake_metal_runtime.hpp"
#include "common/fault_recorder.hpp"
#include "common/slots.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

namespace unit_devices_line_health {

using namespace gpu_async;
using namespace gpu_async::test;
using calls_t = std::vector<std::string>;

namespace {

constexpr std::uint64_t ms = 1'000'000;

// Runs the health queries now (a fresh virtual time, a zero backstop: due; the fakes turn them
// off otherwise); true when they ran.
bool run_queries() {
    backstop_scope b(dur_ns::zero());
    return detail::query_line_health(fresh_health_now());
}

} // namespace

// --- CUDA -------------------------------------------------------------------------------------

BOOST_AUTO_TEST_SUITE(cuda_health)

using namespace gpu_async::test::cuda_fake;

BOOST_FIXTURE_TEST_CASE(a_line_queries_a_stream_of_its_own_in_its_context, fixture) {
    auto d = driver();
    {
        auto line = cuda_line::create_on(*d, 1);
        BOOST_TEST_REQUIRE(line.has_value());
        BOOST_TEST(line.value().mapped().has_health_query());
        BOOST_TEST(detail::line_health_watched());
        BOOST_TEST(state.count_prefix("cuStreamCreate flags 1 in 1") == 1u);
        BOOST_TEST(state.live_streams == 1);
        state.calls.clear();
        BOOST_TEST(run_queries());
        BOOST_TEST(
            (state.calls == calls_t{"cuCtxPushCurrent 1", "cuStreamQuery 2", "cuCtxPopCurrent"}));
        BOOST_TEST(state.current == -1); // the reactor's thread is as it was
        state.calls.clear();
    }
    // Closed: unwatched before the retirement, the stream destroyed after the settle.
    BOOST_TEST((state.calls == calls_t{"cuCtxPushCurrent 1", "cuCtxSynchronize", "cuCtxPopCurrent",
                                       "cuCtxPushCurrent 1", "cuStreamDestroy 2", "cuCtxPopCurrent",
                                       "cuCtxPushCurrent 1", "cuMemFreeHost", "cuCtxPopCurrent",
                                       "cuDevicePrimaryCtxRelease 1"}));
    BOOST_TEST(state.live_streams == 0);
    BOOST_TEST(!detail::line_health_watched());
    state.calls.clear();
    BOOST_TEST(!run_queries());
    BOOST_TEST(state.calls.empty());
}

BOOST_FIXTURE_TEST_CASE(a_sticky_fault_faults_every_slot_of_the_line_once, fixture) {
    auto d = driver();
    fault_recorder reactor;
    auto line = cuda_line::create_on(*d, 0);
    BOOST_TEST_REQUIRE(line.has_value());
    auto& l = line.value();
    state.land_stores = false; // the store never lands: its wait stays pending
    auto stored = l.store(slot(2), state.stream(0));
    BOOST_TEST_REQUIRE(stored.has_value());
    const memory_descriptor pending = stored.value();
    BOOST_TEST((descriptor_status(pending) == line_status::live));

    state.sticky = cuda::error_launch_failed;
    BOOST_TEST(run_queries());
    const auto faults = reactor.faults_of(l.line());
    BOOST_TEST_REQUIRE(faults.size() == line_words);
    for (std::size_t i = 0; i < line_words; ++i)
        BOOST_TEST(faults[i].slot == i);
    BOOST_TEST((descriptor_status(pending) == line_status::faulted));
    BOOST_TEST((descriptor_status(l.mapped().last(slot(5))) == line_status::faulted));

    // Told once: later runs do not query the faulted context again.
    state.calls.clear();
    BOOST_TEST(run_queries());
    BOOST_TEST(state.calls.empty());
    BOOST_TEST(reactor.faults_of(l.line()).size() == line_words);
    const completion_line& watched = l.line(); // its address only, once closed
    BOOST_TEST(!l.close().has_value());
    BOOST_TEST(reactor.retirements_of(watched) <= 1u);
}

BOOST_FIXTURE_TEST_CASE(a_sticky_fault_ends_a_pending_descriptor_wait_with_device_fault, fixture) {
    auto d = driver();
    std_watcher w;
    auto line = cuda_line::create_on(*d, 0);
    BOOST_TEST_REQUIRE(line.has_value());
    state.land_stores = false;
    auto stored = line.value().store(slot(0), state.stream(0));
    BOOST_TEST_REQUIRE(stored.has_value());
    std::promise<std::error_code> ended;
    watch_handle h = w.on_end(stored.value(), [&](std::error_code ec) { ended.set_value(ec); });
    state.sticky = cuda::error_launch_failed;
    run_queries(); // (or the watcher's own run, where it runs them)
    auto f = ended.get_future();
    BOOST_TEST_REQUIRE((f.wait_for(std::chrono::seconds(10)) == std::future_status::ready));
    BOOST_TEST(f.get() == make_error_code(errc::device_fault));
}

BOOST_FIXTURE_TEST_CASE(a_healthy_or_busy_context_faults_nothing, fixture) {
    auto d = driver();
    fault_recorder reactor;
    auto line = cuda_line::create_on(*d, 0);
    BOOST_TEST_REQUIRE(line.has_value());
    BOOST_TEST(run_queries()); // CUDA_SUCCESS
    state.pending_queries = 1;
    BOOST_TEST(run_queries()); // CUDA_ERROR_NOT_READY
    BOOST_TEST(state.pending_queries == 0);
    // A failed push says nothing of the context.
    state.fail["cuCtxPushCurrent"] = cuda::error_invalid_context;
    BOOST_TEST(run_queries());
    state.fail.clear();
    BOOST_TEST(reactor.faults_of(line.value().line()).empty());
    BOOST_TEST((descriptor_status(line.value().mapped().last(slot(0))) == line_status::live));
}

// Each call of the probe query fails in turn (the push, the query, the pop), on a healthy and
// on a faulted context. Every push that succeeded is popped exactly once, on every path: after a
// query that found a fault too (never a second pop: one that the driver refused may have left
// the context pushed or not, and a second could take the caller's own context off its stack);
// the fault is told whenever the query answered it, even when the pop after it failed; a failed
// push or pop says nothing of the context.
BOOST_AUTO_TEST_CASE(the_probe_querys_push_and_pop_balance_on_every_path) {
    for (const int sticky : {0, cuda::error_launch_failed}) {
        for (int n = 1; n <= 3; ++n) {
            fixture f;
            auto d = f.driver();
            fault_recorder reactor;
            auto line = cuda_line::create_on(*d, 0);
            BOOST_TEST_REQUIRE(line.has_value());
            f.state.sticky = sticky;
            f.state.calls.clear();
            f.state.call_count = 0;
            f.state.fail_at = n;
            f.state.fail_status = cuda::error_invalid_context;
            BOOST_TEST(run_queries());
            const std::string failed = f.state.failed_call;
            BOOST_TEST_CONTEXT("sticky " << sticky << ", " << failed << " failed") {
                BOOST_TEST(!failed.empty());
                // (A failed call is logged by its name alone.)
                if (failed == "cuCtxPushCurrent")
                    BOOST_TEST((f.state.calls == calls_t{"cuCtxPushCurrent"}));
                else
                    BOOST_TEST(f.state.count_prefix("cuCtxPopCurrent") == 1u);
                BOOST_TEST(f.state.calls.size() == (failed == "cuCtxPushCurrent" ? 1u : 3u));
                // Only a refused pop leaves the push behind.
                BOOST_TEST(f.state.pushed.size() == (failed == "cuCtxPopCurrent" ? 1u : 0u));
                // The query's own failure is the context's answer: a fault.
                const bool told =
                    failed == "cuStreamQuery" || (sticky != 0 && failed != "cuCtxPushCurrent");
                BOOST_TEST(reactor.faults_of(line.value().line()).size() ==
                           (told ? line_words : 0u));
            }
        }
    }
}

BOOST_FIXTURE_TEST_CASE(queries_run_at_most_once_per_backstop, fixture) {
    auto d = driver();
    backstop_scope b(dur_ns::from_ms(10));
    auto line = cuda_line::create_on(*d, 0);
    BOOST_TEST_REQUIRE(line.has_value());
    state.calls.clear();
    const std::uint64_t t = fresh_health_now();
    BOOST_TEST(detail::query_line_health(t));
    BOOST_TEST(state.count_prefix("cuStreamQuery") == 1u);
    BOOST_TEST(!detail::query_line_health(t + 5 * ms));
    BOOST_TEST(state.count_prefix("cuStreamQuery") == 1u);
    BOOST_TEST(detail::query_line_health(t + 10 * ms));
    BOOST_TEST(state.count_prefix("cuStreamQuery") == 2u);
}

BOOST_FIXTURE_TEST_CASE(a_moved_line_keeps_its_health_query, fixture) {
    auto d = driver();
    fault_recorder reactor;
    auto made = cuda_line::create_on(*d, 0);
    BOOST_TEST_REQUIRE(made.has_value());
    cuda_line line = std::move(made).value();
    BOOST_TEST(line.mapped().has_health_query());
    state.sticky = cuda::error_launch_failed;
    BOOST_TEST(run_queries());
    BOOST_TEST(reactor.faults_of(line.line()).size() == line_words);
}

BOOST_FIXTURE_TEST_CASE(without_stream_creation_a_line_has_no_health_query, fixture) {
    state.missing = {"cuStreamCreate"};
    auto d = driver();
    auto line = cuda_line::create_on(*d, 0);
    BOOST_TEST_REQUIRE(line.has_value());
    BOOST_TEST(!line.value().mapped().has_health_query());
    BOOST_TEST(state.count_prefix("cuStreamCreate") == 0u);
    BOOST_TEST(!detail::line_health_watched());
}

BOOST_FIXTURE_TEST_CASE(a_failed_probe_creation_fails_the_line_and_gives_back, fixture) {
    auto d = driver();
    state.fail["cuStreamCreate"] = cuda::error_invalid_value;
    auto line = cuda_line::create_on(*d, 0);
    BOOST_TEST_REQUIRE(!line.has_value());
    BOOST_TEST(line.error().args().at(0) == "cuStreamCreate");
    BOOST_TEST(state.pages.empty());
    BOOST_TEST(state.refs[0] == 0);
    BOOST_TEST(state.live_streams == 0);
    BOOST_TEST(!detail::line_health_watched());
}

BOOST_FIXTURE_TEST_CASE(a_failed_probe_destruction_is_reported_by_close, fixture) {
    auto d = driver();
    auto line = cuda_line::create_on(*d, 0);
    BOOST_TEST_REQUIRE(line.has_value());
    state.fail["cuStreamDestroy"] = cuda::error_invalid_value;
    const auto e = line.value().close();
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST(e->args().at(0) == "cuStreamDestroy");
    BOOST_TEST(state.pages.empty()); // the rest of the close went on
    BOOST_TEST(state.refs[0] == 0);
    BOOST_TEST(!detail::line_health_watched());
}

BOOST_AUTO_TEST_SUITE_END()

// --- HIP --------------------------------------------------------------------------------------

BOOST_AUTO_TEST_SUITE(hip_health)

using namespace gpu_async::test::hip_fake;

BOOST_FIXTURE_TEST_CASE(a_line_queries_a_stream_of_its_own_on_its_device, fixture) {
    auto d = driver();
    {
        auto line = hip_line::create_on(*d, 1);
        BOOST_TEST_REQUIRE(line.has_value());
        BOOST_TEST(line.value().mapped().has_health_query());
        BOOST_TEST(state.live_streams == 1);
        BOOST_TEST(state.stream2_device == 1);
        state.calls.clear();
        BOOST_TEST(run_queries());
        BOOST_TEST((state.calls == calls_t{"hipGetDevice", "hipSetDevice 1",
                                           "hipStreamQuery 2 on 1", "hipSetDevice 0"}));
        BOOST_TEST(state.current == 0);
    }
    BOOST_TEST(state.live_streams == 0);
    BOOST_TEST(!detail::line_health_watched());
}

BOOST_FIXTURE_TEST_CASE(a_sticky_fault_faults_every_slot_of_the_line_once, fixture) {
    auto d = driver();
    fault_recorder reactor;
    auto line = hip_line::create_on(*d, 0);
    BOOST_TEST_REQUIRE(line.has_value());
    const memory_descriptor d3 = line.value().mapped().last(slot(3));
    state.sticky = 719; // hipErrorLaunchFailure
    BOOST_TEST(run_queries());
    BOOST_TEST(reactor.faults_of(line.value().line()).size() == line_words);
    BOOST_TEST((descriptor_status(d3) == line_status::faulted));
    state.calls.clear();
    BOOST_TEST(run_queries());
    BOOST_TEST(state.calls.empty());
}

BOOST_FIXTURE_TEST_CASE(a_healthy_or_busy_device_faults_nothing, fixture) {
    auto d = driver();
    fault_recorder reactor;
    auto line = hip_line::create_on(*d, 0);
    BOOST_TEST_REQUIRE(line.has_value());
    BOOST_TEST(run_queries());
    state.stream_status = hip::error_not_ready;
    BOOST_TEST(run_queries());
    BOOST_TEST(reactor.faults_of(line.value().line()).empty());
}

BOOST_FIXTURE_TEST_CASE(without_stream_creation_a_line_has_no_health_query, fixture) {
    state.missing = {"hipStreamCreate"};
    auto d = driver();
    auto line = hip_line::create_on(*d, 0);
    BOOST_TEST_REQUIRE(line.has_value());
    BOOST_TEST(!line.value().mapped().has_health_query());
    BOOST_TEST(!detail::line_health_watched());
}

BOOST_AUTO_TEST_SUITE_END()

// --- Metal ------------------------------------------------------------------------------------

BOOST_AUTO_TEST_SUITE(metal_health)

namespace {

using fake_object = gpu_async::test::fake_objc_object;

struct metal_fixture {
    fake_metal_runtime fake;
    std::unique_ptr<metal_runtime> rt;
    metal_fixture() {
        auto r = metal_runtime::from_api(fake.api());
        BOOST_TEST_REQUIRE(r.has_value());
        rt = std::move(r).value();
    }
    metal_source source() {
        auto dev = metal_device::create_system_default(*rt);
        BOOST_TEST_REQUIRE(dev.has_value());
        auto s = metal_source::create(dev.value());
        BOOST_TEST_REQUIRE(s.has_value());
        fake.calls.clear();
        return std::move(s).value();
    }
    static fake_object& of(metal::object_t o) { return fake_metal_runtime::of(o); }
};

} // namespace

BOOST_FIXTURE_TEST_CASE(a_failed_buffer_faults_the_mirror_slot_once, metal_fixture) {
    fault_recorder reactor;
    metal_source s = source();
    const metal::object_t cb = fake.command_buffer();
    s.encode_signal(cb); // target 1
    const memory_descriptor d = s.descriptor();
    BOOST_TEST(run_queries());
    BOOST_TEST(reactor.faults() == 0u); // committed: healthy
    of(cb).status = metal::command_buffer_status_error;
    fake.calls.clear();
    BOOST_TEST(run_queries());
    BOOST_TEST((fake.calls == calls_t{"status cb1", "signaledValue event1"}));
    const auto faults = reactor.faults_of(d.line());
    BOOST_TEST_REQUIRE(faults.size() == 1u);
    BOOST_TEST(faults[0].slot == 0u);
    BOOST_TEST(faults[0].word == 0u); // not signalled: the wait faults
    BOOST_TEST((descriptor_status(d) == line_status::faulted));
    fake.calls.clear();
    BOOST_TEST(run_queries());
    BOOST_TEST(fake.calls.empty()); // told once
}

BOOST_FIXTURE_TEST_CASE(a_signalled_target_reaches_the_mirror_before_the_fault, metal_fixture) {
    fault_recorder reactor;
    metal_source s = source();
    const metal::object_t done = fake.command_buffer();
    const metal::object_t bad = fake.command_buffer();
    s.encode_signal(done); // 1: signalled, not yet read by the source
    s.encode_signal(bad);  // 2: its buffer fails
    fake.event().value = 1;
    of(bad).status = metal::command_buffer_status_error;
    BOOST_TEST(s.last_value() == 0u);
    BOOST_TEST(run_queries());
    const auto faults = reactor.faults_of(s.descriptor().line());
    BOOST_TEST_REQUIRE(faults.size() == 1u);
    BOOST_TEST(faults[0].word == 1u); // a reactor completes the wait for 1, faults the one for 2
    BOOST_TEST(s.last_value() == 1u);
}

BOOST_FIXTURE_TEST_CASE(a_healthy_source_faults_nothing, metal_fixture) {
    fault_recorder reactor;
    metal_source s = source();
    const metal::object_t cb = fake.command_buffer();
    s.encode_signal(cb);
    BOOST_TEST(run_queries());
    of(cb).status = metal::command_buffer_status_completed;
    BOOST_TEST(run_queries());
    BOOST_TEST(reactor.faults() == 0u);
    BOOST_TEST((descriptor_status(s.descriptor()) == line_status::live));
}

BOOST_FIXTURE_TEST_CASE(a_moved_source_keeps_and_a_gone_one_drops_its_query, metal_fixture) {
    fault_recorder reactor;
    {
        metal_source first = source();
        metal_source s = std::move(first);
        const metal::object_t cb = fake.command_buffer();
        s.encode_signal(cb);
        of(cb).status = metal::command_buffer_status_error;
        BOOST_TEST(detail::line_health_watched());
        BOOST_TEST(run_queries());
        BOOST_TEST(reactor.faults_of(s.descriptor().line()).size() == 1u);
    }
    BOOST_TEST(!detail::line_health_watched());
    BOOST_TEST(fake.unbalanced() == calls_t{});
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_devices_line_health
