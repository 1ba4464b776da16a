// SPDX-License-Identifier: BSL-1.0
//
// test/common/scripted_idle.hpp: a reactor idle on a manual clock that records every call, and a
// virtual-time device that stores sequence numbers into completion lines at set times.
//
#ifndef GPU_ASYNC_TEST_COMMON_SCRIPTED_IDLE_HPP
#define GPU_ASYNC_TEST_COMMON_SCRIPTED_IDLE_HPP

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/time.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

namespace gpu_async::test {

/// Idles on a manual clock. sleep_until sets the clock to the deadline; park_line moves the
/// clock from timer to timer (the virtual device's stores are timers) until the predicate holds
/// or the bound passes. Every call is recorded; `on_idle`, when set, runs first in each call (to
/// assert the caller's state at the moment it idles).
class scripted_idle {
public:
    enum class op { sleep, park };
    struct call {
        op what;
        mono_ns at;                            ///< clock when called
        mono_ns until;                         ///< sleep deadline
        dur_ns bound;                          ///< park bound
        const completion_line* line = nullptr; ///< park line
        mono_ns returned;                      ///< clock when it returned
        bool result = false;                   ///< park result
    };

    explicit scripted_idle(manual_clock& clock)
        : clock_(&clock) {}

    mono_ns now() const noexcept { return clock_->now(); }

    void sleep_until(mono_ns at) {
        if (on_idle) on_idle();
        call c{op::sleep, now(), at, {}, nullptr, {}, false};
        clock_->set(max(at, now()));
        c.returned = now();
        calls.push_back(c);
    }

    template <class Pred>
    bool park_line(const completion_line& line, Pred pred, dur_ns bound) {
        if (on_idle) on_idle();
        call c{op::park, now(), {}, bound, &line, {}, false};
        const mono_ns limit = now().after(bound);
        while (!pred()) {
            const auto next = clock_->next_deadline();
            if (!next || *next > limit) {
                clock_->set(limit);
                break;
            }
            clock_->set(max(*next, now()));
        }
        c.result = pred();
        c.returned = now();
        calls.push_back(c);
        return c.result;
    }

    std::size_t count(op o) const {
        std::size_t n = 0;
        for (const auto& c : calls)
            n += c.what == o ? 1 : 0;
        return n;
    }

    std::vector<call> calls;
    std::function<void()> on_idle;

private:
    manual_clock* clock_;
};

/// Schedules a release store of `value` into `line.words[slot]` at virtual time `at`: a GPU
/// stream's store, on the manual clock.
inline void store_at(manual_clock& clock, completion_line& line, std::size_t slot,
                     std::uint64_t value, mono_ns at) {
    clock.schedule(
        at, [&line, slot, value] { line.words[slot].store(value, std::memory_order_release); });
}

} // namespace gpu_async::test

#endif // GPU_ASYNC_TEST_COMMON_SCRIPTED_IDLE_HPP
