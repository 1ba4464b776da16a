// SPDX-License-Identifier: BSL-1.0
//
// test/common/fault_sweep.hpp: what the CUDA and HIP fault sweeps share (test/unit/devices/
// cuda_faults.cpp and hip_faults.cpp): a line's whole life through the port, run against a fake
// driver that fails its n-th call, and the helpers that read the fake's call log.
//
#ifndef GPU_ASYNC_TEST_COMMON_FAULT_SWEEP_HPP
#define GPU_ASYNC_TEST_COMMON_FAULT_SWEEP_HPP

#include <gpu_async/gpu_completion_port.hpp>

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

} // namespace gpu_async::test

#endif // GPU_ASYNC_TEST_COMMON_FAULT_SWEEP_HPP
