// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/wait/detail/timer_slack.hpp: short sleeps that stay short.
//
// Linux lets a sleeping thread wake up to its timer slack (50 us by default) after its deadline,
// to batch wake-ups. A waiter whose whole budget is a park bound of 100 us cannot afford that:
// its threads set their slack to 1 ns (prctl PR_SET_TIMERSLACK; it applies to the calling thread
// only). Elsewhere this does nothing.
//
#ifndef GPU_ASYNC_WAIT_DETAIL_TIMER_SLACK_HPP
#define GPU_ASYNC_WAIT_DETAIL_TIMER_SLACK_HPP

#if defined(__linux__)
#include <sys/prctl.h>
#endif

namespace gpu_async::detail {

/// Sets the calling thread's timer slack to 1 ns where the OS has one; best effort.
inline void shorten_timer_slack() noexcept {
#if defined(__linux__)
    static_cast<void>(::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL));
#endif
}

/// Shortens the calling thread's timer slack for its lifetime, then puts the old one back.
class scoped_timer_slack {
public:
    scoped_timer_slack() noexcept {
#if defined(__linux__)
        const int old = ::prctl(PR_GET_TIMERSLACK, 0UL, 0UL, 0UL, 0UL);
        if (old > 0) old_ = static_cast<unsigned long>(old);
#endif
        shorten_timer_slack();
    }
    scoped_timer_slack(const scoped_timer_slack&) = delete;
    scoped_timer_slack& operator=(const scoped_timer_slack&) = delete;
    ~scoped_timer_slack() {
#if defined(__linux__)
        if (old_ != 0) static_cast<void>(::prctl(PR_SET_TIMERSLACK, old_, 0UL, 0UL, 0UL));
#endif
    }

private:
    unsigned long old_ = 0;
};

} // namespace gpu_async::detail

#endif // GPU_ASYNC_WAIT_DETAIL_TIMER_SLACK_HPP
