// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/impl/reactor_service.ipp: definitions of the reactor service.
//
#ifndef GPU_ASYNC_IMPL_REACTOR_SERVICE_IPP
#define GPU_ASYNC_IMPL_REACTOR_SERVICE_IPP

#include <gpu_async/detail/reactor_service.hpp>

#include <gpu_async/detail/timer_slack.hpp>

#include <algorithm>
#include <exception>
#include <utility>

namespace gpu_async::detail {

GPU_ASYNC_DECL reactor_service::reactor_service(asio::execution_context& ctx)
    : asio::execution_context::service(ctx)
    , bell_(std::make_shared<doorbell>()) {
    add_line_watcher(*this);
}

GPU_ASYNC_DECL reactor_service::~reactor_service() {
    // shutdown() has run (the execution context calls it before destroying services); this only
    // guards against a service destroyed some other way.
    remove_line_watcher(*this);
    stop_thread();
}

GPU_ASYNC_DECL void reactor_service::park_bound(dur_ns bound) noexcept {
    park_bound_ns_.store(bound.ns == 0 ? 1 : bound.ns, std::memory_order_relaxed);
}

GPU_ASYNC_DECL std::size_t reactor_service::pending() const {
    std::lock_guard lk(mutex_);
    return table_.size();
}

GPU_ASYNC_DECL std::size_t reactor_service::pending(const reactor_port& port) const {
    std::lock_guard lk(mutex_);
    return port.count;
}

GPU_ASYNC_DECL bool reactor_service::watcher_running() const {
    std::lock_guard lk(mutex_);
    return thread_.joinable();
}

GPU_ASYNC_DECL reactor_key reactor_service::make_key(reactor_op& op) noexcept {
    op.serial_ = next_serial_.fetch_add(1, std::memory_order_relaxed);
    return reactor_key{op.descriptor(), &op, op.serial_};
}

/// The process monotonic clock (steady_clock) as the core's time points.
inline mono_ns to_mono(std::chrono::steady_clock::time_point t) noexcept {
    const auto ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
    return mono_ns{ns > 0 ? static_cast<std::uint64_t>(ns) : 0};
}

GPU_ASYNC_DECL void reactor_service::ready_sink::operator()(reactor_op* op, watch_end why) const {
    self->unlinked_locked(op);
    switch (why) {
    case watch_end::reached:
        op->ec = {};
        break;
    case watch_end::expired:
        op->ec = asio::error::timed_out;
        break;
    case watch_end::removed:
        op->ec = asio::error::operation_aborted;
        break;
    }
    out->push(op);
}

GPU_ASYNC_DECL reactor_service::start_result
reactor_service::start(reactor_port* port, reactor_op* op, dur_ns bound,
                       std::optional<std::chrono::steady_clock::time_point> deadline) {
    bool ring = false;
    start_result result = start_result::registered;
    ready_list others; // waits the registration's read completed (a rebase)
    std::exception_ptr failure;
    {
        std::lock_guard lk(mutex_);
        if (shut_down_) {
            // The context is being destroyed: nothing will run the handler. Destroy it
            // (outside the lock), never invoke it, as shutdown() does with pending waits.
            return start_result::dropped;
        }
        if (deadline && *deadline <= std::chrono::steady_clock::now()) {
            op->ec = asio::error::timed_out;
            return start_result::finished;
        }
        const bool was_idle = table_.empty();
        // One read of the word decides both "complete now" and the wait's place: a store after
        // it is seen by the waiter's next scan, which cannot run before this registration.
        const std::optional<table_type::handle> pos =
            table_.insert(op->descriptor(), op, sink_locked(others),
                          deadline ? std::optional<mono_ns>(to_mono(*deadline)) : std::nullopt);
        if (!pos) {
            op->ec = {};
            result = start_result::finished;
        } else {
            op->pos_ = *pos;
            op->bound_ns_ = bound.ns;
            const bool earlier = deadline && table_.earliest_deadline() &&
                                 table_.earliest_deadline()->ns == to_mono(*deadline).ns;
            const bool tighter = bound.ns != 0 &&
                                 (bounds_.empty() || bound.ns < bounds_.begin()->first) &&
                                 bound.ns < park_bound_ns_.load(std::memory_order_relaxed);
            link_locked(port, op);
            ring = was_idle || earlier || tighter || fill_ > 0;
            if (fill_ == 0 && !thread_.joinable()) {
                try {
                    start_thread_locked();
                } catch (...) {
                    // No watcher: nothing registered, the op stays the caller's.
                    table_.erase(op->pos_);
                    unlinked_locked(op);
                    failure = std::current_exception();
                }
            }
        }
    }
    if (ring) bell_->ring();
    complete_all(others.head);
    if (failure) std::rethrow_exception(failure);
    // Not registered: the caller alone owns the op. It completes it itself, so that a failure
    // there (posting can throw) cannot leave the op's ownership in doubt.
    return result;
}

GPU_ASYNC_DECL bool reactor_service::cancel(const reactor_key& wait) {
    reactor_op* op = nullptr;
    {
        std::lock_guard lk(mutex_);
        // After shutdown the table is empty; before registration and after completion the wait
        // is not found. Only a registered op (alive, owned by the table) is touched.
        const std::optional<table_type::handle> pos =
            table_.find(wait.descriptor, [&](const reactor_op* candidate) {
                return candidate == wait.op && candidate->serial_ == wait.serial;
            });
        if (!pos) return false;
        op = const_cast<reactor_op*>(wait.op);
        table_.erase(*pos);
        unlinked_locked(op);
        op->ec = asio::error::operation_aborted;
    }
    op->complete();
    return true;
}

GPU_ASYNC_DECL std::size_t reactor_service::cancel(reactor_port& port) {
    ready_list list;
    {
        std::lock_guard lk(mutex_);
        while (port.head != nullptr) {
            reactor_op* op = port.head;
            table_.erase(op->pos_);
            unlinked_locked(op);
            op->ec = asio::error::operation_aborted;
            list.push(op);
        }
    }
    complete_all(list.head);
    return list.count;
}

GPU_ASYNC_DECL void reactor_service::retire_line(const completion_line& line) noexcept {
    ready_list list;
    {
        std::lock_guard lk(mutex_);
        table_.remove_line(line, sink_locked(list));
    }
    // The waits are out of the table: no scan reads the line any more. Their completions go to
    // their executors (a failed post destroys that op uninvoked).
    complete_all_quietly(list.head);
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
        if (fill_ == 0 && !table_.empty() && !thread_.joinable() && !shut_down_) {
            try {
                start_thread_locked();
            } catch (...) {
                // No watcher: the pending waits complete at the next run_fill or on retry at the
                // next registration. Nothing is lost.
            }
        }
    }
    bell_->ring();
}

