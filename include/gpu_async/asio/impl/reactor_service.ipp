// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/asio/impl/reactor_service.ipp: definitions of the reactor service.
//
#ifndef GPU_ASYNC_IMPL_REACTOR_SERVICE_IPP
#define GPU_ASYNC_IMPL_REACTOR_SERVICE_IPP

#include <gpu_async/asio/detail/reactor_service.hpp>

#include <algorithm>
#include <exception>
#include <memory>
#include <utility>

namespace gpu_async::detail {
GPU_ASYNC_ASIO_NAMESPACE_BEGIN

GPU_ASYNC_DECL reactor_service::reactor_service(asio::execution_context& ctx)
    : asio::execution_context::service(ctx)
    , bell_(std::make_shared<doorbell>()) {
    // Last: from here on retirements and faults reach the service, from any thread.
    add_line_watcher(*this);
}

GPU_ASYNC_DECL reactor_service::~reactor_service() {
    // shutdown() has run (the execution context calls it before destroying services) and did
    // both; this only guards against a service destroyed some other way. No retirement reaches
    // a half-destroyed service: it leaves the line watchers first.
    remove_line_watcher(*this);
    watcher_.stop();
}

GPU_ASYNC_DECL bool reactor_service::waits_locked() const {
    return !engine_.empty() || !incoming_.empty();
}

GPU_ASYNC_DECL bool reactor_service::watcher_running() const {
    std::lock_guard lk(mutex_);
    return watcher_.joinable();
}

GPU_ASYNC_DECL void reactor_service::begin_fill(dur_ns park_bound) {
    {
        std::lock_guard lk(mutex_);
        roster_.fill_begun(park_bound); // may throw: nothing changed
    }
    // The watcher stands down: joined, so no extra thread runs while a FILL driver does;
    // start() launches none while one is active and end_fill() restarts it when waits are
    // pending.
    watcher_.stop();
}

GPU_ASYNC_DECL void reactor_service::end_fill(dur_ns park_bound) {
    {
        std::lock_guard lk(mutex_);
        // With the last one gone no waiter is present: a registration from here on starts the
        // watcher (start() reads that after its push, so one pushed after the look below sees
        // it).
        roster_.fill_ended(park_bound);
        if (roster_.needs_watcher(waits_locked())) {
            try {
                start_thread_locked();
            } catch (...) {
                // No watcher: the pending waits complete at the next run_fill or on retry at
                // the next registration. Nothing is lost.
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
        pass_locked(detail::mono_now(), list);
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
    const mono_ns from = detail::mono_now(); // the look before this park
    {
        std::lock_guard lk(mutex_);
        bound = bound_locked(detail::mono_now(), bound);
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
reactor_service::predicted_sleep_locked(mono_ns now, dur_ns bound) const {
    const deadline_plan plan = rhythm_plan();
    return park_policy::predicted_sleep(
        now, bound, waiter_.device_poll(), engine_.size(), predicting(), [&](auto&& each) {
            engine_.for_each([&](const engine_wait& w) {
                const auto& op = static_cast<const reactor_op&>(w);
                each(rhythm_.expected(op.descriptor(), op.started(), plan));
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
    remove_line_watcher(*this);
    watcher_.stop();
    ready_list list;
    completion_queue* retries = nullptr;
    {
        std::lock_guard lk(mutex_);
        roster_.shutting_down();
        engine_list out;
        engine_.take_in(take_incoming_locked(), out);
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
        completion_queue* q = std::exchange(retries, retries->next_in_list());
        q->next_in_list() = nullptr;
        q->abandon();
    }
}

GPU_ASYNC_DECL void reactor_service::notify_fork(asio::execution_context::fork_event event) {
    if (event == asio::execution_context::fork_prepare) {
        // No thread may be running across fork(): stop the watcher; it restarts lazily.
        watcher_.stop();
        return;
    }
    // Parent or child: restart the watcher when waits are pending.
    std::lock_guard lk(mutex_);
    if (roster_.needs_watcher(waits_locked())) start_thread_locked();
}

GPU_ASYNC_DECL void reactor_service::park_bound(dur_ns bound) noexcept {
    park_bound_ns_.store(bound.ns == 0 ? 1 : bound.ns, std::memory_order_relaxed);
}

GPU_ASYNC_DECL std::size_t reactor_service::pending() const {
    std::lock_guard lk(mutex_);
    std::size_t n = engine_.size();
    incoming_.for_each([&](const engine_wait*) { ++n; });
    return n;
}

GPU_ASYNC_DECL std::size_t reactor_service::pending(const reactor_port& port) const {
    std::lock_guard lk(mutex_);
    const engine_group& waits = port.queue.get()->waits();
    std::size_t n = waits.size();
    incoming_.for_each([&](const engine_wait* w) { n += w->group == &waits ? 1 : 0; });
    return n;
}

GPU_ASYNC_DECL reactor_key reactor_service::make_key(reactor_op& op) noexcept {
    op.serial(next_serial_.fetch_add(1, std::memory_order_relaxed));
    return reactor_key{op.descriptor(), &op, op.serial()};
}

GPU_ASYNC_DECL engine_batch& reactor_service::take_incoming_locked() noexcept {
    // New registrations go into the (empty) batch the engine takes in next; with none, the
    // table's size is published under the queue's lock: a registration after this take reads
    // it (0: it rings an idle waiter).
    incoming_.take(taking_, engine_.size());
    return taking_;
}

GPU_ASYNC_DECL void reactor_service::left_locked(reactor_op& op) noexcept {
    op.set_result(op.end()); // the engine decided it (a retirement since start(): aborted)
    if (op.end() == wait_end::reached) learn_locked(op);
    delivery_.leaving(op.queue());
}

GPU_ASYNC_DECL void reactor_service::finish_locked(engine_list& out, ready_list& list) noexcept {
    for (engine_wait* w = out.head; w != nullptr; w = w->next)
        left_locked(static_cast<reactor_op&>(*w));
    delivery_.finish(out, list);
    publish_size();
}

GPU_ASYNC_DECL void reactor_service::pass_locked(mono_ns now, ready_list& list) noexcept {
    // A take-in ends what it cannot register (no_memory): nothing is lost.
    engine_list out;
    engine_.take_in(take_incoming_locked(), out);
    if (!engine_.empty()) {
        // The registrations that came in during the scan's loads are taken in with it.
        engine_.begin_scan(out);
        while (engine_.wants_late_batch())
            engine_.take_in_late(take_incoming_locked(), out);
        engine_.end_scan(now, out);
    }
    finish_locked(out, list); // each op feeds the rhythm there, before scanned()
    rhythm_.scanned();
}

GPU_ASYNC_DECL void reactor_service::take_in_settled_locked(engine_list& out) noexcept {
    engine_.take_in_settled(take_incoming_locked(), out);
}

GPU_ASYNC_DECL void reactor_service::learn_locked(const reactor_op& op) noexcept {
    if (!op.started()) return; // started while nothing was predicted: no clock read
    rhythm_.learn(op.descriptor(), op.started(), detail::mono_now(), rhythm_plan());
}

GPU_ASYNC_DECL reactor_service::start_result
reactor_service::start(reactor_op* op, dur_ns bound, std::optional<mono_ns> deadline) {
    if (roster_.shut_down()) {
        // The context is being destroyed: nothing will run the handler. Destroy it (outside
        // every lock), never invoke it, as shutdown() does with pending waits.
        return start_result::dropped;
    }
    // The clock is read only for a wait with a deadline (a read per wait is a tenth of the
    // completion path's time through one thread).
    const auto now = deadline ? detail::mono_now() : mono_ns{};
    if (ends_at_start(*op, deadline, now)) return start_result::finished;
    if (!roster_.present()) {
        // Before the op is pushed: a watcher that cannot be started leaves it the caller's.
        std::lock_guard lk(mutex_);
        if (roster_.needs_watcher(true)) start_thread_locked();
    }
    op->started(predicting() ? std::optional<mono_ns>(detail::mono_now()) : std::nullopt);
    op->park_bound = bound;
    op->deadline(deadline);
    push_incoming(*op, bound, deadline, now);
    if (!roster_.present()) {
        // The last FILL driver ended between the look above and the push, finding no waits:
        // this one is registered, so a watcher must run for it.
        std::lock_guard lk(mutex_);
        if (roster_.needs_watcher(true)) {
            try {
                start_thread_locked();
            } catch (...) {
                // Registered without a watcher: the next registration or run_fill retries.
            }
        }
    }
    return start_result::registered;
}

GPU_ASYNC_DECL bool reactor_service::ends_at_start(reactor_op& op, std::optional<mono_ns> deadline,
                                                   mono_ns now) const noexcept {
    if (deadline && *deadline <= now) {
        op.set_result(wait_end::expired);
        return true;
    }
    // A descriptor of a retired line, or of a faulted slot, ends before its line is read; a
    // read counts only if the line's life did not move across it. Without the lock: the engine
    // reads only its line life, which the service never changes. (The take-in reads the word
    // again; a store between the two reads only makes the wait complete there.)
    if (const std::optional<wait_end> r = engine_.end_before_registration(op)) {
        op.set_result(*r);
        return true;
    }
    return false;
}

GPU_ASYNC_DECL void reactor_service::push_incoming(reactor_op& op, dur_ns bound,
                                                   std::optional<mono_ns> deadline,
                                                   mono_ns now) noexcept {
    // Added to the incoming registrations, without the service's lock, which a scan may be
    // holding; the waiter takes it in before its next scan (no allocation here: see
    // engine_batch). Wake the waiter when it must act on it now: it is idle (nothing was
    // pending: it sleeps up to a second), or the wait has a deadline within one park bound or a
    // bound tighter than the park bound. Otherwise it takes the wait in at its next scan, at the
    // latest one park bound away, and a store to the wait's word is seen by that scan.
    // Idle is decided in the same section as the push (registration_queue::push): a waiter that
    // found nothing published the table's size, 0, under the queue's lock as it took, so the
    // first registration after that take reads 0 and rings.
    const bool idle = incoming_.push(op);
    const bool urgent = park_policy::urgent(bound, deadline, now, park_bound());
    if (urgent) {
        urgent_.store(true, std::memory_order_seq_cst);
        delivery_.gate().wake(); // a watcher standing back for drains scans now
    }
    if (idle || urgent) bell_->ring();
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
                return op == wait.op && op->serial() == wait.serial;
            })) {
            engine_.remove(*w, out);
            found = true;
        }
        sched = settle_locked(out);
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
        ready_list list;
        finish_locked(out, list);
        // One at a time, each op finished while it is at hand: with many pending, a second walk
        // of the list would find them out of the cache.
        while (engine_wait* w = port.queue.get()->waits().front()) {
            engine_list one;
            engine_.remove(*w, one);
            finish_locked(one, list);
            ++n;
        }
        sched = completion_queue::enqueue(list);
    }
    schedule(sched);
    return n;
}

template <class End, class After>
void reactor_service::end_waits(End&& end, After&& after) noexcept {
    completion_queue* sched = nullptr;
    {
        std::lock_guard lk(mutex_);
        engine_list out;
        take_in_settled_locked(out); // those not yet taken in end as the others do
        end(out);
        sched = settle_locked(out);
        after();
    }
    // Their completions go to their executors.
    schedule(sched);
}

GPU_ASYNC_DECL void reactor_service::retire_line(const completion_line& line) noexcept {
    // Once the waits are out of the table no scan reads the line any more. Its rhythm goes
    // after they are finished: those that reached their target are learnt from as they finish.
    end_waits([&](engine_list& out) { engine_.retire_line(line, out); },
              [&] { rhythm_.forget(line); });
}

// A slot's fault or retirement acts only if the slot is, under mutex_, at the generation it
// produced: a take-in under mutex_ has seen every generation before (the side table changes
// before anyone is asked), so no wait of a later stream on the slot is in the table then; a
// slot that moved on was, or will be, ended by the later change, which visits every reactor.
GPU_ASYNC_DECL void reactor_service::fault_slot(const completion_line& line, slot_id slot,
                                                std::uint64_t generation) noexcept {
    end_waits(
        [&](engine_list& out) {
            if (slot_generation(line, slot) == generation) engine_.fault_slot(line, slot, out);
        },
        [] {});
}

GPU_ASYNC_DECL void reactor_service::retire_slot(const completion_line& line, slot_id slot,
                                                 slot_retirement r) noexcept {
    completion_queue* sched = nullptr;
    {
        std::lock_guard lk(mutex_);
        engine_list out;
        if (slot_generation(line, slot) == r.next) {
            // Still this retirement's slot: no later stream has stored into it (its stream is
            // made after a later retirement, which waits for mutex_), so the waits registered
            // before the retirement and not yet taken in have their word read.
            engine_.take_in_retiring(take_incoming_locked(), out, line, slot, r.retired);
            engine_.retire_slot(line, slot, out);
        } else {
            take_in_settled_locked(out);
        }
        sched = settle_locked(out);
    }
    schedule(sched);
}

GPU_ASYNC_DECL void reactor_service::scan_after_drain() noexcept {
    // Only when something rang since the last scan (a handler's producer, most likely) and the
    // waiter is not scanning now: the drain must never wait for the lock.
    const std::uint64_t rings = bell_->count();
    if (!park_policy::drain_scans(delivery_.rang_since_scan(rings), bell_->device_signaled()))
        return;
    std::unique_lock lk(mutex_, std::try_to_lock);
    if (!lk.owns_lock()) return;
    if (bell_->device_signaled()) bell_->take_device_signal();
    delivery_.scanned(rings);
    ready_list list;
    pass_locked(detail::mono_now(), list);
    completion_queue* sched = completion_queue::enqueue(list);
    lk.unlock();
    schedule(sched);
}

GPU_ASYNC_DECL deadline_plan reactor_service::rhythm_plan() const noexcept {
    deadline_plan plan;
    plan.margin_ns = waiter_.device_poll().ns;
    plan.min_sleep_ns = 0;
    plan.max_sleep_ns = default_wait_tuning.idle_bound.ns;
    plan.window = default_wait_tuning.rhythm_window;
    return plan;
}

GPU_ASYNC_DECL dur_ns reactor_service::bound_locked(mono_ns now, dur_ns bound) const noexcept {
    return engine_.bound(now, bound);
}

GPU_ASYNC_DECL void reactor_service::retry_later(completion_queue* q) noexcept {
    std::unique_lock lk(mutex_);
    if (roster_.shut_down()) {
        lk.unlock();
        q->abandon();
        return;
    }
    delivery_.keep_for_retry(q);
    if (roster_.needs_watcher(true)) {
        try {
            start_thread_locked();
        } catch (...) {
            // No watcher either: the next registration, poll_ready() or run_fill() retries.
        }
    }
    lk.unlock();
    bell_->ring();
}

GPU_ASYNC_DECL completion_queue* reactor_service::settle_locked(engine_list& out) noexcept {
    ready_list list;
    finish_locked(out, list);
    return completion_queue::enqueue(list);
}

GPU_ASYNC_DECL void reactor_service::schedule(completion_queue* list) noexcept {
    while (list != nullptr) {
        completion_queue* q = std::exchange(list, list->next_in_list());
        q->next_in_list() = nullptr;
        if (q->post_drain()) continue; // the drain holds the reference now
        // Posting failed: keep the queue (and its reference) for the waiter to post again.
        retry_later(q);
    }
}

GPU_ASYNC_DECL void reactor_service::deliver(reactor_op* op) noexcept {
    completion_queue* q = op->queue();
    op->next = nullptr;
    if (q->push(op, op)) {
        q->next_in_list() = nullptr;
        schedule(q);
    }
}

GPU_ASYNC_DECL std::optional<reactor_service::start_result>
reactor_service::ends_before_start(reactor_op& op, std::optional<mono_ns> deadline) noexcept {
    // start()'s looks before it registers, in its order.
    if (roster_.shut_down()) return start_result::dropped;
    const auto now = deadline ? detail::mono_now() : mono_ns{};
    if (ends_at_start(op, deadline, now)) return start_result::finished;
    return std::nullopt;
}

GPU_ASYNC_ASIO_NAMESPACE_END
} // namespace gpu_async::detail

#endif // GPU_ASYNC_IMPL_REACTOR_SERVICE_IPP
