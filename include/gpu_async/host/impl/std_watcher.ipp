// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/host/impl/std_watcher.ipp: std_watcher's thread (its loop and its stop pass) and the
// end of a line's or slot's waits, out of the class so that its declaration reads as one page.
//
#ifndef GPU_ASYNC_HOST_IMPL_STD_WATCHER_IPP
#define GPU_ASYNC_HOST_IMPL_STD_WATCHER_IPP

#include <gpu_async/host/std_watcher.hpp>

namespace gpu_async {

template <class End>
void std_watcher::end_waits(const completion_line& line, std::optional<slot_id> slot,
                            End&& end) noexcept {
    detail::engine_list here;
    {
        std::lock_guard lk(m_);
        // Those that ended before go first: the order in which they ended.
        detail::engine_list rest;
        while (detail::engine_wait* w = left_.pop()) {
            auto* p = static_cast<detail::watch_state*>(w);
            const memory_descriptor& d = p->descriptor();
            if (p->ends_here && &d.line() == &line && (!slot || d.slot() == *slot))
                fire_here_locked(*p, here);
            else
                rest.push(w);
        }
        left_ = rest;
        detail::engine_list out;
        end(out);
        settle_locked(out, &here);
    }
    bell_->ring();
    fire_here(here);
}

inline void std_watcher::run() {
    // While nothing is watched the thread sleeps on the doorbell; a registration and the
    // stop ring it.
    std::vector<state_ptr> fired;
    std::unique_lock lk(m_);
    thread_id_ = std::this_thread::get_id();
    while (!stop_) {
        // Read before the scan (under the lock a registration takes): a ring after it ends
        // the park below.
        const std::uint64_t seen = bell_->count();
        if (bell_->device_signaled()) bell_->take_device_signal();
        park_policy::view top;
        top.empty = engine_.empty() && left_.empty();
        if (park_policy::next(top) == park_policy::step::idle) {
            lk.unlock();
            waiter_.park(*bell_, seen, default_wait_tuning.idle_bound, /*watching=*/false);
            lk.lock();
            continue;
        }
        scans_.fetch_add(1, std::memory_order_relaxed);
        collect(fired);
        park_policy::view scanned;
        scanned.scanned = true;
        scanned.found = !fired.empty();
        scanned.pending = !engine_.empty();
        const park_policy::step next = park_policy::next(scanned);
        if (next == park_policy::step::deliver) {
            lk.unlock();
            for (const state_ptr& s : fired)
                fire(*s, std::error_code());
            lk.lock();
            for (auto& s : fired)
                s->state = detail::watch_state::phase::done;
            fired.clear();
            idle_cv_.notify_all();
            continue;
        }
        if (next == park_policy::step::idle) continue; // the top of the loop idles
        lk.unlock();
        // A faulted context ends its lines' waits (device_fault) within a fault backstop.
        detail::query_line_health();
        waiter_.park(*bell_, seen, park_bound_);
        lk.lock();
    }
    stop_pass(lk);
}

inline void std_watcher::stop_pass(std::unique_lock<detail::ranked_mutex>& lk) {
    std::vector<state_ptr> ending;
    const std::size_t all = engine_.size() + left_.count + stop_listeners_.size();
    ending.reserve(all); // so that the sort below never throws
    // Pending or reached: an on_end registration ends with the stop's code, the other forms
    // stay registered; ended unreached: decided already, it ends with its own code.
    const auto sort = [&](detail::engine_wait* w) {
        auto* p = static_cast<detail::watch_state*>(w);
        if (p->end_fn || p->ending)
            ending.push_back(p->shared_from_this());
        else
            stranded_.push(w);
    };
    engine_.clear(left_); // after what left before: left_ keeps its order
    while (detail::engine_wait* w = left_.pop())
        sort(w);
    for (state_ptr& p : stop_listeners_)
        ending.push_back(std::move(p));
    stop_listeners_.clear();
    if (ending.empty()) return;
    for (const state_ptr& p : ending)
        p->state = detail::watch_state::phase::firing;
    lk.unlock();
    for (const state_ptr& s : ending)
        fire(*s, make_error_code(errc::shut_down));
    lk.lock();
    for (const state_ptr& s : ending)
        s->state = detail::watch_state::phase::done;
    idle_cv_.notify_all();
}

} // namespace gpu_async

#endif // GPU_ASYNC_HOST_IMPL_STD_WATCHER_IPP
