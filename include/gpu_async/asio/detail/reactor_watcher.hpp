// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The reactor service's watcher: its own thread, which waits for the service's lines
/// while no run_fill caller does, and the loop that carries out the park policy's steps.
///
/// The watcher decides nothing itself: at the top of each pass and after each scan it asks
/// park_policy::next (<gpu_async/core/park_policy.hpp>) what comes next (post the drains that
/// could not be posted, idle while a FILL driver waits, stand back while drains scan, scan, hand
/// out what was found, park) and does it, under the service's lock except while it waits. The
/// service starts it lazily, for a pending wait while no waiter is present (waiter_roster), and
/// stops it when a FILL driver begins, on shutdown and before fork.
#ifndef GPU_ASYNC_ASIO_DETAIL_REACTOR_WATCHER_HPP
#define GPU_ASYNC_ASIO_DETAIL_REACTOR_WATCHER_HPP

#include <gpu_async/asio/detail/flavour.hpp>
#include <gpu_async/core/detail/config.hpp>
#include <gpu_async/wait/detail/ranked_mutex.hpp>

#include <cstdint>
#include <mutex>
#include <thread>

namespace gpu_async::detail {
GPU_ASYNC_ASIO_NAMESPACE_BEGIN

class reactor_service;

class reactor_watcher {
public:
    explicit reactor_watcher(reactor_service& svc) noexcept
        : svc_(svc) {}
    reactor_watcher(const reactor_watcher&) = delete;
    reactor_watcher& operator=(const reactor_watcher&) = delete;

    /// Starts the thread (under the service's lock, while the roster needs a watcher); throws
    /// std::system_error when it cannot.
    GPU_ASYNC_DECL void start_locked();
    /// Tells the thread to stop and joins it, if one runs (no lock held).
    GPU_ASYNC_DECL void stop();
    /// Whether a thread runs or is being stopped (under the service's lock).
    bool joinable() const noexcept { return thread_.joinable(); }

private:
    /// The thread: passes of park_policy's steps until stopped.
    void run();
    /// The steps (the service's lock held on entry and exit; each releases it while it waits).
    void post_retries_step(std::unique_lock<ranked_mutex>& lk, std::uint64_t seen);
    void idle_step(std::unique_lock<ranked_mutex>& lk, std::uint64_t seen);
    void stand_back_step(std::unique_lock<ranked_mutex>& lk);
    void scan_step(std::unique_lock<ranked_mutex>& lk, std::uint64_t seen);
    /// What ends a stand-back: no drain out, a stop, an urgent registration, a device's signal.
    bool stand_back_over() const noexcept;

    reactor_service& svc_;
    std::thread thread_;
};

GPU_ASYNC_ASIO_NAMESPACE_END
} // namespace gpu_async::detail

#endif // GPU_ASYNC_ASIO_DETAIL_REACTOR_WATCHER_HPP
