// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/core/impl/scan_engine.ipp: the scan engine's take-in (a batch's and one wait's, the
// judgement of each, the endings in hand-out order), out of the class so that its declaration
// reads as the engine's operations.
//
#ifndef GPU_ASYNC_CORE_IMPL_SCAN_ENGINE_IPP
#define GPU_ASYNC_CORE_IMPL_SCAN_ENGINE_IPP

#include <gpu_async/core/detail/scan_engine.hpp>

namespace gpu_async::detail {

inline void scan_engine::begin_take() noexcept {
    ++take_ins_;
    keys_.clear();
    const line_life_functions life_now = life();
    status_now_ = life_now.status;
    epoch_now_ = life_now.epoch != nullptr ? life_now.epoch() : 0;
}

inline void scan_engine::left(engine_wait& w, wait_end why) noexcept {
    if (engine_group* g = w.group) {
        (w.group_prev_ != nullptr ? w.group_prev_->next : g->head_) = w.next;
        if (w.next != nullptr) w.next->group_prev_ = w.group_prev_;
        w.group_prev_ = w.next = nullptr;
        --g->count_;
    }
    if (w.park_bound.ns != 0) {
        const auto b = bounds_.find(w.park_bound.ns);
        if (--b->second == 0) bounds_.erase(b);
    }
    left_unregistered(w, why);
}

inline void scan_engine::take_in_settled(engine_batch& batch, engine_list& out) noexcept {
    const std::size_t before = out.count;
    engine_wait* const tail = out.tail;
    take_in(batch, out);
    const std::size_t found = out.count - before;
    if (found == 0) return;
    recollect(out, tail, found);
    if (out.count - before > found) order(out);
}

inline void scan_engine::take_in_late(engine_batch& batch, engine_list& out) noexcept {
    engine_wait* const before = out.tail;
    const std::size_t before_count = out.count;
    take_in(batch, out);
    const std::size_t found = out.count - before_count;
    if (pass_.late_wanted == 1) {
        pass_.late = found;
        // Once more for what these completed: a second take-in may read a newer store still.
        pass_.late_wanted = found != 0 ? 2 : 0;
        recollect(out, before, found);
        return;
    }
    recollect(out, before, found);
    pass_.again = out.count - pass_.taken - pass_.collected - pass_.late;
    pass_.late_wanted = 0;
}

inline void scan_engine::judge_pending(engine_list& out) noexcept {
    // (Not a structured binding: clang 14 cannot capture one in the lambda below.)
    const line_life_functions life_now = life();
    const status_fn status = life_now.status;
    const epoch_fn epoch = life_now.epoch;
    if (status == nullptr || epoch == nullptr || table_.empty()) return;
    const std::uint64_t now = epoch(); // before judging: a later move is seen next time
    if (now == judged_pending_at_) return;
    try {
        ending_.clear();
        table_.for_each([&](const engine_wait* w) {
            const line_status st = status(w->descriptor());
            if (ends_unwatched(st, w->descriptor()))
                ending_.emplace_back(const_cast<engine_wait*>(w), st);
        });
    } catch (...) {
        ending_.clear();
        return;
    }
    judged_pending_at_ = now;
    for (const auto& [w, st] : ending_)
        remove(*w, out, st == line_status::faulted ? wait_end::faulted : wait_end::aborted);
    ending_.clear();
}

inline void scan_engine::order(engine_list& list) noexcept {
    try {
        keys_.clear();
        for (engine_wait* w = list.head; w != nullptr; w = w->next)
            keys_.push_back(key::of(w));
    } catch (...) {
        keys_.clear();
        return; // no room to order them: handed out in their runs
    }
    sort_keys();
    engine_list sorted;
    for (const key& k : keys_)
        sorted.push(k.w);
    keys_.clear();
    list = sorted;
}

inline void scan_engine::recollect(engine_list& out, engine_wait* before, std::size_t n) noexcept {
    engine_wait* w = before != nullptr ? before->next : out.head;
    for (std::size_t i = 0; i < n; ++i, w = w->next) {
        const memory_descriptor& d = w->descriptor();
        table_.collect(d.line(), d.slot(), sink(out));
    }
}

inline void scan_engine::take_one(engine_wait& w, engine_list& scanned, engine_list& out) noexcept {
    w.next = nullptr;
    // Read before the take-in's number takes its word. A wait taken in again while pending is
    // judged anew: its host's judgement was at registration.
    const std::uint64_t judged = taking_ == judgement::at_registration ? w.judged_at_ : 0;
    w.taken_in_ = take_ins_;
    w.done_at_take_in_ = false;
    const memory_descriptor& d = w.descriptor();
    if (status_now_ != nullptr && (judged == 0 || judged != epoch_now_)) {
        const line_status st = status_now_(d);
        if (st == line_status::retiring) {
            take_given_back(w, out);
            return;
        }
        if (ends_unwatched(st, d) && !retired_here(d, st)) {
            // Stale at its registration, the wait never began; stale later, its line was
            // retired while it was pending (wait_end.hpp).
            end_at_take_in(w,
                           st != line_status::stale                ? wait_end::faulted
                           : taking_ == judgement::at_registration ? wait_end::stale
                                                                   : wait_end::aborted,
                           out);
            return;
        }
    }
    try {
        // One read of the word decides both "complete now" and the wait's place in its slot
        // (and may complete other waits of the slot: the word moved far since the last scan).
        const bool kept = table_.insert(w, sink(scanned), w.deadline());
        if (!kept) {
            w.done_at_take_in_ = true;
            end_at_take_in(w, wait_end::reached, out);
            return;
        }
        if (w.park_bound.ns != 0) {
            try {
                ++bounds_[w.park_bound.ns];
            } catch (...) {
                table_.erase(w); // not left in the table to be completed a second time
                throw;
            }
        }
        w.registered_ = true;
        if (engine_group* g = w.group) {
            w.group_prev_ = nullptr;
            w.next = g->head_;
            if (g->head_ != nullptr) g->head_->group_prev_ = &w;
            g->head_ = &w;
            ++g->count_;
        }
    } catch (...) {
        // No memory for its place in the table: it ends with that error, never lost.
        left_unregistered(w, wait_end::no_memory);
        out.push(&w);
    }
}

inline void scan_engine::take_given_back(engine_wait& w, engine_list& out) noexcept {
    const line_read r = gpu_async::read_checked(w.descriptor(), status_now_);
    // pending cannot follow a retiring judgement; it ends as the rest of the slot's do.
    const wait_end why = ending_of(r, taking_).value_or(wait_end::aborted);
    if (why == wait_end::reached) w.done_at_take_in_ = true;
    end_at_take_in(w, why, out);
}

inline void scan_engine::end_at_take_in(engine_wait& w, wait_end why, engine_list& out) noexcept {
    left_unregistered(w, why);
    try {
        keys_.push_back(key::taken(&w)); // read while it is at hand
    } catch (...) {
        out.push(&w); // no room to order it: handed out as it comes
    }
}

inline void scan_engine::end_take(engine_list& scanned, engine_list& out) noexcept {
    while (scanned.head != nullptr) {
        try {
            keys_.push_back(key::taken(scanned.head));
        } catch (...) {
            break; // no room to order the rest: handed out as they come, after the ordered
        }
        scanned.pop();
    }
    if (keys_.size() > 1) {
        for (key& k : keys_)
            k.measure();
        sort_keys();
    }
    for (const key& k : keys_)
        out.push(k.w);
    keys_.clear();
    while (engine_wait* w = scanned.pop())
        out.push(w);
}

inline void scan_engine::take_batch(engine_batch& batch, engine_list& out) noexcept {
    begin_take();
    std::size_t count = batch.waits.size();
    // The overflow stack is used only once the array is full: after it, in order.
    engine_wait* fifo = nullptr;
    while (batch.overflow != nullptr) {
        engine_wait* next = batch.overflow->next;
        batch.overflow->next = fifo;
        fifo = std::exchange(batch.overflow, next);
        ++count;
    }
    engine_list scanned; // waits of the table that an insert's scan of their slot completed
    // With thousands of registrations their records are out of the cache: fetched a few
    // ahead, the reads overlap.
    constexpr std::size_t ahead = 8;
    std::vector<engine_wait*>& taken = batch.waits;
    for (std::size_t i = 0; i < taken.size(); ++i) {
        if (i + ahead < taken.size()) prefetch(taken[i + ahead]);
        take_one(*taken[i], scanned, out);
    }
    while (fifo != nullptr)
        take_one(*std::exchange(fifo, fifo->next), scanned, out);
    taken.clear();
    // Room for twice as many in this array, which the host fills next (its two batches
    // alternate); without memory, those past its room wait on the stack.
    if (taken.capacity() < 2 * count) {
        try {
            taken.reserve(2 * count);
        } catch (...) {
        }
    }
    end_take(scanned, out);
}

} // namespace gpu_async::detail

#endif // GPU_ASYNC_CORE_IMPL_SCAN_ENGINE_IPP
