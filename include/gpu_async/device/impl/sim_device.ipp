// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/device/impl/sim_device.ipp: definitions of the simulated device.
//
#ifndef GPU_ASYNC_IMPL_SIM_DEVICE_IPP
#define GPU_ASYNC_IMPL_SIM_DEVICE_IPP

#include <gpu_async/device/sim_device.hpp>

#include <algorithm>

namespace gpu_async {

namespace detail {

inline std::error_code sim_cancelled() noexcept {
    return std::make_error_code(std::errc::operation_canceled);
}

} // namespace detail

// ---------------------------------------------------------------------------------------------
// sim_stream

GPU_ASYNC_DECL std::error_code sim_stream::error() const {
    if (!failed_.load(std::memory_order_acquire)) return {};
    std::lock_guard<detail::ranked_mutex> lk(worker_->mutex);
    return error_;
}

GPU_ASYNC_DECL query_result sim_stream::query() const {
    const std::uint64_t t = tail();
    if (sequence_reached(word(), t)) return query_result::done();
    if (failed_.load(std::memory_order_acquire)) return query_result::failed(error());
    return query_result::pending();
}

GPU_ASYNC_DECL std::error_code sim_stream::block() {
    const std::uint64_t t = tail();
    if (device_->manual_) {
        const query_result q = query();
        if (q.is_done()) return {};
        if (q.is_failed()) return q.error;
        return make_error_code(errc::stalled);
    }
    std::unique_lock<detail::ranked_mutex> lk(worker_->mutex);
    worker_->done_cv.wait(
        lk, [&] { return sequence_reached(word(), t) || failed_.load(std::memory_order_acquire); });
    if (sequence_reached(word(), t)) return {};
    return error_;
}

GPU_ASYNC_DECL std::error_code sim_stream::arm() {
    return error();
}

GPU_ASYNC_DECL bool sim_stream::park(dur_ns bound) const {
    const std::uint64_t t = tail();
    auto ended = [&] {
        return sequence_reached(word(), t) || failed_.load(std::memory_order_acquire);
    };
    doorbell* bell = bell_.load(std::memory_order_acquire);
    if (bell != nullptr && !device_store_.load(std::memory_order_acquire))
        bell->wait(ended, bound);
    else
        word_wait::probe().park(*line_, ended, bound);
    return sequence_reached(word(), t);
}

GPU_ASYNC_DECL std::uint64_t sim_stream::push(dur_ns d, std::unique_ptr<detail::sim_work> work,
                                              std::error_code fault) {
    detail::sim_worker& w = *worker_;
    std::uint64_t seq = 0;
    bool retire = false;
    {
        std::lock_guard<detail::ranked_mutex> lk(w.mutex);
        seq = tail_.load(std::memory_order_relaxed) + 1;
        tail_.store(seq, std::memory_order_release);
        if (!w.closed) {
            if (failed_.load(std::memory_order_relaxed)) return seq; // sticky fault: never runs
            queue_.push_back(detail::sim_item{seq, d, std::move(work), fault});
            if (!device_->manual_ && !scheduled_) device_->schedule_locked(w, *this);
            return seq;
        }
        // Refused: the number is never stored. A device line's slot is retired (as for dropped
        // work: not a fault), so that no descriptor wait on the refused number hangs; but only
        // once the shutdown has stopped the workers: items accepted earlier still run (drain)
        // and complete their waits. Until then the shutdown's drop_queued() retires it.
        if (!failed_.load(std::memory_order_relaxed) && (own_line_ || shared_slot_) && !released_) {
            if (w.stop)
                retire = true;
            else
                refused_ = true;
        }
        fail_locked(detail::sim_cancelled());
    }
    // No lock of ours held; only at the generation decided on under it: a stream given back and
    // a new one made on the slot meanwhile is not retired in this one's place.
    if (retire) retire_slot(*line_, slot_, generation_);
    return seq;
}

GPU_ASYNC_DECL void sim_stream::fail_locked(std::error_code ec) {
    if (!error_) error_ = ec;
    failed_.store(true, std::memory_order_release);
    worker_->done_cv.notify_all();
}

GPU_ASYNC_DECL void sim_stream::run(detail::sim_item& item) {
    detail::expect_no_lock_held(); // the work item is the user's
    std::error_code ec = item.fault;
    if (!ec && item.work) ec = item.work->run();
    // A device line's slot may have a new stream once this one is given back (release() marks
    // it under the worker's lock): then this item's number or fault is not the slot's any more.
    if (!ec) {
        // The item's own writes happen before this release store (the default fence of
        // cuStreamWriteValue64).
        if (shared_slot_) {
            std::lock_guard<detail::ranked_mutex> lk(worker_->mutex);
            if (!released_) line_->words[slot_.index()].store(item.seq, std::memory_order_release);
        } else {
            line_->words[slot_.index()].store(item.seq, std::memory_order_release);
        }
    } else {
        bool given_back = false;
        {
            std::lock_guard<detail::ranked_mutex> lk(worker_->mutex);
            fail_locked(ec);
            queue_.clear(); // sticky: nothing behind a fault runs
            given_back = shared_slot_ && released_;
        }
        // The slot's stream will store nothing more: descriptor waits on it end with
        // device_fault now, and later ones at their start (no lock of ours held: the reactors
        // take theirs). Only at this stream's generation: if it is given back and a stream made
        // on the slot after the decision above, the fault is not the new stream's.
        if (!given_back) fault_slot(*line_, slot_, generation_);
    }
    ring();
}

GPU_ASYNC_DECL void sim_stream::set_doorbell(std::shared_ptr<doorbell> bell, sim_signal how) {
    std::lock_guard<detail::ranked_mutex> lk(worker_->mutex);
    doorbell* raw = bell.get();
    if (bell && std::find(bells_.begin(), bells_.end(), bell) == bells_.end())
        bells_.push_back(std::move(bell)); // a worker may be signalling the previous one now
    const bool device = how == sim_signal::device_store && raw != nullptr;
    if (counted_ != nullptr && (counted_ != raw || !device)) {
        counted_->remove_device_producer();
        counted_ = nullptr;
    }
    if (device && counted_ == nullptr) {
        raw->add_device_producer();
        counted_ = raw;
    }
    device_store_.store(device, std::memory_order_release);
    bell_.store(raw, std::memory_order_release);
}

GPU_ASYNC_DECL sim_stream::~sim_stream() {
    if (counted_ != nullptr) counted_->remove_device_producer(); // bells_ keeps it alive
}

GPU_ASYNC_DECL void sim_stream::ring() const noexcept {
    doorbell* bell = bell_.load(std::memory_order_acquire);
    if (bell == nullptr) return;
    if (device_store_.load(std::memory_order_acquire))
        // As a GPU's batch: the completion word was stored first (release), then this word.
        bell->line().words[doorbell::device_word].store(doorbell::device_signal,
                                                        std::memory_order_release);
    else
        bell->ring();
}

// ---------------------------------------------------------------------------------------------
// sim_stream_handle

GPU_ASYNC_DECL void detail::throw_device_gone() {
    const coded_error e(errc::device_gone, {"a sim_stream_handle"});
    throw coded_system_error(e);
}

GPU_ASYNC_DECL void detail::throw_invalid_target(std::uint64_t seq, std::uint64_t start,
                                                 std::uint64_t tail) {
    const coded_error e(errc::invalid_target,
                        {std::to_string(seq), "the simulated stream (its numbers run from " +
                                                  std::to_string(start) + " through " +
                                                  std::to_string(tail) + ")"});
    throw coded_system_error(e);
}

GPU_ASYNC_DECL void sim_stream_handle::reset() noexcept {
    sim_stream* s = std::exchange(stream_, nullptr);
    std::shared_ptr<detail::sim_life> life = std::move(life_);
    if (!s || !life) return;
    // Counted while giving back, so the device's destructor waits for a give-back in progress;
    // no lock is held across it (see sim_life).
    sim_device* device = nullptr;
    {
        std::lock_guard<detail::ranked_mutex> lk(life->mutex);
        device = life->device;
        if (device == nullptr) return;
        ++life->giving_back;
    }
    device->release(*s);
    {
        std::lock_guard<detail::ranked_mutex> lk(life->mutex);
        --life->giving_back;
    }
    life->idle.notify_all();
}

// ---------------------------------------------------------------------------------------------
// sim_device

GPU_ASYNC_DECL sim_device::sim_device(options opts)
    : manual_(opts.manual) {
    life_->device = this;
    const std::size_t n = manual_ ? 1 : std::max<std::size_t>(opts.workers, 1);
    workers_.reserve(n);
    for (std::size_t i = 0; i < n; ++i)
        workers_.push_back(std::make_unique<detail::sim_worker>());
    if (manual_) return;
    try {
        for (auto& w : workers_) {
            detail::sim_worker* wp = w.get();
            w->thread = std::thread([this, wp] { worker_loop(*wp); });
        }
    } catch (...) {
        shutdown(sim_shutdown::cancel);
        throw;
    }
}

GPU_ASYNC_DECL sim_device::~sim_device() {
    {
        // Handles dropped from now on do nothing; a give-back in progress finishes first.
        std::unique_lock<detail::ranked_mutex> lk(life_->mutex);
        life_->device = nullptr;
        life_->idle.wait(lk, [&] { return life_->giving_back == 0; });
    }
    // First every reactor ends its waits on the device's lines (operation_aborted) and stops
    // reading them, so a wait ends as aborted rather than with the cancellation below; then the
    // workers stop; then the lines' memory goes.
    for (const completion_line& line : lines_)
        retire_line(line);
    shutdown(sim_shutdown::cancel);
}

GPU_ASYNC_DECL completion_line& sim_device::make_line() {
    std::lock_guard<detail::ranked_mutex> lk(mutex_);
    completion_line& line = lines_.emplace_back();
    try {
        shared_lines_.insert(&line);
        adopt_line(line); // the device's: retired when it goes, its descriptors checked
    } catch (...) {
        shared_lines_.erase(&line);
        lines_.pop_back();
        throw;
    }
    return line;
}

GPU_ASYNC_DECL sim_stream_handle sim_device::make_stream() {
    completion_line* line = nullptr;
    {
        std::lock_guard<detail::ranked_mutex> lk(mutex_);
        if (!free_lines_.empty()) {
            // Retired already (no reactor reads it): zeroed, so the new stream starts at 0 as on
            // a fresh line.
            line = free_lines_.back();
            free_lines_.pop_back();
            for (auto& word : line->words)
                word.store(0, std::memory_order_relaxed);
        }
    }
    if (!line)
        line = &make_line();
    else
        adopt_line(*line); // a new generation: the previous stream's descriptors are stale
    return make_stream_on(*line, *slot_id::at(0), true, false);
}

GPU_ASYNC_DECL sim_stream_handle sim_device::make_stream(completion_line& line, slot_id slot) {
    bool shared = false;
    {
        std::lock_guard<detail::ranked_mutex> lk(mutex_);
        shared = shared_lines_.count(&line) != 0;
    }
    // A device line's slot begins a new generation for each stream: a fault that the slot's
    // previous stream recorded after it was given back (an item a worker was still running
    // failed) is not the new stream's.
    if (shared) retire_slot(line, slot);
    return make_stream_on(line, slot, false, shared);
}

GPU_ASYNC_DECL sim_stream_handle sim_device::make_stream_on(completion_line& line, slot_id slot,
                                                            bool own_line, bool shared_slot) {
    std::lock_guard<detail::ranked_mutex> lk(mutex_);
    detail::sim_worker& w = *workers_[next_worker_++ % workers_.size()];
    auto s = std::unique_ptr<sim_stream>(new sim_stream(*this, w, line, slot));
    s->own_line_ = own_line;
    s->shared_slot_ = shared_slot;
    s->generation_ = slot_generation(line, slot);
    s->index_ = streams_.size();
    streams_.push_back(std::move(s));
    return sim_stream_handle(life_, streams_.back().get());
}

GPU_ASYNC_DECL void sim_device::release(sim_stream& s) noexcept {
    std::deque<detail::sim_item> dropped; // callables destroyed with no lock held
    bool worker_has_it = false;
    // Read before the stream is marked released: a worker running its item frees it after.
    completion_line* const line = s.shared_slot_ ? s.line_ : nullptr;
    const slot_id slot = s.slot_;
    const std::uint64_t generation = s.generation_;
    detail::sim_worker& w = *s.worker_;
    {
        std::lock_guard<detail::ranked_mutex> lk(w.mutex);
        s.released_ = true;
        // Its tail will never be stored: wakes block(). A device line's item still running
        // stores nothing once the stream is released, so it counts as well: a plan-driven wait
        // blocked on this stream is thus woken before the retirement below waits for it.
        if (!s.queue_.empty() || (s.running_ && s.shared_slot_))
            s.fail_locked(detail::sim_cancelled());
        dropped.swap(s.queue_);
        if (s.scheduled_ && !s.running_) {
            // Waiting in the heap: take it out, so the worker never sees it again.
            w.heap.remove(&s);
            s.scheduled_ = false;
            --w.active;
        }
        worker_has_it = s.running_;
        s.retiring_ = line != nullptr;
        w.done_cv.notify_all();
    }
    dropped.clear();
    if (line != nullptr) {
        // A slot of a device line: retired now, not when the stream is freed (a worker may still
        // run its item), so that a stream made on the slot next starts after the retirement.
        // The retirement waits for callers still inside the stream (a plan-driven wait's
        // block()), so the stream is freed only after it returns: a worker that lets go of it
        // meanwhile leaves the freeing to this thread.
        retire_slot(*line, slot, generation);
        std::lock_guard<detail::ranked_mutex> lk(w.mutex);
        s.retiring_ = false;
        worker_has_it = s.running_;
    }
    if (!worker_has_it) dispose(s); // else the worker disposes of it once it lets go
}

// Called exactly once per stream: by release() when no worker holds it, else by that worker.
GPU_ASYNC_DECL void sim_device::dispose(sim_stream& s) noexcept {
    const bool own = s.own_line_;
    completion_line* line = s.line_;
    if (own) retire_line(*line); // waits on it end with operation_aborted
    std::unique_ptr<sim_stream> gone;
    {
        std::lock_guard<detail::ranked_mutex> lk(mutex_);
        const std::size_t i = s.index_;
        gone = std::move(streams_[i]);
        if (i + 1 != streams_.size()) {
            streams_[i] = std::move(streams_.back());
            streams_[i]->index_ = i;
        }
        streams_.pop_back();
        if (own) {
            try {
                free_lines_.push_back(line);
            } catch (...) {
                // kept in lines_ until the device goes; just not reused
            }
        }
    }
    // `gone` (and the doorbells it keeps) is destroyed here, with no lock held.
}

GPU_ASYNC_DECL std::size_t sim_device::stream_count() const {
    std::lock_guard<detail::ranked_mutex> lk(mutex_);
    return streams_.size();
}

GPU_ASYNC_DECL std::size_t sim_device::line_count() const {
    std::lock_guard<detail::ranked_mutex> lk(mutex_);
    return lines_.size();
}

GPU_ASYNC_DECL void sim_device::schedule_locked(detail::sim_worker& w, sim_stream& s) {
    s.scheduled_ = true;
    ++w.active;
    w.heap.push({detail::mono_now().after(s.queue_.front().duration), w.order++, &s});
    w.work_cv.notify_one();
}

GPU_ASYNC_DECL void sim_device::worker_loop(detail::sim_worker& w) {
    std::unique_lock<detail::ranked_mutex> lk(w.mutex);
    for (;;) {
        if (w.stop) return;
        if (w.heap.empty()) {
            w.work_cv.wait(lk);
            continue;
        }
        const detail::sim_worker::entry top = w.heap.top();
        if (top.due > detail::mono_now()) {
            w.work_cv.wait_until(lk, detail::steady_from(top.due));
            continue;
        }
        w.heap.pop();
        sim_stream& s = *top.stream;
        if (!s.released_ && !s.queue_.empty()) {
            {
                detail::sim_item item = std::move(s.queue_.front());
                s.queue_.pop_front();
                s.running_ = true;
                lk.unlock();
                s.run(item);
            } // the item's callable is destroyed with no lock held
            lk.lock();
            s.running_ = false;
        }
        s.scheduled_ = false;
        --w.active;
        if (s.released_) {
            // Given back while the worker held it: the worker frees it now, unless the thread
            // giving it back is still retiring its slot (that thread frees it then).
            w.done_cv.notify_all();
            if (s.retiring_) continue;
            lk.unlock();
            dispose(s);
            lk.lock();
            continue;
        }
        if (!s.queue_.empty()) schedule_locked(w, s);
        w.done_cv.notify_all();
    }
}

GPU_ASYNC_DECL bool sim_device::step(sim_stream& s) {
    if (!manual_ || s.device_ != this) return false;
    detail::sim_worker& w = *s.worker_;
    {
        detail::sim_item item;
        {
            std::lock_guard<detail::ranked_mutex> lk(w.mutex);
            if (s.queue_.empty()) return false;
            item = std::move(s.queue_.front());
            s.queue_.pop_front();
        }
        s.run(item);
    }
    std::lock_guard<detail::ranked_mutex> lk(w.mutex);
    w.done_cv.notify_all();
    return true;
}

GPU_ASYNC_DECL std::size_t sim_device::step_all() {
    if (!manual_) return 0;
    std::size_t ran = 0;
    for (bool progress = true; progress;) {
        progress = false;
        std::vector<sim_stream*> snapshot;
        {
            std::lock_guard<detail::ranked_mutex> lk(mutex_);
            for (auto& s : streams_)
                snapshot.push_back(s.get());
        }
        for (sim_stream* s : snapshot) {
            while (step(*s)) {
                ++ran;
                progress = true;
            }
        }
    }
    return ran;
}

GPU_ASYNC_DECL void sim_device::shutdown(sim_shutdown mode) {
    {
        std::lock_guard<detail::ranked_mutex> lk(mutex_);
        if (shut_) return;
        shut_ = true;
    }
    for (auto& w : workers_) {
        std::lock_guard<detail::ranked_mutex> lk(w->mutex);
        w->closed = true;
    }
    if (mode == sim_shutdown::drain) {
        if (manual_) {
            step_all();
        } else {
            for (auto& w : workers_) {
                std::unique_lock<detail::ranked_mutex> lk(w->mutex);
                w->done_cv.wait(lk, [&] { return w->active == 0; });
            }
        }
    }
    for (auto& w : workers_) {
        {
            std::lock_guard<detail::ranked_mutex> lk(w->mutex);
            w->stop = true;
        }
        w->work_cv.notify_all();
    }
    for (auto& w : workers_)
        if (w->thread.joinable()) w->thread.join();
    // The device's slots whose work was dropped are retired once no lock of ours is held: their
    // waits could never complete (a cancellation is not a fault: they end operation_aborted).
    // Each at the generation found under the locks: a slot given back and made anew meanwhile
    // is not retired in its old stream's place.
    for (const dropped_slot& d : drop_queued())
        retire_slot(*d.line, d.slot, d.generation);
}

GPU_ASYNC_DECL std::vector<sim_device::dropped_slot> sim_device::drop_queued() noexcept {
    // No worker runs any more: drop what is left; its numbers are never stored. A stream given
    // back is not ours to free: exactly one thread disposes of it, the one that gave it back or
    // the worker that held it (joined by shutdown), and the former may still be inside dispose()
    // now (an explicit shutdown takes no life lock), so it stays listed until that dispose
    // erases it.
    std::vector<dropped_slot> dropped;
    std::lock_guard<detail::ranked_mutex> lk(mutex_);
    try {
        dropped.reserve(streams_.size());
    } catch (...) {
        // Without room the waits end when the device goes (it retires its lines).
    }
    for (auto& s : streams_) {
        std::lock_guard<detail::ranked_mutex> wl(s->worker_->mutex);
        if (!s->queue_.empty() || s->refused_) {
            s->fail_locked(detail::sim_cancelled());
            s->queue_.clear();
            s->refused_ = false;
            if ((s->own_line_ || s->shared_slot_) && !s->released_ &&
                dropped.size() < dropped.capacity())
                dropped.push_back({s->line_, s->slot_, s->generation_});
        }
        s->scheduled_ = false;
    }
    for (auto& w : workers_) {
        std::lock_guard<detail::ranked_mutex> wl(w->mutex);
        w->heap = {};
        w->active = 0;
        w->done_cv.notify_all();
    }
    return dropped;
}

} // namespace gpu_async

#endif // GPU_ASYNC_IMPL_SIM_DEVICE_IPP
