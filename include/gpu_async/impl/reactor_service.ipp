// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/impl/reactor_service.ipp: definitions of the reactor service.
//
#ifndef GPU_ASYNC_IMPL_REACTOR_SERVICE_IPP
#define GPU_ASYNC_IMPL_REACTOR_SERVICE_IPP

#include <gpu_async/reactor_service.hpp>

#include <algorithm>
#include <bit>
#include <exception>
#include <utility>

namespace gpu_async {

GPU_ASYNC_DECL reactor_service::reactor_service(asio::execution_context& ctx)
    : asio::execution_context::service(ctx) {}

GPU_ASYNC_DECL reactor_service::~reactor_service() {
    // shutdown() has run (the execution context calls it before destroying services); this only
    // guards against a service destroyed some other way.
    stop_thread();
}

GPU_ASYNC_DECL void reactor_service::park_bound(dur_ns bound) noexcept {
    park_bound_ns_.store(bound.ns == 0 ? 1 : bound.ns, std::memory_order_relaxed);
}

GPU_ASYNC_DECL std::size_t reactor_service::pending() const {
    std::lock_guard lk(mutex_);
    return pending_;
}

GPU_ASYNC_DECL std::size_t reactor_service::pending(const detail::reactor_port& port) const {
    std::lock_guard lk(mutex_);
    return port.count;
}

GPU_ASYNC_DECL bool reactor_service::watcher_running() const {
    std::lock_guard lk(mutex_);
    return thread_.joinable();
}

GPU_ASYNC_DECL reactor_service::start_result
reactor_service::start(detail::reactor_port* port, detail::reactor_op* op, dur_ns bound,
                       std::optional<std::chrono::steady_clock::time_point> deadline) {
    using state = detail::reactor_op::state;
    bool ring = false;
    bool finish_now = false;
    bool destroy_now = false;
    {
        std::lock_guard lk(mutex_);
        if (shut_down_) {
            // The context is being destroyed: nothing will run the handler. Destroy it
            // (outside the lock), never invoke it, as shutdown() does with pending waits.
            destroy_now = true;
        } else if (op->state_ == state::cancelled_early) {
            op->ec = asio::error::operation_aborted;
            finish_now = true;
        } else if (op->descriptor().is_complete()) {
            // Checked under the lock: a store after this check is seen by the waiter's next
            // scan, which cannot run before the registration below is linked.
            op->ec = {};
            finish_now = true;
        } else if (deadline && *deadline <= std::chrono::steady_clock::now()) {
            op->ec = asio::error::timed_out;
            finish_now = true;
        } else {
            if (fill_ == 0 && !thread_.joinable()) start_thread_locked();
            const bool was_idle = pending_ == 0;
            op->bound_ns_ = bound.ns;
            op->deadline_ = deadline;
            const bool earlier =
                deadline && (deadlines_.empty() || *deadline < deadlines_.begin()->first);
            const bool tighter = bound.ns != 0 &&
                                 (bounds_.empty() || bound.ns < bounds_.begin()->first) &&
                                 bound.ns < park_bound_ns_.load(std::memory_order_relaxed);
            link_locked(port, op);
            ring = was_idle || earlier || tighter || fill_ > 0;
        }
        if (finish_now || destroy_now) op->state_ = state::finished;
    }
    if (ring) bell_.ring();
    // Not registered: the caller alone owns the op. It completes or destroys it itself, so that
    // a failure there (posting can throw) cannot leave the op's ownership in doubt.
    if (destroy_now) return start_result::dropped;
    if (finish_now) return start_result::finished;
    return start_result::registered;
}

GPU_ASYNC_DECL bool reactor_service::cancel(detail::reactor_op* op) {
    using state = detail::reactor_op::state;
    {
        std::lock_guard lk(mutex_);
        // After shutdown every wait has been destroyed (or will be, unstarted), but its
        // cancellation handler stays in the slot (the signal may be gone, so shutdown leaves the
        // slot alone): a signal emitted then, e.g. from a handler's destructor while the context
        // shuts down, must not reach the op.
        if (shut_down_) return false;
        switch (op->state_) {
        case state::fresh:
            op->state_ = state::cancelled_early;
            return true;
        case state::registered:
            unlink_locked(op);
            op->ec = asio::error::operation_aborted;
            break;
        case state::cancelled_early:
        case state::finished:
            return false;
        }
    }
    op->complete();
    return true;
}

GPU_ASYNC_DECL std::size_t reactor_service::cancel(detail::reactor_port& port) {
    detail::reactor_op* list = nullptr;
    std::size_t n = 0;
    {
        std::lock_guard lk(mutex_);
        while (port.head != nullptr) {
            detail::reactor_op* op = port.head;
            unlink_locked(op);
            op->ec = asio::error::operation_aborted;
            op->next_ready_ = list;
            list = op;
            ++n;
        }
    }
    complete_all(list);
    return n;
}

GPU_ASYNC_DECL void reactor_service::begin_fill() {
    {
        std::lock_guard lk(mutex_);
        ++fill_;
    }
    // The watcher stands down: joined, so no extra thread runs while a FILL driver does;
    // start() launches none while fill_ > 0 and end_fill() restarts it when waits are pending.
    stop_thread();
}

GPU_ASYNC_DECL void reactor_service::end_fill() {
    {
        std::lock_guard lk(mutex_);
        --fill_;
        if (fill_ == 0 && pending_ > 0 && !thread_.joinable() && !shut_down_) {
            try {
                start_thread_locked();
            } catch (...) {
                // No watcher: the pending waits complete at the next run_fill or on retry at the
                // next registration. Nothing is lost.
            }
        }
    }
    bell_.ring();
}

GPU_ASYNC_DECL std::size_t reactor_service::poll_ready() {
    std::size_t n = 0;
    detail::reactor_op* list = nullptr;
    {
        std::lock_guard lk(mutex_);
        if (pending_ == 0) return 0;
        list = collect_locked(std::chrono::steady_clock::now(), n);
    }
    complete_all(list);
    return n;
}

GPU_ASYNC_DECL void reactor_service::park(std::uint64_t seen, dur_ns bound) {
    {
        std::lock_guard lk(mutex_);
        bound = bound_locked(std::chrono::steady_clock::now(), bound);
    }
    park_on_bell(seen, bound);
}

GPU_ASYNC_DECL void reactor_service::shutdown() {
    stop_thread();
    detail::reactor_op* list = nullptr;
    {
        std::lock_guard lk(mutex_);
        shut_down_ = true;
        std::vector<detail::reactor_op*> all;
        all.reserve(pending_);
        for (line_waits* lw : active_)
            for (auto& s : lw->slots)
                for (auto& entry : s.waits)
                    all.push_back(entry.second);
        for (detail::reactor_op* op : all) {
            unlink_locked(op);
            op->next_ready_ = list;
            list = op;
        }
    }
    // Destroyed without being invoked, with no lock held (a handler's destructor may do anything).
    while (list != nullptr) {
        detail::reactor_op* next = list->next_ready_;
        list->destroy();
        list = next;
    }
}

GPU_ASYNC_DECL void reactor_service::notify_fork(asio::execution_context::fork_event event) {
    if (event == asio::execution_context::fork_prepare) {
        // No thread may be running across fork(): stop the watcher; it restarts lazily.
        stop_thread();
        return;
    }
    // Parent or child: restart the watcher when waits are pending.
    std::lock_guard lk(mutex_);
    if (fill_ == 0 && pending_ > 0 && !thread_.joinable() && !shut_down_) start_thread_locked();
}

GPU_ASYNC_DECL void reactor_service::link_locked(detail::reactor_port* port,
                                                 detail::reactor_op* op) {
    const completion_line* line = &op->descriptor().line();
    auto [it, inserted] = lines_.try_emplace(line);
    line_waits& lw = it->second;
    if (inserted) {
        lw.line = line;
        lw.active_pos = active_.size();
        active_.push_back(&lw);
    }
    const std::size_t s = op->descriptor().slot().index();
    slot_waits& sw = lw.slots[s];
    if (sw.waits.empty()) sw.anchor = line->words[s].load(std::memory_order_relaxed);
    op->slot_pos_ = sw.waits.emplace(op->descriptor().target() - sw.anchor, op);
    lw.front[s] = sw.waits.begin()->second->descriptor().target();
    lw.mask |= 1u << s;
    ++lw.count;
    op->line_ = &lw;
    if (op->deadline_) op->deadline_pos_ = deadlines_.emplace(*op->deadline_, op);
    if (op->bound_ns_ != 0) ++bounds_[op->bound_ns_];
    if (port != nullptr) {
        op->owner_ = port;
        op->prev_ = nullptr;
        op->next_ = port->head;
        if (port->head != nullptr) port->head->prev_ = op;
        port->head = op;
        ++port->count;
    }
    op->state_ = detail::reactor_op::state::registered;
    ++pending_;
}

GPU_ASYNC_DECL void reactor_service::unlink_locked(detail::reactor_op* op) {
    auto* lw = static_cast<line_waits*>(op->line_);
    const std::size_t s = op->descriptor().slot().index();
    slot_waits& sw = lw->slots[s];
    sw.waits.erase(op->slot_pos_);
    if (sw.waits.empty())
        lw->mask &= ~(1u << s);
    else
        lw->front[s] = sw.waits.begin()->second->descriptor().target();
    if (--lw->count == 0) {
        line_waits* last = active_.back();
        active_[lw->active_pos] = last;
        last->active_pos = lw->active_pos;
        active_.pop_back();
        lines_.erase(lw->line);
    }
    op->line_ = nullptr;
    if (op->deadline_) {
        deadlines_.erase(op->deadline_pos_);
        op->deadline_.reset();
    }
    if (op->bound_ns_ != 0) {
        auto b = bounds_.find(op->bound_ns_);
        if (--b->second == 0) bounds_.erase(b);
    }
    if (detail::reactor_port* port = op->owner_) {
        if (op->prev_ != nullptr)
            op->prev_->next_ = op->next_;
        else
            port->head = op->next_;
        if (op->next_ != nullptr) op->next_->prev_ = op->prev_;
        --port->count;
        op->owner_ = nullptr;
        op->prev_ = op->next_ = nullptr;
    }
    op->state_ = detail::reactor_op::state::finished;
    --pending_;
}

GPU_ASYNC_DECL detail::reactor_op*
reactor_service::collect_locked(std::chrono::steady_clock::time_point now, std::size_t& n) {
    detail::reactor_op* list = nullptr;
    // Backwards: unlinking the last wait of a line swaps the last active line into its place,
    // which has been visited already.
    for (std::size_t i = active_.size(); i-- > 0;) {
        line_waits* lw = active_[i];
        std::uint32_t mask = lw->mask;
        bool gone = false;
        while (mask != 0 && !gone) {
            const auto s = static_cast<std::size_t>(std::countr_zero(mask));
            mask &= mask - 1;
            const std::uint64_t word = lw->line->words[s].load(std::memory_order_acquire);
            if (!sequence_reached(word, lw->front[s])) continue; // the common case: one load
            auto& waits = lw->slots[s].waits;
            while (!waits.empty()) {
                detail::reactor_op* op = waits.begin()->second;
                if (!sequence_reached(word, op->descriptor().target())) break;
                gone = lw->count == 1; // unlinking the line's last wait erases lw
                unlink_locked(op);
                op->ec = {};
                op->next_ready_ = list;
                list = op;
                ++n;
                if (gone) break;
            }
        }
    }
    while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
        detail::reactor_op* op = deadlines_.begin()->second;
        unlink_locked(op);
        op->ec = asio::error::timed_out;
        op->next_ready_ = list;
        list = op;
        ++n;
    }
    return list;
}

