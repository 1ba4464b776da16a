// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/device/impl/vulkan_settle.ipp: closing a line: settle, keep, leak, release.
//
#ifndef GPU_ASYNC_IMPL_VULKAN_SETTLE_IPP
#define GPU_ASYNC_IMPL_VULKAN_SETTLE_IPP

#include <gpu_async/core/wait_tuning.hpp>
#include <gpu_async/device/impl/vulkan_common.ipp>
#include <gpu_async/wait/detail/ranked_mutex.hpp>

#include <chrono>
#include <thread>

namespace gpu_async {

// --- closing and settling a line --------------------------------------------------------

namespace detail {

namespace vulkan_impl {

/// Keeps `bell` alive to the process's end (reachable: not a leak to a leak checker): a line that
/// leaked may still have a store in flight that rings it.
inline void keep_forever(std::shared_ptr<doorbell> bell) noexcept {
    static ranked_mutex mutex{lock_rank::doorbell_keep};
    static auto* kept = new std::vector<std::shared_ptr<doorbell>>(); // never destroyed
    std::lock_guard lk(mutex);
    try {
        kept->push_back(std::move(bell));
    } catch (...) {
        static_cast<void>(new (std::nothrow) std::shared_ptr<doorbell>(std::move(bell)));
    }
}

inline void sleep_for(std::uint64_t ns) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(static_cast<std::int64_t>(ns)));
}

inline std::string settle_limit_text(std::uint64_t limit) {
    return "the settle timeout (" + std::to_string(limit / 1000000) + " ms";
}

inline coded_error batches_timed_out(std::uint64_t limit) {
    return backend("closing a Vulkan line: its await_semaphore batches did not finish within " +
                   settle_limit_text(limit) + "); its memory is leaked, not freed");
}

inline coded_error store_timed_out(const vulkan_line_state& s, std::size_t i, std::uint64_t limit) {
    return backend("closing a Vulkan line: slot " + std::to_string(i) + "'s store of " +
                   std::to_string(s.sequence[i]) +
                   ", recorded into a command buffer, did not land within " +
                   settle_limit_text(limit) +
                   ": was the command buffer submitted?); its memory is leaked, not freed");
}

/// The first slot whose last store, recorded into a command buffer, has not landed (a slot's
/// stores land in order, so its last landing means every earlier one has); line_words if none.
inline std::size_t unlanded_slot(const vulkan_line_state& s) noexcept {
    for (std::size_t i = 0; i < line_words; ++i)
        if (s.way[i] == store_way::recorded && !reached(*s.line, *slot_id::at(i), s.sequence[i]))
            return i;
    return line_words;
}

/// What is left of the line's settle timeout since its close began.
inline std::uint64_t settle_left(const vulkan_line_state& s) noexcept {
    const std::uint64_t spent = detail::mono_now().ns - s.close_start;
    const std::uint64_t limit = s.settle_timeout.count();
    return spent >= limit ? 0 : limit - spent;
}

} // namespace vulkan_impl
} // namespace detail

GPU_ASYNC_DECL void vulkan_device::begin_close(detail::vulkan_line_state& s) noexcept {
    vulkan_device& dev = *s.device;
    // No health query of the line runs from here on (none may fault a retired line).
    if (s.health != nullptr) unwatch_line_health(*s.line);
    // Every reactor ends its waits on the line and stops reading it, whatever happens next.
    retire_line(*s.line);
    s.close_start = detail::mono_now().ns;
    std::lock_guard lk(dev.lines_mutex_);
    dev.lines_.erase(std::remove(dev.lines_.begin(), dev.lines_.end(), &s), dev.lines_.end());
}

