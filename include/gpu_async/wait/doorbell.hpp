// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief A completion line that host-thread producers ring.
///
/// A producer that is a CPU thread (the simulated device, a test, a host thread) may ring: it
/// stores its completion (release), then `ring()`s, which increments word 0 of the doorbell's line
/// and wakes, with a shared futex (not FUTEX_PRIVATE_FLAG), every thread sleeping on that word's
/// low 32 bits. The wake system call is skipped when nobody sleeps.
///
/// A waiter that knows all of its producers ring may `wait()`: a short spin, then futex sleeps,
/// bounded. A GPU store cannot ring (no device executes a system call), so a device path never
/// relies on ringing alone: it parks with `word_wait` on the line, or bounds its futex sleeps and
/// re-checks (the reactor's backstop query), and the ring only shortens the host-producer case.
/// GPU producers may store to the doorbell's line as well; a hardware park on it sees those
/// stores, a futex sleeper does not.
///
/// Device signals. A GPU backend with a doorbell attached (mapped_line::attach_doorbell) follows
/// each completion store, in the same stream, by a store of `device_signal` into word
/// `device_word` (1). Not word 0: that is the host ring counter, which ringers fetch_add and
/// futex sleepers compare, and a device store into it would overwrite counts and break the
/// futex protocol above. The value carries nothing but "some device stored": the store's only
/// purpose is the write to the line, which ends a user-mode monitor (UMWAIT, MWAITX, WFE) armed
/// on it. A waiter that wants to return on such a store, not merely wake and re-check, consumes
/// the signal: `take_device_signal()` (exchange to 0) before it scans its lines, and
/// `device_signaled()` in its park's predicate. The device's completion store precedes its signal
/// store (the driver fences before each 64-bit stream write), so a signal taken before a scan
/// never hides a completion from that scan, and one stored after it ends the next park.
///
/// Memory ordering (the lost-wake argument). Ringer: increment W (word 0), seq_cst fence, load S
/// (sleepers). Waiter: increment S, seq_cst fence, then re-check `done()` and hand the last W it
/// saw to FUTEX_WAIT, which compares again in the kernel. Both fences are in the single total
/// order: if the ringer's fence comes first, the waiter's re-check after its own fence sees the
/// producer's store and W's increment (so it does not sleep, or FUTEX_WAIT returns at once);
/// if the waiter's fence comes first, the ringer's load sees S > 0 and issues the wake. Either
/// way no wake is lost; the torture test in test/unit/hosts/doorbell.cpp runs this race.
#ifndef GPU_ASYNC_WAIT_DOORBELL_HPP
#define GPU_ASYNC_WAIT_DOORBELL_HPP

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/time.hpp>
#include <gpu_async/core/wait_tuning.hpp>
#include <gpu_async/wait/detail/futex.hpp>
#include <gpu_async/wait/detail/spin.hpp>
#include <gpu_async/wait/wordwait.hpp>

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <thread>

namespace gpu_async {

/// A ringable completion line. Not copyable, not movable (waiters hold its address).
class alignas(line_bytes) doorbell {
public:
    /// How long `wait` spins before it sleeps on the futex (wait_tuning::spin).
    static constexpr std::uint64_t spin_ns = default_wait_tuning.spin.ns;
    /// The longest single futex sleep (wait_tuning::longest_sleep); `wait` loops to its bound.
    static constexpr std::uint64_t max_sleep_ns = default_wait_tuning.longest_sleep.ns;

    doorbell() noexcept = default;
    doorbell(const doorbell&) = delete;
    doorbell& operator=(const doorbell&) = delete;

    /// The line; word 0 is the ring counter. Other producers may store to its other words.
    completion_line& line() noexcept { return line_; }
    const completion_line& line() const noexcept { return line_; }

    /// Release-increments word 0, then wakes every futex sleeper (shared futex), skipping the
    /// system call when nobody sleeps. Call it after the store it announces. Thread-safe.
    void ring() noexcept {
        line_.words[0].fetch_add(1, std::memory_order_release);
        if (sleepers_.notify(futex_word())) wakes_.fetch_add(1, std::memory_order_relaxed);
    }

