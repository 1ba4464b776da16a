// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/device/metal.hpp>

#include <gpu_async/core/wait_machine.hpp>
#include <gpu_async/core/wait_plan.hpp>
#include <gpu_async/gpu_completion_port.hpp>
#include <gpu_async/host/std_host.hpp>

#include "common/fake_metal_runtime.hpp"
#include "common/io_context_fixture.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace unit_devices_metal {

// The Metal backend against a fake Objective-C runtime (test/common/fake_metal_runtime.hpp): the
// messages it sends and in which order, retain/release balance, the OS wait's time-outs and its
// polling fallback, command buffer errors, and signaledValue's wrap-around, with no Apple
// hardware. The real libraries are only asked for where the test can tell what they must answer
// (absent here).

using namespace gpu_async;
using calls_t = std::vector<std::string>;
using fake_object = gpu_async::test::fake_objc_object;

namespace {

constexpr std::uint64_t top = std::numeric_limits<std::uint64_t>::max(); // 2^64 - 1

/// Short poll and block slices, so polls and blocks that never see their value end soon.
metal_source_options fast() {
    metal_source_options o;
    o.poll_interval = dur_ns::from_us(10);
    o.block_slice = dur_ns::from_ms(20);
    return o;
}

wait_plan plan(std::string_view text) {
    auto p = wait_plan::parse(text);
    BOOST_TEST_REQUIRE(p.has_value());
    return p.value();
}

bool has(const std::string& text, std::string_view part) {
    return text.find(part) != std::string::npos;
}

struct fixture {
    gpu_async::test::fake_metal_runtime fake;
    std::unique_ptr<metal_runtime> rt;

    fixture() {
        auto r = metal_runtime::from_api(fake.api());
        BOOST_TEST_REQUIRE(r.has_value());
        rt = std::move(r).value();
        fake.calls.clear();
    }

    metal_device device() {
        auto d = metal_device::create_system_default(*rt);
        BOOST_TEST_REQUIRE(d.has_value());
        return std::move(d).value();
    }

    /// A source over a new event (its device already released); the call log cleared.
    metal_source source(metal_source_options o = fast()) {
        auto s = metal_source::create(device(), o);
        BOOST_TEST_REQUIRE(s.has_value());
        fake.calls.clear();
        return std::move(s).value();
    }

    /// A command buffer that failed with `code` and `text`.
    metal::object_t failed_buffer(metal::integer_t code, const char* text) {
        metal::object_t b = fake.command_buffer();
        fake_object& f = gpu_async::test::fake_metal_runtime::of(b);
        f.status = metal::command_buffer_status_error;
        f.error = &gpu_async::test::fake_metal_runtime::of(fake.error(code, text));
        return b;
    }

    void balanced() {
        BOOST_TEST(fake.unbalanced() == calls_t{});
        BOOST_TEST(fake.bad == calls_t{});
        BOOST_TEST(fake.pool_depth == 0);
    }
};

struct port_result {
    std::optional<boost::system::error_code> ec;
    wait_report report;
};

auto record(port_result& r) {
    return [&r](boost::system::error_code ec, wait_report rep) {
        BOOST_TEST(!r.ec.has_value()); // exactly once
        r.ec = ec;
        r.report = rep;
    };
}

} // namespace

BOOST_AUTO_TEST_SUITE(metal_suite)

// --- loading --------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(loading_the_runtime_here_succeeds_or_names_what_is_missing) {
    // Off Apple systems the Objective-C runtime is missing, and the error names it; on a Mac the
    // runtime loads. Either way the answer is cached.
    auto first = metal_runtime::load();
    auto second = metal_runtime::load();
    BOOST_TEST(first.has_value() == second.has_value());
    if (first.has_value()) {
        BOOST_TEST(first.value() == second.value());
    } else {
        BOOST_TEST(first.error().code() == errc::unavailable);
        BOOST_TEST((first.error() == second.error()));
        const std::string m = first.error().message();
        BOOST_TEST((has(m, metal_runtime::objc_library) || has(m, "Metal.framework")), m);
    }
}

