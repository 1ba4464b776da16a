// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/asio/error.hpp>
#include <gpu_async/device/hip.hpp>
#include <gpu_async/wait/doorbell.hpp>

#include "common/fake_hip_driver.hpp"
#include "common/slots.hpp"

#include <boost/test/unit_test.hpp>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace unit_devices_hip {

using namespace gpu_async;

// The fake HIP runtime (test/common/fake_hip_driver.hpp) records every call, so the tests check
// the HIP table's wiring with no GPU and no ROCm.
using namespace gpu_async::test::hip_fake;
using gpu_async::test::slot;

namespace {

using calls_t = std::vector<std::string>;

} // namespace

BOOST_AUTO_TEST_SUITE(hip_suite)

BOOST_AUTO_TEST_CASE(a_missing_library_is_unavailable) {
    auto d = hip_driver::load_library("libgpu_async_no_such_runtime.so");
    BOOST_TEST_REQUIRE(!d.has_value());
    BOOST_TEST(d.error().code() == errc::unavailable);
    BOOST_TEST(d.error().message().find("libgpu_async_no_such_runtime.so") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_library_without_the_entry_points_is_unavailable) {
    auto d = hip_driver::load_library("libm.so.6");
    BOOST_TEST_REQUIRE(!d.has_value());
    BOOST_TEST(d.error().code() == errc::unavailable);
    BOOST_TEST(d.error().message().find("hipInit") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(loading_the_runtime_here_succeeds_or_fails_cleanly) {
    // Without ROCm, or with ROCm but no AMD GPU (CI installs libamdhip64 for the compile check),
    // the load is a coded error; on an AMD machine it loads. Either way the answer is cached.
    auto first = hip_driver::load();
    auto second = hip_driver::load();
    BOOST_TEST(first.has_value() == second.has_value());
    if (first.has_value()) {
        BOOST_TEST(first.value() == second.value());
        BOOST_TEST(first.value()->device_count() > 0);
    } else {
        BOOST_TEST(first.error().code() == errc::unavailable);
        BOOST_TEST((first.error() == second.error()));
        BOOST_TEST(first.error().message().find("HIP") != std::string::npos);
    }
}

BOOST_AUTO_TEST_CASE(no_resolver_is_unavailable) {
    auto d = hip_driver::from_resolver(nullptr, nullptr);
    BOOST_TEST_REQUIRE(!d.has_value());
    BOOST_TEST(d.error().code() == errc::unavailable);
}

BOOST_FIXTURE_TEST_CASE(resolution_initializes_and_counts_devices, fixture) {
    auto d = hip_driver::from_resolver(&f_dlsym, &state);
    BOOST_TEST_REQUIRE(d.has_value());
    BOOST_TEST((state.calls == calls_t{"hipInit", "hipDriverGetVersion", "hipGetDeviceCount"}));
    BOOST_TEST(d.value()->device_count() == 2);
    BOOST_TEST(d.value()->version() == 50221153);
    BOOST_TEST(std::string(d.value()->line_table().backend) == "HIP");
    BOOST_TEST(d.value()->status_name(600) == "hipErrorNotReady");
    BOOST_TEST(d.value()->status_name(4242) == "hipError4242");
}

BOOST_FIXTURE_TEST_CASE(a_missing_entry_point_is_unavailable, fixture) {
    state.missing = {"hipHostMalloc"};
    auto d = hip_driver::from_resolver(&f_dlsym, &state);
    BOOST_TEST_REQUIRE(!d.has_value());
    BOOST_TEST(d.error().code() == errc::unavailable);
    BOOST_TEST(d.error().message().find("hipHostMalloc") != std::string::npos);
    BOOST_TEST(state.calls.empty());
}

BOOST_FIXTURE_TEST_CASE(init_failure_and_no_device_are_unavailable, fixture) {
    state.fail["hipInit"] = 101;
    auto d = hip_driver::from_resolver(&f_dlsym, &state);
    BOOST_TEST_REQUIRE(!d.has_value());
    BOOST_TEST(d.error().code() == errc::unavailable);
    BOOST_TEST(d.error().message().find("hipErrorInvalidDevice (101)") != std::string::npos);

    state.fail.clear();
    state.device_count = 0;
    auto none = hip_driver::from_resolver(&f_dlsym, &state);
    BOOST_TEST_REQUIRE(!none.has_value());
    BOOST_TEST(none.error().code() == errc::unavailable);
    BOOST_TEST(none.error().message().find("found none") != std::string::npos);
}

BOOST_FIXTURE_TEST_CASE(without_write_value64_or_stream_device_only_lines_fail, fixture) {
    for (const char* absent : {"hipStreamWriteValue64", "hipStreamGetDevice"}) {
        state.missing = {absent};
        auto d = driver();
        auto line = hip_line::create(*d);
        BOOST_TEST_REQUIRE(!line.has_value());
        BOOST_TEST(line.error().code() == errc::unavailable);
        BOOST_TEST(line.error().message().find(absent) != std::string::npos);
        BOOST_TEST(state.refs[0] == 0);
        BOOST_TEST(state.calls.empty());
    }
}

BOOST_FIXTURE_TEST_CASE(an_unknown_device_is_unavailable, fixture) {
    auto d = driver();
    auto line = hip_line::create_on(*d, 2);
    BOOST_TEST_REQUIRE(!line.has_value());
    BOOST_TEST(line.error().code() == errc::unavailable);
    BOOST_TEST(line.error().message().find("HIP device 2") != std::string::npos);
    BOOST_TEST(state.calls.empty());
}

BOOST_FIXTURE_TEST_CASE(a_line_runs_the_runtime_calls_in_the_owned_order, fixture) {
    auto d = driver();
    {
        auto line = hip_line::create_on(*d, 1);
        BOOST_TEST_REQUIRE(line.has_value());
        // Retain first; the page is allocated with device 1 current, then device 0 is back.
        BOOST_TEST(
            (state.calls == calls_t{"hipDevicePrimaryCtxRetain 1", "hipGetDevice", "hipSetDevice 1",
                                    "hipHostMalloc 4096 on 1", "hipSetDevice 0", "hipGetDevice",
                                    "hipSetDevice 1", "hipHostGetDevicePointer", "hipSetDevice 0",
                                    // The probe of the line's health query.
                                    "hipGetDevice", "hipSetDevice 1", "hipStreamCreate on 1",
                                    "hipSetDevice 0"}));
        BOOST_TEST(state.alloc_flags == (hip::host_malloc_mapped | hip::host_malloc_coherent));
        BOOST_TEST(line.value().device() == 1);
        BOOST_TEST(state.refs[1] == 1);

        state.calls.clear();
        auto stored = line.value().store(slot(6), state.stream(1));
        BOOST_TEST_REQUIRE(stored.has_value());
        BOOST_TEST(stored.value().is_complete());
        BOOST_TEST(
            (state.calls == calls_t{"hipStreamGetDevice", "hipStreamWriteValue64 1 flags 0"}));

        state.calls.clear();
        auto foreign = line.value().store(slot(6), state.stream(0));
        BOOST_TEST_REQUIRE(!foreign.has_value());
        BOOST_TEST(foreign.error().code() == errc::foreign_stream);
        BOOST_TEST((state.calls == calls_t{"hipStreamGetDevice"}));
        state.calls.clear();
    }
    // Device synchronize (on the line's device) before the free, release after it; the probe
    // goes with no switch (a stream carries its device).
    BOOST_TEST((state.calls ==
                calls_t{"hipGetDevice", "hipSetDevice 1", "hipDeviceSynchronize on 1",
                        "hipSetDevice 0", "hipStreamDestroy 2", "hipGetDevice", "hipSetDevice 1",
                        "hipHostFree", "hipSetDevice 0", "hipDevicePrimaryCtxRelease 1"}));
    BOOST_TEST(state.refs[1] == 0);
    BOOST_TEST(state.pages.empty());
}

BOOST_FIXTURE_TEST_CASE(a_failed_synchronize_leaks_the_page_and_the_context, fixture) {
    auto d = driver();
    auto line = hip_line::create(*d);
    BOOST_TEST_REQUIRE(line.has_value());
    state.fail["hipDeviceSynchronize on 0"] = 719;
    state.calls.clear();
    const auto error = line.value().close();
    BOOST_TEST_REQUIRE(error.has_value());
    BOOST_TEST((error->args() ==
                std::vector<std::string>{"hipDeviceSynchronize", "hipErrorLaunchFailure", "719"}));
    BOOST_TEST(state.refs[0] == 1);
    BOOST_TEST(state.pages.size() == 1u);
    BOOST_TEST(line.value().mapped().leaked());
}

BOOST_FIXTURE_TEST_CASE(a_failed_set_device_before_alloc_releases_the_context, fixture) {
    auto d = driver();
    state.fail["hipSetDevice 1"] = 101;
    auto line = hip_line::create_on(*d, 1);
    BOOST_TEST_REQUIRE(!line.has_value());
    BOOST_TEST(line.error().args().at(0) == "hipSetDevice");
    BOOST_TEST(state.calls.back() == "hipDevicePrimaryCtxRelease 1");
    BOOST_TEST(state.refs[1] == 0);
    BOOST_TEST(state.pages.empty());
}

BOOST_FIXTURE_TEST_CASE(a_source_maps_query_block_and_arm, fixture) {
    auto d = driver();
    auto line = hip_line::create(*d);
    BOOST_TEST_REQUIRE(line.has_value());
    auto foreign = hip_source::create(line.value(), slot(0), state.stream(1));
    BOOST_TEST_REQUIRE(!foreign.has_value());
    BOOST_TEST(foreign.error().code() == errc::foreign_stream);
    auto made = hip_source::create(line.value(), slot(0), state.stream(2));
    BOOST_TEST_REQUIRE(made.has_value());
    hip_source& source = made.value();

    state.stream_status = hip::error_not_ready;
    BOOST_TEST((source.query() == query_result::pending()));
    state.stream_status = hip::success;
    BOOST_TEST((source.query() == query_result::done()));
    BOOST_TEST(!source.block());
    BOOST_TEST(!source.arm());
    BOOST_TEST(source.descriptor().target() == 1u);
    BOOST_TEST(source.park(dur_ns{1000}));

    state.stream_status = hip::error_launch_failure;
    BOOST_TEST(source.query().error == errc::device_fault);
    BOOST_TEST(source.last_error()->args().at(1) == "hipErrorLaunchFailure");
    BOOST_TEST(source.block() == errc::device_fault);
    state.fail["hipStreamWriteValue64 2 flags 0"] = 1;
    BOOST_TEST(source.arm() == errc::driver_status);
    BOOST_TEST(source.descriptor().target() == 1u);
}

BOOST_FIXTURE_TEST_CASE(a_doorbell_is_registered_and_signalled_by_a_second_write, fixture) {
    auto d = driver();
    BOOST_TEST(d->line_table().batch_write64 == nullptr); // no hipStreamBatchMemOp, by design
    auto bell = std::make_shared<doorbell>();
    {
        auto line = hip_line::create_on(*d, 1);
        BOOST_TEST_REQUIRE(line.has_value());
        state.calls.clear();
        BOOST_TEST(!line.value().attach_doorbell(bell).has_value());
        // Registered with device 1 current (Mapped | Portable), then its device pointer there.
        BOOST_TEST((state.calls == calls_t{"hipDevicePrimaryCtxRetain 1", "hipGetDevice",
                                           "hipSetDevice 1", "hipHostRegister 64 flags 3 on 1",
                                           "hipSetDevice 0", "hipGetDevice", "hipSetDevice 1",
                                           "hipHostGetDevicePointer", "hipSetDevice 0"}));
        BOOST_TEST(state.registered.count(&bell->line()) == 1u);
        BOOST_TEST(state.refs[1] == 2);

        state.calls.clear();
        BOOST_TEST(line.value().store(slot(4), state.stream(1)).has_value());
        BOOST_TEST((state.calls == calls_t{"hipStreamGetDevice", "hipStreamWriteValue64 1 flags 0",
                                           "hipStreamWriteValue64 1 flags 0"}));
        BOOST_TEST_REQUIRE(state.stores.size() == 2u);
        // The completion word first, then the doorbell's device word, on the same stream.
        BOOST_TEST(state.stores[0].address == line.value().mapped().device_address(slot(4)));
        BOOST_TEST(state.stores[1].address ==
                   reinterpret_cast<std::uintptr_t>(&bell->line().words[doorbell::device_word]) +
                       device_offset);
        BOOST_TEST(state.stores[0].stream == state.stream(1));
        BOOST_TEST(state.stores[1].stream == state.stream(1));
        BOOST_TEST(bell->device_signaled());
        state.calls.clear();
    }
    BOOST_TEST(
        (state.calls == calls_t{"hipGetDevice", "hipSetDevice 1", "hipDeviceSynchronize on 1",
                                "hipSetDevice 0", "hipStreamDestroy 2", "hipGetDevice",
                                "hipSetDevice 1", "hipHostUnregister on 1", "hipSetDevice 0",
                                "hipDevicePrimaryCtxRelease 1", "hipGetDevice", "hipSetDevice 1",
                                "hipHostFree", "hipSetDevice 0", "hipDevicePrimaryCtxRelease 1"}));
    BOOST_TEST(state.registered.empty());
    BOOST_TEST(state.refs[1] == 0);
}

BOOST_FIXTURE_TEST_CASE(hip_doorbell_failures_are_coded, fixture) {
    {
        state.missing = {"hipHostRegister"};
        auto d = driver();
        auto line = hip_line::create(*d);
        BOOST_TEST_REQUIRE(line.has_value());
        const auto e = line.value().attach_doorbell(std::make_shared<doorbell>());
        BOOST_TEST_REQUIRE(e.has_value());
        BOOST_TEST(e->code() == errc::unavailable);
        BOOST_TEST(e->message().find("hipHostRegister") != std::string::npos);
        state.missing.clear();
    }
    auto d = driver();
    auto line = hip_line::create(*d);
    BOOST_TEST_REQUIRE(line.has_value());
    auto bell = std::make_shared<doorbell>();
    state.fail["hipHostRegister 64 flags 3 on 0"] = 1;
    const auto reg = line.value().attach_doorbell(bell);
    BOOST_TEST_REQUIRE(reg.has_value());
    BOOST_TEST(reg->args().at(0) == "hipHostRegister");
    BOOST_TEST(state.refs[0] == 1);
    state.fail.clear();
    BOOST_TEST(!line.value().attach_doorbell(bell).has_value());
    state.fail["hipHostUnregister on 0"] = 1;
    const auto closed = line.value().close();
    BOOST_TEST_REQUIRE(closed.has_value());
    BOOST_TEST(closed->args().at(0) == "hipHostUnregister");
    BOOST_TEST(state.pages.empty());
    BOOST_TEST(state.registered.size() == 1u);
}

BOOST_FIXTURE_TEST_CASE(hip_await_event_waits_on_its_own_stream_then_stores, fixture) {
    auto d = driver();
    auto line = hip_line::create(*d);
    BOOST_TEST_REQUIRE(line.has_value());
    auto bell = std::make_shared<doorbell>();
    BOOST_TEST(!line.value().attach_doorbell(bell).has_value());
    state.calls.clear();
    {
        auto made = hip_event_waiter::create(line.value(), slot(1));
        BOOST_TEST_REQUIRE(made.has_value());
        BOOST_TEST((state.calls == calls_t{"hipGetDevice", "hipStreamCreate on 0"}));
        BOOST_TEST(made.value().stream() == state.stream(2));
        state.calls.clear();
        auto done = made.value().await_event(state.event());
        BOOST_TEST_REQUIRE(done.has_value());
        BOOST_TEST(
            (state.calls == calls_t{"hipGetDevice", "hipStreamWaitEvent stream 2 event flags 0",
                                    "hipStreamGetDevice", "hipStreamWriteValue64 1 flags 0",
                                    "hipStreamWriteValue64 1 flags 0"}));
        BOOST_TEST(done.value().target() == 1u);
        BOOST_TEST(done.value().is_complete());
        BOOST_TEST_REQUIRE(state.stores.size() == 2u);
        BOOST_TEST(state.stores[0].stream == state.stream(2));
        BOOST_TEST(state.stores[1].stream == state.stream(2));
        BOOST_TEST(bell->device_signaled());
        state.calls.clear();
    }
    BOOST_TEST((state.calls == calls_t{"hipStreamDestroy 2"}));
    BOOST_TEST(state.count_prefix("hipEventDestroy") == 0u);
}

BOOST_FIXTURE_TEST_CASE(hip_await_event_refuses_another_device_and_reports_errors, fixture) {
    auto d = driver();
    auto line = hip_line::create_on(*d, 0);
    BOOST_TEST_REQUIRE(line.has_value());
    auto waiter = hip_event_waiter::create(line.value(), slot(0));
    BOOST_TEST_REQUIRE(waiter.has_value());

    state.current = 1;
    state.calls.clear();
    auto foreign = waiter.value().await_event(state.event());
    BOOST_TEST_REQUIRE(!foreign.has_value());
    BOOST_TEST(foreign.error().code() == errc::foreign_stream);
    BOOST_TEST(foreign.error().message().find("HIP event") != std::string::npos);
    BOOST_TEST((state.calls == calls_t{"hipGetDevice"}));

    state.current = 0;
    state.fail["hipStreamWaitEvent stream 2 event flags 0"] = 101;
    auto failed = waiter.value().await_event(state.event());
    BOOST_TEST_REQUIRE(!failed.has_value());
    BOOST_TEST((failed.error().args() ==
                std::vector<std::string>{"hipStreamWaitEvent", "hipErrorInvalidDevice", "101"}));
    BOOST_TEST(state.stores.empty());
    BOOST_TEST(line.value().mapped().sequence(slot(0)) == 0u);
    state.fail.clear();

    state.fail["hipStreamDestroy 2"] = 101;
    const auto closed = waiter.value().close();
    BOOST_TEST_REQUIRE(closed.has_value());
    BOOST_TEST(closed->args().at(0) == "hipStreamDestroy");
    auto after = waiter.value().await_event(state.event());
    BOOST_TEST_REQUIRE(!after.has_value());
    BOOST_TEST(after.error().code() == errc::backend);
}

BOOST_FIXTURE_TEST_CASE(a_hip_event_waiter_needs_its_entry_points, fixture) {
    for (const char* absent : {"hipStreamWaitEvent", "hipStreamCreate", "hipStreamDestroy"}) {
        state.missing = {absent};
        auto d = driver();
        auto line = hip_line::create(*d);
        BOOST_TEST_REQUIRE(line.has_value());
        state.calls.clear();
        auto waiter = hip_event_waiter::create(line.value(), slot(0));
        BOOST_TEST_REQUIRE(!waiter.has_value());
        BOOST_TEST(waiter.error().code() == errc::unavailable);
        BOOST_TEST(state.calls.empty());
    }
    state.missing.clear();
    auto d = driver();
    auto line = hip_line::create(*d);
    BOOST_TEST_REQUIRE(line.has_value());
    state.fail["hipStreamCreate on 0"] = 2;
    auto failed = hip_event_waiter::create(line.value(), slot(0));
    BOOST_TEST_REQUIRE(!failed.has_value());
    BOOST_TEST(failed.error().args().at(0) == "hipStreamCreate");
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_devices_hip