    /// The word of the line that device producers store `device_signal` into (word 0 is the
    /// host ring counter).
    static constexpr std::size_t device_word = 1;
    /// The value a device producer stores into `device_word`: non-zero, a signal only.
    static constexpr std::uint64_t device_signal = 1;

    /// True when a device producer has stored its signal since it was last taken (acquire).
    bool device_signaled() const noexcept {
        return line_.words[device_word].load(std::memory_order_acquire) != 0;
    }

    /// Takes the device signal: resets `device_word` to 0 and returns whether it was set.
    /// Call it before scanning the lines whose stores the signal announces. Thread-safe.
    bool take_device_signal() noexcept {
        return line_.words[device_word].exchange(0, std::memory_order_acq_rel) != 0;
    }

    /// Counts a device producer that stores its signal into `device_word` (a GPU line with this
    /// doorbell attached). While there is one, a waiter without a user-mode monitor sleeps in
    /// short steps and looks at `device_word` after each (a futex sleep does not see a device's
    /// store). Thread-safe.
    void add_device_producer() noexcept {
        device_producers_.fetch_add(1, std::memory_order_relaxed);
    }
    /// Ends a count made with `add_device_producer()`.
    void remove_device_producer() noexcept {
        device_producers_.fetch_sub(1, std::memory_order_relaxed);
    }
    /// Device producers counted now.
    std::uint32_t device_producers() const noexcept {
        return device_producers_.load(std::memory_order_relaxed);
    }

    /// Acquire load of word 0: how many times the bell has rung.
    std::uint64_t count() const noexcept { return line_.words[0].load(std::memory_order_acquire); }

    /// Registers a sleeper that waits on `futex_word()` by other means (e.g. an io_uring
    /// IORING_OP_FUTEX_WAIT with shared futex flags), so `ring()` issues the wake while it is
    /// registered. The protocol is `wait`'s: read `seen = uint32(count())`, `add_sleeper()`
    /// (its seq_cst fence is the waiter's half of the argument above), re-check the condition,
    /// then futex-wait on `futex_word()` expecting `seen`; `remove_sleeper()` once woken.
    void add_sleeper() const noexcept { sleepers_.add(); }
    /// Ends a registration made with `add_sleeper()`.
    void remove_sleeper() const noexcept { sleepers_.remove(); }

    /// The futex word: the low 32 bits of word 0 (the ring counter's low half).
    const std::uint32_t* futex_word() const noexcept {
        const auto* p = reinterpret_cast<const std::uint32_t*>(&line_.words[0]);
        return std::endian::native == std::endian::little ? p : p + 1;
    }

    /// Number of threads currently registered as sleeping (in `wait` or by `add_sleeper`).
    std::uint32_t sleepers() const noexcept { return sleepers_.count(); }

    /// Number of wake system calls `ring` has issued (rings that found a sleeper).
    std::uint64_t wakes_issued() const noexcept { return wakes_.load(std::memory_order_relaxed); }

    /// Waits until `done()` or `bound` has passed, and returns `done()`: spins up to `spin_ns`,
    /// then sleeps on the futex, waking at each ring. Only producers that ring wake the sleep
    /// early; use it only when all of them ring. `done` must be cheap and must not block.
    template <class Pred>
    bool wait(Pred&& done, dur_ns bound) const {
        return wait(static_cast<Pred&&>(done), bound, dur_ns{spin_ns});
    }

    /// As `wait(done, bound)`, spinning up to `spin` (instead of `spin_ns`; zero: not at all)
    /// before it sleeps.
    template <class Pred>
    bool wait(Pred&& done, dur_ns bound, dur_ns spin) const {
        const mono_ns deadline = detail::mono_now().after(bound);
        return detail::spin_then_sleep(done, spin, deadline, default_wait_tuning.longest_sleep,
                                       [&](dur_ns left) {
                                           const auto seen = static_cast<std::uint32_t>(count());
                                           return sleepers_.sleep(futex_word(), seen, done, left);
                                       });
    }

private:
    completion_line line_;
    detail::futex_sleepers sleepers_;
    std::atomic<std::uint64_t> wakes_{0};
    std::atomic<std::uint32_t> device_producers_{0};
};

} // namespace gpu_async

#endif // GPU_ASYNC_WAIT_DOORBELL_HPP
