// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/device/cuda.hpp>

#include <gpu_async/gpu_completion_port.hpp>

#include "common/fake_cuda_driver.hpp"
#include "common/fault_sweep.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>
#include <boost/test/unit_test.hpp>

#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <vector>

// The CUDA backend when driver calls fail: a context pop that fails after the
// real call succeeded, and a sweep failing each call of a line's and an event waiter's life.

using namespace gpu_async;
using namespace gpu_async::test::cuda_fake;
using namespace gpu_async::test;

namespace {

// A line's life with the caller's context 0 current, on device 0 (test::line_life).
run_result scenario(const cuda_driver& drv) {
    return line_life<cuda_event_waiter>(
        [&] { return cuda_line::create_on(drv, 0); }, fake->stream(0),
        [](cuda_event_waiter& w) { return w.await_event(fake->event(0)); });
}

} // namespace

BOOST_AUTO_TEST_SUITE(cuda_faults)

// The pop after a successful cuMemHostAlloc fails: the page is live, so it must be freed before
// the domain's reference goes (it used to be leaked, and the reference released under it).
BOOST_FIXTURE_TEST_CASE(a_failed_pop_after_the_page_is_allocated_frees_it, fixture) {
    auto d = driver();
    {
        auto clean = cuda_line::create_on(*d, 0);
        BOOST_TEST_REQUIRE(clean.has_value());
    }
    const int n = call_after(state.calls, "cuMemHostAlloc", "cuCtxPopCurrent");
    BOOST_TEST_REQUIRE(n > 0);
    state.calls.clear();
    state.call_count = 0;
    state.fail_at = n;
    auto line = cuda_line::create_on(*d, 0);
    BOOST_TEST_REQUIRE(!line.has_value());
    BOOST_TEST(state.failed_call == "cuCtxPopCurrent");
    BOOST_TEST(names(line.error().message(), "cuCtxPopCurrent"));
    BOOST_TEST(state.pages.empty());
    BOOST_TEST(state.refs[0] == 0);
}

// The pop after a successful cuStreamCreate fails: the stream must be destroyed, not leaked.
BOOST_FIXTURE_TEST_CASE(a_failed_pop_after_the_waiters_stream_is_made_destroys_it, fixture) {
    auto d = driver();
    auto line = cuda_line::create_on(*d, 0);
    BOOST_TEST_REQUIRE(line.has_value());
    const int probe = state.live_streams; // the line's own (its health query's)
    state.calls.clear();
    state.fail_at = state.call_count + 3; // push, cuStreamCreate, pop
    auto w = cuda_event_waiter::create(line.value(), slot(1));
    BOOST_TEST_REQUIRE(!w.has_value());
    BOOST_TEST(state.failed_call == "cuCtxPopCurrent");
    BOOST_TEST(names(w.error().message(), "cuCtxPopCurrent"));
    BOOST_TEST(state.live_streams == probe);
}

// The push before cuStreamDestroy fails: the waiter keeps its stream, so a second close()
// destroys it (it used to forget the stream first, and a second close() did nothing).
BOOST_FIXTURE_TEST_CASE(a_failed_push_at_close_keeps_the_stream_for_a_second_close, fixture) {
    auto d = driver();
    auto line = cuda_line::create_on(*d, 0);
    BOOST_TEST_REQUIRE(line.has_value());
    const int probe = state.live_streams; // the line's own (its health query's)
    auto w = cuda_event_waiter::create(line.value(), slot(1));
    BOOST_TEST_REQUIRE(w.has_value());
    BOOST_TEST(state.live_streams == probe + 1);
    state.fail_at = state.call_count + 1;
    auto e = w.value().close();
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST(state.failed_call == "cuCtxPushCurrent");
    BOOST_TEST(names(e->message(), "cuCtxPushCurrent"));
    BOOST_TEST(w.value().stream() != nullptr);
    BOOST_TEST(state.live_streams == probe + 1);
    BOOST_TEST(!w.value().close());
    BOOST_TEST(w.value().stream() == nullptr);
    BOOST_TEST(state.live_streams == probe);
}

