// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/asio/impl/completion_queue.ipp: definitions of the completion queue.
//
#ifndef GPU_ASYNC_IMPL_COMPLETION_QUEUE_IPP
#define GPU_ASYNC_IMPL_COMPLETION_QUEUE_IPP

#include <gpu_async/asio/detail/completion_queue.hpp>
#include <gpu_async/asio/detail/reactor_service.hpp>

#include <utility>

namespace gpu_async::detail {
GPU_ASYNC_ASIO_NAMESPACE_BEGIN

GPU_ASYNC_DECL completion_queue* completion_queue::enqueue(ready_list& list) noexcept {
    completion_queue* sched = nullptr;
    completion_queue** tail = &sched;
    if (list.head() != nullptr && !list.mixed) {
        // One queue (a single port's waits: the common case), pushed whole.
        completion_queue* q = list.queue;
        if (q->push(list.head(), list.tail())) {
            q->next_schedule_ = nullptr;
            sched = q;
        }
        return sched;
    }
    reactor_op* op = list.head();
    while (op != nullptr) {
        // One push per run of consecutive ops of one queue (usually the whole list).
        completion_queue* q = op->queue();
        reactor_op* last = op;
        while (last->next != nullptr && last->next_op()->queue() == q)
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

GPU_ASYNC_DECL bool completion_queue::push(reactor_op* head, reactor_op* tail) noexcept {
    std::lock_guard lk(mutex_);
    if (tail_ != nullptr)
        tail_->next = head;
    else
        head_ = head;
    tail_ = tail;
    if (posted_) return false;
    posted_ = true;
    svc_->deliveries().gate().drain_out();
    add_ref(); // the drain's
    return true;
}

GPU_ASYNC_DECL bool completion_queue::put_back(reactor_op* rest) noexcept {
    std::lock_guard lk(mutex_);
    if (rest != nullptr) {
        reactor_op* last = rest;
        while (last->next != nullptr)
            last = last->next_op();
        last->next = head_;
        if (head_ == nullptr) tail_ = last;
        head_ = rest;
    }
    if (head_ != nullptr) return true;
    posted_ = false;
    return false;
}

GPU_ASYNC_DECL void completion_queue::run() {
    queue_ref self(this); // the drain's reference
    reactor_op* batch = nullptr;
    {
        std::lock_guard lk(mutex_);
        batch = std::exchange(head_, nullptr);
        tail_ = nullptr;
    }
    if (batch != nullptr) prefetch_op(batch);
    for (std::uint32_t n = 1; batch != nullptr; ++n) {
        // A sign of life for a watcher that stands back (cheap: one relaxed add per 64 ops).
        if ((n & 63u) == 0) svc_->deliveries().progressed(false);
        reactor_op* op = batch;
        batch = op->next_op();
        op->next = nullptr;
        // The op after the next one is asked for now (the next was, one handler ago, but for
        // the second of the batch): a long batch's ops are out of the cache, and a handler's
        // run hides the fetch.
        if (batch != nullptr && batch->next != nullptr) prefetch_op(batch->next_op());
        const bool foreign = op->foreign_executor(); // read now: complete() consumes the op
        try {
            expect_no_lock_held();
            op->complete();
        } catch (...) {
            // A handler invoked inline threw: as Asio's own queues do, the rest stays queued for
            // a later drain and the exception leaves run() / poll().
            if (put_back(batch)) {
                next_schedule_ = nullptr;
                svc_->schedule(self.release_ownership());
            } else {
                svc_->deliveries().gate().drain_ended();
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
    if (put_back(batch)) {
        // More arrived while this batch ran, or the batch stopped after a handler with an
        // executor of its own: post again, behind what is already queued (a busy port cannot
        // hold the executor's other handlers back).
        next_schedule_ = nullptr;
        svc_->schedule(self.release_ownership());
    } else {
        svc_->deliveries().gate().drain_ended();
    }
}

GPU_ASYNC_DECL void completion_queue::work_started() {
    std::size_t n = ops_.load(std::memory_order_relaxed);
    while (n != 0)
        if (ops_.compare_exchange_weak(n, n + 1, std::memory_order_relaxed)) return;
    // From 0: a hold first (may throw: nothing counted), then the count. Another start that
    // moved the count from 0 meanwhile holds the work for this op too, so ours goes again; a last
    // op's work_finished() that races this lets go of the hold of its own start, not ours.
    work_(this, true);
    if (ops_.fetch_add(1, std::memory_order_acq_rel) != 0) work_(this, false);
}

GPU_ASYNC_DECL void completion_queue::work_finished() noexcept {
    std::size_t n = ops_.load(std::memory_order_relaxed);
    while (n > 1)
        if (ops_.compare_exchange_weak(n, n - 1, std::memory_order_relaxed)) return;
    if (ops_.fetch_sub(1, std::memory_order_acq_rel) == 1) work_(this, false);
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
    svc_->deliveries().gate().drain_ended();
    while (list != nullptr) {
        reactor_op* op = list;
        list = op->next_op();
        op->next = nullptr;
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

#endif // GPU_ASYNC_IMPL_COMPLETION_QUEUE_IPP
