// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/device/impl/vulkan_common.ipp: what the parts share: errors, a line's state, objects.
//
#ifndef GPU_ASYNC_IMPL_VULKAN_COMMON_IPP
#define GPU_ASYNC_IMPL_VULKAN_COMMON_IPP

#include <gpu_async/device/vulkan.hpp>
#include <gpu_async/line/line_health.hpp>
#include <gpu_async/line/line_life.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <list>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace gpu_async {

namespace detail::vulkan_impl {

using namespace gpu_async::vulkan;

inline coded_error unavailable(std::string what, std::string why) {
    return coded_error(errc::unavailable, {std::move(what), std::move(why)});
}

inline coded_error backend(std::string what) {
    return coded_error(errc::backend, {std::move(what)});
}

/// The store's push constants (vulkan_line_store.comp's store_args).
struct store_args {
    std::uint32_t value_lo;
    std::uint32_t value_hi;
    std::uint32_t slot;
    std::uint32_t bell; ///< the doorbell's device word in binding 1, or no_bell
};

/// store_args::bell of a line without a doorbell (the shader's no_bell).
inline constexpr std::uint32_t no_bell = 0xffffffffu;

/// How a slot's last store was made: its order against a store made the other way is unknown.
enum class store_way : std::uint8_t { none, recorded, awaited };

/// A line's health query: vkGetSemaphoreCounterValue on the line's own timeline semaphore (never
/// blocks); VK_ERROR_DEVICE_LOST faults every slot, once. Holds nothing that changes while it is
/// registered, so it may run on any thread.
class vulkan_line_health final : public line_health {
public:
    vulkan_line_health(const device_api& api, device_t device, semaphore_t timeline) noexcept
        : api_(&api)
        , device_(device)
        , timeline_(timeline) {}

    void query(const completion_line& line) noexcept override {
        if (faulted_.load(std::memory_order_acquire)) return; // sticky: told once
        std::uint64_t value = 0;
        if (api_->get_semaphore_counter_value(device_, timeline_, &value) != error_device_lost)
            return;
        faulted_.store(true, std::memory_order_release);
        // The whole device is lost: every store into the line's slots is of it.
        for (std::size_t i = 0; i < line_words; ++i)
            fault_slot(line, *slot_id::at(i));
    }

private:
    const device_api* api_;
    device_t device_;
    semaphore_t timeline_;
    std::atomic<bool> faulted_{false};
};

/// One await_semaphore batch's command buffer and the value its batch signals on the line's
/// timeline semaphore: reusable once the semaphore has reached it.
struct in_flight {
    command_buffer_t commands;
    std::uint64_t value;
};

} // namespace detail::vulkan_impl

namespace detail {

/// How far a closing line's settle went: `pending` while a store may still land; otherwise
/// `settled` (nothing may reach the line any more) or not (its failure says why).
struct vulkan_settle {
    bool settled = true;
    bool pending = false;
    std::optional<coded_error> failure;

    void fail(coded_error e) noexcept {
        settled = false;
        failure = std::move(e);
    }
};

/// A line's objects and records, on the heap: the line object moves, its device keeps its
/// address (to close it), and so does its health query.
struct vulkan_line_state {
    vulkan_device* device = nullptr;
    vulkan::buffer_t buffer{};
    vulkan::device_memory_t memory{};
    vulkan::descriptor_pool_t descriptor_pool{};
    vulkan::descriptor_set_t descriptor_set{}; ///< the set the next store binds
    vulkan::semaphore_t timeline{};
    vulkan::command_pool_t command_pool{};
    void* mapped = nullptr;
    completion_line* line = nullptr; ///< null once closed
    std::uint64_t generation = 0;
    std::array<std::uint64_t, line_words> sequence{};
    std::array<vulkan_impl::store_way, line_words> way{};
    /// A store was recorded into a caller's command buffer at some time (sticky): the caller's
    /// command buffers may refer to the memory after a slot's later stores are made otherwise.
    bool ever_recorded = false;
    std::uint64_t close_start = 0; ///< when its close began (mono_now): its settle timeout's start
    std::shared_ptr<vulkan_closing> closing; ///< told how a close without blocking ended
    std::uint64_t submitted = 0;             ///< the value the last batch signals on `timeline`
    std::vector<vulkan_impl::in_flight> flying;
    std::vector<vulkan::command_buffer_t> spare;
    std::unique_ptr<vulkan_impl::vulkan_line_health> health;
    dur_ns settle_timeout{};
    bool leaked = false;
    /// The attached doorbell, its imported page(s), and the index of its device word there.
    std::shared_ptr<doorbell> bell;
    vulkan::buffer_t bell_buffer{};
    vulkan::device_memory_t bell_memory{};
    std::uint32_t bell_word = vulkan_impl::no_bell;
};

namespace vulkan_impl {

/// Destroys the objects of the line's batches (each only if made): with none of its batches
/// pending, nor the queue's bookkeeping of them (see vulkan_device::close_line).
inline void destroy_batch_objects(const device_api& a, device_t dev,
                                  vulkan_line_state& s) noexcept {
    // Destroying the pool frees its command buffers.
    if (s.command_pool != command_pool_t{}) a.destroy_command_pool(dev, s.command_pool, nullptr);
    if (s.timeline != semaphore_t{}) a.destroy_semaphore(dev, s.timeline, nullptr);
    s.command_pool = {};
    s.timeline = {};
    s.flying.clear();
    s.spare.clear();
}

/// Destroys a line's memory, buffer and descriptor pool (each only if made), in reverse order:
/// with no command buffer that refers to them pending.
inline void destroy_memory_objects(const device_api& a, device_t dev,
                                   const vulkan_kept_line& k) noexcept {
    // Destroying the descriptor pool frees the line's set.
    if (k.descriptor_pool != descriptor_pool_t{})
        a.destroy_descriptor_pool(dev, k.descriptor_pool, nullptr);
    if (k.mapped) a.unmap_memory(dev, k.memory);
    if (k.buffer != buffer_t{}) a.destroy_buffer(dev, k.buffer, nullptr);
    if (k.memory != device_memory_t{}) a.free_memory(dev, k.memory, nullptr);
    if (k.bell_buffer != buffer_t{}) a.destroy_buffer(dev, k.bell_buffer, nullptr);
    if (k.bell_memory != device_memory_t{}) a.free_memory(dev, k.bell_memory, nullptr);
}

/// The memory objects of `s`, handed over (cleared in `s`).
inline vulkan_kept_line take_memory_objects(vulkan_line_state& s) noexcept {
    vulkan_kept_line k{s.descriptor_pool, s.buffer,      s.memory,         s.mapped != nullptr,
                       s.bell_buffer,     s.bell_memory, std::move(s.bell)};
    s.bell.reset();
    s.bell_buffer = {};
    s.bell_memory = {};
    s.bell_word = no_bell;
    s.descriptor_pool = {};
    s.descriptor_set = {};
    s.buffer = {};
    s.memory = {};
    s.mapped = nullptr;
    return k;
}

/// Everything `s` made, destroyed (line creation's unwinding: nothing was submitted yet).
inline void destroy_line_objects(const device_api& a, device_t dev, vulkan_line_state& s) noexcept {
    destroy_batch_objects(a, dev, s);
    destroy_memory_objects(a, dev, take_memory_objects(s));
}

} // namespace vulkan_impl

} // namespace detail

} // namespace gpu_async

#endif // GPU_ASYNC_IMPL_VULKAN_COMMON_IPP