BOOST_AUTO_TEST_CASE(a_missing_objective_c_runtime_is_unavailable_naming_it) {
    auto r =
        metal_runtime::load_libraries("/no/such/libobjc.A.dylib", metal_runtime::metal_framework);
    BOOST_TEST_REQUIRE(!r.has_value());
    BOOST_TEST(r.error().code() == errc::unavailable);
    const std::string m = r.error().message();
    BOOST_TEST(has(m, "Objective-C runtime (/no/such/libobjc.A.dylib)"), m);
    BOOST_TEST(has(m, "Metal needs macOS or iOS"), m);
}

BOOST_AUTO_TEST_CASE(a_missing_metal_framework_is_unavailable_naming_it) {
    auto r = metal_runtime::load_libraries("libm.so.6", metal_runtime::metal_framework);
    BOOST_TEST_REQUIRE(!r.has_value());
    BOOST_TEST(r.error().code() == errc::unavailable);
    const std::string m = r.error().message();
    BOOST_TEST(has(m, std::string("Metal.framework (") + metal_runtime::metal_framework + ")"), m);
}

BOOST_AUTO_TEST_CASE(libraries_without_the_symbols_are_unavailable_naming_each) {
    auto r = metal_runtime::load_libraries("libm.so.6", "libm.so.6");
    BOOST_TEST_REQUIRE(!r.has_value());
    BOOST_TEST(r.error().code() == errc::unavailable);
    const std::string m = r.error().message();
    for (const char* sym :
         {"objc_getClass", "sel_registerName", "objc_msgSend", "MTLCreateSystemDefaultDevice"})
        BOOST_TEST(has(m, std::string(sym) + " (libm.so.6)"), m);
    BOOST_TEST(!has(m, "objc_autoreleasePoolPush"), m); // optional
}

BOOST_AUTO_TEST_CASE(a_table_with_missing_entries_is_unavailable_naming_each) {
    gpu_async::test::fake_metal_runtime fake;
    metal::runtime_api a = fake.api();
    a.signaled_value = nullptr;
    a.utf8_string = nullptr;
    a.autorelease_pool_pop = nullptr; // a push without a pop
    auto r = metal_runtime::from_api(a);
    BOOST_TEST_REQUIRE(!r.has_value());
    BOOST_TEST(r.error().code() == errc::unavailable);
    const std::string m = r.error().message();
    BOOST_TEST(has(m, "signaledValue, UTF8String, objc_autoreleasePoolPop"), m);
    BOOST_TEST(fake.calls == calls_t{}); // nothing was asked of the runtime

    metal::runtime_api none;
    auto empty = metal_runtime::from_api(none);
    BOOST_TEST_REQUIRE(!empty.has_value());
    BOOST_TEST(has(empty.error().message(), "objc_getClass, sel_registerName"));
}

BOOST_AUTO_TEST_CASE(an_unregistered_selector_is_unavailable) {
    gpu_async::test::fake_metal_runtime fake;
    fake.unregistered = {"waitUntilSignaledValue:timeoutMS:"};
    auto r = metal_runtime::from_api(fake.api());
    BOOST_TEST_REQUIRE(!r.has_value());
    BOOST_TEST(r.error().code() == errc::unavailable);
    BOOST_TEST(has(r.error().message(), "waitUntilSignaledValue:timeoutMS:"));
}

BOOST_AUTO_TEST_CASE(a_framework_without_shared_events_is_unavailable) {
    gpu_async::test::fake_metal_runtime fake;
    fake.no_listener_class = true;
    auto r = metal_runtime::from_api(fake.api());
    BOOST_TEST_REQUIRE(!r.has_value());
    BOOST_TEST(r.error().code() == errc::unavailable);
    BOOST_TEST(has(r.error().message(), "macOS 10.14"));
    BOOST_TEST(fake.calls == calls_t{"objc_getClass MTLSharedEventListener"});
}

BOOST_AUTO_TEST_CASE(a_table_without_pools_loads) {
    gpu_async::test::fake_metal_runtime fake;
    fake.pools = false;
    auto r = metal_runtime::from_api(fake.api());
    BOOST_TEST_REQUIRE(r.has_value());
    auto d = metal_device::create_system_default(*r.value());
    BOOST_TEST_REQUIRE(d.has_value());
    BOOST_TEST(d.value().name() == "Fake Metal GPU");
    BOOST_TEST(fake.pools_pushed == 0);
}

