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

/// The end of a spin of `spin_ns` begun at `start_ns`: that, or `deadline_ns` when it comes
/// first (mono clock ns).
constexpr std::uint64_t spin_end(std::uint64_t start_ns, std::uint64_t spin_ns,
                                 std::uint64_t deadline_ns) noexcept {
    return deadline_ns - start_ns < spin_ns ? deadline_ns : start_ns + spin_ns;
}

/// Pause-spins until `done()` is true (returns true) or the process clock reaches `end_ns`
/// (returns false). `done()` is asked at least once, also when `end_ns` has passed.
template <class Pred>
bool spin_until(Pred&& done, std::uint64_t end_ns) {
    for (unsigned i = 1;; ++i) {
        if (done()) return true;
        cpu_relax();
        if ((i & 15u) == 0 && mono_now().ns >= end_ns) return false;
    }
}

/// The one spin-then-sleep of the waiting path (the doorbell's wait, the word wait's portable
/// park, the stand-back gate): spins up to `spin_ns`, then sleeps in rounds of at most
/// `longest_ns` until `done()` or the clock reaches `deadline_ns`, and returns `done()`.
/// `sleep(left_ns)` is one round (a futex sleep on an eventcount, a yield): it returns true when
/// it saw `done()`. The spin and the rounds' length are the park policy's (wait_tuning).
template <class Pred, class Sleep>
bool spin_then_sleep(Pred&& done, std::uint64_t spin_ns, std::uint64_t deadline_ns,
                     std::uint64_t longest_ns, Sleep&& sleep) {
    if (done()) return true;
    if (spin_ns != 0 && spin_until(done, spin_end(mono_now().ns, spin_ns, deadline_ns)))
        return true;
    for (;;) {
        const std::uint64_t now = mono_now().ns;
        if (now >= deadline_ns) return static_cast<bool>(done());
        if (sleep(deadline_ns - now < longest_ns ? deadline_ns - now : longest_ns)) return true;
    }
}

} // namespace gpu_async::detail

#endif // GPU_ASYNC_WAIT_DETAIL_SPIN_HPP
