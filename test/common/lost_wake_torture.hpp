// SPDX-License-Identifier: BSL-1.0
//
// test/common/lost_wake_torture.hpp: a producer storing at random moments against a parking
// waiter, in lock step, to catch a lost wake (shared by the word-wait and doorbell tests).
//
// Round i: the producer waits for the waiter's acknowledgement of round i-1, lets a random delay
// pass (from nothing to tens of microseconds, so its store lands before, during and after the
// waiter's arm/check/sleep), stores i into the watched word (release) and calls `announce()`
// (e.g. a doorbell ring). The waiter parks until the word reaches i with a bound of `bound`
// (generous: a second). A lost wake shows as a park that returns false or that ran to its bound
// although the store came microseconds after it started: a futex sleeper whose wake was lost
// sleeps to its bound, then finds the word. (For the monitor paths a lost wake would cost one
// wait quantum, ~100 us, not the bound; the loop re-checks; the torture then checks the
// arm/check/wait order does not miss the predicate.)
//
#ifndef GPU_ASYNC_TEST_COMMON_LOST_WAKE_TORTURE_HPP
#define GPU_ASYNC_TEST_COMMON_LOST_WAKE_TORTURE_HPP

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/wait/wordwait.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <thread>

namespace gpu_async::test {

/// Whether the long versions of the tortures were asked for (GPU_ASYNC_LONG_TESTS set to anything
/// but 0): a release check or a change to a park path runs them; the everyday suite does not.
inline bool long_tests() noexcept {
    const char* v = std::getenv("GPU_ASYNC_LONG_TESTS");
    return v != nullptr && *v != '\0' && *v != '0';
}

/// Rounds of the lost-wake tortures: 1e6 in the long run, 1e5 by default. A torture meets a
/// narrow window only by chance (more often the more rounds), so the known lost-wake window (the
/// ring count read after the last look) is also pinned by a deterministic test that fails on it
/// every time (doorbell_suite/a_ring_between_the_last_look_and_the_sleep_is_not_lost); the
/// tortures hunt the orderings nobody wrote down.
inline std::uint64_t torture_rounds() noexcept {
    return long_tests() ? 1000000 : 100000;
}

/// Time budget of one torture: long enough for the rounds on a loaded 2-core machine (about 6 s
/// for 1e6 rounds of the word wait, 15 s for the doorbell here); under a sanitizer (whose
/// instrumentation makes a round 5-20x slower) or under qemu (GPU_ASYNC_QEMU set by
/// scripts/ci/aarch64.sh), as many rounds as fit in 1.5 s.
inline std::chrono::milliseconds torture_budget() noexcept {
    constexpr std::chrono::milliseconds instrumented(1500);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    return instrumented;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
    return instrumented;
#endif
#endif
    if (std::getenv("GPU_ASYNC_QEMU") != nullptr) return instrumented;
    return std::chrono::milliseconds(long_tests() ? 40000 : 10000);
}

struct torture_result {
    std::uint64_t rounds = 0;     ///< rounds completed
    std::uint64_t lost = 0;       ///< parks that returned false (each a lost wake)
    std::uint64_t first_lost = 0; ///< the round of the first lost wake (0: none)
};

/// Runs up to `max_rounds` rounds or until `budget` has passed (checked every 256 rounds), with
/// `park(line, pred, bound)` as the waiter and `announce()` after each store.
template <class Park, class Announce>
torture_result lost_wake_torture(completion_line& line, std::uint64_t max_rounds,
                                 std::chrono::nanoseconds budget, dur_ns bound, Park park,
                                 Announce announce, std::uint64_t seed = 0x9e3779b97f4a7c15ull) {
    std::atomic<std::uint64_t> ack{0};
    std::atomic<std::uint64_t> last_round{max_rounds};
    std::atomic<bool> stop{false};
    auto& word = line.words[1];
    word.store(0, std::memory_order_relaxed);

    std::thread producer([&] {
        std::uint64_t x = seed;
        for (std::uint64_t i = 1;; ++i) {
            while (ack.load(std::memory_order_acquire) != i - 1) {
                if (stop.load(std::memory_order_acquire)) return;
                detail::cpu_relax();
                std::this_thread::yield();
            }
            if (i > last_round.load(std::memory_order_acquire)) return;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            const unsigned kind = static_cast<unsigned>(x & 7u);
            const unsigned spins = static_cast<unsigned>((x >> 8) & 1023u);
            if (kind < 3) {
                // store at once
            } else if (kind < 6) {
                for (unsigned s = 0; s < spins; ++s)
                    detail::cpu_relax();
            } else {
                for (unsigned s = 0; s < (spins & 7u) + 1; ++s)
                    std::this_thread::yield();
            }
            word.store(i, std::memory_order_release);
            announce();
        }
    });

    torture_result r;
    const auto start = std::chrono::steady_clock::now();
    for (std::uint64_t i = 1; i <= max_rounds; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        const bool seen = park(
            line, [&] { return word.load(std::memory_order_acquire) >= i; }, bound);
        const auto took = std::chrono::steady_clock::now() - t0;
        if (!seen || took >= std::chrono::nanoseconds(bound.count())) {
            ++r.lost;
            if (r.first_lost == 0) r.first_lost = i;
            // Let the round finish so the producer is not left waiting.
            while (word.load(std::memory_order_acquire) < i)
                std::this_thread::yield();
        }
        r.rounds = i;
        if ((i & 255u) == 0 && std::chrono::steady_clock::now() - start >= budget) {
            last_round.store(i, std::memory_order_release);
            ack.store(i, std::memory_order_release);
            break;
        }
        ack.store(i, std::memory_order_release);
    }
    stop.store(true, std::memory_order_release);
    producer.join();
    return r;
}

} // namespace gpu_async::test

#endif // GPU_ASYNC_TEST_COMMON_LOST_WAKE_TORTURE_HPP