GPU_ASYNC_DECL dur_ns reactor_service::bound_locked(std::chrono::steady_clock::time_point now,
                                                    dur_ns bound) const {
    if (!bounds_.empty()) bound = min(bound, dur_ns{bounds_.begin()->first});
    if (!deadlines_.empty()) {
        const auto left = deadlines_.begin()->first - now;
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
        bound = min(bound, dur_ns{ns > 0 ? static_cast<std::uint64_t>(ns) : 0});
    }
    return bound;
}

GPU_ASYNC_DECL void reactor_service::start_thread_locked() {
    stop_ = false;
    thread_ = std::thread([this] { watcher_main(); });
}

GPU_ASYNC_DECL void reactor_service::stop_thread() {
    std::thread t;
    {
        std::lock_guard lk(mutex_);
        if (!thread_.joinable()) return;
        stop_ = true;
        t = std::move(thread_);
    }
    bell_.ring();
    t.join();
    std::lock_guard lk(mutex_);
    stop_ = false;
}

GPU_ASYNC_DECL void reactor_service::watcher_main() {
    // While nothing is pending (or a FILL driver is the waiter) the watcher sleeps on the
    // doorbell: a registration, end_fill() and stop all ring it. The idle sleep is bounded only
    // so that a lost ring (none is expected) costs at most a second.
    constexpr dur_ns idle_bound = dur_ns::from_ms(1000);
    std::unique_lock lk(mutex_);
    while (!stop_) {
        const std::uint64_t seen = bell_.count();
        if (fill_ > 0 || pending_ == 0) {
            lk.unlock();
            park_on_bell(seen, idle_bound);
            lk.lock();
            continue;
        }
        const auto now = std::chrono::steady_clock::now();
        std::size_t n = 0;
        detail::reactor_op* list = collect_locked(now, n);
        const dur_ns bound = bound_locked(now, park_bound());
        lk.unlock();
        if (list != nullptr)
            complete_all(list);
        else
            park_on_bell(seen, bound);
        lk.lock();
    }
}