// Each cuCtxPushCurrent of a line's close fails in turn: the line's probe stream is destroyed
// all the same. It used to be destroyed only with the line's context pushed, so a failed push
// there left it alive (and the sweep below did not count it).
BOOST_AUTO_TEST_CASE(a_close_meeting_a_failed_push_destroys_the_probe) {
    std::vector<int> pushes; // the call numbers of a clean close's pushes
    {
        fixture f;
        auto d = f.driver();
        f.state.current = 0;
        auto line = cuda_line::create_on(*d, 0);
        BOOST_TEST_REQUIRE(line.has_value());
        f.state.calls.clear();
        f.state.call_count = 0;
        BOOST_TEST_REQUIRE(!line.value().close());
        for (std::size_t i = 0; i < f.state.calls.size(); ++i)
            if (f.state.calls[i].rfind("cuCtxPushCurrent", 0) == 0)
                pushes.push_back(static_cast<int>(i + 1));
    }
    BOOST_TEST_REQUIRE(pushes.size() >= 2u); // the settle's and the free's, at least
    for (const int n : pushes) {
        fixture f;
        auto d = f.driver();
        f.state.current = 0;
        auto line = cuda_line::create_on(*d, 0);
        BOOST_TEST_REQUIRE(line.has_value());
        BOOST_TEST_REQUIRE(f.state.live_streams == 1); // the probe
        f.state.call_count = 0;
        f.state.fail_at = n;
        const auto e = line.value().close();
        BOOST_TEST_CONTEXT("call " << n << " of the close") {
            BOOST_TEST(f.state.failed_call == "cuCtxPushCurrent");
            BOOST_TEST_REQUIRE(e.has_value());
            BOOST_TEST(names(e->message(), "cuCtxPushCurrent"));
            BOOST_TEST(f.state.live_streams == 0);
            BOOST_TEST(f.state.pushed.empty());
            BOOST_TEST(!detail::line_health_watched());
        }
    }
}

// Every call of the scenario fails in turn. After each run: what failed is named by the error;
// nothing the driver holds is left behind (pages, context references, registrations), except
// where the failing call is a settle, a free or an unregistration, which leak by design rather
// than free what a device may still use, or the release of a context reference itself; every
// stream the library made (the line's probe, the waiter's) is destroyed whatever failed, but for
// one whose cuStreamDestroy itself failed (never tried twice: the handle may be gone); the
// caller's context is current again and the stack empty (unless the failing call is that
// restore); every wait that started ended exactly once.
BOOST_AUTO_TEST_CASE(sweep_fails_each_call_in_turn) {
    std::vector<std::string> clean;
    {
        fixture f;
        auto d = f.driver();
        f.state.current = 0;
        const run_result r = scenario(*d);
        BOOST_TEST_REQUIRE(r.error.empty(), r.error);
        BOOST_TEST_REQUIRE(r.ends.size() == 2u);
        clean = f.state.calls;
        BOOST_TEST(f.state.pages.empty());
        BOOST_TEST(f.state.live_streams == 0);
    }
    BOOST_TEST_REQUIRE(clean.size() > 10u);
    BOOST_TEST_MESSAGE("CUDA sweep: " << clean.size() << " calls, each failed in turn");
    for (int n = 1; n <= static_cast<int>(clean.size()); ++n) {
        fixture f;
        auto d = f.driver();
        f.state.current = 0;
        f.state.fail_at = n;
        const run_result r = scenario(*d);
        const std::string failed = f.state.failed_call;
        BOOST_TEST_REQUIRE(!failed.empty(), "call " << n);
        const std::string call = failed.substr(0, failed.find(' '));
        // The call a failed push was for: the next one of the clean run.
        const std::string meant =
            call == "cuCtxPushCurrent" && static_cast<std::size_t>(n) < clean.size()
                ? clean[static_cast<std::size_t>(n)]
                : failed;
        const bool may_leak = meant.rfind("cuCtxSynchronize", 0) == 0 ||
                              meant.rfind("cuMemFreeHost", 0) == 0 ||
                              meant.rfind("cuMemHostUnregister", 0) == 0 ||
                              meant.rfind("cuDevicePrimaryCtxRelease", 0) == 0;
        BOOST_TEST_CONTEXT("call " << n << ": " << failed << " (for " << meant << ")") {
            BOOST_TEST(names(r.error, call), "error: " << r.error);
            if (!may_leak) {
                BOOST_TEST(f.state.pages.empty());
                BOOST_TEST(f.state.refs[0] == 0);
                BOOST_TEST(f.state.registered.empty());
            }
            BOOST_TEST(f.state.live_streams == (call == "cuStreamDestroy" ? 1 : 0));
            if (call != "cuCtxPopCurrent") {
                BOOST_TEST(f.state.current == 0);
                BOOST_TEST(f.state.pushed.empty());
            }
            for (int ends : r.ends)
                BOOST_TEST(ends == 1);
        }
    }
}

BOOST_AUTO_TEST_SUITE_END()
