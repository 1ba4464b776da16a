// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/line/impl/line_health.ipp: the lines' health queries, under the line registry's lock
// (line/impl/line_watchers.ipp).
//
#ifndef GPU_ASYNC_IMPL_LINE_HEALTH_IPP
#define GPU_ASYNC_IMPL_LINE_HEALTH_IPP

#include <gpu_async/line/impl/line_watchers.ipp>
#include <gpu_async/line/line_health.hpp>
#include <gpu_async/wait/detail/mono_clock.hpp>
#include <gpu_async/wait/detail/ranked_mutex.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace gpu_async {

namespace detail {

struct line_health_registry {
    // The health queries (watch_line_health), under the line registry's `mutex` (line_watchers(),
    // whose `unpinned` they wait on too). Shared: a run holds the entries it
    // is about to ask, so unwatching never frees one a run still reads; `running` (under `mutex`)
    // is what unwatching waits for, `removed` keeps a run from starting an unwatched query.
    struct health_entry {
        const completion_line* line;
        line_health* health;
        bool running = false;
        bool removed = false;
    };
    std::vector<std::shared_ptr<health_entry>> health;
    std::atomic<std::size_t> health_watched{0}; // health.size(), read without the lock
    std::atomic<std::uint64_t> health_last{0};  // the last run's now_ns (0: none yet)
    std::atomic<std::uint64_t> health_backstop{default_fault_backstop.ns};
    std::atomic<bool> health_running{false}; // a run is under way
};

GPU_ASYNC_DECL line_health_registry& line_health_queries() noexcept {
    // Never destroyed, as the line watchers' registry.
    static line_health_registry* r = new line_health_registry();
    return *r;
}

} // namespace detail

GPU_ASYNC_DECL void watch_line_health(const completion_line& line, line_health& h) {
    detail::line_watcher_registry& r = detail::line_watchers();
    detail::line_health_registry& q = detail::line_health_queries();
    auto e = std::make_shared<detail::line_health_registry::health_entry>(
        detail::line_health_registry::health_entry{&line, &h});
    std::lock_guard lk(r.mutex);
    q.health.push_back(std::move(e));
    q.health_watched.store(q.health.size(), std::memory_order_release);
}

GPU_ASYNC_DECL void unwatch_line_health(const completion_line& line) noexcept {
    detail::line_watcher_registry& r = detail::line_watchers();
    detail::line_health_registry& q = detail::line_health_queries();
    std::unique_lock lk(r.mutex);
    for (;;) {
        const auto it = std::find_if(q.health.begin(), q.health.end(),
                                     [&](const auto& e) { return e->line == &line; });
        if (it == q.health.end()) return;
        // Swapped with the last (order is not kept: every query runs, in any order).
        std::swap(*it, q.health.back());
        std::shared_ptr<detail::line_health_registry::health_entry> gone =
            std::move(q.health.back());
        q.health.pop_back();
        q.health_watched.store(q.health.size(), std::memory_order_release);
        gone->removed = true; // no run starts it from here on
        r.unpinned.wait(lk, [&] { return !gone->running; });
        lk.unlock();
        gone.reset(); // freed outside the lock (or by the run that still holds it)
        lk.lock();
    }
}

GPU_ASYNC_DECL void set_fault_backstop(dur_ns backstop) noexcept {
    detail::line_health_queries().health_backstop.store(backstop.ns, std::memory_order_relaxed);
}

GPU_ASYNC_DECL dur_ns fault_backstop() noexcept {
    return dur_ns{detail::line_health_queries().health_backstop.load(std::memory_order_relaxed)};
}

namespace detail {

GPU_ASYNC_DECL bool line_health_watched() noexcept {
    return line_health_queries().health_watched.load(std::memory_order_acquire) != 0;
}

GPU_ASYNC_DECL bool query_line_health() noexcept {
    if (!line_health_watched()) return false;
    return query_line_health(detail::mono_now().ns);
}

GPU_ASYNC_DECL bool query_line_health(std::uint64_t now_ns) noexcept {
    line_watcher_registry& r = line_watchers();
    line_health_registry& q = line_health_queries();
    if (q.health_watched.load(std::memory_order_acquire) == 0) return false;
    expect_no_lock_held(); // the queries call their drivers
    const std::uint64_t backstop = q.health_backstop.load(std::memory_order_relaxed);
    if (backstop == dur_ns::max().ns) return false;
    // Due: no run yet, or one backstop away from the last run (either side).
    const auto due = [&] {
        const std::uint64_t last = q.health_last.load(std::memory_order_relaxed);
        return last == 0 || (now_ns > last ? now_ns - last : last - now_ns) >= backstop;
    };
    if (!due()) return false;
    // One run at a time, and only the caller that holds the run claims the turn (health_last is
    // written under health_running alone): one that finds a run under way leaves the turn due
    // for the first call after that run. (Claiming it and then skipping it put the next run a
    // whole backstop later.)
    if (q.health_running.load(std::memory_order_relaxed) ||
        q.health_running.exchange(true, std::memory_order_acquire))
        return false;
    if (!due()) { // a run took the turn between the look and the exchange
        q.health_running.store(false, std::memory_order_release);
        return false;
    }
    q.health_last.store(now_ns != 0 ? now_ns : 1, std::memory_order_relaxed);
    std::vector<std::shared_ptr<line_health_registry::health_entry>> asked;
    {
        std::lock_guard lk(r.mutex);
        try {
            asked = q.health;
        } catch (...) {
            // No memory for the list: no run this turn; the next one tries again.
            q.health_running.store(false, std::memory_order_release);
            return false;
        }
    }
    for (const auto& e : asked) {
        {
            std::lock_guard lk(r.mutex);
            if (e->removed) continue;
            e->running = true;
        }
        e->health->query(*e->line);
        {
            std::lock_guard lk(r.mutex);
            e->running = false;
        }
        r.unpinned.notify_all();
    }
    asked.clear(); // the entries unwatched meanwhile go here, outside the lock
    q.health_running.store(false, std::memory_order_release);
    return true;
}

} // namespace detail

} // namespace gpu_async

#endif // GPU_ASYNC_IMPL_LINE_HEALTH_IPP
