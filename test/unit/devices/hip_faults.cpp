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
    std::vector<int> gets; // the call numbers of a clean close's hipGetDevice calls
    {
        fixture f;
        auto d = f.driver();
        auto line = hip_line::create_on(*d, 1);
        BOOST_TEST_REQUIRE(line.has_value());
        f.state.calls.clear();
        f.state.call_count = 0;
        BOOST_TEST_REQUIRE(!line.value().close());
        for (std::size_t i = 0; i < f.state.calls.size(); ++i)
            if (f.state.calls[i] == "hipGetDevice") gets.push_back(static_cast<int>(i + 1));
    }
    BOOST_TEST_REQUIRE(gets.size() >= 2u); // the settle's and the free's, at least
    for (const int n : gets) {
        fixture f;
        auto d = f.driver();
        auto line = hip_line::create_on(*d, 1);
        BOOST_TEST_REQUIRE(line.has_value());
        BOOST_TEST_REQUIRE(f.state.live_streams == 1); // the probe
        f.state.call_count = 0;
        f.state.fail_at = n;
        const auto e = line.value().close();
        BOOST_TEST_CONTEXT("call " << n << " of the close") {
            BOOST_TEST(f.state.failed_call == "hipGetDevice");
            BOOST_TEST_REQUIRE(e.has_value());
            BOOST_TEST(names(e->message(), "hipGetDevice"));
            BOOST_TEST(f.state.live_streams == 0);
            BOOST_TEST(!detail::line_health_watched());
        }
    }
}

// Every call of the scenario fails in turn. After each run: what failed is named by the error;
// nothing the runtime holds is left behind (pages, context references, registrations), except
// where the failing call is a settle, a free or an unregistration, which leak by design rather
// than free what a device may still use, or the release of a context reference itself; every
// stream the library made (the line's probe, the waiter's) is destroyed whatever failed, but for
// one whose hipStreamDestroy itself failed (never tried twice: the handle may be gone); the
// caller's device is current again (unless the failing call is that switch back); every wait
// that started ended exactly once.
BOOST_AUTO_TEST_CASE(sweep_fails_each_call_in_turn) {
    std::vector<std::string> clean;
    {
        fixture f;
        auto d = f.driver();
        const run_result r = scenario(*d);
        BOOST_TEST_REQUIRE(r.error.empty(), r.error);
        BOOST_TEST_REQUIRE(r.ends.size() == 2u);
        clean = f.state.calls;
        BOOST_TEST(f.state.pages.empty());
        BOOST_TEST(f.state.live_streams == 0);
    }
    BOOST_TEST_REQUIRE(clean.size() > 10u);
    BOOST_TEST_MESSAGE("HIP sweep: " << clean.size() << " calls, each failed in turn");
    for (int n = 1; n <= static_cast<int>(clean.size()); ++n) {
        fixture f;
        auto d = f.driver();
        f.state.fail_at = n;
        const run_result r = scenario(*d);
        const std::string failed = f.state.failed_call;
        BOOST_TEST_REQUIRE(!failed.empty(), "call " << n);
        const std::string call = failed.substr(0, failed.find(' '));
        // The call a failed switch to the line's device was for: the next other one of the
        // clean run.
        std::string meant = failed;
        if (failed == "hipGetDevice" || failed == "hipSetDevice 1")
            for (std::size_t i = static_cast<std::size_t>(n); i < clean.size(); ++i)
                if (clean[i] != "hipGetDevice" && clean[i] != "hipSetDevice 1") {
                    meant = clean[i];
                    break;
                }
        const bool may_leak = meant.rfind("hipDeviceSynchronize", 0) == 0 ||
                              meant.rfind("hipHostFree", 0) == 0 ||
                              meant.rfind("hipHostUnregister", 0) == 0 ||
                              meant.rfind("hipDevicePrimaryCtxRelease", 0) == 0;
        BOOST_TEST_CONTEXT("call " << n << ": " << failed << " (for " << meant << ")") {
            BOOST_TEST(names(r.error, call), "error: " << r.error);
            if (!may_leak) {
                BOOST_TEST(f.state.pages.empty());
                BOOST_TEST(f.state.refs[1] == 0);
                BOOST_TEST(f.state.registered.empty());
            }
            BOOST_TEST(f.state.live_streams == (call == "hipStreamDestroy" ? 1 : 0));
            if (failed != "hipSetDevice 0") BOOST_TEST(f.state.current == 0);
            for (int ends : r.ends)
                BOOST_TEST(ends == 1);
        }
    }
}

BOOST_AUTO_TEST_SUITE_END()
