// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The one spin of the waiting path (pause until a condition holds or a time passes)
/// and the one spin-then-sleep built on it.
///
/// Every bounded spin of the library (the word wait's portable park, the doorbell's wait, the
/// bell waiter's predicted park, the stand-back gate) is this loop, so a spin reads the clock
/// once per 16 pauses everywhere: a clock read costs about as much as the pauses between two.
#ifndef GPU_ASYNC_WAIT_DETAIL_SPIN_HPP
#define GPU_ASYNC_WAIT_DETAIL_SPIN_HPP

#include <gpu_async/wait/detail/mono_clock.hpp>
#include <gpu_async/wait/detail/wordwait_arm.hpp>
#include <gpu_async/wait/detail/wordwait_x86.hpp>

#include <cstdint>

namespace gpu_async::detail {

/// A spin hint: PAUSE on x86, YIELD on aarch64.
inline void cpu_relax() noexcept {
#if GPU_ASYNC_WORDWAIT_X86
    __builtin_ia32_pause();
#elif GPU_ASYNC_WORDWAIT_ARM
    arm::yield_hint();
#endif
}

/// The end of a spin of `spin` begun at `start`: that, or `deadline` when it comes first.
constexpr mono_ns spin_end(mono_ns start, dur_ns spin, mono_ns deadline) noexcept {
    return deadline.ns - start.ns < spin.ns ? deadline : mono_ns{start.ns + spin.ns};
}

/// Pause-spins until `done()` is true (returns true) or the process clock reaches `end`
/// (returns false). `done()` is asked at least once, also when `end` has passed.
template <class Pred>
bool spin_until(Pred&& done, mono_ns end) {
    for (unsigned i = 1;; ++i) {
        if (done()) return true;
        cpu_relax();
        if ((i & 15u) == 0 && mono_now() >= end) return false;
    }
}

/// The one spin-then-sleep of the waiting path (the doorbell's wait, the word wait's portable
/// park, the stand-back gate): spins up to `spin`, then sleeps in rounds of at most `longest`
/// until `done()` or the clock reaches `deadline`, and returns `done()`. `sleep(left)` (a
/// dur_ns) is one round (a futex sleep on an eventcount, a yield): it returns true when it saw
/// `done()`. The spin and the rounds' length are the park policy's (wait_tuning).
template <class Pred, class Sleep>
bool spin_then_sleep(Pred&& done, dur_ns spin, mono_ns deadline, dur_ns longest, Sleep&& sleep) {
    if (done()) return true;
    if (spin.ns != 0 && spin_until(done, spin_end(mono_now(), spin, deadline))) return true;
    for (;;) {
        const mono_ns now = mono_now();
        if (now >= deadline) return static_cast<bool>(done());
        if (sleep(min(deadline.since(now), longest))) return true;
    }
}

} // namespace gpu_async::detail

#endif // GPU_ASYNC_WAIT_DETAIL_SPIN_HPP