BOOST_FIXTURE_TEST_CASE(send_casts_objc_msgsend_to_the_message_signature, fixture) {
    // The fake's msg_send is its signaledValue: send<std::uint64_t>() reaches it with the
    // selector it names.
    metal_source s = source();
    gpu_async::test::fake_metal_runtime::of(s.event()).value = 42;
    BOOST_TEST(rt->send<std::uint64_t>(s.event(), "signaledValue") == 42u);
    BOOST_TEST(fake.calls == calls_t{"signaledValue event1"});
    BOOST_TEST(fake.bad == calls_t{});
}

// --- device ---------------------------------------------------------------------------------

BOOST_FIXTURE_TEST_CASE(the_default_device_is_released_once, fixture) {
    {
        metal_device d = device();
        BOOST_TEST(d.native_handle() != nullptr);
        BOOST_TEST(d.name() == "Fake Metal GPU");
        BOOST_TEST(
            (fake.calls == calls_t{"pool push", "MTLCreateSystemDefaultDevice", "pool pop",
                                   "pool push", "name device1", "UTF8String string1", "pool pop"}));
        fake.calls.clear();
    }
    BOOST_TEST(fake.calls == calls_t{"release device1"});
    balanced();
}

BOOST_FIXTURE_TEST_CASE(no_default_device_is_unavailable, fixture) {
    fake.no_device = true;
    auto d = metal_device::create_system_default(*rt);
    BOOST_TEST_REQUIRE(!d.has_value());
    BOOST_TEST(d.error().code() == errc::unavailable);
    BOOST_TEST(has(d.error().message(), "MTLCreateSystemDefaultDevice returned nil"));
    BOOST_TEST(fake.count("release") == 0u);
    balanced();
}

BOOST_FIXTURE_TEST_CASE(a_moved_device_is_released_once_by_its_last_owner, fixture) {
    {
        metal_device a = device();
        metal_device b = std::move(a);
        BOOST_TEST(a.native_handle() == nullptr);
        metal_device c = device();
        c = std::move(b); // releases device2, takes device1
        BOOST_TEST(fake.count("release") == 1u);
        BOOST_TEST(fake.calls.back() == "release device2");
        BOOST_TEST(a.name().empty());
    }
    BOOST_TEST(fake.count("release device1") == 1u);
    balanced();
}

// --- source: creation and ownership ---------------------------------------------------------

BOOST_FIXTURE_TEST_CASE(a_new_event_starts_at_zero_and_is_released_once, fixture) {
    {
        metal_device d = device();
        fake.calls.clear();
        auto made = metal_source::create(d, fast());
        BOOST_TEST_REQUIRE(made.has_value());
        metal_source& s = made.value();
        BOOST_TEST((fake.calls ==
                    calls_t{"pool push", "newSharedEvent device1", "pool pop",
                            "respondsToSelector: event1 waitUntilSignaledValue:timeoutMS:"}));
        BOOST_TEST(s.event() == gpu_async::test::fake_metal_runtime::id(fake.event()));
        BOOST_TEST(s.target() == 0u);
        BOOST_TEST(s.last_value() == 0u);
        BOOST_TEST(s.descriptor().target() == 0u);
        BOOST_TEST(s.descriptor().is_complete());
        BOOST_TEST(s.has_os_wait());
        BOOST_TEST(!s.arm()); // nothing to enqueue
        BOOST_TEST(s.watched() == 0u);
        fake.calls.clear();
    }
    // The device went first; the source needed only the event (read once at its end: the mirror
    // moves up to it before the retirement).
    BOOST_TEST(
        (fake.calls == calls_t{"signaledValue event1", "release event1", "release device1"}));
    balanced();
}

BOOST_FIXTURE_TEST_CASE(no_shared_event_is_unavailable, fixture) {
    fake.no_event = true;
    {
        metal_device d = device();
        auto s = metal_source::create(d);
        BOOST_TEST_REQUIRE(!s.has_value());
        BOOST_TEST(s.error().code() == errc::unavailable);
        BOOST_TEST(has(s.error().message(), "[MTLDevice newSharedEvent] returned nil"));
    }
    BOOST_TEST(fake.count("release") == 1u); // the device only
    balanced();
}

