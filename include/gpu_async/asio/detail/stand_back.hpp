// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/asio/detail/stand_back.hpp: the gate a waiter stands back at while another thread scans
// for it (an implementation detail of the reactor service).
//
// While a port's drains are out (posted, running or awaiting a retry), each drain's end scans
// the lines on the executor's thread; the waiter then waits for the drains to end instead of
// scanning beside them. The gate counts the drains out and is an eventcount on that count:
// whatever ends a stand-back changes its state first and bumps the count after (wake()), so a
// sleeper sees the new count or the new state.
//
#ifndef GPU_ASYNC_ASIO_DETAIL_STAND_BACK_HPP
#define GPU_ASYNC_ASIO_DETAIL_STAND_BACK_HPP

#include <gpu_async/core/park_policy.hpp>
#include <gpu_async/core/time.hpp>
#include <gpu_async/wait/detail/bell_waiter.hpp>
#include <gpu_async/wait/detail/futex.hpp>
#include <gpu_async/wait/detail/spin.hpp>
#include <gpu_async/wait/doorbell.hpp>
#include <gpu_async/wait/wordwait.hpp>

#include <atomic>
#include <cstdint>
#include <thread>

namespace gpu_async::detail {

class stand_back_gate {
public:
    /// A drain was posted.
    void drain_out() noexcept { drains_out_.fetch_add(1, std::memory_order_seq_cst); }
    /// A drain ended without being posted again: the last one ends a stand-back.
    void drain_ended() noexcept {
        if (drains_out_.fetch_sub(1, std::memory_order_seq_cst) == 1) wake();
    }
    /// Drains out (for tests and diagnostics: 0 once every completion queue is idle).
    std::uint32_t drains_out() const noexcept {
        return drains_out_.load(std::memory_order_seq_cst);
    }

    /// Ends a stand-back: its state changed (a stop, an urgent registration); the caller
    /// changed it first.
    void wake() noexcept {
        epoch_.fetch_add(1, std::memory_order_seq_cst);
        sleepers_.notify(epoch_word());
    }

    /// Waits until `over()` or `bound` passes, as park_policy::stand_back_round says: spins
    /// first (the first round of a stand-back: `spin_first`), then, while rings come densely,
    /// sleeps on the eventcount, in steps of the device poll interval while device producers
    /// count and no monitor sees their stores (a device's store does not end a futex sleep).
    /// Sparse rings: returns after the spin (a drain's end is near). It reads lines that nobody
    /// writes per completion: the drains' count, the flags, the doorbell's device word.
    template <class Over>
    void wait(const doorbell& bell, const bell_waiter& waiter, dur_ns bound, bool spin_first,
              Over&& over) noexcept {
        if (over() || bound.ns == 0) return;
        const park_policy::stand_back_wait round = park_policy::stand_back_round(
            spin_first, waiter.spin(), bell.device_producers() != 0 && !waiter.has_monitor(),
            waiter.device_poll());
        const mono_ns deadline = mono_now().after(bound);
        if (!round.sleep) {
            if (round.spin.ns != 0) spin_until(over, spin_end(mono_now(), round.spin, deadline));
            return;
        }
        spin_then_sleep(over, round.spin, deadline, round.round, [&](dur_ns left) {
            const std::uint32_t epoch = epoch_.load(std::memory_order_seq_cst);
            return sleepers_.sleep(epoch_word(), epoch, over, left);
        });
    }

private:
    // Drains posted, running or awaiting a retry; the eventcount and its sleepers.
    std::atomic<std::uint32_t> drains_out_{0};
    std::atomic<std::uint32_t> epoch_{0};
    futex_sleepers sleepers_;

    const std::uint32_t* epoch_word() const noexcept {
        return reinterpret_cast<const std::uint32_t*>(&epoch_);
    }
};

} // namespace gpu_async::detail

#endif // GPU_ASYNC_ASIO_DETAIL_STAND_BACK_HPP
