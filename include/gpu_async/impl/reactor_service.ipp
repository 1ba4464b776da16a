// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/impl/reactor_service.ipp: definitions of the reactor service.
//
#ifndef GPU_ASYNC_IMPL_REACTOR_SERVICE_IPP
#define GPU_ASYNC_IMPL_REACTOR_SERVICE_IPP

#include <gpu_async/detail/reactor_service.hpp>

#include <algorithm>
#include <exception>
#include <functional>
#include <utility>

namespace gpu_async::detail {
GPU_ASYNC_ASIO_NAMESPACE_BEGIN

GPU_ASYNC_DECL reactor_service::reactor_service(asio::execution_context& ctx)
    : asio::execution_context::service(ctx)
    , bell_(std::make_shared<doorbell>()) {
    incoming_.reserve(initial_incoming);
    incoming_spare_.reserve(initial_incoming);
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
    std::size_t n = table_.size();
    for_each_incoming_locked([&](const reactor_op*) { ++n; });
    return n;
}

GPU_ASYNC_DECL std::size_t reactor_service::pending(const reactor_port& port) const {
    std::lock_guard lk(mutex_);
    std::size_t n = port.count;
    for_each_incoming_locked([&](const reactor_op* op) { n += op->port_ == &port ? 1 : 0; });
    return n;
}

GPU_ASYNC_DECL bool reactor_service::has_incoming_locked() const {
    std::lock_guard in(incoming_mutex_);
    return !incoming_.empty() || incoming_overflow_ != nullptr;
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
        self->learn_locked(*op);
        break;
    case watch_end::expired:
        op->ec = asio::error::timed_out;
        break;
    case watch_end::removed:
        op->ec = asio::error::operation_aborted;
        break;
    case watch_end::faulted:
        op->ec = errc::device_fault;
        break;
    }
    out->push(op);
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
    op->bound_ns_ = bound.ns;
    op->has_deadline_ = deadline.has_value();
    op->deadline_ns_ = deadline ? to_mono(*deadline).ns : 0;
    // Registered: added to the incoming registrations, without the service's lock, which a
    // scan may be holding. The waiter moves it into the table before its next scan. (Into the
    // array while it has room, else onto the overflow stack: no allocation here.)
    // Wake the waiter when it must act on this registration now: it is idle (nothing was
    // pending: it sleeps up to a second), or the wait has a deadline within one park bound or a
    // bound tighter than the park bound. Otherwise it takes the wait in at its next scan, at the
    // latest one park bound away, and a store to the wait's word is seen by that scan.
    // Idle is decided in the same section as the push: a waiter that found nothing published
    // table_size_ 0 and then took the registrations under incoming_mutex_, so the first one
    // added after that take reads 0 here (a merge that takes it, on any thread, stores its
    // size only after this section) and rings.
    bool idle = false;
    {
        std::lock_guard in(incoming_mutex_);
        idle = incoming_.empty() && incoming_overflow_ == nullptr &&
               table_size_.load(std::memory_order_seq_cst) == 0;
        if (incoming_.size() < incoming_.capacity()) {
            incoming_.push_back(op);
        } else {
            op->next_ready_ = incoming_overflow_;
            incoming_overflow_ = op;
        }
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

GPU_ASYNC_DECL void reactor_service::merge_incoming_locked(ready_list& out) {
    reactor_op* overflow = nullptr;
    {
        std::lock_guard in(incoming_mutex_);
        if (incoming_.empty() && incoming_overflow_ == nullptr) {
            table_size_.store(table_.size(), std::memory_order_seq_cst);
            return;
        }
        incoming_.swap(incoming_spare_); // new registrations go into the (empty) spare
        overflow = std::exchange(incoming_overflow_, nullptr);
    }
    std::vector<reactor_op*>& taken = incoming_spare_;
    std::size_t count = taken.size();
    const std::uint64_t merge = ++merges_;
    // The overflow stack is used only once the array is full: after it, in registration order.
    reactor_op* fifo = nullptr;
    while (overflow != nullptr) {
        reactor_op* next = overflow->next_ready_;
        overflow->next_ready_ = fifo;
        fifo = overflow;
        overflow = next;
        ++count;
    }
    reached_scratch_.clear();
    ready_list scanned; // waits of the table that an insert's scan of their slot completed
    auto take_in = [&](reactor_op* op) {
        op->next_ready_ = nullptr;
        op->taken_in_ = merge;
        op->done_at_take_in_ = false;
        // Checked again here, under the lock a retirement takes after advancing the line's
        // generation: a registration that raced the retirement never reads the line. It was
        // live at its start (start() checks), so a retirement since found it pending: aborted.
        if (error_code ec = status_error(op->descriptor())) {
            if (ec == errc::stale_descriptor) ec = asio::error::operation_aborted;
            op->ec = ec;
            out.push(op);
            return;
        }
        try {
            // One read of the word decides both "complete now" and the wait's place in its slot
            // (and may complete other waits of the slot: the word moved far since the last scan).
            const std::optional<table_type::handle> pos =
                table_.insert(op->descriptor(), op, sink_locked(scanned),
                              op->has_deadline_ ? std::optional<mono_ns>(mono_ns{op->deadline_ns_})
                                                : std::nullopt);
            if (!pos) {
                op->ec = {};
                op->done_at_take_in_ = true;
                learn_locked(*op);
                try {
                    reached_scratch_.push_back(reached::taken(op)); // read while it is at hand
                } catch (...) {
                    out.push(op); // no room to order it: handed out as it comes
                }
                return;
            }
            op->pos_ = *pos;
            try {
                link_locked(op->port_, op);
            } catch (...) {
                table_.erase(*pos); // not left in the table to be completed a second time
                throw;
            }
        } catch (...) {
            // No memory for its place in the table: it ends with that error, never lost.
            op->ec = asio::error::no_memory;
            out.push(op);
        }
    };
    // With thousands of registrations their ops are out of the cache: fetched a few ahead, the
    // reads overlap.
    constexpr std::size_t ahead = 8;
    for (std::size_t i = 0; i < taken.size(); ++i) {
        if (i + ahead < taken.size()) prefetch_op(taken[i + ahead]);
        take_in(taken[i]);
    }
    while (fifo != nullptr)
        take_in(std::exchange(fifo, fifo->next_ready_));
    taken.clear();
    // Room for twice as many in this array, which takes the registrations after the next merge
    // (the two alternate); without memory, those past its room wait on the overflow stack.
    if (taken.capacity() < 2 * count) {
        try {
            taken.reserve(2 * count);
        } catch (...) {
        }
    }
    // Waits already complete when taken in leave in ascending target order per slot, as a scan
    // hands them out: by slot, then by distance below the slot's word (read once per wait, all
    // in one pass after the inserts, as close together as they can be). With them, the table's
    // waits an insert completed: registered earlier, they may have lower targets of the same
    // slot, and the two runs leave as one.
    while (scanned.head != nullptr) {
        reactor_op* op = scanned.head;
        try {
            reached_scratch_.push_back(reached::taken(op));
        } catch (...) {
            break; // no room to order the rest: handed out as they come, after the ordered
        }
        scanned.head = op->next_ready_;
        --scanned.count;
    }
    if (reached_scratch_.size() > 1) {
        for (reached& r : reached_scratch_)
            r.measure();
        sort_reached();
    }
    const std::size_t n = reached_scratch_.size();
    for (std::size_t i = 0; i < n; ++i) {
        if (i + ahead < n) prefetch_line(&reached_scratch_[i + ahead].op->next_ready_);
        out.push(reached_scratch_[i].op, reached_scratch_[i].queue);
    }
    reached_scratch_.clear();
    while (scanned.head != nullptr) {
        reactor_op* op = scanned.head;
        scanned.head = op->next_ready_;
        out.push(op);
    }
    table_size_.store(table_.size(), std::memory_order_seq_cst);
}

GPU_ASYNC_DECL void reactor_service::recollect_locked(ready_list& out, reactor_op* before,
                                                      std::size_t n) {
    reactor_op* op = before != nullptr ? before->next_ready_ : out.head;
    for (std::size_t i = 0; i < n; ++i, op = op->next_ready_) {
        const memory_descriptor& d = op->descriptor();
        table_.collect(d.line(), d.slot(), sink_locked(out));
    }
}

GPU_ASYNC_DECL void reactor_service::merge_settled_locked(ready_list& out) {
    const std::size_t before = out.count;
    reactor_op* const tail = out.tail;
    merge_incoming_locked(out);
    const std::size_t found = out.count - before;
    if (found == 0) return;
    // The table's waits of the slots these were found complete in, that the same store reached
    // (lower or equal targets, started earlier), leave with them, as a scan's would.
    try {
        recollect_locked(out, tail, found);
    } catch (...) {
        // Out of memory in a slot's scan: the rest are found by the next scan.
    }
    if (out.count - before > found) order_locked(out);
}

GPU_ASYNC_DECL bool reactor_service::cancel(const reactor_key& wait) {
    bool found = false;
    completion_queue* sched = nullptr;
    {
        std::lock_guard lk(mutex_);
        ready_list list;
        merge_settled_locked(list); // a wait not yet taken in is in the table now
        // After shutdown the table is empty; before registration and after completion the wait
        // is not found. Only a registered op (alive, owned by the table) is touched.
        const std::optional<table_type::handle> pos =
            table_.find(wait.descriptor, [&](const reactor_op* candidate) {
                return candidate == wait.op && candidate->serial_ == wait.serial;
            });
        if (pos) {
            auto* op = const_cast<reactor_op*>(wait.op);
            table_.erase(*pos);
            unlinked_locked(op);
            op->ec = asio::error::operation_aborted;
            list.push(op);
            found = true;
        }
        table_size_.store(table_.size(), std::memory_order_relaxed);
        sched = enqueue_locked(list);
    }
    schedule(sched);
    return found;
}

GPU_ASYNC_DECL std::size_t reactor_service::cancel(reactor_port& port) {
    ready_list list;
    std::size_t n = 0;
    completion_queue* sched = nullptr;
    {
        std::lock_guard lk(mutex_);
        merge_settled_locked(list);
        n = list.count;
        while (port.head != nullptr) {
            reactor_op* op = port.head;
            table_.erase(op->pos_);
            unlinked_locked(op);
            op->ec = asio::error::operation_aborted;
            list.push(op);
        }
        table_size_.store(table_.size(), std::memory_order_relaxed);
        n = list.count - n;
        sched = enqueue_locked(list);
    }
    schedule(sched);
    return n;
}

GPU_ASYNC_DECL void reactor_service::retire_line(const completion_line& line) noexcept {
    completion_queue* sched = nullptr;
    {
        std::lock_guard lk(mutex_);
        ready_list list;
        merge_settled_locked(list);
        table_.remove_line(line, sink_locked(list));
        rhythm_.forget(line);
        table_size_.store(table_.size(), std::memory_order_relaxed);
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
        ready_list list;
        merge_settled_locked(list); // those not yet taken in see the fault as they are
        // What the stream stored before its fault completes them as usual; the rest fault.
        try {
            table_.collect(line, slot, sink_locked(list));
        } catch (...) {
            // No memory to take the reached ones out in order: they fault with the rest.
        }
        table_.remove_slot(line, slot, sink_locked(list));
        table_size_.store(table_.size(), std::memory_order_relaxed);
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
            const bool waits = !table_.empty() || has_incoming_locked();
            if (waits && !shut_down_) {
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
    if (bell_->device_signaled()) bell_->take_device_signal(); // before the scan (watcher_main)
    std::size_t n = 0;
    completion_queue* sched = nullptr;
    completion_queue* retries = nullptr;
    {
        std::lock_guard lk(mutex_);
        retries = take_retries_locked();
        ready_list list;
        merge_incoming_locked(list);
        if (!table_.empty())
            scan_locked(std::chrono::steady_clock::now(), list);
        else
            scan_late_ = false;
        table_size_.store(table_.size(), std::memory_order_relaxed);
        n = list.count;
        sched = enqueue_locked(list);
    }
    schedule(retries);
    schedule(sched);
    return n;
}

GPU_ASYNC_DECL void reactor_service::scan_after_drain() noexcept {
    // Only when something rang since the last scan (a handler's producer, most likely) and the
    // waiter is not scanning now: the drain must never wait for the lock.
    const std::uint64_t rings = bell_->count();
    if (rings == scanned_at_.load(std::memory_order_relaxed) && !bell_->device_signaled()) return;
    std::unique_lock lk(mutex_, std::try_to_lock);
    if (!lk.owns_lock()) return;
    ready_list list;
    try {
        if (bell_->device_signaled()) bell_->take_device_signal();
        scanned_at_.store(rings, std::memory_order_relaxed);
        drain_progress_.fetch_add(1, std::memory_order_release);
        merge_incoming_locked(list);
        if (!table_.empty())
            scan_locked(std::chrono::steady_clock::now(), list);
        else
            scan_late_ = false;
    } catch (...) {
        // What it found is handed out below; the waiter's next scan finds the rest.
    }
    table_size_.store(table_.size(), std::memory_order_relaxed);
    completion_queue* sched = enqueue_locked(list);
    lk.unlock();
    schedule(sched);
}

GPU_ASYNC_DECL void reactor_service::park(std::uint64_t seen, dur_ns bound) {
    std::optional<dur_ns> sleep;
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

GPU_ASYNC_DECL std::optional<dur_ns> reactor_service::predicted_sleep_locked(std::uint64_t now_ns,
                                                                             dur_ns bound) const {
    if (table_.empty() || table_.size() > predict_max_pending || !predicting() ||
        !polls_within(bound))
        return std::nullopt;
    const deadline_plan plan = rhythm_plan();
    // A sleep shorter than two steps saves nothing: the first wait due by then settles it.
    const std::uint64_t soon = mono_ns{now_ns}.after(two_polls()).ns;
    std::uint64_t wake = ~std::uint64_t{0};
    bool step = false;
    table_.for_each([&](const reactor_op* op) {
        if (step) return;
        const memory_descriptor& d = op->descriptor();
        const std::optional<std::uint64_t> s =
            op->started_ns_ == 0 ? std::nullopt : rhythm_.sleep_ns(d.line(), d.slot(), plan);
        // A wait without a prediction may complete at any time.
        wake = s ? std::min(wake, mono_ns{op->started_ns_}.after(dur_ns{*s}).ns) : 0;
        step = wake <= soon;
    });
    if (step) return std::nullopt;
    return dur_ns{wake - now_ns};
}

GPU_ASYNC_DECL bool reactor_service::park_between_scans(std::uint64_t seen, dur_ns bound,
                                                        std::optional<dur_ns> sleep) {
    if (!sleep) {
        park_on_bell(seen, bound);
        return false;
    }
    // Within the bound the sleep ends a margin before the earliest expected completion; then
    // the waiter polls for up to twice the device poll interval (the margin and one step), then
    // steps as usual. Past the bound (a deadline, a tighter bound, the park bound) it sleeps the
    // whole bound, without steps: the scan there looks, and the next park predicts again. Either
    // way a completion the device signalled during the sleep came before its prediction.
    if (*sleep >= bound) return waiter_.park_predicted(*bell_, seen, bound, dur_ns{});
    return waiter_.park_predicted(*bell_, seen, *sleep, min(two_polls(), bound - *sleep));
}

GPU_ASYNC_DECL void reactor_service::shutdown() {
    stop_thread();
    ready_list list;
    completion_queue* retries = nullptr;
    {
        std::lock_guard lk(mutex_);
        shut_down_.store(true, std::memory_order_release);
        merge_incoming_locked(list);
        table_.clear(sink_locked(list));
        table_size_.store(0, std::memory_order_relaxed);
        retries = take_retries_locked();
    }
    // Destroyed without being invoked, with no lock held (a handler's destructor may do anything).
    for (reactor_op* op = list.head; op != nullptr;) {
        reactor_op* next = op->next_ready_;
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
    const bool waits = !table_.empty() || has_incoming_locked();
    if (no_waiter_locked() && waits && !shut_down_) start_thread_locked();
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
    const std::size_t merged = out.count; // what merge_incoming_locked handed out before
    table_.collect(sink_locked(out));
    const std::size_t collected = out.count - merged;
    // Waits registered since the caller's merge: one pushed before a store that the scan above
    // saw is among the new registrations now, and must leave with this scan, not after the slot's
    // later targets (it is handed out here if complete, else taken into the table).
    reactor_op* const before_late = out.tail;
    merge_incoming_locked(out);
    const std::size_t late = out.count - merged - collected;
    std::size_t again = 0;
    if (late != 0) {
        // That merge may have read a store the scan above did not see: the table's waits of the
        // same slots that it reached (lower targets among them) leave with it, not at the next
        // scan; so do waits registered before that store but after the merge took them in.
        recollect_locked(out, before_late, late);
        // Once more for what a second merge completes (it may read a newer store still). This
        // narrows the window, it cannot close it: a registration racing two stores and a scan
        // may still leave one scan before a lower target of its slot.
        reactor_op* const before_again = out.tail;
        const std::size_t before_count = out.count;
        merge_incoming_locked(out);
        recollect_locked(out, before_again, out.count - before_count);
        again = out.count - merged - collected - late;
    }
    table_.collect_expired(to_mono(now), sink_locked(out));
    // Up to four runs, each in ascending target order per slot (taken in complete, found by
    // the scan, taken in complete after it, found after that): one slot may have waits in
    // several.
    if (int{merged != 0} + int{collected != 0} + int{late != 0} + int{again != 0} >= 2)
        order_locked(out);
    scan_late_ = false; // only the first scan after a predicted sleep
}

GPU_ASYNC_DECL void reactor_service::scan_locked(std::chrono::steady_clock::time_point now,
                                                 ready_list& out) noexcept {
    try {
        collect_locked(now, out);
    } catch (...) {
        // Out of memory in a slot's scan (it changes nothing before it can throw): what the
        // scan found before is handed out, the rest stays in the table for the next scan.
        scan_late_ = false;
    }
}

GPU_ASYNC_DECL bool reactor_service::reached::before(const reached& a, const reached& b) noexcept {
    if (a.line != b.line) return std::less<>()(a.line, b.line);
    if (a.slot != b.slot) return a.slot < b.slot;
    if (a.failed != b.failed) return !a.failed;
    if (a.below != b.below) return a.below > b.below;
    return a.started < b.started;
}

GPU_ASYNC_DECL void reactor_service::sort_reached() noexcept {
    // stable_sort may allocate a buffer; without one it still sorts (in place, more slowly).
    if (!std::is_sorted(reached_scratch_.begin(), reached_scratch_.end(), reached::before))
        std::stable_sort(reached_scratch_.begin(), reached_scratch_.end(), reached::before);
}

GPU_ASYNC_DECL void reactor_service::order_locked(ready_list& list) noexcept {
    // A stable sort by line, slot, then the completed before the rest, in ascending target
    // order (descending distance below the slot's word, read once per wait here).
    try {
        reached_scratch_.clear();
        for (reactor_op* op = list.head; op != nullptr; op = op->next_ready_)
            reached_scratch_.push_back(reached::of(op));
    } catch (...) {
        reached_scratch_.clear();
        return; // no room to order them: handed out in their runs
    }
    sort_reached();
    ready_list sorted;
    for (const reached& r : reached_scratch_)
        sorted.push(r.op);
    reached_scratch_.clear();
    list = sorted;
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
    // While nothing is pending (or a FILL driver is the waiter) the watcher sleeps on the
    // doorbell: a registration, end_fill() and stop all ring it (bell_waiter::idle_bound).
    constexpr dur_ns idle_bound = bell_waiter::idle_bound;
    std::unique_lock lk(mutex_);
    while (!stop_) {
        std::uint64_t seen = bell_->count();
        if (completion_queue* retries = take_retries_locked()) {
            lk.unlock();
            schedule(retries);
            lk.lock();
            // A drain that cannot be posted now is retried after one park bound (a device's
            // signal must not end that park at once: the scan after the retries reads the
            // word anyway).
            if (retry_ != nullptr) {
                if (bell_->device_signaled()) bell_->take_device_signal();
                lk.unlock();
                park_on_bell(seen, park_bound());
                lk.lock();
            }
            continue;
        }
        if (fill_ > 0) {
            if (bell_->device_signaled()) bell_->take_device_signal(); // the FILL driver scans
            lk.unlock();
            park_on_bell(seen, idle_bound, /*watching=*/false);
            lk.lock();
            continue;
        }
        if (drains_out_.load(std::memory_order_acquire) != 0) {
            // A drain is out: it scans after its batch, on the executor's thread. Leave the
            // table to it rather than contend with it for the lock and for the lines a busy
            // port's handlers write (words, the incoming registrations, the queue); scan once it
            // ends, or when a bound passes in which no drain ran (an executor holds it back), at a
            // device's signal or a registration that cannot wait (a near deadline, a tight
            // bound), and in any case after stand_back_bounds park bounds or at the earliest
            // deadline (a drain scans only when the bell rang or a device signalled).
            const auto now = std::chrono::steady_clock::now();
            const dur_ns bound = bound_locked(now, park_bound());
            const std::uint64_t pb = park_bound().ns;
            const dur_ns most = bound_locked(now, dur_ns{pb > ~std::uint64_t{0} / stand_back_bounds
                                                             ? ~std::uint64_t{0}
                                                             : pb * stand_back_bounds});
            const std::uint64_t until = mono_ns{detail::wordwait_now_ns()}.after(most).ns;
            lk.unlock();
            for (std::uint64_t progress = drain_progress_.load(std::memory_order_acquire),
                               round = 0;
                 ; ++round) {
                const std::uint64_t t = detail::wordwait_now_ns();
                if (t >= until) break;
                stand_back(min(bound, dur_ns{until - t}), round == 0);
                const std::uint64_t now_progress = drain_progress_.load(std::memory_order_acquire);
                if (now_progress == progress || stand_back_over()) break;
                progress = now_progress; // the drains ran within the bound: one scans at its end
            }
            lk.lock();
            if (stop_) break;
            seen = bell_->count();
        }
        urgent_.store(false, std::memory_order_seq_cst); // the scan below takes it in
        // A device's doorbell store ends the park below; taken just before the scan it announces
        // (the device stored its completion word first), so the scan sees that completion. (Not
        // before a stand-back: the drains' scans look for the signal while it stays set.)
        if (bell_->device_signaled()) bell_->take_device_signal();
        ready_list list;
        merge_incoming_locked(list);
        if (table_.empty() && list.head == nullptr) {
            // Idle. table_size_ (0) was published before the registrations were taken, so a
            // registration pushed after that take sees 0 and rings: it cannot be missed here.
            scan_late_ = false;
            lk.unlock();
            park_on_bell(seen, idle_bound, /*watching=*/false);
            lk.lock();
            continue;
        }
        const auto now = std::chrono::steady_clock::now();
        scan_locked(now, list);
        table_size_.store(table_.size(), std::memory_order_relaxed);
        completion_queue* sched = enqueue_locked(list);
        const dur_ns bound = bound_locked(now, park_bound());
        const std::uint64_t from = detail::wordwait_now_ns(); // this look
        const std::optional<dur_ns> sleep =
            list.head != nullptr ? std::nullopt : predicted_sleep_locked(from, bound);
        lk.unlock();
        bool late = false;
        if (list.head != nullptr)
            schedule(sched);
        else
            late = park_between_scans(seen, bound, sleep);
        lk.lock();
        if (late) {
            scan_late_ = true;
            slept_from_ns_ = from;
        }
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
        while (last->next_ready_ != nullptr && last->next_ready_->queue_ == q)
            last = last->next_ready_;
        reactor_op* next = last->next_ready_;
        last->next_ready_ = nullptr;
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
    op->next_ready_ = nullptr;
    if (q->push(op, op)) {
        q->next_schedule_ = nullptr;
        schedule(q);
    }
}

// --- completion_queue --------------------------------------------------------------------------

GPU_ASYNC_DECL bool completion_queue::push(reactor_op* head, reactor_op* tail) noexcept {
    std::lock_guard lk(mutex_);
    if (tail_ != nullptr)
        tail_->next_ready_ = head;
    else
        head_ = head;
    tail_ = tail;
    if (posted_) return false;
    posted_ = true;
    svc_->drain_out();
    add_ref(); // the drain's
    return true;
}

GPU_ASYNC_DECL void completion_queue::run() {
    queue_ref self(this); // the drain's reference
    reactor_op* batch = nullptr;
    {
        std::lock_guard lk(mutex_);
        batch = std::exchange(head_, nullptr);
        tail_ = nullptr;
    }
    // Put back what is not delivered yet (in front of what arrived meanwhile) and decide whether
    // a drain must be posted again; posted_ stays set while one must.
    auto settle = [this](reactor_op* rest) {
        std::lock_guard lk(mutex_);
        if (rest != nullptr) {
            reactor_op* last = rest;
            while (last->next_ready_ != nullptr)
                last = last->next_ready_;
            last->next_ready_ = head_;
            if (head_ == nullptr) tail_ = last;
            head_ = rest;
        }
        if (head_ != nullptr) return true;
        posted_ = false;
        return false;
    };
    if (batch != nullptr) prefetch_op(batch);
    for (std::uint32_t n = 1; batch != nullptr; ++n) {
        // A sign of life for a watcher that stands back (cheap: one relaxed add per 64 ops).
        if ((n & 63u) == 0) svc_->drain_progress_.fetch_add(1, std::memory_order_relaxed);
        reactor_op* op = batch;
        batch = op->next_ready_;
        op->next_ready_ = nullptr;
        // The op after the next one is asked for now (the next was, one handler ago, but for
        // the second of the batch): a long batch's ops are out of the cache, and a handler's
        // run hides the fetch.
        if (batch != nullptr && batch->next_ready_ != nullptr) prefetch_op(batch->next_ready_);
        const bool foreign = op->foreign_executor_; // read now: complete() consumes the op
        try {
            op->complete();
        } catch (...) {
            // A handler invoked inline threw: as Asio's own queues do, the rest stays queued for
            // a later drain and the exception leaves run() / poll().
            if (settle(batch)) {
                next_schedule_ = nullptr;
                svc_->schedule(self.release_ownership());
            } else {
                svc_->drain_ended();
            }
            throw;
        }
        // The handler went to an executor of its own (a strand, say). Where that executor runs
        // it inline (a strand's invoker through the io_context or thread_pool executor this
        // drain runs on), its execute() catches what the handler throws and keeps it until this
        // drain returns; a second one kept meanwhile would merge both into
        // asio::multiple_exceptions. Whether it threw cannot be seen from here (public API), so
        // such a completion is the drain's last: the rest is posted again below, after this
        // handler was handed over (the order holds), and a kept exception leaves run() by
        // itself, as when a handler throws out of complete(). Handlers on the I/O executor (the
        // common case) keep the batch going: no extra post.
        if (foreign) break;
    }
    // The batch's handlers may have started waits and stored or rung: scan now, on this thread
    // (what a scan finds joins the queues; ours is posted again below), rather than wake the
    // waiter for each of them.
    svc_->scan_after_drain();
    if (settle(batch)) {
        // More arrived while this batch ran, or the batch stopped after a handler with an
        // executor of its own: post again, behind what is already queued (a busy port cannot
        // hold the executor's other handlers back).
        next_schedule_ = nullptr;
        svc_->schedule(self.release_ownership());
    } else {
        svc_->drain_ended();
    }
}

GPU_ASYNC_DECL void completion_queue::abandon() noexcept {
    queue_ref self(this); // the drain's reference
    reactor_op* list = nullptr;
    {
        std::lock_guard lk(mutex_);
        list = std::exchange(head_, nullptr);
        tail_ = nullptr;
        posted_ = false;
    }
    svc_->drain_ended();
    while (list != nullptr) {
        reactor_op* op = list;
        list = op->next_ready_;
        op->next_ready_ = nullptr;
        op->destroy();
    }
}

GPU_ASYNC_DECL void completion_queue::dropped() noexcept {
    // An executor destroyed the drain unrun: the waiter posts it again (not here: an executor
    // that throws after taking the drain would bring us back here at once, without end), or,
    // after shutdown, its ops are destroyed.
    svc_->retry_later(this);
}

GPU_ASYNC_ASIO_NAMESPACE_END
} // namespace gpu_async::detail

#endif // GPU_ASYNC_IMPL_REACTOR_SERVICE_IPP
