// SPDX-License-Identifier: BSL-1.0
//
// test/common/fault_sweep.hpp: what the CUDA and HIP fault sweeps share (test/unit/devices/
// cuda_faults.cpp and hip_faults.cpp): a line's whole life through the port, run against a fake
// driver that fails its n-th call, the sweep that fails each call of it in turn, and the helpers
// that read the fake's call log.
//
#ifndef GPU_ASYNC_TEST_COMMON_FAULT_SWEEP_HPP
#define GPU_ASYNC_TEST_COMMON_FAULT_SWEEP_HPP

#include <gpu_async/gpu_completion_port.hpp>
#include <gpu_async/line/detail/line_watchers.hpp>
#include <gpu_async/line/line_health.hpp>
#include <gpu_async/line/line_life.hpp>

#include "common/io_context_fixture.hpp"
#include "common/slots.hpp"

#include "common/asio.hpp"
#include <boost/test/unit_test.hpp>

#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpu_async::test {

/// Whether an error message names the driver call `call`.
inline bool names(const std::string& message, const std::string& call) {
    return message.find(call) != std::string::npos;
}

/// The number (1-based, as the fakes' fail_at counts) of the first call starting with `next`
/// after the first call starting with `after`; 0 when there is none.
inline int call_after(const std::vector<std::string>& calls, const std::string& after,
                      const std::string& next) {
    bool seen = false;
    for (std::size_t i = 0; i < calls.size(); ++i) {
        if (!seen) {
            seen = calls[i].rfind(after, 0) == 0;
            continue;
        }
        if (calls[i].rfind(next, 0) == 0) return static_cast<int>(i + 1);
    }
    return 0;
}

/// What a run of line_life() saw.
struct run_result {
    std::string error;    ///< the first error's message (empty: none)
    std::deque<int> ends; ///< per wait started: how many times its handler ran
};

/// A line's life: `make_line()` creates it; attach the port's doorbell, store behind `stream`,
/// create an event waiter on slot 1 and await an event through `await_event(waiter)`, then close
/// the waiter and the line. Stops at the first error (a failed close() is retried once, as a
/// caller would), closes what it made, and runs the port until every wait has ended.
template <class Waiter, class MakeLine, class Stream, class AwaitEvent>
run_result line_life(MakeLine make_line, Stream stream, AwaitEvent await_event) {
    run_result r;
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    auto fail = [&](const coded_error& e) {
        if (r.error.empty()) r.error = e.message();
    };
    auto wait = [&](const memory_descriptor& d) {
        int& ends = r.ends.emplace_back(0);
        port.async_wait(d, [&ends](gpu_async::error_code) { ++ends; });
    };
    {
        auto line = make_line();
        if (!line.has_value()) {
            fail(line.error());
        } else {
            auto& l = line.value();
            bool ok = true;
            if (auto e = l.attach_doorbell(port.shared_bell())) {
                fail(*e);
                ok = false;
            }
            if (ok) {
                if (auto d = l.store(slot(0), stream); d.has_value())
                    wait(d.value());
                else {
                    fail(d.error());
                    ok = false;
                }
            }
            std::optional<Waiter> w;
            if (ok) {
                if (auto made = Waiter::create(l, slot(1)); made.has_value())
                    w.emplace(std::move(made).value());
                else {
                    fail(made.error());
                    ok = false;
                }
            }
            if (ok) {
                if (auto d = await_event(*w); d.has_value())
                    wait(d.value());
                else
                    fail(d.error());
            }
            if (w) {
                if (auto e = w->close()) {
                    fail(*e);
                    static_cast<void>(w->close());
                }
            }
            if (auto e = l.close()) fail(*e);
        }
    }
    ctx.run_for(run_bound);
    BOOST_TEST_REQUIRE(ctx.stopped(), "the port's waits did not end within the bound");
    return r;
}

/// What a vendor's sweep (sweep_each_call) must know of the vendor's calls, as its fake records
/// them.
struct sweep_vendor {
    const char* name;                ///< for the log ("CUDA")
    std::vector<std::string> enters; ///< prefixes of the calls that make the line's domain current
    std::vector<std::string> leaky;  ///< prefixes of the calls whose failure leaks by design
    std::string stream_destroy;      ///< never tried twice: the stream may be gone
    int device;                      ///< the line's device, whose references are counted
};

