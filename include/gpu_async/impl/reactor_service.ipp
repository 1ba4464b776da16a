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
    std::size_t n = engine_.size();
    std::lock_guard in(incoming_mutex_);
    incoming_.for_each([&](const engine_wait*) { ++n; });
    return n;
}

GPU_ASYNC_DECL std::size_t reactor_service::pending(const reactor_port& port) const {
    std::lock_guard lk(mutex_);
    std::size_t n = port.count;
    std::lock_guard in(incoming_mutex_);
    incoming_.for_each([&](const engine_wait* w) {
        n += static_cast<const reactor_op*>(w)->port_ == &port ? 1 : 0;
    });
    return n;
}

GPU_ASYNC_DECL bool reactor_service::waits_locked() const {
    if (!engine_.empty()) return true;
    std::lock_guard in(incoming_mutex_);
    return !incoming_.empty();
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

GPU_ASYNC_DECL void reactor_service::fetch_incoming(engine_batch& b) noexcept {
    std::lock_guard in(incoming_mutex_);
    if (incoming_.empty()) {
        // Published under incoming_mutex_: a registration after this take reads it (0: it
        // rings an idle waiter).
        publish_size();
        return;
    }
    std::swap(incoming_, b); // new registrations go into the (empty) batch the engine gave
}

GPU_ASYNC_DECL void reactor_service::finish_locked(engine_list& out, ready_list& list) noexcept {
    while (engine_wait* w = out.pop()) {
        auto* op = static_cast<reactor_op*>(w);
        unlink_port_locked(*op);
        switch (w->end()) {
        case wait_end::reached:
            op->ec = {};
            learn_locked(*op);
            break;
        case wait_end::expired:
            op->ec = asio::error::timed_out;
            break;
        case wait_end::aborted:
        case wait_end::stale: // live at start(): a retirement since found it pending
            op->ec = asio::error::operation_aborted;
            break;
        case wait_end::faulted:
            op->ec = errc::device_fault;
            break;
        case wait_end::no_memory:
            op->ec = asio::error::no_memory;
            break;
        }
        list.push(op);
    }
}

GPU_ASYNC_DECL void reactor_service::pass_locked(std::chrono::steady_clock::time_point now,
                                                 ready_list& list) noexcept {
    engine_list out;
    try {
        engine_.take_in(fetch(), registered(), out);
    } catch (...) {
        // A take-in ends what it cannot register (no_memory): nothing is lost.
    }
    if (!engine_.empty()) engine_.scan(to_mono(now), fetch(), registered(), out);
    finish_locked(out, list); // learns with scan_late_ as the scan found it
    scan_late_ = false;       // only the first scan after a predicted sleep
    publish_size();
}

GPU_ASYNC_DECL void reactor_service::take_in_settled_locked(engine_list& out) noexcept {
    try {
        engine_.take_in_settled(fetch(), registered(), out);
    } catch (...) {
    }
}

GPU_ASYNC_DECL void reactor_service::learn_locked(const reactor_op& op) noexcept {
    const std::uint64_t start = op.started_ns_;
    if (start == 0) return; // started while nothing was predicted
    // What the wait teaches its slot's rhythm: from its start to this look; or, when it was
    // pending at the look before a predicted sleep and this is the first look after it, that
    // it came somewhere between the two.
    const std::uint64_t now = detail::wordwait_now_ns();
    const std::uint64_t took = now > start ? now - start : 0;
    const memory_descriptor& d = op.descriptor();
    try {
        if (scan_late_ && start < slept_from_ns_)
            rhythm_.observe_between(d.line(), d.slot(), slept_from_ns_ - start, took,
                                    rhythm_plan());
        else
            rhythm_.observe(d.line(), d.slot(), took, rhythm_plan());
    } catch (...) {
        // No memory for the line's record: the sample is dropped (the waiter steps for it).
    }
}

GPU_ASYNC_DECL reactor_service::start_result
reactor_service::start(reactor_port& port, reactor_op* op, dur_ns bound,
                       std::optional<std::chrono::steady_clock::time_point> deadline) {
    op->queue_ = port.queue.get();
    if (shut_down_.load(std::memory_order_acquire)) {
        // The context is being destroyed: nothing will run the handler. Destroy it (outside
        // every lock), never invoke it, as shutdown() does with pending waits.
        return start_result::dropped;
    }
    // The clock is read only for a wait with a deadline (a read per wait is a tenth of the
    // completion path's time through one thread).
    const auto now =
        deadline ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    if (deadline && *deadline <= now) {
        op->ec = asio::error::timed_out;
        return start_result::finished;
    }
    // A descriptor of a retired line, or of a faulted slot, ends before its line is read.
    const memory_descriptor& d = op->descriptor();
    if (const error_code ec = status_error(d)) {
        op->ec = ec;
        return start_result::finished;
    }
    // Complete already? (The waiter's insert reads the word again; a store between the two reads
    // only makes the wait complete at that insert.)
    if (sequence_reached(d.line().words[d.slot().index()].load(std::memory_order_acquire),
                         d.target())) {
        op->ec = {};
        return start_result::finished;
    }
    if (!waiter_present_.load(std::memory_order_acquire)) {
        // Before the op is pushed: a watcher that cannot be started leaves it the caller's.
        std::lock_guard lk(mutex_);
        if (no_waiter_locked() && !shut_down_.load(std::memory_order_relaxed))
            start_thread_locked();
    }
    op->port_ = &port;
    op->started_ns_ = predicting() ? detail::wordwait_now_ns() : 0;
    op->bound_ns = bound.ns;
    op->has_deadline = deadline.has_value();
    op->deadline_ns = deadline ? to_mono(*deadline).ns : 0;
    // Registered: added to the incoming registrations, without the service's lock, which a
    // scan may be holding. The waiter moves it into the table before its next scan. (Into the
    // array while it has room, else onto the overflow stack: no allocation here.)
    // Wake the waiter when it must act on this registration now: it is idle (nothing was
    // pending: it sleeps up to a second), or the wait has a deadline within one park bound or a
    // bound tighter than the park bound. Otherwise it takes the wait in at its next scan, at the
    // latest one park bound away, and a store to the wait's word is seen by that scan.
    // Idle is decided in the same section as the push: a waiter that found nothing published
    // table_size_ 0 and then took the registrations under incoming_mutex_, so the first one
    // added after that take reads 0 here (a take-in, on any thread, stores its
    // size only after this section) and rings.
    bool idle = false;
    {
        std::lock_guard in(incoming_mutex_);
        idle = incoming_.empty() && table_size_.load(std::memory_order_seq_cst) == 0;
        incoming_.push(op);
    }
    const std::uint64_t pb = park_bound_ns_.load(std::memory_order_relaxed);
    const bool tighter = bound.ns != 0 && bound.ns < pb;
    // A deadline further than one park bound away is met by the waiter's next pass.
    const bool soon = deadline && *deadline - now < dur_ns{pb}.chrono();
    if (soon || tighter) {
        urgent_.store(true, std::memory_order_seq_cst);
        wake_stand_back(); // a watcher standing back for drains scans now
    }
    if (idle || soon || tighter) bell_->ring();
    if (!waiter_present_.load(std::memory_order_seq_cst)) {
        // The last FILL driver ended between the look above and the push, finding no waits:
        // this one is registered, so a watcher must run for it.
        std::lock_guard lk(mutex_);
        if (no_waiter_locked() && !shut_down_.load(std::memory_order_relaxed)) {
            try {
                start_thread_locked();
            } catch (...) {
                // Registered without a watcher: the next registration or run_fill retries.
            }
        }
    }
    return start_result::registered;
}

GPU_ASYNC_DECL bool reactor_service::cancel(const reactor_key& wait) {
    bool found = false;
    completion_queue* sched = nullptr;
    {
        std::lock_guard lk(mutex_);
        engine_list out;
        take_in_settled_locked(out); // a wait not yet taken in is in the table now
        // After shutdown the table is empty; before registration and after completion the wait
        // is not found. Only a registered op (alive, owned by the engine) is touched.
        if (engine_wait* w = engine_.find(wait.descriptor, [&](const engine_wait* candidate) {
                const auto* op = static_cast<const reactor_op*>(candidate);
                return op == wait.op && op->serial_ == wait.serial;
            })) {
            engine_.remove(*w, out);
            found = true;
        }
        ready_list list;
        finish_locked(out, list);
        publish_size();
        sched = enqueue_locked(list);
    }
    schedule(sched);
    return found;
}

GPU_ASYNC_DECL std::size_t reactor_service::cancel(reactor_port& port) {
    std::size_t n = 0;
    completion_queue* sched = nullptr;
    {
        std::lock_guard lk(mutex_);
        engine_list out;
        take_in_settled_locked(out);
        while (port.head != nullptr) {
            reactor_op* op = port.head;
            unlink_port_locked(*op);
            engine_.remove(*op, out);
            ++n;
        }
        ready_list list;
        finish_locked(out, list);
        publish_size();
        sched = enqueue_locked(list);
    }
    schedule(sched);
    return n;
}

GPU_ASYNC_DECL void reactor_service::retire_line(const completion_line& line) noexcept {
    completion_queue* sched = nullptr;
    {
        std::lock_guard lk(mutex_);
        engine_list out;
        take_in_settled_locked(out);
        engine_.retire_line(line, out);
        rhythm_.forget(line);
        ready_list list;
        finish_locked(out, list);
        publish_size();
        sched = enqueue_locked(list);
    }
    // The waits are out of the table: no scan reads the line any more. Their completions go to
    // their executors.
    schedule(sched);
}

GPU_ASYNC_DECL void reactor_service::fault_slot(const completion_line& line,
                                                slot_id slot) noexcept {
    completion_queue* sched = nullptr;
    {
        std::lock_guard lk(mutex_);
        engine_list out;
        take_in_settled_locked(out); // those not yet taken in see the fault as they are
        engine_.fault_slot(line, slot, out);
        ready_list list;
        finish_locked(out, list);
        publish_size();
        sched = enqueue_locked(list);
    }
    schedule(sched);
}

GPU_ASYNC_DECL void reactor_service::begin_fill(dur_ns park_bound) {
    {
        std::lock_guard lk(mutex_);
        fill_bounds_.insert(park_bound.ns); // first: it may throw
        fill_bound_ns_.store(*fill_bounds_.rbegin(), std::memory_order_relaxed);
        ++fill_;
        waiter_present_.store(true, std::memory_order_release);
    }
    // The watcher stands down: joined, so no extra thread runs while a FILL driver does;
    // start() launches none while fill_ > 0 and end_fill() restarts it when waits are pending.
    stop_thread();
}

GPU_ASYNC_DECL void reactor_service::end_fill(dur_ns park_bound) {
    {
        std::lock_guard lk(mutex_);
        --fill_;
        fill_bounds_.erase(fill_bounds_.find(park_bound.ns));
        fill_bound_ns_.store(fill_bounds_.empty() ? 0 : *fill_bounds_.rbegin(),
                             std::memory_order_relaxed);
        if (no_waiter_locked()) {
            // No waiter now: a registration from here on starts the watcher (start() reads this
            // after its push, so one pushed after the look below sees it).
            waiter_present_.store(false, std::memory_order_seq_cst);
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
        retries = take_retries_locked();
        ready_list list;
        pass_locked(std::chrono::steady_clock::now(), list);
        n = list.count;
        sched = enqueue_locked(list);
    }
    schedule(retries);
    schedule(sched);
    if (table_size_.load(std::memory_order_relaxed) != 0) query_health();
    return n;
}

GPU_ASYNC_DECL void reactor_service::scan_after_drain() noexcept {
    // Only when something rang since the last scan (a handler's producer, most likely) and the
    // waiter is not scanning now: the drain must never wait for the lock.
    const std::uint64_t rings = bell_->count();
    if (rings == scanned_at_.load(std::memory_order_relaxed) && !bell_->device_signaled()) return;
    std::unique_lock lk(mutex_, std::try_to_lock);
    if (!lk.owns_lock()) return;
    if (bell_->device_signaled()) bell_->take_device_signal();
    scanned_at_.store(rings, std::memory_order_relaxed);
    drain_progress_.fetch_add(1, std::memory_order_release);
    ready_list list;
    pass_locked(std::chrono::steady_clock::now(), list);
    completion_queue* sched = enqueue_locked(list);
    lk.unlock();
    schedule(sched);
}

GPU_ASYNC_DECL void reactor_service::park(std::uint64_t seen, dur_ns bound) {
    std::optional<park_policy::predicted_park> sleep;
    const std::uint64_t from = detail::wordwait_now_ns(); // the look before this park
    {
        std::lock_guard lk(mutex_);
        bound = bound_locked(std::chrono::steady_clock::now(), bound);
        sleep = predicted_sleep_locked(from, bound);
    }
    if (park_between_scans(seen, bound, sleep)) {
        std::lock_guard lk(mutex_);
        scan_late_ = true;
        slept_from_ns_ = from;
    }
}

GPU_ASYNC_DECL std::size_t reactor_service::rhythm_lines() const {
    std::lock_guard lk(mutex_);
    return rhythm_.lines();
}

GPU_ASYNC_DECL std::optional<std::uint64_t>
reactor_service::rhythm_sleep_ns(const completion_line& line, slot_id slot) const {
    std::lock_guard lk(mutex_);
    return rhythm_.sleep_ns(line, slot, rhythm_plan());
}

GPU_ASYNC_DECL deadline_plan reactor_service::rhythm_plan() const noexcept {
    deadline_plan plan;
    plan.margin_ns = waiter_.device_poll().ns;
    plan.min_sleep_ns = 0;
    plan.max_sleep_ns = bell_waiter::idle_bound.ns;
    plan.window = 8;
    return plan;
}

GPU_ASYNC_DECL std::optional<park_policy::predicted_park>
reactor_service::predicted_sleep_locked(std::uint64_t now_ns, dur_ns bound) const {
    const deadline_plan plan = rhythm_plan();
    return park_policy::predicted_sleep(
        mono_ns{now_ns}, bound, waiter_.device_poll(), engine_.size(), predicting(),
        [&](auto&& each) {
            engine_.for_each([&](const engine_wait& w) {
                const auto& op = static_cast<const reactor_op&>(w);
                const memory_descriptor& d = op.descriptor();
                const std::optional<std::uint64_t> s =
                    op.started_ns_ == 0 ? std::nullopt : rhythm_.sleep_ns(d.line(), d.slot(), plan);
                each(s ? std::optional<mono_ns>(mono_ns{op.started_ns_}.after(dur_ns{*s}))
                       : std::nullopt);
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
        publish_size();
        retries = take_retries_locked();
    }
    // Destroyed without being invoked, with no lock held (a handler's destructor may do anything).
    for (reactor_op* op = list.head; op != nullptr;) {
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
    if (no_waiter_locked() && waits_locked() && !shut_down_) start_thread_locked();
}

GPU_ASYNC_DECL void reactor_service::link_locked(reactor_op& op) noexcept {
    if (reactor_port* port = op.port_) {
        op.owner_ = port;
        op.prev_ = nullptr;
        op.next_ = port->head;
        if (port->head != nullptr) port->head->prev_ = &op;
        port->head = &op;
        ++port->count;
    }
}

GPU_ASYNC_DECL void reactor_service::unlink_port_locked(reactor_op& op) noexcept {
    if (reactor_port* port = op.owner_) {
        if (op.prev_ != nullptr)
            op.prev_->next_ = op.next_;
        else
            port->head = op.next_;
        if (op.next_ != nullptr) op.next_->prev_ = op.prev_;
        --port->count;
        op.owner_ = nullptr;
        op.prev_ = op.next_ = nullptr;
    }
}

GPU_ASYNC_DECL dur_ns reactor_service::bound_locked(std::chrono::steady_clock::time_point now,
                                                    dur_ns bound) const noexcept {
    return engine_.bound(to_mono(now), bound);
}

GPU_ASYNC_DECL void reactor_service::start_thread_locked() {
    stop_ = false;
    stopping_.store(false, std::memory_order_relaxed);
    thread_ = start_watcher_thread([this] { watcher_main(); });
    waiter_present_.store(true, std::memory_order_release);
}

GPU_ASYNC_DECL void reactor_service::stop_thread() {
    std::thread t;
    {
        std::lock_guard lk(mutex_);
        if (!thread_.joinable()) return;
        stop_ = true;
        stopping_.store(true, std::memory_order_seq_cst);
        t = std::move(thread_);
        waiter_present_.store(fill_ > 0, std::memory_order_release);
    }
    bell_->ring();
    wake_stand_back();
    t.join();
    std::lock_guard lk(mutex_);
    stop_ = false;
    stopping_.store(false, std::memory_order_relaxed);
}

GPU_ASYNC_DECL void reactor_service::watcher_main() {
    std::unique_lock lk(mutex_);
    while (!stop_) {
        std::uint64_t seen = bell_->count();
        switch (park_policy::before_scan(retry_ != nullptr, fill_ > 0,
                                         drains_out_.load(std::memory_order_acquire) != 0)) {
        case park_policy::step::post_retries:
            post_retries_step(lk, seen);
            continue;
        case park_policy::step::idle:
            idle_step(lk, seen);
            continue;
        case park_policy::step::stand_back:
            stand_back_step(lk);
            if (stop_) return;
            seen = bell_->count();
            break;
        case park_policy::step::scan:
            break;
        }
        scan_step(lk, seen);
    }
}

GPU_ASYNC_DECL void reactor_service::post_retries_step(std::unique_lock<std::mutex>& lk,
                                                       std::uint64_t seen) {
    completion_queue* retries = take_retries_locked();
    lk.unlock();
    schedule(retries);
    lk.lock();
    // A drain that cannot be posted now is retried after one park bound (a device's signal must
    // not end that park at once: the scan after the retries reads the word anyway).
    if (retry_ != nullptr) {
        if (bell_->device_signaled()) bell_->take_device_signal();
        lk.unlock();
        park_on_bell(seen, park_bound());
        lk.lock();
    }
}

GPU_ASYNC_DECL void reactor_service::idle_step(std::unique_lock<std::mutex>& lk,
                                               std::uint64_t seen) {
    // A FILL driver is the waiter (it scans): sleep on the doorbell until end_fill() or a stop
    // rings it (bell_waiter::idle_bound).
    if (bell_->device_signaled()) bell_->take_device_signal();
    lk.unlock();
    park_on_bell(seen, bell_waiter::idle_bound, /*watching=*/false);
    lk.lock();
}

GPU_ASYNC_DECL void reactor_service::stand_back_step(std::unique_lock<std::mutex>& lk) {
    // A drain is out: it scans after its batch, on the executor's thread. Leave the table to it
    // rather than contend with it for the lock and for the lines a busy port's handlers write
    // (words, the incoming registrations, the queue); scan once it ends, or when a bound passes
    // in which no drain ran (an executor holds it back), at a device's signal or a registration
    // that cannot wait (a near deadline, a tight bound), and in any case after the policy's
    // window (a drain scans only when the bell rang or a device signalled).
    const auto now = std::chrono::steady_clock::now();
    const park_policy::stand_back_window window =
        park_policy::stand_back(mono_ns{detail::wordwait_now_ns()}, park_bound(),
                                [&](dur_ns b) { return bound_locked(now, b); });
    lk.unlock();
    std::uint64_t progress = drain_progress_.load(std::memory_order_acquire);
    for (bool first = true;; first = false) {
        const mono_ns t{detail::wordwait_now_ns()};
        if (t >= window.until) break;
        stand_back(min(window.round, window.until.since(t)), first);
        const std::uint64_t now_progress = drain_progress_.load(std::memory_order_acquire);
        if (!park_policy::stand_back_again(progress, now_progress, stand_back_over(),
                                           mono_ns{detail::wordwait_now_ns()}, window.until))
            break;
        progress = now_progress; // the drains ran within the bound: one scans at its end
    }
    lk.lock();
}

GPU_ASYNC_DECL void reactor_service::scan_step(std::unique_lock<std::mutex>& lk,
                                               std::uint64_t seen) {
    urgent_.store(false, std::memory_order_seq_cst); // the scan below takes it in
    // A device's doorbell store ends the park below; taken just before the scan it announces
    // (the device stored its completion word first), so the scan sees that completion. (Not
    // before a stand-back: the drains' scans look for the signal while it stays set.)
    if (bell_->device_signaled()) bell_->take_device_signal();
    const auto now = std::chrono::steady_clock::now();
    ready_list list;
    pass_locked(now, list);
    switch (park_policy::between_scans(list.head != nullptr, !engine_.empty())) {
    case park_policy::after::idle:
        // table_size_ (0) was published before the registrations were taken, so a registration
        // pushed after that take sees 0 and rings: it cannot be missed here.
        lk.unlock();
        park_on_bell(seen, bell_waiter::idle_bound, /*watching=*/false);
        lk.lock();
        return;
    case park_policy::after::deliver: {
        completion_queue* sched = enqueue_locked(list);
        lk.unlock();
        schedule(sched);
        lk.lock();
        return;
    }
    case park_policy::after::park:
        break;
    }
    const dur_ns bound = bound_locked(now, park_bound());
    const std::uint64_t from = detail::wordwait_now_ns(); // this look
    const std::optional<park_policy::predicted_park> sleep = predicted_sleep_locked(from, bound);
    lk.unlock();
    query_health(); // a faulted context ends its lines' waits (device_fault) within a backstop
    const bool late = park_between_scans(seen, bound, sleep);
    lk.lock();
    if (late) {
        scan_late_ = true;
        slept_from_ns_ = from;
    }
}

GPU_ASYNC_DECL void reactor_service::stand_back(dur_ns bound, bool spin_first) {
    const doorbell& bell = *bell_;
    if (stand_back_over() || bound.ns == 0) return;
    const std::uint64_t start = detail::wordwait_now_ns();
    const std::uint64_t deadline = mono_ns{start}.after(bound).ns;
    // Spin as a park would (up to max_spin_ns while rings come densely). It reads lines that
    // nobody writes per completion: the drains' count, the flags, the doorbell's device word.
    const std::uint64_t spin = waiter_.spin_ns();
    const std::uint64_t spin_for =
        spin_first ? std::min<std::uint64_t>(spin, stand_back_spin_ns) : 0;
    const std::uint64_t spin_end = deadline - start < spin_for ? deadline : start + spin_for;
    for (unsigned i = 1;; ++i) {
        if (stand_back_over()) return;
        detail::cpu_relax();
        if ((i & 15u) == 0 && detail::wordwait_now_ns() >= spin_end) break;
    }
    // Sparse rings: a drain's end is near (the waiter scans and parks as usual). Dense rings
    // (a busy port): sleep until the drains end, so that the port's thread runs alone. A device
    // store does not end a futex sleep: with device producers and no monitor, sleep in steps of
    // the device poll interval and look at the doorbell's device word after each.
    if (spin != bell_waiter::max_spin_ns) return;
    const std::uint64_t step = bell.device_producers() != 0 && !waiter_.has_monitor()
                                   ? std::max<std::uint64_t>(1, waiter_.device_poll().ns)
                                   : ~std::uint64_t{0};
#if GPU_ASYNC_HAS_FUTEX
    for (;;) {
        // Eventcount: registered as a sleeper, read the count, then check; whatever ends a
        // stand-back changes its state first and bumps the count after, so the futex sees
        // the new count or the check sees the new state.
        stand_back_sleepers_.fetch_add(1, std::memory_order_seq_cst);
        const std::uint32_t epoch = stand_back_epoch_.load(std::memory_order_seq_cst);
        const std::uint64_t now = detail::wordwait_now_ns();
        if (stand_back_over() || now >= deadline) {
            stand_back_sleepers_.fetch_sub(1, std::memory_order_relaxed);
            return;
        }
        const std::uint64_t left = std::min({deadline - now, doorbell::max_sleep_ns, step});
        detail::futex_wait(reinterpret_cast<const std::uint32_t*>(&stand_back_epoch_), epoch, left);
        stand_back_sleepers_.fetch_sub(1, std::memory_order_relaxed);
    }
#else
    (void)step;
    while (!stand_back_over() && detail::wordwait_now_ns() < deadline)
        std::this_thread::yield();
#endif
}

GPU_ASYNC_DECL bool reactor_service::stand_back_over() const noexcept {
    return drains_out_.load(std::memory_order_seq_cst) == 0 ||
           stopping_.load(std::memory_order_seq_cst) || urgent_.load(std::memory_order_seq_cst) ||
           bell_->device_signaled();
}

GPU_ASYNC_DECL void reactor_service::drain_ended() noexcept {
    // The last drain's end ends a stand-back.
    if (drains_out_.fetch_sub(1, std::memory_order_seq_cst) == 1) wake_stand_back();
}

GPU_ASYNC_DECL void reactor_service::wake_stand_back() noexcept {
    stand_back_epoch_.fetch_add(1, std::memory_order_seq_cst);
#if GPU_ASYNC_HAS_FUTEX
    if (stand_back_sleepers_.load(std::memory_order_seq_cst) != 0)
        detail::futex_wake_all(reinterpret_cast<const std::uint32_t*>(&stand_back_epoch_));
#endif
}

GPU_ASYNC_DECL void reactor_service::retry_later(completion_queue* q) noexcept {
    std::unique_lock lk(mutex_);
    if (shut_down_.load(std::memory_order_relaxed)) {
        lk.unlock();
        q->abandon();
        return;
    }
    q->next_schedule_ = retry_;
    retry_ = q;
    if (no_waiter_locked() && !stop_) {
        try {
            start_thread_locked();
        } catch (...) {
            // No watcher either: the next registration, poll_ready() or run_fill() retries.
        }
    }
    lk.unlock();
    bell_->ring();
}

GPU_ASYNC_DECL completion_queue* reactor_service::enqueue_locked(ready_list& list) noexcept {
    completion_queue* sched = nullptr;
    completion_queue** tail = &sched;
    if (list.head != nullptr && !list.mixed) {
        // One queue (a single port's waits: the common case), pushed whole.
        completion_queue* q = list.queue;
        if (q->push(list.head, list.tail)) {
            q->next_schedule_ = nullptr;
            sched = q;
        }
        return sched;
    }
    reactor_op* op = list.head;
    while (op != nullptr) {
        // One push per run of consecutive ops of one queue (usually the whole list).
        completion_queue* q = op->queue_;
        reactor_op* last = op;
        while (last->next != nullptr && last->next_op()->queue_ == q)
            last = last->next_op();
        reactor_op* next = last->next_op();
        last->next = nullptr;
        if (q->push(op, last)) {
            q->next_schedule_ = nullptr;
            *tail = q;
            tail = &q->next_schedule_;
        }
        op = next;
    }
    return sched;
}

GPU_ASYNC_DECL void reactor_service::schedule(completion_queue* list) noexcept {
    while (list != nullptr) {
        completion_queue* q = std::exchange(list, list->next_schedule_);
        q->next_schedule_ = nullptr;
        if (q->schedule_(q)) continue; // the drain holds the reference now
        // Posting failed: keep the queue (and its reference) for the waiter to post again.
        retry_later(q);
    }
}

GPU_ASYNC_DECL void reactor_service::deliver(reactor_op* op) noexcept {
    completion_queue* q = op->queue_;
    op->next = nullptr;
    if (q->push(op, op)) {
        q->next_schedule_ = nullptr;
        schedule(q);
    }
}

GPU_ASYNC_ASIO_NAMESPACE_END
} // namespace gpu_async::detail

#endif // GPU_ASYNC_IMPL_REACTOR_SERVICE_IPP