GPU_ASYNC_DECL std::size_t reactor_service::poll_ready() {
    ready_list list;
    {
        std::lock_guard lk(mutex_);
        if (table_.empty()) return 0;
        collect_locked(std::chrono::steady_clock::now(), list);
    }
    complete_all(list.head);
    return list.count;
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
    ready_list list;
    {
        std::lock_guard lk(mutex_);
        shut_down_ = true;
        table_.clear(sink_locked(list));
    }
    // Destroyed without being invoked, with no lock held (a handler's destructor may do anything).
    for (reactor_op* op = list.head; op != nullptr;) {
        reactor_op* next = op->next_ready_;
        op->destroy();
        op = next;
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
    if (fill_ == 0 && !table_.empty() && !thread_.joinable() && !shut_down_) start_thread_locked();
}

GPU_ASYNC_DECL void reactor_service::link_locked(reactor_port* port, reactor_op* op) {
    if (op->bound_ns_ != 0) ++bounds_[op->bound_ns_];
    if (port != nullptr) {
        op->owner_ = port;
        op->prev_ = nullptr;
        op->next_ = port->head;
        if (port->head != nullptr) port->head->prev_ = op;
        port->head = op;
        ++port->count;
    }
}

// The op has left the table: drop the service's own bookkeeping of it.
GPU_ASYNC_DECL void reactor_service::unlinked_locked(reactor_op* op) {
    if (op->bound_ns_ != 0) {
        auto b = bounds_.find(op->bound_ns_);
        if (--b->second == 0) bounds_.erase(b);
        op->bound_ns_ = 0;
    }
    if (reactor_port* port = op->owner_) {
        if (op->prev_ != nullptr)
            op->prev_->next_ = op->next_;
        else
            port->head = op->next_;
        if (op->next_ != nullptr) op->next_->prev_ = op->prev_;
        --port->count;
        op->owner_ = nullptr;
        op->prev_ = op->next_ = nullptr;
    }
}

GPU_ASYNC_DECL void reactor_service::collect_locked(std::chrono::steady_clock::time_point now,
                                                    ready_list& out) {
    table_.collect(sink_locked(out));
    table_.collect_expired(to_mono(now), sink_locked(out));
}

GPU_ASYNC_DECL dur_ns reactor_service::bound_locked(std::chrono::steady_clock::time_point now,
                                                    dur_ns bound) const {
    if (!bounds_.empty()) bound = min(bound, dur_ns{bounds_.begin()->first});
    if (const std::optional<mono_ns> d = table_.earliest_deadline())
        bound = min(bound, d->since(to_mono(now)));
    return bound;
}

GPU_ASYNC_DECL void reactor_service::start_thread_locked() {
    stop_ = false;
    thread_ = std::thread([this] {
        shorten_timer_slack();
        watcher_main();
    });
}

GPU_ASYNC_DECL void reactor_service::stop_thread() {
    std::thread t;
    {
        std::lock_guard lk(mutex_);
        if (!thread_.joinable()) return;
        stop_ = true;
        t = std::move(thread_);
    }
    bell_->ring();
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
        const std::uint64_t seen = bell_->count();
        if (fill_ > 0 || table_.empty()) {
            lk.unlock();
            park_on_bell(seen, idle_bound);
            lk.lock();
            continue;
        }
        const auto now = std::chrono::steady_clock::now();
        ready_list list;
        collect_locked(now, list);
        const dur_ns bound = bound_locked(now, park_bound());
        lk.unlock();
        if (list.head != nullptr)
            complete_all_quietly(list.head);
        else
            park_on_bell(seen, bound);
        lk.lock();
    }
}

