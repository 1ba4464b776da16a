// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief Who waits for the reactor service's lines, as one state machine: its watcher thread
/// (none, running, or being stopped), the FILL drivers (run_fill callers) with their park
/// bounds, and the service's shutdown, after which nobody waits or starts.
///
/// The service changes it only under its lock, through these members; each publishes at once
/// what is read without the lock (whether a waiter is present, whether the watcher is being
/// stopped, whether the service shut down, the longest FILL park bound), in one atomic word and
/// one bound, so no flag is kept in step with another by hand. "Is a watcher needed" is asked
/// here only (`needs_watcher`).
#ifndef GPU_ASYNC_ASIO_DETAIL_WAITER_ROSTER_HPP
#define GPU_ASYNC_ASIO_DETAIL_WAITER_ROSTER_HPP

#include <gpu_async/core/time.hpp>

#include <atomic>
#include <cstdint>
#include <set>

namespace gpu_async::detail {

class waiter_roster {
public:
    /// The watcher thread's state.
    enum class watcher : std::uint8_t {
        none,     ///< no thread
        running,  ///< it waits for the table
        stopping, ///< told to stop and being joined: it is no waiter, and none starts meanwhile
    };

    // --- under the owner's lock ---------------------------------------------------------------

    watcher thread() const noexcept { return thread_; }
    /// FILL drivers are active: they wait for the table, not the watcher.
    bool fill_active() const noexcept { return !fill_bounds_.empty(); }
    /// Whether a watcher is to be started now, `waits` being whether work is pending: nobody
    /// waits for it, none is being stopped (its stopper decides what comes next), and the
    /// service has not shut down.
    bool needs_watcher(bool waits) const noexcept {
        return waits && thread_ == watcher::none && !fill_active() && !shut_down_;
    }
    /// The service shuts down: no waiter starts from here on (a running one is stopped first).
    void shutting_down() noexcept {
        shut_down_ = true;
        publish();
    }

    void watcher_started() noexcept {
        thread_ = watcher::running;
        publish();
    }
    void watcher_stopping() noexcept {
        thread_ = watcher::stopping;
        publish();
    }
    void watcher_joined() noexcept {
        thread_ = watcher::none;
        publish();
    }
    /// A FILL driver begins with park bound `b` (may throw: no memory, nothing changed).
    void fill_begun(dur_ns b) {
        fill_bounds_.insert(b.ns);
        publish();
    }
    /// A FILL driver with park bound `b` ends.
    void fill_ended(dur_ns b) noexcept {
        fill_bounds_.erase(fill_bounds_.find(b.ns));
        publish();
    }

    // --- from any thread ----------------------------------------------------------------------

    /// A waiter (the watcher, or a FILL driver) waits for the table. A registration pushed
    /// before it reads this (seq_cst) is seen by the waiter, or finds none and starts one.
    bool present() const noexcept {
        return (word_.load(std::memory_order_seq_cst) & present_bit) != 0;
    }
    /// The watcher has been told to stop (a stand-back ends for it).
    bool stopping() const noexcept {
        return (word_.load(std::memory_order_seq_cst) & stopping_bit) != 0;
    }
    /// The service has shut down: a wait started now is dropped.
    bool shut_down() const noexcept {
        return (word_.load(std::memory_order_seq_cst) & shut_down_bit) != 0;
    }
    /// The longest FILL driver's park bound; 0 when none runs.
    dur_ns fill_bound() const noexcept {
        return dur_ns{fill_bound_ns_.load(std::memory_order_relaxed)};
    }

private:
    static constexpr std::uint8_t present_bit = 1;
    static constexpr std::uint8_t stopping_bit = 2;
    static constexpr std::uint8_t shut_down_bit = 4;

    void publish() noexcept {
        fill_bound_ns_.store(fill_bounds_.empty() ? 0 : *fill_bounds_.rbegin(),
                             std::memory_order_relaxed);
        const bool present = thread_ == watcher::running || fill_active();
        word_.store(static_cast<std::uint8_t>((present ? present_bit : 0) |
                                              (thread_ == watcher::stopping ? stopping_bit : 0) |
                                              (shut_down_ ? shut_down_bit : 0)),
                    std::memory_order_seq_cst);
    }

    watcher thread_ = watcher::none;
    bool shut_down_ = false;
    std::multiset<std::uint64_t> fill_bounds_; // the FILL drivers' park bounds
    std::atomic<std::uint8_t> word_{0}; // present_bit | stopping_bit | shut_down_bit, published
    std::atomic<std::uint64_t> fill_bound_ns_{0};
};

} // namespace gpu_async::detail

#endif // GPU_ASYNC_ASIO_DETAIL_WAITER_ROSTER_HPP
