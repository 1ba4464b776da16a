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

namespace unit_devices_cuda_faults {

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
    fail_each_enter_of_close<fixture>(
        "cuCtxPushCurrent", [](const cuda_driver& d) { return cuda_line::create_on(d, 0); },
        [](fake_cuda& s) { s.current = 0; },
        [](const fake_cuda& s) { BOOST_TEST(s.pushed.empty()); });
}

// Every call of the scenario fails in turn (test::sweep_each_call), the caller's context 0
// current: a failed push is meant for the next call, and the caller's context is current again
// and the stack empty unless the failing call is that pop.
BOOST_AUTO_TEST_CASE(sweep_fails_each_call_in_turn) {
    const sweep_vendor cuda{
        "CUDA",
        {"cuCtxPushCurrent"},
        {"cuCtxSynchronize", "cuMemFreeHost", "cuMemHostUnregister", "cuDevicePrimaryCtxRelease"},
        "cuStreamDestroy",
        0};
    sweep_each_call<fixture>(
        cuda, scenario, [](fake_cuda& s) { s.current = 0; },
        [](const fake_cuda& s, const std::string& failed) {
            if (failed == "cuCtxPopCurrent") return;
            BOOST_TEST(s.current == 0);
            BOOST_TEST(s.pushed.empty());
        });
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_devices_cuda_faults
