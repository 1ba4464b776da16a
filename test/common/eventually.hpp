// SPDX-License-Identifier: BSL-1.0
//
// test/common/eventually.hpp: wait until a condition holds, bounded only against hangs.
//
#ifndef GPU_ASYNC_TEST_COMMON_EVENTUALLY_HPP
#define GPU_ASYNC_TEST_COMMON_EVENTUALLY_HPP

#include "common/run_bound.hpp"

#include <chrono>
#include <thread>

namespace gpu_async::test {

/// Looks at `pred` until it holds or `bound` has passed, and returns its last answer: true once
/// it held. The bound only catches a hang (the default, `run_bound`, is far beyond anything a
/// loaded machine or a sanitizer makes of a passing test), so use it only for something that
/// must happen: a false return is a failure, never an outcome to expect. To show that something
/// does not happen, wait for an event that would follow it instead.
///
/// Between looks it sleeps briefly (100 us) rather than spinning: on a 2-core machine a spinning
/// waiter takes a core from the thread whose progress it waits for.
template <class Pred>
bool eventually(Pred&& pred, std::chrono::nanoseconds bound = run_bound) {
    const auto end = std::chrono::steady_clock::now() + bound;
    while (!pred()) {
        if (std::chrono::steady_clock::now() >= end) return static_cast<bool>(pred());
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return true;
}

} // namespace gpu_async::test

#endif // GPU_ASYNC_TEST_COMMON_EVENTUALLY_HPP