GPU_ASYNC_DECL void reactor_service::park_on_bell(std::uint64_t seen, dur_ns bound) {
    if (bound.ns == 0) return;
    auto rang = [this, seen] { return bell_.count() != seen; };
    // A user-mode monitor on the doorbell's line sees rings (a store to word 0) and any store a
    // GPU producer makes to that line; without one, the futex sleep sees rings only.
    const word_wait& ww = word_wait::probe();
    if (ww.path() != word_wait_path::fallback)
        ww.park(bell_.line(), rang, bound);
    else
        bell_.wait(rang, bound);
}

GPU_ASYNC_DECL void reactor_service::complete_all(detail::reactor_op* list) {
    // Every op in the list is unlinked already: each must be completed even when an earlier one
    // fails (posting can throw; that op is then destroyed), or it would hold its work for ever.
    // The first exception propagates once the list is done.
    std::exception_ptr failure;
    while (list != nullptr) {
        detail::reactor_op* next = list->next_ready_;
        list->next_ready_ = nullptr;
        try {
            list->complete();
        } catch (...) {
            if (!failure) failure = std::current_exception();
        }
        list = next;
    }
    if (failure) std::rethrow_exception(failure);
}

} // namespace gpu_async

#endif // GPU_ASYNC_IMPL_REACTOR_SERVICE_IPP