BOOST_FIXTURE_TEST_CASE(a_wrapped_event_is_retained_and_released_once, fixture) {
    const metal::object_t mine = fake.own_event(41);
    {
        auto made = metal_source::wrap(*rt, mine, fast());
        BOOST_TEST_REQUIRE(made.has_value());
        BOOST_TEST(
            (fake.calls == calls_t{"respondsToSelector: event1 signaledValue",
                                   "respondsToSelector: event1 waitUntilSignaledValue:timeoutMS:",
                                   "signaledValue event1", "retain event1"}));
        BOOST_TEST(made.value().target() == 41u); // starts where the event is
        BOOST_TEST(made.value().descriptor().is_complete());
        BOOST_TEST(gpu_async::test::fake_metal_runtime::of(mine).refs == 2);
        fake.calls.clear();
    }
    BOOST_TEST((fake.calls == calls_t{"signaledValue event1", "release event1"}));
    BOOST_TEST(gpu_async::test::fake_metal_runtime::of(mine).refs == 1); // the test's own
    balanced();
}

BOOST_FIXTURE_TEST_CASE(wrapping_null_or_not_an_event_is_unavailable, fixture) {
    auto none = metal_source::wrap(*rt, nullptr);
    BOOST_TEST_REQUIRE(!none.has_value());
    BOOST_TEST(none.error().code() == errc::unavailable);
    BOOST_TEST(fake.calls == calls_t{});

    const metal::object_t buffer = fake.command_buffer();
    auto wrong = metal_source::wrap(*rt, buffer);
    BOOST_TEST_REQUIRE(!wrong.has_value());
    BOOST_TEST(wrong.error().code() == errc::unavailable);
    BOOST_TEST(has(wrong.error().message(), "not an MTLSharedEvent"));
    BOOST_TEST(fake.calls == calls_t{"respondsToSelector: cb1 signaledValue"});
    balanced();
}

BOOST_FIXTURE_TEST_CASE(a_moved_source_releases_once_and_keeps_its_descriptor, fixture) {
    const metal::object_t b1 = fake.command_buffer();
    {
        metal_source a = source();
        a.watch(b1);
        const completion_line* line = &a.descriptor().line();
        metal_source b = std::move(a);
        BOOST_TEST(a.event() == nullptr);
        BOOST_TEST(&b.descriptor().line() == line); // descriptors taken before the move hold
        BOOST_TEST(b.watched() == 1u);

        metal_source c = source(); // event2
        c = std::move(b);          // releases event2, takes event1 and cb1
        BOOST_TEST(fake.calls.back() == "release event2");
        BOOST_TEST(c.watched() == 1u);
        fake.calls.clear();
    }
    BOOST_TEST((fake.calls == calls_t{"signaledValue event1", "release cb1", "release event1"}));
    balanced();
}

// --- source: query --------------------------------------------------------------------------

BOOST_FIXTURE_TEST_CASE(query_reads_signaled_value_against_the_target, fixture) {
    metal_source s = source();
    s.set_target(3);
    fake.event().reads = {1, 2, 3, 4};
    BOOST_TEST((s.query() == query_result::pending()));
    BOOST_TEST(s.last_value() == 1u);
    BOOST_TEST(!s.descriptor().is_complete());
    BOOST_TEST((s.query() == query_result::pending()));
    BOOST_TEST((s.query() == query_result::done()));
    BOOST_TEST(s.descriptor().is_complete()); // the mirror word holds what the query read
    BOOST_TEST((s.query() == query_result::done()));
    BOOST_TEST(s.last_value() == 4u);
    BOOST_TEST(fake.calls == calls_t(4, "signaledValue event1"));
    BOOST_TEST(!s.last_error().has_value());
}

BOOST_FIXTURE_TEST_CASE(the_target_wraps_past_two_to_the_64, fixture) {
    metal_source s = source();
    s.set_target(top);
    fake.event().reads = {top - 1, 0, 1};
    BOOST_TEST((s.query() == query_result::pending()));
    BOOST_TEST((s.query() == query_result::done())); // 0 follows 2^64 - 1
    BOOST_TEST(s.descriptor().is_complete());
    BOOST_TEST((s.query() == query_result::done()));

    // Numerically past the target but behind it in wrapping order: not reached.
    s.set_target(1);
    fake.event().reads = {top, 0, 1};
    BOOST_TEST((s.query() == query_result::pending()));
    BOOST_TEST(!s.descriptor().is_complete());
    BOOST_TEST((s.query() == query_result::pending()));
    BOOST_TEST((s.query() == query_result::done()));

    // advance() and encode_signal() wrap too.
    s.set_target(top);
    BOOST_TEST(s.advance() == 0u);
    s.set_target(top);
    const metal::object_t b = fake.command_buffer();
    BOOST_TEST(s.encode_signal(b) == 0u);
    BOOST_TEST(s.target() == 0u);
    BOOST_TEST(fake.calls.at(fake.calls.size() - 2) == "encodeSignalEvent cb1 event1 0");
}

