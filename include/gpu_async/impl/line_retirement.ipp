// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/impl/line_retirement.ipp: the process-wide registry of line watchers.
//
#ifndef GPU_ASYNC_IMPL_LINE_RETIREMENT_IPP
#define GPU_ASYNC_IMPL_LINE_RETIREMENT_IPP

#include <gpu_async/line_retirement.hpp>

#include <algorithm>
#include <mutex>
#include <vector>

namespace gpu_async {

namespace detail {

struct line_watcher_registry {
    std::mutex mutex;
    std::vector<line_watcher*> watchers;
};

GPU_ASYNC_DECL line_watcher_registry& line_watchers() noexcept {
    // Never destroyed: line owners with static storage may retire lines during exit.
    static line_watcher_registry* r = new line_watcher_registry();
    return *r;
}

GPU_ASYNC_DECL void add_line_watcher(line_watcher& w) {
    line_watcher_registry& r = line_watchers();
    std::lock_guard lk(r.mutex);
    r.watchers.push_back(&w);
}

GPU_ASYNC_DECL void remove_line_watcher(line_watcher& w) noexcept {
    line_watcher_registry& r = line_watchers();
    std::lock_guard lk(r.mutex);
    r.watchers.erase(std::remove(r.watchers.begin(), r.watchers.end(), &w), r.watchers.end());
}

} // namespace detail

GPU_ASYNC_DECL void retire_line(const completion_line& line) noexcept {
    detail::line_watcher_registry& r = detail::line_watchers();
    std::lock_guard lk(r.mutex);
    for (detail::line_watcher* w : r.watchers)
        w->retire_line(line);
}

} // namespace gpu_async

#endif // GPU_ASYNC_IMPL_LINE_RETIREMENT_IPP
