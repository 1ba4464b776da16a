// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief Every timing constant of the waiting path, in one struct.
///
/// How a thread waits is decided by `park_policy` (<gpu_async/core/park_policy.hpp>) from what
/// the thread saw and these numbers; the runners (the reactor service's watcher, `run_fill`, the
/// std_watcher, the FILL executor) and the wait primitives (the doorbell, the word wait's
/// portable park, the stand-back gate) carry its answers out and hold no timing of their own.
/// The public defaults (`default_park_bound`, `default_device_poll`, `default_fault_backstop`,
/// `doorbell::spin_ns`, `run_fill`'s options) are names for these fields.
#ifndef GPU_ASYNC_CORE_WAIT_TUNING_HPP
#define GPU_ASYNC_CORE_WAIT_TUNING_HPP

#include <gpu_async/core/time.hpp>

#include <cstddef>
#include <cstdint>

namespace gpu_async {

/// The timing of the waiting path. An aggregate: `wait_tuning{}` holds the library's values.
struct wait_tuning {
    /// The longest park between two scans while waits are pending: a store that nobody rings
    /// (a GPU stream's) is seen within about this long. Each port can set its own.
    dur_ns park_bound = dur_ns::from_us(100);
    /// The step of a park without a user-mode monitor while device producers store into the
    /// doorbell: a futex sleep does not see a device's store, so the park looks after each
    /// step. 20 us is near the knee where a shorter sleep of a virtual CPU buys little latency.
    dur_ns device_poll = dur_ns::from_us(20);
    /// The park of a waiter with nothing to watch: a registration and a stop ring it, so the
    /// bound only caps what a lost ring (none is expected) would cost.
    dur_ns idle_bound = dur_ns::from_ms(1000);
    /// `run_fill`'s wait in the io_context while nothing is watched (its timers and sockets).
    dur_ns fill_idle_bound = dur_ns::from_ms(1);
    /// How often a waiter asks the drivers whether a context faulted (device_fault).
    dur_ns fault_backstop = dur_ns::from_ms(10);

    /// The spin before a futex sleep or a yield (the doorbell, the word wait's portable park).
    dur_ns spin = dur_ns::from_us(2);
    /// The spin before a futex sleep while rings come densely: cheaper than a futex wake per
    /// ring (a system call for the ringer, a wake-up for the waiter).
    dur_ns busy_spin = dur_ns::from_us(100);
    /// The mean gap between rings at or under which they count as dense; they stop counting as
    /// dense past twice this.
    dur_ns busy_gap = dur_ns::from_us(25);
    /// The window over which the ring rate is measured.
    dur_ns ring_rate_window = dur_ns::from_ms(1);
    /// The longest single futex sleep: a bounded wait loops to its bound.
    dur_ns longest_sleep = dur_ns::from_ms(1000);

    /// The longest spin of the first round of a stand-back.
    dur_ns stand_back_spin = dur_ns::from_us(20);
    /// The longest stand-back, in park bounds (a drain scans only when the bell rang), while
    /// the drains keep making progress: long enough that a drain of a large batch (65,536
    /// handlers take a few milliseconds) ends and scans before the watcher scans beside it,
    /// which would split the batch and trade the table between two threads. A registration
    /// with a tighter bound or an earlier deadline still shortens it.
    std::uint64_t stand_back_bounds = 100;

    /// At most this many pending waits are looked through for the earliest expected completion;
    /// with more the waiter steps (a look per park would cost more than the steps it saves).
    std::size_t predict_max_pending = 256;
    /// The completions a slot's rhythm is learnt over.
    std::uint64_t rhythm_window = 8;

    /// A closing line's wait for its recorded stores to land polls at intervals that double
    /// from these (the blocking close's naps, async_close's timer) up to `settle_poll_last`.
    dur_ns settle_poll_first = dur_ns::from_us(20);
    dur_ns close_poll_first = dur_ns::from_us(50);
    dur_ns settle_poll_last = dur_ns::from_ms(1);
};

/// The library's timing.
inline constexpr wait_tuning default_wait_tuning{};

} // namespace gpu_async

#endif // GPU_ASYNC_CORE_WAIT_TUNING_HPP
