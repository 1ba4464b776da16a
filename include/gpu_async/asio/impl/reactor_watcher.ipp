// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/asio/impl/reactor_watcher.ipp: definitions of the reactor service's watcher.
//
#ifndef GPU_ASYNC_IMPL_REACTOR_WATCHER_IPP
#define GPU_ASYNC_IMPL_REACTOR_WATCHER_IPP

#include <gpu_async/asio/detail/reactor_service.hpp>
#include <gpu_async/asio/detail/reactor_watcher.hpp>

#include <chrono>
#include <optional>
#include <utility>

namespace gpu_async::detail {
GPU_ASYNC_ASIO_NAMESPACE_BEGIN

GPU_ASYNC_DECL void reactor_watcher::start_locked() {
    thread_ = start_watcher_thread([this] { run(); });
    svc_.roster().watcher_started(); // under the service's lock: the thread reads it once it has it
}

GPU_ASYNC_DECL void reactor_watcher::stop() {
    std::thread t;
    {
        std::lock_guard lk(svc_.mutex());
        if (!thread_.joinable()) return;
        svc_.roster().watcher_stopping();
        t = std::move(thread_);
    }
    svc_.bell().ring();
    svc_.deliveries().gate().wake();
    t.join();
    std::lock_guard lk(svc_.mutex());
    svc_.roster().watcher_joined();
}

GPU_ASYNC_DECL void reactor_watcher::run() {
    std::unique_lock lk(svc_.mutex());
    while (svc_.roster().thread() == waiter_roster::watcher::running) {
        std::uint64_t seen = svc_.bell().count();
        park_policy::view top;
        top.retries = svc_.deliveries().retries();
        top.caller_drives = svc_.roster().fill_active();
        top.drains_out = svc_.deliveries().gate().drains_out() != 0;
        switch (park_policy::next(top)) {
        case park_policy::step::post_retries:
            post_retries_step(lk, seen);
            continue;
        case park_policy::step::idle:
            idle_step(lk, seen);
            continue;
        case park_policy::step::stand_back:
            stand_back_step(lk);
            if (svc_.roster().thread() != waiter_roster::watcher::running) return;
            seen = svc_.bell().count();
            break;
        case park_policy::step::scan:
            break;
        default: // not an answer at the top of a pass
            break;
        }
        scan_step(lk, seen);
    }
}

GPU_ASYNC_DECL void reactor_watcher::post_retries_step(std::unique_lock<ranked_mutex>& lk,
                                                       std::uint64_t seen) {
    completion_queue* retries = svc_.deliveries().take_retries();
    lk.unlock();
    svc_.schedule(retries);
    lk.lock();
    // A drain that cannot be posted now is retried after one park bound (a device's signal must
    // not end that park at once: the scan after the retries reads the word anyway).
    if (svc_.deliveries().retries()) {
        if (svc_.bell().device_signaled()) svc_.bell().take_device_signal();
        lk.unlock();
        svc_.park_on_bell(seen, svc_.park_bound());
        lk.lock();
    }
}

GPU_ASYNC_DECL void reactor_watcher::idle_step(std::unique_lock<ranked_mutex>& lk,
                                               std::uint64_t seen) {
    // A FILL driver is the waiter (it scans): sleep on the doorbell until end_fill() or a stop
    // rings it (wait_tuning::idle_bound).
    if (svc_.bell().device_signaled()) svc_.bell().take_device_signal();
    lk.unlock();
    svc_.park_on_bell(seen, default_wait_tuning.idle_bound, /*watching=*/false);
    lk.lock();
}

GPU_ASYNC_DECL void reactor_watcher::stand_back_step(std::unique_lock<ranked_mutex>& lk) {
    // A drain is out: it scans after its batch, on the executor's thread. Leave the table to it
    // rather than contend with it for the lock and for the lines a busy port's handlers write
    // (words, the incoming registrations, the queue); scan once it ends, or when a bound passes
    // in which no drain ran (an executor holds it back), at a device's signal or a registration
    // that cannot wait (a near deadline, a tight bound), and in any case after the policy's
    // window (a drain scans only when the bell rang or a device signalled).
    const mono_ns now = detail::mono_now();
    const park_policy::stand_back_window window = park_policy::stand_back(
        now, svc_.park_bound(), [&](dur_ns b) { return svc_.bound_locked(now, b); });
    lk.unlock();
    std::uint64_t progress = svc_.deliveries().progress();
    for (bool first = true;; first = false) {
        const mono_ns t = detail::mono_now();
        if (t >= window.until) break;
        svc_.deliveries().gate().wait(svc_.bell(), svc_.waiter(),
                                      min(window.round, window.until.since(t)), first,
                                      [this] { return stand_back_over(); });
        const std::uint64_t now_progress = svc_.deliveries().progress();
        if (!park_policy::stand_back_again(progress, now_progress, stand_back_over(),
                                           detail::mono_now(), window.until))
            break;
        progress = now_progress; // the drains ran within the bound: one scans at its end
    }
    lk.lock();
}

GPU_ASYNC_DECL void reactor_watcher::scan_step(std::unique_lock<ranked_mutex>& lk,
                                               std::uint64_t seen) {
    svc_.clear_urgent(); // the scan below takes it in
    // A device's doorbell store ends the park below; taken just before the scan it announces
    // (the device stored its completion word first), so the scan sees that completion. (Not
    // before a stand-back: the drains' scans look for the signal while it stays set.)
    if (svc_.bell().device_signaled()) svc_.bell().take_device_signal();
    const mono_ns now = detail::mono_now();
    ready_list list;
    svc_.pass_locked(now, list);
    park_policy::view seen_now;
    seen_now.scanned = true;
    seen_now.found = list.head() != nullptr;
    seen_now.pending = svc_.watching_locked(); // its deadlines are the pending waits' own
    switch (park_policy::next(seen_now)) {
    case park_policy::step::idle:
        // The table's size (0) was published before the registrations were taken, so a registration
        // pushed after that take sees 0 and rings: it cannot be missed here.
        lk.unlock();
        svc_.park_on_bell(seen, default_wait_tuning.idle_bound, /*watching=*/false);
        lk.lock();
        return;
    case park_policy::step::deliver: {
        completion_queue* sched = completion_queue::enqueue(list);
        lk.unlock();
        svc_.schedule(sched);
        lk.lock();
        return;
    }
    case park_policy::step::park:
    default: // only the answers above after a scan
        break;
    }
    const dur_ns bound = svc_.bound_locked(now, svc_.park_bound());
    const mono_ns from = detail::mono_now(); // this look
    const std::optional<park_policy::predicted_park> sleep =
        svc_.predicted_sleep_locked(from, bound);
    lk.unlock();
    svc_.query_health(); // a faulted context ends its lines' waits (device_fault) within a backstop
    const bool late = svc_.park_between_scans(seen, bound, sleep);
    lk.lock();
    if (late) svc_.slept_late_locked(from);
}

GPU_ASYNC_DECL bool reactor_watcher::stand_back_over() const noexcept {
    return svc_.deliveries().gate().drains_out() == 0 || svc_.roster().stopping() ||
           svc_.urgent() || svc_.bell().device_signaled();
}

GPU_ASYNC_ASIO_NAMESPACE_END
} // namespace gpu_async::detail

#endif // GPU_ASYNC_IMPL_REACTOR_WATCHER_IPP
