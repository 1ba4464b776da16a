// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/wait/detail/futex.hpp: the Linux futex calls the doorbell uses, on shared (not private)
// futexes: private io_uring futex waits can miss wakes from shared ones on some kernels, and a
// doorbell's word may live in memory another process or a device also maps.
//
#ifndef GPU_ASYNC_WAIT_DETAIL_FUTEX_HPP
#define GPU_ASYNC_WAIT_DETAIL_FUTEX_HPP

#include <gpu_async/core/time.hpp>

#include <atomic>
#include <cstdint>
#include <limits>
#include <thread>

#if defined(__linux__)
#define GPU_ASYNC_HAS_FUTEX 1
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#else
#define GPU_ASYNC_HAS_FUTEX 0
#endif

namespace gpu_async::detail {

#if GPU_ASYNC_HAS_FUTEX

/// FUTEX_WAIT (shared) on `word` while it holds `expected`, for at most `timeout_ns` (relative,
/// CLOCK_MONOTONIC). Returns at a wake, a value mismatch, a signal or the timeout.
inline void futex_wait(const std::uint32_t* word, std::uint32_t expected,
                       std::uint64_t timeout_ns) noexcept {
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(timeout_ns / 1000000000u);
    ts.tv_nsec = static_cast<long>(timeout_ns % 1000000000u);
    ::syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, nullptr, 0);
}

/// FUTEX_WAKE (shared): wakes every thread waiting on `word`.
inline void futex_wake_all(const std::uint32_t* word) noexcept {
    ::syscall(SYS_futex, word, FUTEX_WAKE, std::numeric_limits<int>::max(), nullptr, nullptr, 0);
}

#endif // GPU_ASYNC_HAS_FUTEX

/// The one futex eventcount of the waiting path (the doorbell's ring counter, the stand-back
/// gate): a 32-bit word that notifiers advance, and the count of threads asleep on it, so that a
/// notification makes no system call while nobody sleeps. No wake is lost: the waiter reads the
/// word, counts itself asleep (seq_cst fence), looks at its condition once more, then sleeps
/// expecting the word it read; the notifier changes the condition, advances the word, fences
/// (seq_cst) and wakes when it sees a sleeper. Whichever fence comes first, either the waiter's
/// look sees the new condition (or the kernel sees the new word) or the notifier sees the
/// sleeper. Without futex (not Linux) a sleep is a yield.
class futex_sleepers {
public:
    /// The waiter's half, for a thread that sleeps by other means (an io_uring futex wait):
    /// counts it asleep, then fences.
    void add() const noexcept {
        n_.fetch_add(1, std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_seq_cst);
    }
    void remove() const noexcept { n_.fetch_sub(1, std::memory_order_relaxed); }
    std::uint32_t count() const noexcept { return n_.load(std::memory_order_relaxed); }

    /// Sleeps on `word` for at most `timeout` while it holds `seen` (read before `done()` was
    /// last false), unless `done()` holds once this thread counts as asleep: then returns true
    /// without sleeping. Returns false after a sleep (a wake, a changed word or the timeout).
    template <class Pred>
    bool sleep(const std::uint32_t* word, std::uint32_t seen, Pred&& done, dur_ns timeout) const {
        add();
        if (done()) {
            remove();
            return true;
        }
#if GPU_ASYNC_HAS_FUTEX
        futex_wait(word, seen, timeout.ns);
#else
        (void)word;
        (void)seen;
        (void)timeout;
        std::this_thread::yield();
#endif
        remove();
        return false;
    }

    /// The notifier's half, after it advanced `word`: fences, then wakes every sleeper if there
    /// is one. Returns whether it issued the wake.
    bool notify(const std::uint32_t* word) const noexcept {
        std::atomic_thread_fence(std::memory_order_seq_cst);
        if (count() == 0) return false;
#if GPU_ASYNC_HAS_FUTEX
        futex_wake_all(word);
#else
        (void)word;
#endif
        return true;
    }

private:
    mutable std::atomic<std::uint32_t> n_{0};
};

} // namespace gpu_async::detail

#endif // GPU_ASYNC_WAIT_DETAIL_FUTEX_HPP