BOOST_FIXTURE_TEST_CASE(encode_signal_encodes_the_next_value_and_watches_the_buffer, fixture) {
    const metal::object_t b1 = fake.command_buffer();
    const metal::object_t b2 = fake.command_buffer();
    {
        metal_source s = source();
        BOOST_TEST(s.encode_signal(b1) == 1u);
        BOOST_TEST(s.encode_signal(b2) == 2u);
        BOOST_TEST(s.target() == 2u);
        BOOST_TEST(s.watched() == 2u);
        BOOST_TEST((fake.calls == calls_t{"encodeSignalEvent cb1 event1 1", "retain cb1",
                                          "encodeSignalEvent cb2 event1 2", "retain cb2"}));
        BOOST_TEST(gpu_async::test::fake_metal_runtime::of(b1).signals ==
                   std::vector<std::uint64_t>{1});
        BOOST_TEST(gpu_async::test::fake_metal_runtime::of(b1).refs == 2);
        fake.calls.clear();
    }
    // Destroyed with both still watched: each released once, then the event.
    BOOST_TEST((fake.calls ==
                calls_t{"signaledValue event1", "release cb1", "release cb2", "release event1"}));
    balanced();
}

BOOST_FIXTURE_TEST_CASE(a_completed_buffer_is_released_at_the_next_query, fixture) {
    const metal::object_t b1 = fake.command_buffer();
    const metal::object_t b2 = fake.command_buffer();
    metal_source s = source();
    s.encode_signal(b1);
    s.watch(b2);
    s.watch(nullptr); // nothing to watch
    gpu_async::test::fake_metal_runtime::of(b1).status = metal::command_buffer_status_completed;
    fake.event().value = 1;
    fake.calls.clear();
    BOOST_TEST((s.query() == query_result::done()));
    BOOST_TEST(
        (fake.calls == calls_t{"status cb1", "release cb1", "status cb2", "signaledValue event1"}));
    BOOST_TEST(s.watched() == 1u);
    BOOST_TEST(gpu_async::test::fake_metal_runtime::of(b1).refs == 1);
    s.unwatch_all();
    BOOST_TEST(s.watched() == 0u);
    BOOST_TEST(gpu_async::test::fake_metal_runtime::of(b2).refs == 1);
}

BOOST_FIXTURE_TEST_CASE(a_failed_buffer_fails_the_query_until_unwatched, fixture) {
    const metal::object_t bad = failed_buffer(2, "Caused GPU Timeout Error");
    metal_source s = source();
    s.encode_signal(bad);
    fake.calls.clear();
    const query_result q = s.query();
    BOOST_TEST(q.is_failed());
    BOOST_TEST(q.error == errc::device_fault);
    BOOST_TEST((fake.calls == calls_t{"status cb1", "pool push", "error cb1",
                                      "localizedDescription error1", "UTF8String string1",
                                      "code error1", "pool pop"}));
    BOOST_TEST(fake.count("signaledValue") == 0u); // the fault comes first
    BOOST_TEST_REQUIRE(s.last_error().has_value());
    BOOST_TEST(s.last_error()->code() == errc::device_fault);
    const std::string m = s.last_error()->message();
    BOOST_TEST(has(m, "Caused GPU Timeout Error (MTLCommandBufferError code 2)"), m);
    BOOST_TEST(has(m, "Metal command buffer 0x"), m);

    // Sticky: a failed buffer never completes; only unwatch_all forgets it.
    BOOST_TEST(s.query().is_failed());
    s.unwatch_all();
    fake.event().value = 1;
    BOOST_TEST((s.query() == query_result::done()));
    BOOST_TEST(gpu_async::test::fake_metal_runtime::of(bad).refs == 1);
    BOOST_TEST(fake.pool_depth == 0);
}

