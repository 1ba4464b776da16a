// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/device/impl/vulkan_store.ipp: a line's stores, their batches, and vulkan_source.
//
#ifndef GPU_ASYNC_IMPL_VULKAN_STORE_IPP
#define GPU_ASYNC_IMPL_VULKAN_STORE_IPP

#include <gpu_async/device/impl/vulkan_common.ipp>

namespace gpu_async {

// --- the stores ----------------------------------------------------------------------------

namespace detail::vulkan_impl {

/// Records the store of `value` into `slot`'s word behind the commands recorded so far.
inline void record_store_commands(const vulkan_device& dev, const vulkan_line_state& s,
                                  command_buffer_t cb, slot_id slot, std::uint64_t value,
                                  pipeline_t pipeline, pipeline_layout_t layout) noexcept {
    const device_api& a = dev.api();
    // After every earlier command of the queue, whose writes are made available to the host too
    // (HOST_READ: the host reads the caller's results once it sees the word).
    memory_barrier before{};
    before.src_access_mask = access_memory_write_bit;
    before.dst_access_mask =
        access_shader_read_bit | access_shader_write_bit | access_host_read_bit;
    a.cmd_pipeline_barrier(cb, pipeline_stage_all_commands_bit,
                           pipeline_stage_compute_shader_bit | pipeline_stage_host_bit, 0, 1,
                           &before, 0, nullptr, 0, nullptr);
    a.cmd_bind_pipeline(cb, pipeline_bind_point_compute, pipeline);
    a.cmd_bind_descriptor_sets(cb, pipeline_bind_point_compute, layout, 0, 1, &s.descriptor_set, 0,
                               nullptr);
    const store_args args{static_cast<std::uint32_t>(value),
                          static_cast<std::uint32_t>(value >> 32),
                          static_cast<std::uint32_t>(slot.index()), s.bell_word};
    a.cmd_push_constants(cb, layout, shader_stage_compute_bit, 0, sizeof(args), &args);
    a.cmd_dispatch(cb, 1, 1, 1);
    // The store itself, available to the host.
    memory_barrier after{};
    after.src_access_mask = access_shader_write_bit;
    after.dst_access_mask = access_host_read_bit;
    a.cmd_pipeline_barrier(cb, pipeline_stage_compute_shader_bit, pipeline_stage_host_bit, 0, 1,
                           &after, 0, nullptr, 0, nullptr);
}

/// Refuses a store made `way` on a slot whose last store was made the other way and has not
/// landed: the two could land in either order.
inline std::optional<coded_error> check_way(const vulkan_line& line, const vulkan_line_state& s,
                                            slot_id slot, store_way way) {
    const std::size_t i = slot.index();
    if (s.way[i] == store_way::none || s.way[i] == way || line.last(slot).is_complete())
        return std::nullopt;
    return backend(
        "Vulkan line slot " + std::to_string(i) + ": a store " +
        (way == store_way::recorded ? "recorded into a command buffer" : "behind a semaphore") +
        " while its last store (" + std::to_string(s.sequence[i]) + ", " +
        (s.way[i] == store_way::recorded ? "recorded into a command buffer"
                                         : "behind a semaphore") +
        ") has not landed (one order per slot; nothing was made)");
}

/// Takes back the command buffers of the batches the line's semaphore has passed, and makes room
/// for one more record of each kind: no allocation may fail once a batch is submitted.
inline std::optional<coded_error> reclaim_batches(const vulkan_device& dev, vulkan_line_state& s) {
    std::uint64_t passed = 0;
    if (const auto r = dev.api().get_semaphore_counter_value(dev.device(), s.timeline, &passed);
        r != success)
        return dev.error("vkGetSemaphoreCounterValue", r);
    try {
        for (auto it = s.flying.begin(); it != s.flying.end();) {
            if (it->value <= passed) {
                s.spare.push_back(it->commands);
                it = s.flying.erase(it);
            } else {
                ++it;
            }
        }
        s.flying.reserve(s.flying.size() + 1);
        s.spare.reserve(s.spare.size() + 1);
    } catch (...) {
        return backend("no memory for a Vulkan line's batch records");
    }
    return std::nullopt;
}

/// A command buffer for the next batch, begun: a spare one reset, else a new one of the line's
/// pool. On failure a spare one goes back to the spares (room reserved by reclaim_batches).
inline std::optional<coded_error> begin_batch(const vulkan_device& dev, vulkan_line_state& s,
                                              command_buffer_t& cb) {
    const device_api& a = dev.api();
    if (!s.spare.empty()) {
        cb = s.spare.back();
        s.spare.pop_back();
        if (const auto r = a.reset_command_buffer(cb, 0); r != success) {
            s.spare.push_back(cb);
            return dev.error("vkResetCommandBuffer", r);
        }
    } else {
        command_buffer_allocate_info alloc{};
        alloc.command_pool = s.command_pool;
        alloc.command_buffer_count = 1;
        if (const auto r = a.allocate_command_buffers(dev.device(), &alloc, &cb); r != success)
            return dev.error("vkAllocateCommandBuffers", r);
    }
    command_buffer_begin_info begin{};
    begin.flags = command_buffer_usage_one_time_submit_bit;
    if (const auto r = a.begin_command_buffer(cb, &begin); r != success) {
        s.spare.push_back(cb); // reserved by reclaim_batches
        return dev.error("vkBeginCommandBuffer", r);
    }
    return std::nullopt;
}

/// Submits `cb` on the device's queue: it waits for `semaphore` to reach `value` (every stage:
/// the store's barrier orders after it), stores, then signals the line's own semaphore at
/// `signal`.
inline result_t submit_batch(const vulkan_device& dev, const vulkan_line_state& s,
                             command_buffer_t cb, semaphore_t semaphore, std::uint64_t value,
                             std::uint64_t signal) {
    const flags_t wait_stage = pipeline_stage_all_commands_bit;
    timeline_semaphore_submit_info values{};
    values.wait_semaphore_value_count = 1;
    values.wait_semaphore_values = &value;
    values.signal_semaphore_value_count = 1;
    values.signal_semaphore_values = &signal;
    submit_info submit{};
    submit.next = &values;
    submit.wait_semaphore_count = 1;
    submit.wait_semaphores = &semaphore;
    submit.wait_dst_stage_mask = &wait_stage;
    submit.command_buffer_count = 1;
    submit.command_buffers = &cb;
    submit.signal_semaphore_count = 1;
    submit.signal_semaphores = &s.timeline;
    return dev.submit(1, &submit);
}

} // namespace detail::vulkan_impl

GPU_ASYNC_DECL result<memory_descriptor>
vulkan_line::record_store(slot_id slot, vulkan::command_buffer_t command_buffer) {
    using namespace detail::vulkan_impl;
    if (!is_open()) return backend("record_store on a closed or moved-from vulkan_line");
    if (command_buffer == nullptr) return backend("record_store was given no command buffer");
    detail::vulkan_line_state& s = *state_;
    if (auto e = check_way(*this, s, slot, store_way::recorded)) return std::move(*e);
    const std::size_t i = slot.index();
    const std::uint64_t next = s.sequence[i] + 1; // wraps modulo 2^64
    const vulkan_device& dev = *s.device;
    record_store_commands(dev, s, command_buffer, slot, next, dev.pipeline_, dev.pipeline_layout_);
    s.sequence[i] = next;
    s.way[i] = store_way::recorded;
    s.ever_recorded = true;
    return detail::vulkan_descriptor(*s.line, slot, next, s.generation);
}

GPU_ASYNC_DECL result<memory_descriptor>
vulkan_line::await_semaphore(slot_id slot, vulkan::semaphore_t semaphore, std::uint64_t value) {
    using namespace detail::vulkan_impl;
    if (!is_open()) return backend("await_semaphore on a closed or moved-from vulkan_line");
    if (semaphore == vulkan::semaphore_t{})
        return backend("await_semaphore was given no semaphore");
    detail::vulkan_line_state& s = *state_;
    if (auto e = check_way(*this, s, slot, store_way::awaited)) return std::move(*e);
    const vulkan_device& dev = *s.device;
    if (auto e = reclaim_batches(dev, s)) return std::move(*e);
    vulkan::command_buffer_t cb = nullptr;
    if (auto e = begin_batch(dev, s, cb)) return std::move(*e);
    const std::size_t i = slot.index();
    const std::uint64_t next = s.sequence[i] + 1; // wraps modulo 2^64
    record_store_commands(dev, s, cb, slot, next, dev.pipeline_, dev.pipeline_layout_);
    if (const auto r = dev.api().end_command_buffer(cb); r != vulkan::success) {
        s.spare.push_back(cb); // reserved by reclaim_batches
        return dev.error("vkEndCommandBuffer", r);
    }
    const std::uint64_t signal = s.submitted + 1;
    if (const auto r = submit_batch(dev, s, cb, semaphore, value, signal); r != vulkan::success) {
        if (r == vulkan::error_device_lost) {
            // The batch may be pending on a lost device: count it as submitted, so close()
            // never frees under it (its wait reports the loss, and the line leaks).
            s.submitted = signal;
            s.flying.push_back({cb, signal}); // reserved by reclaim_batches
        } else {
            s.spare.push_back(cb); // reserved: a failed submission changes nothing
        }
        return dev.error("vkQueueSubmit", r);
    }
    s.submitted = signal;
    s.flying.push_back({cb, signal}); // reserved by reclaim_batches
    s.sequence[i] = next;
    s.way[i] = store_way::awaited;
    return detail::vulkan_descriptor(*s.line, slot, next, s.generation);
}

// --- the source ----------------------------------------------------------------------------

GPU_ASYNC_DECL result<vulkan_source> vulkan_source::create(vulkan_line& line, slot_id slot,
                                                           vulkan::semaphore_t semaphore) {
    using detail::vulkan_impl::backend;
    if (!line.is_open()) return backend("vulkan_source on a closed or moved-from vulkan_line");
    if (semaphore == vulkan::semaphore_t{}) return backend("vulkan_source was given no semaphore");
    return vulkan_source(line, slot, semaphore);
}

GPU_ASYNC_DECL std::error_code vulkan_source::fail(const char* call, vulkan::result_t result) {
    last_error_ = vulkan_loader::error(call, result);
    return make_error_code(result == vulkan::error_device_lost ? errc::device_fault
                                                               : errc::driver_status);
}

GPU_ASYNC_DECL query_result vulkan_source::query() {
    if (!line_->is_open()) {
        last_error_ = detail::vulkan_impl::backend("a vulkan_source's line is closed");
        return query_result::failed(make_error_code(errc::backend));
    }
    const vulkan_device& dev = *line_->device();
    std::uint64_t value = 0;
    if (const auto r = dev.api().get_semaphore_counter_value(dev.device(), semaphore_, &value);
        r != vulkan::success)
        return query_result::failed(fail("vkGetSemaphoreCounterValue", r));
    return value >= target_ ? query_result::done() : query_result::pending();
}

GPU_ASYNC_DECL std::error_code vulkan_source::block() {
    if (!line_->is_open()) {
        last_error_ = detail::vulkan_impl::backend("a vulkan_source's line is closed");
        return make_error_code(errc::backend);
    }
    const vulkan_device& dev = *line_->device();
    vulkan::semaphore_wait_info wait{};
    wait.semaphore_count = 1;
    wait.semaphores = &semaphore_;
    wait.values = &target_;
    for (;;) {
        const auto r = dev.api().wait_semaphores(dev.device(), &wait,
                                                 std::numeric_limits<std::uint64_t>::max());
        if (r == vulkan::success) return {};
        if (r != vulkan::timeout) return fail("vkWaitSemaphores", r);
    }
}

GPU_ASYNC_DECL std::error_code vulkan_source::arm() {
    auto stored = line_->await_semaphore(slot_, semaphore_, target_);
    if (!stored.has_value()) {
        last_error_ = stored.error();
        return stored.error().code();
    }
    armed_ = stored.value().target();
    return {};
}

} // namespace gpu_async

#endif // GPU_ASYNC_IMPL_VULKAN_STORE_IPP