/// Every call of `scenario(driver)` fails in turn, each in a fresh `Fixture` made ready by
/// `prepare(state)`. After each run: what failed is named by the error; nothing the driver holds
/// is left behind (pages, context references, registrations), except where the failing call is
/// meant for one of `leaky` (a settle, a free or an unregistration, which leak by design rather
/// than free what a device may still use, or the release of a context reference itself); every
/// stream the library made (the line's probe, the waiter's) is destroyed whatever failed, but for
/// one whose destroy itself failed; `restored(state, failed_call)` checks the caller's state is
/// back; every wait that started ended exactly once.
template <class Fixture, class Scenario, class Prepare, class Restored>
void sweep_each_call(const sweep_vendor& v, Scenario scenario, Prepare prepare, Restored restored) {
    auto starts = [](const std::string& call, const std::vector<std::string>& prefixes) {
        for (const auto& p : prefixes)
            if (call.rfind(p, 0) == 0) return true;
        return false;
    };
    std::vector<std::string> clean;
    {
        Fixture f;
        auto d = f.driver();
        prepare(f.state);
        const run_result r = scenario(*d);
        BOOST_TEST_REQUIRE(r.error.empty(), r.error);
        BOOST_TEST_REQUIRE(r.ends.size() == 2u);
        clean = f.state.calls;
        BOOST_TEST(f.state.pages.empty());
        BOOST_TEST(f.state.live_streams == 0);
    }
    BOOST_TEST_REQUIRE(clean.size() > 10u);
    BOOST_TEST_MESSAGE(v.name << " sweep: " << clean.size() << " calls, each failed in turn");
    for (int n = 1; n <= static_cast<int>(clean.size()); ++n) {
        Fixture f;
        auto d = f.driver();
        prepare(f.state);
        f.state.fail_at = n;
        const run_result r = scenario(*d);
        const std::string failed = f.state.failed_call;
        BOOST_TEST_REQUIRE(!failed.empty(), "call " << n);
        const std::string call = failed.substr(0, failed.find(' '));
        // The call a failed switch to the line's domain was for: the next other one of the clean
        // run.
        std::string meant = failed;
        if (starts(failed, v.enters))
            for (std::size_t i = static_cast<std::size_t>(n); i < clean.size(); ++i)
                if (!starts(clean[i], v.enters)) {
                    meant = clean[i];
                    break;
                }
        BOOST_TEST_CONTEXT("call " << n << ": " << failed << " (for " << meant << ")") {
            BOOST_TEST(names(r.error, call), "error: " << r.error);
            if (!starts(meant, v.leaky)) {
                BOOST_TEST(f.state.pages.empty());
                BOOST_TEST(f.state.refs[static_cast<std::size_t>(v.device)] == 0);
                BOOST_TEST(f.state.registered.empty());
            }
            BOOST_TEST(f.state.live_streams == (call == v.stream_destroy ? 1 : 0));
            restored(f.state, failed);
            for (int ends : r.ends)
                BOOST_TEST(ends == 1);
        }
    }
}

/// Each call starting with `enter` (making the line's domain current) of a clean close of the
/// line `make_line(driver)` makes fails in turn, each in a fresh `Fixture` made ready by
/// `prepare(state)`: the close names that call, the line's probe stream is destroyed all the same,
/// `restored(state)` holds, and the line's health query is gone.
template <class Fixture, class MakeLine, class Prepare, class Restored>
void fail_each_enter_of_close(const std::string& enter, MakeLine make_line, Prepare prepare,
                              Restored restored) {
    std::vector<int> enters; // the call numbers of a clean close's enters
    {
        Fixture f;
        auto d = f.driver();
        prepare(f.state);
        auto line = make_line(*d);
        BOOST_TEST_REQUIRE(line.has_value());
        f.state.calls.clear();
        f.state.call_count = 0;
        BOOST_TEST_REQUIRE(!line.value().close());
        for (std::size_t i = 0; i < f.state.calls.size(); ++i)
            if (f.state.calls[i].rfind(enter, 0) == 0) enters.push_back(static_cast<int>(i + 1));
    }
    BOOST_TEST_REQUIRE(enters.size() >= 2u); // the settle's and the free's, at least
    for (const int n : enters) {
        Fixture f;
        auto d = f.driver();
        prepare(f.state);
        auto line = make_line(*d);
        BOOST_TEST_REQUIRE(line.has_value());
        BOOST_TEST_REQUIRE(f.state.live_streams == 1); // the probe
        f.state.call_count = 0;
        f.state.fail_at = n;
        const auto e = line.value().close();
        BOOST_TEST_CONTEXT("call " << n << " of the close") {
            BOOST_TEST(f.state.failed_call == enter);
            BOOST_TEST_REQUIRE(e.has_value());
            BOOST_TEST(names(e->message(), enter));
            BOOST_TEST(f.state.live_streams == 0);
            restored(f.state);
            BOOST_TEST(!detail::line_health_watched());
        }
    }
}

} // namespace gpu_async::test

#endif // GPU_ASYNC_TEST_COMMON_FAULT_SWEEP_HPP