BOOST_FIXTURE_TEST_CASE(a_failed_buffer_without_an_error_object_is_still_a_fault, fixture) {
    metal::object_t b = fake.command_buffer();
    gpu_async::test::fake_metal_runtime::of(b).status = metal::command_buffer_status_error;
    metal::object_t mute = failed_buffer(7, nullptr); // an NSError without a description
    metal_source s = source();
    s.watch(b);
    BOOST_TEST(s.query().error == errc::device_fault);
    BOOST_TEST(has(s.last_error()->message(), "without an NSError"));
    s.unwatch_all();
    s.watch(mute);
    BOOST_TEST(s.query().error == errc::device_fault);
    BOOST_TEST(has(s.last_error()->message(), "no description (MTLCommandBufferError code 7)"));
}

// --- source: park ---------------------------------------------------------------------------

BOOST_FIXTURE_TEST_CASE(park_waits_in_the_os_for_whole_milliseconds, fixture) {
    metal_source s = source();
    s.set_target(5);
    fake.event().value = 4;
    fake.waits = {5}; // signalled during the wait
    BOOST_TEST(s.park(dur_ns{3'700'000}));
    BOOST_TEST((fake.calls == calls_t{"signaledValue event1", "waitUntilSignaledValue event1 5 3",
                                      "signaledValue event1"}));
    BOOST_TEST(s.last_value() == 5u);
    BOOST_TEST(s.descriptor().is_complete());

    // Already reached: no wait at all.
    fake.calls.clear();
    BOOST_TEST(s.park(dur_ns::from_ms(10)));
    BOOST_TEST(fake.calls == calls_t{"signaledValue event1"});
}

BOOST_FIXTURE_TEST_CASE(park_returns_false_when_the_os_wait_times_out, fixture) {
    metal_source s = source();
    s.set_target(1);
    fake.waits = {std::nullopt};
    BOOST_TEST(!s.park(dur_ns::from_ms(2)));
    BOOST_TEST((fake.calls == calls_t{"signaledValue event1", "waitUntilSignaledValue event1 1 2",
                                      "signaledValue event1"}));
    BOOST_TEST(!s.descriptor().is_complete());
}

BOOST_FIXTURE_TEST_CASE(a_park_under_a_millisecond_polls, fixture) {
    metal_source s = source();
    s.set_target(1);
    // Never signalled: polls until the bound, with no OS wait (it takes whole milliseconds).
    BOOST_TEST(!s.park(dur_ns::from_us(300)));
    BOOST_TEST(fake.count("waitUntilSignaledValue") == 0u);
    BOOST_TEST(fake.count("signaledValue") >= 2u); // the first read, then at least one poll

    // Signalled by the second read: the poll reads at least once after its first sleep.
    fake.calls.clear();
    fake.event().reads = {0, 1};
    BOOST_TEST(s.park(dur_ns::from_us(900)));
    BOOST_TEST(fake.calls == calls_t(2, "signaledValue event1"));
}

BOOST_FIXTURE_TEST_CASE(without_the_os_wait_park_and_block_poll, fixture) {
    fake.os_wait = false;
    metal_source s = source();
    BOOST_TEST(!s.has_os_wait());
    s.set_target(1);
    fake.event().reads = {0, 0, 1};
    BOOST_TEST(s.park(dur_ns::from_ms(1000))); // returns once the poll sees it
    BOOST_TEST(fake.calls == calls_t(3, "signaledValue event1"));

    s.set_target(2);
    fake.event().reads = {1, 1, 1, 2};
    fake.calls.clear();
    BOOST_TEST(!s.block());
    BOOST_TEST(fake.calls == calls_t(4, "signaledValue event1"));
    BOOST_TEST(fake.bad == calls_t{}); // waitUntilSignaledValue was never sent
}

BOOST_FIXTURE_TEST_CASE(a_value_numerically_past_an_unreached_target_polls, fixture) {
    // Target 1 with the event at 2^64 - 1: reached only after the sequence wraps. The OS wait
    // compares in plain order and would return at once, so the park polls instead.
    metal_source s = source();
    s.set_target(1);
    fake.event().reads = {top, top, 0, 1};
    BOOST_TEST(s.park(dur_ns::from_ms(1000)));
    BOOST_TEST(fake.count("waitUntilSignaledValue") == 0u);
    BOOST_TEST(fake.calls == calls_t(4, "signaledValue event1"));
}