GPU_ASYNC_DECL void reactor_service::park_on_bell(std::uint64_t seen, dur_ns bound) {
    if (bound.ns == 0) return;
    const doorbell& bell = *bell_;
    auto rang = [&bell, seen] { return bell.count() != seen; };
    // A user-mode monitor on the doorbell's line sees rings (a store to word 0) and any store a
    // GPU producer makes to that line; without one, the futex sleep sees rings only.
    const word_wait& ww = word_wait::probe();
    if (ww.path() != word_wait_path::fallback)
        ww.park(bell_->line(), rang, bound);
    else
        bell.wait(rang, bound);
}

GPU_ASYNC_DECL void reactor_service::complete_all(reactor_op* list) {
    // Every op in the list is out of the table: each must be completed even when an earlier one
    // fails (posting can throw; that op is then destroyed), or it would hold its work for ever.
    // The first exception propagates once the list is done.
    std::exception_ptr failure;
    while (list != nullptr) {
        reactor_op* next = list->next_ready_;
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

GPU_ASYNC_DECL void reactor_service::complete_all_quietly(reactor_op* list) noexcept {
    try {
        complete_all(list);
    } catch (...) {
        // Posting failed (out of memory): that op was destroyed uninvoked; the rest completed.
    }
}

} // namespace gpu_async::detail

#endif // GPU_ASYNC_IMPL_REACTOR_SERVICE_IPP
