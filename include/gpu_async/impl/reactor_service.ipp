// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/impl/reactor_service.ipp: definitions of the reactor service.
//
#ifndef GPU_ASYNC_IMPL_REACTOR_SERVICE_IPP
#define GPU_ASYNC_IMPL_REACTOR_SERVICE_IPP

#include <gpu_async/asio/reactor_service.hpp>

#include <algorithm>
#include <exception>
#include <functional>
#include <utility>

namespace gpu_async::detail {
GPU_ASYNC_ASIO_NAMESPACE_BEGIN

GPU_ASYNC_DECL reactor_service::reactor_service(asio::execution_context& ctx)
    : asio::execution_context::service(ctx) {
    start_watching_lines();
}

GPU_ASYNC_DECL reactor_service::~reactor_service() {
    // shutdown() has run (the execution context calls it before destroying services) and did
    // both; this only guards against a service destroyed some other way.
    stop_watching_lines();
    stop_thread();
}

GPU_ASYNC_DECL bool reactor_service::waits_locked() const {
    return !engine_.empty() || !incoming_.empty();
}

GPU_ASYNC_DECL bool reactor_service::watcher_running() const {
    std::lock_guard lk(mutex_);
    return thread_.joinable();
}

GPU_ASYNC_DECL void reactor_service::begin_fill(dur_ns park_bound) {
    {
        std::lock_guard lk(mutex_);
        roster_.fill_begun(park_bound); // may throw: nothing changed
    }
    // The watcher stands down: joined, so no extra thread runs while a FILL driver does;
    // start() launches none while one is active and end_fill() restarts it when waits are
    // pending.
    stop_thread();
}

GPU_ASYNC_DECL void reactor_service::end_fill(dur_ns park_bound) {
    {
        std::lock_guard lk(mutex_);
        // With the last one gone no waiter is present: a registration from here on starts the
        // watcher (start() reads that after its push, so one pushed after the look below sees
        // it).
        roster_.fill_ended(park_bound);
        if (roster_.needs_watcher()) {
            if (waits_locked() && !shut_down_) {
                try {
                    start_thread_locked();
                } catch (...) {
                    // No watcher: the pending waits complete at the next run_fill or on retry
                    // at the next registration. Nothing is lost.
                }
            }
        }
    }
    bell_->ring();
}

GPU_ASYNC_DECL std::size_t reactor_service::poll_ready() {
    if (bell_->device_signaled()) bell_->take_device_signal(); // before the scan (scan_step)
    std::size_t n = 0;
    completion_queue* sched = nullptr;
    completion_queue* retries = nullptr;
    {
        std::lock_guard lk(mutex_);
        retries = delivery_.take_retries();
        ready_list list;
        pass_locked(std::chrono::steady_clock::now(), list);
        n = list.count();
        sched = completion_queue::enqueue(list);
    }
    schedule(retries);
    schedule(sched);
    if (incoming_.published_size() != 0) query_health();
    return n;
}

GPU_ASYNC_DECL void reactor_service::park(std::uint64_t seen, dur_ns bound) {
    std::optional<park_policy::predicted_park> sleep;
    const std::uint64_t from = detail::mono_now().ns; // the look before this park
    {
        std::lock_guard lk(mutex_);
        bound = bound_locked(std::chrono::steady_clock::now(), bound);
        sleep = predicted_sleep_locked(from, bound);
    }
    if (park_between_scans(seen, bound, sleep)) {
        std::lock_guard lk(mutex_);
        rhythm_.slept_late(from);
    }
}

GPU_ASYNC_DECL std::size_t reactor_service::rhythm_lines() const {
    std::lock_guard lk(mutex_);
    return rhythm_.rhythm().lines();
}

GPU_ASYNC_DECL std::optional<std::uint64_t>
reactor_service::rhythm_sleep_ns(const completion_line& line, slot_id slot) const {
    std::lock_guard lk(mutex_);
    return rhythm_.rhythm().sleep_ns(line, slot, rhythm_plan());
}

GPU_ASYNC_DECL std::optional<park_policy::predicted_park>
reactor_service::predicted_sleep_locked(std::uint64_t now_ns, dur_ns bound) const {
    const deadline_plan plan = rhythm_plan();
    return park_policy::predicted_sleep(
        mono_ns{now_ns}, bound, waiter_.device_poll(), engine_.size(), predicting(),
        [&](auto&& each) {
            engine_.for_each([&](const engine_wait& w) {
                const auto& op = static_cast<const reactor_op&>(w);
                each(rhythm_.expected(op.descriptor(), op.started_ns_, plan));
            });
        });
}

GPU_ASYNC_DECL bool
reactor_service::park_between_scans(std::uint64_t seen, dur_ns bound,
                                    std::optional<park_policy::predicted_park> sleep) {
    if (!sleep) {
        park_on_bell(seen, bound);
        return false;
    }
    // A completion the device signalled during the sleep came before its prediction.
    return waiter_.park_predicted(*bell_, seen, sleep->sleep, sleep->poll);
}

GPU_ASYNC_DECL void reactor_service::shutdown() {
    // First, with no lock held: from here on no retirement, fault or slot retirement reaches
    // the service, and one asking it now has finished its delivery (its drain posted, or kept
    // for a retry) before this goes on. The scheduler, shut down after this service, then
    // destroys such a drain while the service lives; one posted later would sit in a shut-down
    // scheduler until its destructor, and report itself dropped to a freed service.
    stop_watching_lines();
    stop_thread();
    ready_list list;
    completion_queue* retries = nullptr;
    {
        std::lock_guard lk(mutex_);
        shut_down_.store(true, std::memory_order_release);
        engine_list out;
        try {
            engine_.take_in(fetch(), registered(), out);
        } catch (...) {
        }
        engine_.clear(out);
        finish_locked(out, list);
        retries = delivery_.take_retries();
    }
    // Destroyed without being invoked, with no lock held (a handler's destructor may do anything).
    for (reactor_op* op = list.head(); op != nullptr;) {
        reactor_op* next = op->next_op();
        op->destroy();
        op = next;
    }
    // Queues whose drain could not be posted: nothing will run them now. (A posted drain is
    // destroyed by its executor's shutdown, which abandons its queue the same way.)
    while (retries != nullptr) {
        completion_queue* q = std::exchange(retries, retries->next_schedule_);
        q->next_schedule_ = nullptr;
        q->abandon();
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
    if (roster_.needs_watcher() && waits_locked() && !shut_down_) start_thread_locked();
}

GPU_ASYNC_DECL void reactor_service::start_thread_locked() {
    thread_ = start_watcher_thread([this] { watcher_main(); });
    roster_.watcher_started(); // under mutex_: the thread reads it once it has the lock
}

GPU_ASYNC_DECL void reactor_service::stop_thread() {
    std::thread t;
    {
        std::lock_guard lk(mutex_);
        if (!thread_.joinable()) return;
        roster_.watcher_stopping();
        t = std::move(thread_);
    }
    bell_->ring();
    delivery_.gate().wake();
    t.join();
    std::lock_guard lk(mutex_);
    roster_.watcher_joined();
}

GPU_ASYNC_DECL void reactor_service::watcher_main() {
    std::unique_lock lk(mutex_);
    while (roster_.thread() == waiter_roster::watcher::running) {
        std::uint64_t seen = bell_->count();
        park_policy::view top;
        top.retries = delivery_.retries();
        top.caller_drives = roster_.fill_active();
        top.drains_out = delivery_.gate().drains_out() != 0;
        switch (park_policy::next(top)) {
        case park_policy::step::post_retries:
            post_retries_step(lk, seen);
            continue;
        case park_policy::step::idle:
            idle_step(lk, seen);
            continue;
        case park_policy::step::stand_back:
            stand_back_step(lk);
            if (roster_.thread() != waiter_roster::watcher::running) return;
            seen = bell_->count();
            break;
        case park_policy::step::scan:
            break;
        default: // not an answer at the top of a pass
            break;
        }
        scan_step(lk, seen);
    }
}

GPU_ASYNC_DECL void reactor_service::post_retries_step(std::unique_lock<ranked_mutex>& lk,
                                                       std::uint64_t seen) {
    completion_queue* retries = delivery_.take_retries();
    lk.unlock();
    schedule(retries);
    lk.lock();
    // A drain that cannot be posted now is retried after one park bound (a device's signal must
    // not end that park at once: the scan after the retries reads the word anyway).
    if (delivery_.retries()) {
        if (bell_->device_signaled()) bell_->take_device_signal();
        lk.unlock();
        park_on_bell(seen, park_bound());
        lk.lock();
    }
}

GPU_ASYNC_DECL void reactor_service::idle_step(std::unique_lock<ranked_mutex>& lk,
                                               std::uint64_t seen) {
    // A FILL driver is the waiter (it scans): sleep on the doorbell until end_fill() or a stop
    // rings it (bell_waiter::idle_bound).
    if (bell_->device_signaled()) bell_->take_device_signal();
    lk.unlock();
    park_on_bell(seen, bell_waiter::idle_bound, /*watching=*/false);
    lk.lock();
}

GPU_ASYNC_DECL void reactor_service::stand_back_step(std::unique_lock<ranked_mutex>& lk) {
    // A drain is out: it scans after its batch, on the executor's thread. Leave the table to it
    // rather than contend with it for the lock and for the lines a busy port's handlers write
    // (words, the incoming registrations, the queue); scan once it ends, or when a bound passes
    // in which no drain ran (an executor holds it back), at a device's signal or a registration
    // that cannot wait (a near deadline, a tight bound), and in any case after the policy's
    // window (a drain scans only when the bell rang or a device signalled).
    const auto now = std::chrono::steady_clock::now();
    const park_policy::stand_back_window window = park_policy::stand_back(
        detail::mono_now(), park_bound(), [&](dur_ns b) { return bound_locked(now, b); });
    lk.unlock();
    std::uint64_t progress = delivery_.progress();
    for (bool first = true;; first = false) {
        const mono_ns t{detail::mono_now().ns};
        if (t >= window.until) break;
        delivery_.gate().wait(*bell_, waiter_, min(window.round, window.until.since(t)), first,
                              [this] { return stand_back_over(); });
        const std::uint64_t now_progress = delivery_.progress();
        if (!park_policy::stand_back_again(progress, now_progress, stand_back_over(),
                                           detail::mono_now(), window.until))
            break;
        progress = now_progress; // the drains ran within the bound: one scans at its end
    }
    lk.lock();
}

GPU_ASYNC_DECL void reactor_service::scan_step(std::unique_lock<ranked_mutex>& lk,
                                               std::uint64_t seen) {
    urgent_.store(false, std::memory_order_seq_cst); // the scan below takes it in
    // A device's doorbell store ends the park below; taken just before the scan it announces
    // (the device stored its completion word first), so the scan sees that completion. (Not
    // before a stand-back: the drains' scans look for the signal while it stays set.)
    if (bell_->device_signaled()) bell_->take_device_signal();
    const auto now = std::chrono::steady_clock::now();
    ready_list list;
    pass_locked(now, list);
    park_policy::view seen_now;
    seen_now.scanned = true;
    seen_now.found = list.head() != nullptr;
    seen_now.pending = !engine_.empty(); // its deadlines are the pending waits' own
    switch (park_policy::next(seen_now)) {
    case park_policy::step::idle:
        // The table's size (0) was published before the registrations were taken, so a registration
        // pushed after that take sees 0 and rings: it cannot be missed here.
        lk.unlock();
        park_on_bell(seen, bell_waiter::idle_bound, /*watching=*/false);
        lk.lock();
        return;
    case park_policy::step::deliver: {
        completion_queue* sched = completion_queue::enqueue(list);
        lk.unlock();
        schedule(sched);
        lk.lock();
        return;
    }
    case park_policy::step::park:
    default: // only the answers above after a scan
        break;
    }
    const dur_ns bound = bound_locked(now, park_bound());
    const std::uint64_t from = detail::mono_now().ns; // this look
    const std::optional<park_policy::predicted_park> sleep = predicted_sleep_locked(from, bound);
    lk.unlock();
    query_health(); // a faulted context ends its lines' waits (device_fault) within a backstop
    const bool late = park_between_scans(seen, bound, sleep);
    lk.lock();
    if (late) rhythm_.slept_late(from);
}

GPU_ASYNC_DECL bool reactor_service::stand_back_over() const noexcept {
    return delivery_.gate().drains_out() == 0 || roster_.stopping() ||
           urgent_.load(std::memory_order_seq_cst) || bell_->device_signaled();
}

GPU_ASYNC_ASIO_NAMESPACE_END
} // namespace gpu_async::detail

#endif // GPU_ASYNC_IMPL_REACTOR_SERVICE_IPP