BOOST_FIXTURE_TEST_CASE(after_the_os_wait_the_wrapping_order_decides, fixture) {
    // Target 2^64 - 2 with the event just below; during the wait it passes 2^64 and lands on 3.
    // The OS wait answers NO (3 < 2^64 - 2 in plain order); the read after it says reached.
    metal_source s = source();
    s.set_target(top - 1);
    fake.event().value = top - 2;
    fake.waits = {3};
    BOOST_TEST(s.park(dur_ns::from_ms(4)));
    BOOST_TEST(fake.count("waitUntilSignaledValue event1 " + std::to_string(top - 1) + " 4") == 1u);
    BOOST_TEST(s.last_value() == 3u);
}

// --- source: block --------------------------------------------------------------------------

BOOST_FIXTURE_TEST_CASE(block_waits_in_slices_until_the_target, fixture) {
    metal_source s = source();
    s.set_target(7);
    fake.waits = {std::nullopt, std::nullopt, 7};
    BOOST_TEST(!s.block());
    BOOST_TEST(fake.count("waitUntilSignaledValue event1 7 20") == 3u); // block_slice 20 ms
    BOOST_TEST(fake.count("signaledValue") == 4u);
    BOOST_TEST(s.last_value() == 7u);

    // A slice under a millisecond waits 1 ms at a time.
    metal_source_options o = fast();
    o.block_slice = dur_ns::from_us(10);
    metal_source t = source(o);
    t.set_target(1);
    fake.waits = {1};
    BOOST_TEST(!t.block());
    BOOST_TEST(fake.count("waitUntilSignaledValue event2 1 1") == 1u);
}

BOOST_FIXTURE_TEST_CASE(block_ends_with_the_fault_of_a_watched_buffer, fixture) {
    // The buffer fails after two slices; a failed buffer never signals, so block() must see it.
    const metal::object_t b = failed_buffer(3, "Caused GPU Page Fault");
    fake_object& f = gpu_async::test::fake_metal_runtime::of(b);
    f.statuses = {2, 2}; // then MTLCommandBufferStatusError
    metal_source s = source();
    s.encode_signal(b);
    fake.calls.clear();
    BOOST_TEST(s.block() == errc::device_fault);
    BOOST_TEST(fake.count("waitUntilSignaledValue") == 2u);
    BOOST_TEST(fake.count("status cb1") == 3u);
    BOOST_TEST_REQUIRE(s.last_error().has_value());
    BOOST_TEST(
        has(s.last_error()->message(), "Caused GPU Page Fault (MTLCommandBufferError code 3)"));
    BOOST_TEST(fake.pool_depth == 0);
}

// --- the wait driver and the port over a Metal source -----------------------------------------

BOOST_FIXTURE_TEST_CASE(the_inline_driver_parks_in_the_os_wait, fixture) {
    // On a thread (run_wait) a flag plan's parks are the source's: waitUntilSignaledValue.
    metal_source s = source();
    s.set_target(1);
    fake.waits = {1};
    const std_clock clk;
    std_timer tmr;
    const wait_result r =
        run_wait(s, plan("flag:park_us=2000,backstop_us=1000000"), std::nullopt, clk, tmr);
    BOOST_TEST_REQUIRE(r.has_value(), r.message());
    BOOST_TEST((r.value().kind == wait_kind::parked));
    BOOST_TEST(r.value().parks == 1u);
    BOOST_TEST((fake.calls == calls_t{"signaledValue event1", "signaledValue event1",
                                      "waitUntilSignaledValue event1 1 2", "signaledValue event1",
                                      "signaledValue event1"}));
}

/// A port on its own io_context, and one plan-driven wait at a time over a Metal source.
struct port_fixture : fixture {
    boost::asio::io_context io;
    gpu_completion_port port{io};

    /// Runs one wait of `p` over `s` to its completion (bounded) and returns how it ended.
    port_result wait(metal_source& s, const wait_plan& p) {
        port_result r;
        port.async_wait(s, p, "metal", record(r));
        io.restart();
        gpu_async::test::run_to_completion(io);
        BOOST_TEST_REQUIRE(r.ec.has_value());
        return r;
    }
};

