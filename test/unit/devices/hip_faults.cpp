// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/device/hip.hpp>

#include <gpu_async/gpu_completion_port.hpp>

#include "common/fake_hip_driver.hpp"
#include "common/fault_sweep.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>
#include <boost/test/unit_test.hpp>

#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace unit_devices_hip_faults {

// The HIP backend when runtime calls fail: a switch back to the caller's device
// that fails after the real call succeeded, and a sweep failing each call of a line's and an
// event waiter's life.

using namespace gpu_async;
using namespace gpu_async::test::hip_fake;
using namespace gpu_async::test;

namespace {

// A line's life on device 1 with the caller's device 0 current (test::line_life), so each call
// in the line's device switches and switches back; the event is awaited with device 1 current,
// as the event's recorder has it.
run_result scenario(const hip_driver& drv) {
    return line_life<hip_event_waiter>([&] { return hip_line::create_on(drv, 1); }, fake->stream(1),
                                       [](hip_event_waiter& w) {
                                           const int caller = fake->current;
                                           fake->current = 1; // the caller's own switch
                                           auto d = w.await_event(fake->event());
                                           fake->current = caller;
                                           return d;
                                       });
}

} // namespace

BOOST_AUTO_TEST_SUITE(hip_faults)

// The switch back after a successful hipHostMalloc fails: the page is live, so it must be freed
// before the domain's reference goes (it used to be leaked, and the reference released under it).
BOOST_FIXTURE_TEST_CASE(a_failed_switch_back_after_the_page_is_allocated_frees_it, fixture) {
    auto d = driver();
    {
        auto clean = hip_line::create_on(*d, 1);
        BOOST_TEST_REQUIRE(clean.has_value());
    }
    const int n = call_after(state.calls, "hipHostMalloc", "hipSetDevice 0");
    BOOST_TEST_REQUIRE(n > 0);
    state.calls.clear();
    state.call_count = 0;
    state.fail_at = n;
    auto line = hip_line::create_on(*d, 1);
    BOOST_TEST_REQUIRE(!line.has_value());
    BOOST_TEST(state.failed_call == "hipSetDevice 0");
    BOOST_TEST(names(line.error().message(), "hipSetDevice"));
    BOOST_TEST(state.pages.empty());
    BOOST_TEST(state.refs[1] == 0);
}

// The switch back after a successful hipStreamCreate fails: the stream must be destroyed.
BOOST_FIXTURE_TEST_CASE(a_failed_switch_back_after_the_waiters_stream_is_made_destroys_it,
                        fixture) {
    auto d = driver();
    auto line = hip_line::create_on(*d, 1);
    BOOST_TEST_REQUIRE(line.has_value());
    const int probe = state.live_streams; // the line's own (its health query's)
    state.fail_at = state.call_count + 4; // hipGetDevice, hipSetDevice 1, create, hipSetDevice 0
    auto w = hip_event_waiter::create(line.value(), slot(1));
    BOOST_TEST_REQUIRE(!w.has_value());
    BOOST_TEST(state.failed_call == "hipSetDevice 0");
    BOOST_TEST(names(w.error().message(), "hipSetDevice"));
    BOOST_TEST(state.live_streams == probe);
}

// Each hipGetDevice of a line's close fails in turn: the line's probe stream is destroyed all
// the same. It used to be destroyed with the line's device switched in, so a failed
// hipGetDevice there left it alive (and the sweep below did not count it).
BOOST_AUTO_TEST_CASE(a_close_meeting_a_failed_get_device_destroys_the_probe) {
    fail_each_enter_of_close<fixture>(
        "hipGetDevice", [](const hip_driver& d) { return hip_line::create_on(d, 1); },
        [](fake_hip&) {}, [](const fake_hip&) {});
}

// Every call of the scenario fails in turn (test::sweep_each_call): a failed switch to the line's
// device is meant for the next other call, and the caller's device is current again unless the
// failing call is that switch back.
BOOST_AUTO_TEST_CASE(sweep_fails_each_call_in_turn) {
    const sweep_vendor hip{
        "HIP",
        {"hipGetDevice", "hipSetDevice 1"},
        {"hipDeviceSynchronize", "hipHostFree", "hipHostUnregister", "hipDevicePrimaryCtxRelease"},
        "hipStreamDestroy",
        1};
    sweep_each_call<fixture>(
        hip, scenario, [](fake_hip&) {},
        [](const fake_hip& s, const std::string& failed) {
            if (failed != "hipSetDevice 0") BOOST_TEST(s.current == 0);
        });
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_devices_hip_faults