GPU_ASYNC_DECL detail::vulkan_settle
vulkan_device::settle_wait(detail::vulkan_line_state& s) noexcept {
    using namespace detail::vulkan_impl;
    detail::vulkan_settle out;
    vulkan_device& dev = *s.device;
    const vulkan::device_api& a = dev.api_;
    const vulkan::device_t device = dev.handles_.device;
    const std::uint64_t limit = s.settle_timeout.count();
    try {
        // 1. The line's own batches: its timeline semaphore reaches the last value they signal.
        if (s.submitted > 0) {
            vulkan::semaphore_wait_info wait{};
            wait.semaphore_count = 1;
            wait.semaphores = &s.timeline;
            wait.values = &s.submitted;
            const vulkan::result_t r = a.wait_semaphores(device, &wait, settle_left(s));
            if (r == vulkan::timeout)
                out.fail(batches_timed_out(limit));
            else if (r != vulkan::success)
                out.fail(vulkan_loader::error("vkWaitSemaphores", r));
        }
        // 2. The stores recorded into command buffers: each slot's word reaches its last one.
        std::uint64_t nap = default_wait_tuning.settle_poll_first.ns;
        for (std::size_t i = 0; out.settled && (i = unlanded_slot(s)) != line_words;) {
            std::uint64_t value = 0;
            if (const vulkan::result_t r =
                    a.get_semaphore_counter_value(device, s.timeline, &value);
                r == vulkan::error_device_lost) {
                out.fail(vulkan_loader::error("vkGetSemaphoreCounterValue", r));
                break;
            }
            const std::uint64_t rest = settle_left(s);
            if (rest == 0) {
                out.fail(store_timed_out(s, i, limit));
                break;
            }
            sleep_for(std::min(nap, rest));
            nap = std::min<std::uint64_t>(nap * 2, default_wait_tuning.settle_poll_last.ns);
        }
        // 3. The queue's own bookkeeping of the line's batches: a driver may still touch a
        //    batch's semaphores after its signal is seen (Mesa's emulated timelines release
        //    their wait points then), so the queue drains before they go.
        if (out.settled && s.submitted > 0) {
            std::lock_guard lk(dev.queue_mutex_);
            if (const vulkan::result_t r = a.queue_wait_idle(dev.handles_.queue);
                r != vulkan::success)
                out.fail(vulkan_loader::error("vkQueueWaitIdle", r));
        }
    } catch (...) {
        // Only a message could not be made: what it was about stands.
        out.settled = false;
        if (!out.failure) out.failure = coded_error(errc::backend, {"no memory"});
    }
    return out;
}

GPU_ASYNC_DECL detail::vulkan_settle
vulkan_device::settle_poll(detail::vulkan_line_state& s) noexcept {
    using namespace detail::vulkan_impl;
    detail::vulkan_settle out;
    const vulkan_device& dev = *s.device;
    try {
        std::uint64_t value = 0;
        if (const vulkan::result_t r =
                dev.api_.get_semaphore_counter_value(dev.handles_.device, s.timeline, &value);
            r == vulkan::error_device_lost) {
            out.fail(vulkan_loader::error("vkGetSemaphoreCounterValue", r));
            return out;
        } else if (r != vulkan::success) {
            value = 0; // not known to have passed: looked at again next time
        }
        const std::size_t i = unlanded_slot(s);
        if (value >= s.submitted && i == line_words) return out;
        if (settle_left(s) > 0) {
            out.pending = true;
            return out;
        }
        const std::uint64_t limit = s.settle_timeout.count();
        out.fail(value < s.submitted ? batches_timed_out(limit) : store_timed_out(s, i, limit));
    } catch (...) {
        out.fail(coded_error(errc::backend, {"no memory"}));
    }
    return out;
}

GPU_ASYNC_DECL void vulkan_device::finish_close(detail::vulkan_line_state& s,
                                                detail::vulkan_settle& settle,
                                                bool drained) noexcept {
    using namespace detail::vulkan_impl;
    vulkan_device& dev = *s.device;
    const vulkan::device_api& a = dev.api_;
    const vulkan::device_t device = dev.handles_.device;
    // Free only what nothing may reach any more; otherwise leak it. The memory a store was ever
    // recorded for is referred to by the caller's command buffers, which may still be pending
    // after the store landed, whichever way the slot's later stores were made: the device keeps
    // it until release_closed_lines() or its end.
    if (s.bell != nullptr) s.bell->remove_device_producer(); // no store of it is to come
    if (settle.settled) {
        if (drained || s.submitted == 0)
            destroy_batch_objects(a, device, s);
        else
            dev.keep_batch_objects(s); // not drained: for the next line
        const detail::vulkan_kept_line k = take_memory_objects(s);
        bool kept = false;
        if (s.ever_recorded) {
            std::lock_guard lk(dev.lines_mutex_);
            try {
                dev.kept_.push_back(k);
                kept = true;
            } catch (...) {
                kept = true; // no room to keep it: leak it rather than free it under a command
            }
        }
        if (!kept) destroy_memory_objects(a, device, k);
    } else {
        s.leaked = true;
        // A store may still ring it: the doorbell lives to the process's end, as the line's memory.
        if (s.bell != nullptr) keep_forever(std::move(s.bell));
        std::lock_guard lk(dev.lines_mutex_);
        ++dev.leaked_lines_;
    }
    s.health.reset();
    s.line = nullptr;
    s.device = nullptr;
    if (s.closing != nullptr) { // whoever waits for the close learns how it ended
        s.closing->error_ = settle.failure;
        s.closing->done_.store(true, std::memory_order_release);
        s.closing.reset();
    }
}

GPU_ASYNC_DECL std::optional<coded_error>
vulkan_device::close_line(detail::vulkan_line_state& s) noexcept {
    if (s.line == nullptr) return std::nullopt;
    static_cast<void>(s.device->settle_closed_lines());
    begin_close(s);
    detail::vulkan_settle settle = settle_wait(s);
    finish_close(s, settle, true);
    return std::move(settle.failure);
}