BOOST_FIXTURE_TEST_CASE(the_port_runs_a_flag_plan_over_a_metal_source, port_fixture) {
    // Pending at the first query; arm enqueues nothing; the port parks on the reactor (which no
    // event stores to) until the backstop query reads the event at its target.
    metal_source s = source();
    const metal::object_t b = fake.command_buffer();
    BOOST_TEST(s.encode_signal(b) == 1u);
    fake.event().reads = {0, 1};
    fake.calls.clear();
    const port_result r = wait(s, wait_plan::recommended());
    BOOST_TEST(!*r.ec);
    BOOST_TEST((r.report.kind == wait_kind::parked));
    BOOST_TEST(r.report.backstop_queries >= 1u);
    BOOST_TEST(fake.count("signaledValue") == 2u);
    BOOST_TEST(fake.count("waitUntilSignaledValue") == 0u);
    BOOST_TEST(s.last_value() == 1u);
    BOOST_TEST(port.prediction_ns("metal", deadline_plan{0, 0, 0, 8}).has_value());
}

BOOST_FIXTURE_TEST_CASE(the_port_runs_poll_and_block_plans_over_a_metal_source, port_fixture) {
    metal_source s = source();
    s.set_target(1);
    fake.event().reads = {0, 0, 0, 1};
    const port_result polled = wait(s, plan("poll"));
    BOOST_TEST(!*polled.ec);
    BOOST_TEST((polled.report.kind == wait_kind::parked));
    BOOST_TEST(fake.count("signaledValue") == 4u);

    s.set_target(2);
    fake.waits = {2};
    fake.calls.clear();
    const port_result blocked = wait(s, wait_plan::block());
    BOOST_TEST(!*blocked.ec);
    BOOST_TEST((blocked.report.kind == wait_kind::blocked));
    BOOST_TEST(fake.count("waitUntilSignaledValue event1 2 20") == 1u);

    // Already reached: the immediate query ends it.
    const port_result at_once = wait(s, wait_plan::recommended());
    BOOST_TEST(!*at_once.ec);
    BOOST_TEST((at_once.report.kind == wait_kind::immediate));
}

BOOST_FIXTURE_TEST_CASE(a_command_buffer_fault_reaches_the_port_waiter, port_fixture) {
    // Committed at the first query, failed by the backstop query: the wait ends with the
    // source's code, and the source says which buffer and why.
    const metal::object_t b = failed_buffer(2, "Caused GPU Timeout Error");
    gpu_async::test::fake_metal_runtime::of(b).statuses = {2};
    metal_source s = source();
    s.encode_signal(b);
    const port_result r = wait(s, wait_plan::recommended());
    BOOST_TEST((*r.ec == errc::device_fault));
    BOOST_TEST_REQUIRE(s.last_error().has_value());
    BOOST_TEST(has(s.last_error()->message(), "Caused GPU Timeout Error"));
    BOOST_TEST(fake.pool_depth == 0);
}

BOOST_FIXTURE_TEST_CASE(the_port_waits_on_a_metal_sources_mirror_descriptor, port_fixture) {
    // The descriptor overload over the mirror word: complete once a query has read the target.
    metal_source s = source();
    s.set_target(1);
    fake.event().value = 1;
    BOOST_TEST((s.query() == query_result::done()));
    std::optional<boost::system::error_code> result;
    port.async_wait(s.descriptor(), [&](boost::system::error_code ec) { result = ec; });
    gpu_async::test::run_to_completion(io);
    BOOST_TEST_REQUIRE(result.has_value());
    BOOST_TEST(!*result);
}

BOOST_FIXTURE_TEST_CASE(a_destroyed_source_completes_the_waits_its_event_reached, port_fixture) {
    // The event reaches the target and nothing queries it: the mirror still holds less. The
    // source's end moves the mirror up before it retires it, so the wait completes (as a stream's
    // give-back completes what the stream stored); one beyond the event ends aborted.
    std::optional<boost::system::error_code> reached;
    std::optional<boost::system::error_code> beyond;
    {
        metal_source s = source();
        s.set_target(1);
        port.async_wait(s.descriptor(), [&](boost::system::error_code ec) { reached = ec; });
        s.set_target(2);
        port.async_wait(s.descriptor(), [&](boost::system::error_code ec) { beyond = ec; });
        fake.event().value = 1;
    }
    gpu_async::test::run_to_completion(io);
    BOOST_TEST_REQUIRE(reached.has_value());
    BOOST_TEST(!*reached, reached->message());
    BOOST_TEST_REQUIRE(beyond.has_value());
    BOOST_TEST((*beyond == boost::asio::error::operation_aborted));
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_devices_metal
