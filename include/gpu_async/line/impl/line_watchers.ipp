// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/line/impl/line_watchers.ipp: the process-wide registry of line watchers (and its lock,
// which the lines' health queries share: line/impl/line_health.ipp).
//
#ifndef GPU_ASYNC_IMPL_LINE_WATCHERS_IPP
#define GPU_ASYNC_IMPL_LINE_WATCHERS_IPP

#include <gpu_async/line/detail/line_watchers.hpp>
#include <gpu_async/wait/detail/ranked_mutex.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace gpu_async {

namespace detail {

// Locks (ranked in <gpu_async/wait/detail/ranked_mutex.hpp>): a watcher's own locks are taken while
// no registry lock is held (the registry pins a watcher and releases its lock before asking it).
// The health queries' list (line/impl/line_health.ipp) is under the same lock.
struct line_watcher_registry {
    struct entry {
        line_watcher* watcher;
        std::uint64_t order; // when it was added: `watchers` is sorted by it
        std::size_t pins;    // retirements and faults asking it now
    };
    ranked_mutex mutex{lock_rank::line_registry};
    ranked_condition_variable unpinned;
    // Entries on the heap, in the order they were added: a retirement asks them one by one, each
    // found again by its order after the lock was let go (a pinned entry is never removed).
    std::vector<std::unique_ptr<entry>> watchers;
    std::uint64_t added = 0;
};

GPU_ASYNC_DECL line_watcher_registry& line_watchers() noexcept {
    // Never destroyed: line owners with static storage may retire lines during exit.
    static line_watcher_registry* r = new line_watcher_registry();
    return *r;
}

GPU_ASYNC_DECL void add_line_watcher(line_watcher& w) {
    line_watcher_registry& r = line_watchers();
    auto e = std::make_unique<line_watcher_registry::entry>(line_watcher_registry::entry{&w, 0, 0});
    std::lock_guard lk(r.mutex);
    r.watchers.reserve(r.watchers.size() + 1); // may throw: before the entry's order is taken
    e->order = ++r.added;
    r.watchers.push_back(std::move(e));
}

GPU_ASYNC_DECL std::size_t line_watcher_count() noexcept {
    line_watcher_registry& r = line_watchers();
    std::lock_guard lk(r.mutex);
    return r.watchers.size();
}

GPU_ASYNC_DECL void remove_line_watcher(line_watcher& w) noexcept {
    line_watcher_registry& r = line_watchers();
    std::unique_lock lk(r.mutex);
    const auto find = [&] {
        return std::find_if(r.watchers.begin(), r.watchers.end(),
                            [&](const auto& e) { return e->watcher == &w; });
    };
    r.unpinned.wait(lk, [&] {
        const auto it = find();
        return it == r.watchers.end() || (*it)->pins == 0;
    });
    const auto it = find();
    if (it == r.watchers.end()) return;
    std::unique_ptr<line_watcher_registry::entry> gone = std::move(*it);
    r.watchers.erase(it); // the order is kept: ask_line_watchers walks by it
    lk.unlock();          // freed outside the lock
}

// Asks every registered watcher `ask(watcher)`, one at a time, holding no registry lock while
// it does: each is pinned first, so none is removed (and destroyed) while asked, and found by
// its order after the one asked before, so none is missed however the list changed meanwhile.
// Allocates nothing.
template <class Ask>
void ask_line_watchers(Ask&& ask) noexcept {
    expect_no_lock_held(); // a watcher takes its own locks, which may rank above the caller's
    line_watcher_registry& r = line_watchers();
    std::uint64_t after = 0;
    for (;;) {
        line_watcher_registry::entry* e = nullptr;
        {
            std::lock_guard lk(r.mutex);
            const auto it = std::upper_bound(
                r.watchers.begin(), r.watchers.end(), after,
                [](std::uint64_t order, const auto& x) { return order < x->order; });
            if (it == r.watchers.end()) return;
            e = it->get();
            ++e->pins;
            after = e->order;
        }
        ask(*e->watcher);
        {
            std::lock_guard lk(r.mutex);
            --e->pins;
        }
        r.unpinned.notify_all();
    }
}

} // namespace detail

} // namespace gpu_async

#endif // GPU_ASYNC_IMPL_LINE_WATCHERS_IPP