GPU_ASYNC_DECL void vulkan_device::close_detached(std::unique_ptr<detail::vulkan_line_state>& owner,
                                                  std::shared_ptr<vulkan_closing> status) noexcept {
    detail::vulkan_line_state& s = *owner;
    vulkan_device& dev = *s.device;
    static_cast<void>(dev.settle_closed_lines());
    begin_close(s);
    s.closing = std::move(status);
    detail::vulkan_settle settle = settle_poll(s);
    if (!settle.pending) return finish_close(s, settle, false);
    std::list<std::unique_ptr<detail::vulkan_line_state>> node;
    try {
        node.push_back(std::move(owner));
    } catch (...) {
        // No room to hold it: settle it here, waiting, as close() does.
        settle = settle_wait(s);
        return finish_close(s, settle, true);
    }
    std::lock_guard lk(dev.lines_mutex_);
    dev.closing_.splice(dev.closing_.end(), node);
}

GPU_ASYNC_DECL std::size_t vulkan_device::settle_closed_lines() noexcept {
    std::list<std::unique_ptr<detail::vulkan_line_state>> mine;
    {
        std::lock_guard lk(lines_mutex_);
        mine.splice(mine.end(), closing_);
    }
    for (auto it = mine.begin(); it != mine.end();) {
        detail::vulkan_settle settle = settle_poll(**it);
        if (settle.pending) {
            ++it;
            continue;
        }
        finish_close(**it, settle, false);
        it = mine.erase(it);
    }
    std::lock_guard lk(lines_mutex_);
    closing_.splice(closing_.end(), mine);
    return closing_.size();
}

GPU_ASYNC_DECL std::size_t vulkan_device::closing_lines() const {
    std::lock_guard lk(lines_mutex_);
    return closing_.size();
}

GPU_ASYNC_DECL void vulkan_device::keep_batch_objects(detail::vulkan_line_state& s) noexcept {
    detail::vulkan_spare_batch b{s.timeline, s.command_pool, s.submitted, {}};
    try {
        b.buffers = s.spare;
        for (const auto& f : s.flying)
            b.buffers.push_back(f.commands); // every batch has signalled: free again
        std::lock_guard lk(lines_mutex_);
        spare_batches_.push_back(std::move(b));
    } catch (...) {
        // No room to keep them: leaked, never destroyed under the queue's bookkeeping.
    }
    s.command_pool = {};
    s.timeline = {};
    s.flying.clear();
    s.spare.clear();
}

GPU_ASYNC_DECL bool vulkan_device::take_spare_batch(detail::vulkan_line_state& s) noexcept {
    std::lock_guard lk(lines_mutex_);
    if (spare_batches_.empty()) return false;
    detail::vulkan_spare_batch& b = spare_batches_.back();
    s.timeline = b.timeline;
    s.command_pool = b.command_pool;
    s.submitted = b.submitted;
    s.spare.swap(b.buffers);
    spare_batches_.pop_back();
    return true;
}

GPU_ASYNC_DECL void vulkan_device::destroy_spare_batches() noexcept {
    std::vector<detail::vulkan_spare_batch> spare;
    {
        std::lock_guard lk(lines_mutex_);
        spare.swap(spare_batches_);
    }
    if (spare.empty()) return;
    if (!owned_) { // a device of its own has gone idle already
        std::lock_guard lk(queue_mutex_);
        if (api_.queue_wait_idle(handles_.queue) != vulkan::success) return; // leaked
    }
    for (const detail::vulkan_spare_batch& b : spare) {
        api_.destroy_command_pool(handles_.device, b.command_pool, nullptr);
        api_.destroy_semaphore(handles_.device, b.timeline, nullptr);
    }
}

GPU_ASYNC_DECL void vulkan_device::release_closed_lines() {
    static_cast<void>(settle_closed_lines());
    std::vector<detail::vulkan_kept_line> kept;
    {
        std::lock_guard lk(lines_mutex_);
        kept.swap(kept_);
    }
    for (const detail::vulkan_kept_line& k : kept)
        detail::vulkan_impl::destroy_memory_objects(api_, handles_.device, k);
}

GPU_ASYNC_DECL std::size_t vulkan_device::kept_lines() const {
    std::lock_guard lk(lines_mutex_);
    return kept_.size();
}

GPU_ASYNC_DECL std::shared_ptr<const vulkan_closing> vulkan_line::start_close() {
    auto status = std::make_shared<vulkan_closing>();
    if (state_ == nullptr || state_->line == nullptr) {
        status->done_.store(true, std::memory_order_release);
        return status;
    }
    vulkan_device::close_detached(state_, status);
    state_.reset(); // held by the device now, or freed already
    return status;
}

GPU_ASYNC_DECL std::optional<coded_error> vulkan_line::close() {
    if (state_ == nullptr) return std::nullopt;
    return vulkan_device::close_line(*state_);
}

} // namespace gpu_async

#endif // GPU_ASYNC_IMPL_VULKAN_SETTLE_IPP
