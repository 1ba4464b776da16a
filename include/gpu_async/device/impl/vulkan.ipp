// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/device/impl/vulkan.ipp: definitions of the Vulkan backend.
//
#ifndef GPU_ASYNC_IMPL_VULKAN_IPP
#define GPU_ASYNC_IMPL_VULKAN_IPP

#include <gpu_async/device/vulkan.hpp>
#include <gpu_async/wait/detail/ranked_mutex.hpp>

#include <gpu_async/device/detail/dynamic_library.hpp>
#include <gpu_async/device/detail/vulkan_line_store_spirv.hpp>
#include <gpu_async/line/line_health.hpp>
#include <gpu_async/line/line_life.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <list>
#include <new>
#include <string>
#include <thread>
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

inline void append(std::string& list, const char* name) {
    if (!list.empty()) list += ", ";
    list += name;
}

/// The device name of `p` (deviceName, NUL-terminated within its array).
inline std::string device_name(const physical_device_properties& p) {
    const char* end = std::find(p.device_name, p.device_name + sizeof(p.device_name), '\0');
    return std::string(p.device_name, end);
}

inline std::string version_text(std::uint32_t v) {
    return std::to_string(version_major(v)) + "." + std::to_string(version_minor(v));
}

/// Takes the entry point `name` through `get` into `fn`; names it in `missing` when absent.
template <class Fn, class Get>
void take(Fn& fn, Get get, const char* name, std::string& missing) {
    const void_function_t p = get(name);
    if (p != nullptr)
        fn = reinterpret_cast<Fn>(p);
    else
        append(missing, name);
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

/// Makes a line's batch objects: its own timeline semaphore, which its batches signal in order,
/// and their command pool, on the device's queue family. Whatever it made stays in `s`.
inline std::optional<coded_error> make_batch_objects(const vulkan_device& device,
                                                     vulkan_line_state& s) {
    const device_api& a = device.api();
    const device_t dev = device.device();
    semaphore_type_create_info type_info{};
    type_info.semaphore_type = semaphore_type_timeline;
    semaphore_create_info semaphore_info{};
    semaphore_info.next = &type_info;
    if (const auto r = a.create_semaphore(dev, &semaphore_info, nullptr, &s.timeline);
        r != success) {
        s.timeline = {};
        return device.error("vkCreateSemaphore", r);
    }
    command_pool_create_info command_info{};
    command_info.flags =
        command_pool_create_reset_command_buffer_bit | command_pool_create_transient_bit;
    command_info.queue_family_index = device.queue_family();
    if (const auto r = a.create_command_pool(dev, &command_info, nullptr, &s.command_pool);
        r != success) {
        s.command_pool = {};
        return device.error("vkCreateCommandPool", r);
    }
    return std::nullopt;
}

/// The memory type for a line: host-visible and coherent among `bits`; system memory the host
/// reads through its caches first (HOST_CACHED, not DEVICE_LOCAL: polling a word of device
/// memory over the bus is slow, and a monitor cannot watch uncached memory), then any
/// host-visible coherent type that is not device-local, then any. -1 when none.
inline int line_memory_type(const physical_device_memory_properties& m, std::uint32_t bits) {
    const flags_t need = memory_property_host_visible_bit | memory_property_host_coherent_bit;
    int best = -1;
    int best_rank = -1;
    for (std::uint32_t i = 0; i < m.memory_type_count && i < max_memory_types; ++i) {
        const flags_t f = m.memory_types[i].property_flags;
        if ((bits & (1u << i)) == 0 || (f & need) != need) continue;
        const bool cached = (f & memory_property_host_cached_bit) != 0;
        const bool local = (f & memory_property_device_local_bit) != 0;
        const int rank = (cached && !local) ? 2 : !local ? 1 : 0;
        if (rank > best_rank) {
            best = static_cast<int>(i);
            best_rank = rank;
        }
    }
    return best;
}

} // namespace vulkan_impl

} // namespace detail

// --- the loader ----------------------------------------------------------------------------

GPU_ASYNC_DECL result<std::unique_ptr<vulkan_loader>>
vulkan_loader::from_resolver(vulkan::get_instance_proc_addr_fn get_instance_proc_addr) {
    using namespace detail::vulkan_impl;
    if (get_instance_proc_addr == nullptr)
        return unavailable("vkGetInstanceProcAddr", "no resolver was given");
    std::unique_ptr<vulkan_loader> l(new vulkan_loader());
    l->api_.get_instance_proc_addr = get_instance_proc_addr;
    auto get = [&](const char* name) { return get_instance_proc_addr(nullptr, name); };
    std::string missing;
    take(l->api_.create_instance, get, "vkCreateInstance", missing);
    if (!missing.empty())
        return unavailable("the Vulkan loader's " + missing,
                           "vkGetInstanceProcAddr returned no such entry point");
    std::string optional_missing; // vkEnumerateInstanceVersion: a Vulkan 1.0 loader lacks it
    take(l->api_.enumerate_instance_version, get, "vkEnumerateInstanceVersion", optional_missing);
    l->version_ = 1u << 22; // 1.0
    if (l->api_.enumerate_instance_version != nullptr) {
        std::uint32_t v = 0;
        if (l->api_.enumerate_instance_version(&v) == vulkan::success) l->version_ = v;
    }
    return l;
}

GPU_ASYNC_DECL result<std::unique_ptr<vulkan_loader>>
vulkan_loader::load_library(const char* name) {
    using detail::vulkan_impl::unavailable;
    std::string why;
    void* handle = detail::open_library(name, why);
    if (handle == nullptr)
        return unavailable(std::string("the Vulkan loader (") + name + ")",
                           why + "; is libvulkan1 installed?");
    void* sym = detail::library_symbol(handle, "vkGetInstanceProcAddr");
    if (sym == nullptr)
        return unavailable(std::string("vkGetInstanceProcAddr in ") + name,
                           "the library has no such symbol (it is not a Vulkan loader)");
    return from_resolver(reinterpret_cast<vulkan::get_instance_proc_addr_fn>(sym));
}

GPU_ASYNC_DECL result<const vulkan_loader*> vulkan_loader::load() {
    static const result<std::unique_ptr<vulkan_loader>> loaded = load_library(library_name);
    if (!loaded.has_value()) return loaded.error();
    return static_cast<const vulkan_loader*>(loaded.value().get());
}

GPU_ASYNC_DECL std::string vulkan_loader::result_name(vulkan::result_t result) {
    switch (result) {
    case vulkan::success:
        return "VK_SUCCESS";
    case vulkan::not_ready:
        return "VK_NOT_READY";
    case vulkan::timeout:
        return "VK_TIMEOUT";
    case vulkan::incomplete:
        return "VK_INCOMPLETE";
    case vulkan::error_out_of_host_memory:
        return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case vulkan::error_out_of_device_memory:
        return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case vulkan::error_initialization_failed:
        return "VK_ERROR_INITIALIZATION_FAILED";
    case vulkan::error_device_lost:
        return "VK_ERROR_DEVICE_LOST";
    case vulkan::error_memory_map_failed:
        return "VK_ERROR_MEMORY_MAP_FAILED";
    case vulkan::error_layer_not_present:
        return "VK_ERROR_LAYER_NOT_PRESENT";
    case vulkan::error_extension_not_present:
        return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case vulkan::error_feature_not_present:
        return "VK_ERROR_FEATURE_NOT_PRESENT";
    case vulkan::error_incompatible_driver:
        return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case vulkan::error_too_many_objects:
        return "VK_ERROR_TOO_MANY_OBJECTS";
    case vulkan::error_format_not_supported:
        return "VK_ERROR_FORMAT_NOT_SUPPORTED";
    case vulkan::error_fragmented_pool:
        return "VK_ERROR_FRAGMENTED_POOL";
    case vulkan::error_unknown:
        return "VK_ERROR_UNKNOWN";
    case vulkan::error_out_of_pool_memory:
        return "VK_ERROR_OUT_OF_POOL_MEMORY";
    default:
        return "VK_RESULT_" + std::to_string(result);
    }
}

GPU_ASYNC_DECL coded_error vulkan_loader::error(const char* call, vulkan::result_t result) {
    return coded_error(errc::driver_status,
                       {std::string(call), result_name(result), std::to_string(result)});
}

// --- the device ----------------------------------------------------------------------------

GPU_ASYNC_DECL std::optional<coded_error> vulkan_device::resolve_instance() {
    using namespace detail::vulkan_impl;
    const auto gipa = loader_->api().get_instance_proc_addr;
    const vulkan::instance_t instance = handles_.instance;
    auto get = [&](const char* name) { return gipa(instance, name); };
    std::string missing;
    auto& a = instance_api_;
    take(a.destroy_instance, get, "vkDestroyInstance", missing);
    take(a.enumerate_physical_devices, get, "vkEnumeratePhysicalDevices", missing);
    take(a.get_physical_device_properties, get, "vkGetPhysicalDeviceProperties", missing);
    take(a.get_physical_device_queue_family_properties, get,
         "vkGetPhysicalDeviceQueueFamilyProperties", missing);
    take(a.get_physical_device_memory_properties, get, "vkGetPhysicalDeviceMemoryProperties",
         missing);
    take(a.get_physical_device_features2, get, "vkGetPhysicalDeviceFeatures2", missing);
    take(a.create_device, get, "vkCreateDevice", missing);
    take(a.get_device_proc_addr, get, "vkGetDeviceProcAddr", missing);
    if (!missing.empty())
        return unavailable("the Vulkan instance's entry point(s) " + missing,
                           "vkGetInstanceProcAddr returned none (an instance of Vulkan 1.0?)");
    // Only the doorbell needs these: without them lines take none.
    std::string optional_missing;
    take(a.get_physical_device_properties2, get, "vkGetPhysicalDeviceProperties2",
         optional_missing);
    take(a.enumerate_device_extension_properties, get, "vkEnumerateDeviceExtensionProperties",
         optional_missing);
    return std::nullopt;
}

GPU_ASYNC_DECL std::optional<coded_error> vulkan_device::check_physical_device() const {
    using namespace detail::vulkan_impl;
    const auto& ia = instance_api_;
    const vulkan::physical_device_t pd = handles_.physical_device;
    vulkan::physical_device_properties props{};
    ia.get_physical_device_properties(pd, &props);
    const std::string who = "Vulkan device '" + device_name(props) + "'";
    if (props.api_version < vulkan::api_version_1_2)
        return unavailable(who, "it offers Vulkan " + version_text(props.api_version) +
                                    "; the backend needs 1.2");
    vulkan::physical_device_timeline_semaphore_features timeline{};
    vulkan::physical_device_shader_atomic_int64_features atomics{};
    atomics.next = &timeline;
    vulkan::physical_device_features2 features{};
    features.next = &atomics;
    ia.get_physical_device_features2(pd, &features);
    std::string lacks;
    if (features.features.values[vulkan::physical_device_features::shader_int64_index] == 0)
        append(lacks, "shaderInt64");
    if (atomics.shader_buffer_int64_atomics == 0) append(lacks, "shaderBufferInt64Atomics");
    if (timeline.timeline_semaphore == 0) append(lacks, "timelineSemaphore");
    if (!lacks.empty())
        return unavailable(who, "it lacks the feature(s) " + lacks +
                                    " (the store is a 64-bit atomic; waits are on timeline "
                                    "semaphores)");
    std::uint32_t count = 0;
    ia.get_physical_device_queue_family_properties(pd, &count, nullptr);
    std::vector<vulkan::queue_family_properties> families(count);
    ia.get_physical_device_queue_family_properties(pd, &count, families.data());
    if (handles_.queue_family >= count ||
        (families[handles_.queue_family].queue_flags & vulkan::queue_compute_bit) == 0)
        return unavailable(who, "its queue family " + std::to_string(handles_.queue_family) +
                                    " has no compute");
    return std::nullopt;
}

GPU_ASYNC_DECL std::optional<coded_error> vulkan_device::resolve_device() {
    using namespace detail::vulkan_impl;
    const auto gdpa = instance_api_.get_device_proc_addr;
    const vulkan::device_t device = handles_.device;
    auto get = [&](const char* name) { return gdpa(device, name); };
    std::string missing;
    auto& a = api_;
    take(a.destroy_device, get, "vkDestroyDevice", missing);
    take(a.get_device_queue, get, "vkGetDeviceQueue", missing);
    take(a.device_wait_idle, get, "vkDeviceWaitIdle", missing);
    take(a.queue_submit, get, "vkQueueSubmit", missing);
    take(a.queue_wait_idle, get, "vkQueueWaitIdle", missing);
    take(a.create_buffer, get, "vkCreateBuffer", missing);
    take(a.destroy_buffer, get, "vkDestroyBuffer", missing);
    take(a.get_buffer_memory_requirements, get, "vkGetBufferMemoryRequirements", missing);
    take(a.allocate_memory, get, "vkAllocateMemory", missing);
    take(a.free_memory, get, "vkFreeMemory", missing);
    take(a.bind_buffer_memory, get, "vkBindBufferMemory", missing);
    take(a.map_memory, get, "vkMapMemory", missing);
    take(a.unmap_memory, get, "vkUnmapMemory", missing);
    take(a.create_shader_module, get, "vkCreateShaderModule", missing);
    take(a.destroy_shader_module, get, "vkDestroyShaderModule", missing);
    take(a.create_descriptor_set_layout, get, "vkCreateDescriptorSetLayout", missing);
    take(a.destroy_descriptor_set_layout, get, "vkDestroyDescriptorSetLayout", missing);
    take(a.create_pipeline_layout, get, "vkCreatePipelineLayout", missing);
    take(a.destroy_pipeline_layout, get, "vkDestroyPipelineLayout", missing);
    take(a.create_compute_pipelines, get, "vkCreateComputePipelines", missing);
    take(a.destroy_pipeline, get, "vkDestroyPipeline", missing);
    take(a.create_descriptor_pool, get, "vkCreateDescriptorPool", missing);
    take(a.destroy_descriptor_pool, get, "vkDestroyDescriptorPool", missing);
    take(a.allocate_descriptor_sets, get, "vkAllocateDescriptorSets", missing);
    take(a.update_descriptor_sets, get, "vkUpdateDescriptorSets", missing);
    take(a.create_command_pool, get, "vkCreateCommandPool", missing);
    take(a.destroy_command_pool, get, "vkDestroyCommandPool", missing);
    take(a.allocate_command_buffers, get, "vkAllocateCommandBuffers", missing);
    take(a.free_command_buffers, get, "vkFreeCommandBuffers", missing);
    take(a.reset_command_buffer, get, "vkResetCommandBuffer", missing);
    take(a.begin_command_buffer, get, "vkBeginCommandBuffer", missing);
    take(a.end_command_buffer, get, "vkEndCommandBuffer", missing);
    take(a.cmd_pipeline_barrier, get, "vkCmdPipelineBarrier", missing);
    take(a.cmd_bind_pipeline, get, "vkCmdBindPipeline", missing);
    take(a.cmd_bind_descriptor_sets, get, "vkCmdBindDescriptorSets", missing);
    take(a.cmd_push_constants, get, "vkCmdPushConstants", missing);
    take(a.cmd_dispatch, get, "vkCmdDispatch", missing);
    take(a.create_semaphore, get, "vkCreateSemaphore", missing);
    take(a.destroy_semaphore, get, "vkDestroySemaphore", missing);
    take(a.get_semaphore_counter_value, get, "vkGetSemaphoreCounterValue", missing);
    take(a.wait_semaphores, get, "vkWaitSemaphores", missing);
    take(a.signal_semaphore, get, "vkSignalSemaphore", missing);
    if (!missing.empty())
        return unavailable("the Vulkan device's entry point(s) " + missing,
                           "vkGetDeviceProcAddr returned none (an instance or device of an API "
                           "version below 1.2?)");
    // Null unless VK_EXT_external_memory_host is enabled: then lines take no doorbell.
    std::string optional_missing;
    take(a.get_memory_host_pointer_properties, get, "vkGetMemoryHostPointerPropertiesEXT",
         optional_missing);
    return std::nullopt;
}

GPU_ASYNC_DECL std::optional<coded_error> vulkan_device::make_pipeline() {
    const auto& a = api_;
    const vulkan::device_t dev = handles_.device;
    // Binding 0: the line; binding 1: the doorbell's imported page(s) (the line again without).
    std::array<vulkan::descriptor_set_layout_binding, 2> bindings{};
    for (std::uint32_t i = 0; i < bindings.size(); ++i) {
        bindings[i].binding = i;
        bindings[i].descriptor_type = vulkan::descriptor_type_storage_buffer;
        bindings[i].descriptor_count = 1;
        bindings[i].stage_flags = vulkan::shader_stage_compute_bit;
    }
    vulkan::descriptor_set_layout_create_info set_info{};
    set_info.binding_count = static_cast<std::uint32_t>(bindings.size());
    set_info.bindings = bindings.data();
    if (const auto r = a.create_descriptor_set_layout(dev, &set_info, nullptr, &set_layout_);
        r != vulkan::success)
        return error("vkCreateDescriptorSetLayout", r);

    vulkan::push_constant_range range{};
    range.stage_flags = vulkan::shader_stage_compute_bit;
    range.size = sizeof(detail::vulkan_impl::store_args);
    vulkan::pipeline_layout_create_info layout_info{};
    layout_info.set_layout_count = 1;
    layout_info.set_layouts = &set_layout_;
    layout_info.push_constant_range_count = 1;
    layout_info.push_constant_ranges = &range;
    if (const auto r = a.create_pipeline_layout(dev, &layout_info, nullptr, &pipeline_layout_);
        r != vulkan::success)
        return error("vkCreatePipelineLayout", r);

    vulkan::shader_module_create_info shader_info{};
    shader_info.code_size = sizeof(detail::vulkan_line_store_spirv);
    shader_info.code = detail::vulkan_line_store_spirv;
    if (const auto r = a.create_shader_module(dev, &shader_info, nullptr, &shader_);
        r != vulkan::success)
        return error("vkCreateShaderModule", r);

    vulkan::compute_pipeline_create_info pipeline_info{};
    pipeline_info.stage.stage = vulkan::shader_stage_compute_bit;
    pipeline_info.stage.module = shader_;
    pipeline_info.stage.name = "main";
    pipeline_info.layout = pipeline_layout_;
    if (const auto r = a.create_compute_pipelines(dev, {}, 1, &pipeline_info, nullptr, &pipeline_);
        r != vulkan::success)
        return error("vkCreateComputePipelines", r);
    return std::nullopt;
}

GPU_ASYNC_DECL bool vulkan_device::has_extension(vulkan::physical_device_t pd, const char* name,
                                                 std::string& why) const {
    const auto enumerate = instance_api_.enumerate_device_extension_properties;
    if (enumerate == nullptr) {
        why = "the instance lacks vkEnumerateDeviceExtensionProperties";
        return false;
    }
    auto failed = [&](vulkan::result_t r) {
        why = "vkEnumerateDeviceExtensionProperties failed with " + vulkan_loader::result_name(r) +
              " (" + std::to_string(r) + ")";
        return false;
    };
    std::uint32_t count = 0;
    if (const auto r = enumerate(pd, nullptr, &count, nullptr); r != vulkan::success)
        return failed(r);
    std::vector<vulkan::extension_properties> props(count);
    if (const auto r = enumerate(pd, nullptr, &count, props.data());
        r != vulkan::success && r != vulkan::incomplete)
        return failed(r);
    props.resize(std::min<std::size_t>(count, props.size()));
    for (const auto& p : props) {
        const char* end =
            std::find(p.extension_name, p.extension_name + sizeof(p.extension_name), '\0');
        if (std::string(p.extension_name, end) == name) return true;
    }
    why = std::string("the device does not support ") + name;
    return false;
}

GPU_ASYNC_DECL void vulkan_device::probe_host_import(bool enabled) {
    import_alignment_ = 0;
    const std::string ext = vulkan::ext_external_memory_host;
    // A device of its own was asked for the extension (enabled tells), yours is asked here.
    if (!enabled) return; // no_import_ says why
    if (instance_api_.get_physical_device_properties2 == nullptr) {
        no_import_ = "the instance lacks vkGetPhysicalDeviceProperties2";
        return;
    }
    if (api_.get_memory_host_pointer_properties == nullptr) {
        no_import_ = ext + " is not enabled on the device (vkGetMemoryHostPointerPropertiesEXT "
                           "did not resolve; enable it at your vkCreateDevice)";
        return;
    }
    vulkan::physical_device_external_memory_host_properties host{};
    vulkan::physical_device_properties2 props{};
    props.next = &host;
    instance_api_.get_physical_device_properties2(handles_.physical_device, &props);
    const vulkan::device_size_t align = host.min_imported_host_pointer_alignment;
    if (align == 0 || (align & (align - 1)) != 0) {
        no_import_ = "its minImportedHostPointerAlignment (" + std::to_string(align) +
                     ") is not a power of two";
        return;
    }
    import_alignment_ = align;
    no_import_.clear();
}

GPU_ASYNC_DECL void vulkan_device::destroy_objects() noexcept {
    const auto& a = api_;
    const vulkan::device_t dev = handles_.device;
    if (pipeline_ != vulkan::pipeline_t{}) a.destroy_pipeline(dev, pipeline_, nullptr);
    if (shader_ != vulkan::shader_module_t{}) a.destroy_shader_module(dev, shader_, nullptr);
    if (pipeline_layout_ != vulkan::pipeline_layout_t{})
        a.destroy_pipeline_layout(dev, pipeline_layout_, nullptr);
    if (set_layout_ != vulkan::descriptor_set_layout_t{})
        a.destroy_descriptor_set_layout(dev, set_layout_, nullptr);
    pipeline_ = {};
    shader_ = {};
    pipeline_layout_ = {};
    set_layout_ = {};
}

GPU_ASYNC_DECL result<std::unique_ptr<vulkan_device>>
vulkan_device::adopt(const vulkan_loader& loader, const vulkan_handles& handles) {
    using namespace detail::vulkan_impl;
    if (handles.instance == nullptr || handles.physical_device == nullptr ||
        handles.device == nullptr || handles.queue == nullptr)
        return backend("vulkan_device::adopt was given a null instance, physical device, device "
                       "or queue");
    if (loader.version() < vulkan::api_version_1_2)
        return unavailable("the Vulkan loader", "it offers Vulkan " +
                                                    version_text(loader.version()) +
                                                    "; the backend needs 1.2");
    std::unique_ptr<vulkan_device> d(new vulkan_device(loader));
    d->handles_ = handles;
    if (auto e = d->resolve_instance()) return std::move(*e);
    if (auto e = d->check_physical_device()) return std::move(*e);
    if (auto e = d->resolve_device()) {
        d->api_ = {}; // nothing of the device's is made: the destructor touches nothing
        return std::move(*e);
    }
    d->instance_api_.get_physical_device_memory_properties(handles.physical_device, &d->memory_);
    vulkan::physical_device_properties props{};
    d->instance_api_.get_physical_device_properties(handles.physical_device, &props);
    d->name_ = detail::vulkan_impl::device_name(props);
    d->probe_host_import(
        d->has_extension(handles.physical_device, vulkan::ext_external_memory_host, d->no_import_));
    std::uint32_t count = 0;
    d->instance_api_.get_physical_device_queue_family_properties(handles.physical_device, &count,
                                                                 nullptr);
    for (std::uint32_t i = 0; i < count; ++i)
        d->queue_families_.push_back(i);
    if (auto e = d->make_pipeline()) return std::move(*e);
    return d;
}

GPU_ASYNC_DECL result<std::unique_ptr<vulkan_device>>
vulkan_device::create(const vulkan_loader& loader, vulkan_device_options options) {
    using namespace detail::vulkan_impl;
    if (loader.version() < vulkan::api_version_1_2)
        return unavailable("the Vulkan loader", "it offers Vulkan " +
                                                    version_text(loader.version()) +
                                                    "; the backend needs 1.2");
    std::unique_ptr<vulkan_device> d(new vulkan_device(loader));
    d->owned_ = true; // from here on the destructor destroys what was made

    vulkan::application_info app{};
    app.application_name = "gpu_async";
    app.engine_name = "gpu_async";
    app.api_version = vulkan::api_version_1_2;
    vulkan::instance_create_info instance_info{};
    instance_info.application = &app;
    if (const auto r = loader.api().create_instance(&instance_info, nullptr, &d->handles_.instance);
        r != vulkan::success) {
        d->handles_.instance = nullptr;
        return unavailable("a Vulkan instance", "vkCreateInstance failed with " +
                                                    vulkan_loader::result_name(r) + " (" +
                                                    std::to_string(r) + ")" +
                                                    (r == vulkan::error_incompatible_driver
                                                         ? ": no Vulkan driver (ICD) is installed?"
                                                         : ""));
    }
    if (auto e = d->resolve_instance()) {
        // Without vkDestroyInstance the instance cannot go: leak it with the device object.
        if (d->instance_api_.destroy_instance == nullptr) d->handles_.instance = nullptr;
        return std::move(*e);
    }

    std::uint32_t count = 0;
    if (const auto r =
            d->instance_api_.enumerate_physical_devices(d->handles_.instance, &count, nullptr);
        r != vulkan::success && r != vulkan::incomplete)
        return d->error("vkEnumeratePhysicalDevices", r);
    std::vector<vulkan::physical_device_t> devices(count);
    if (const auto r = d->instance_api_.enumerate_physical_devices(d->handles_.instance, &count,
                                                                   devices.data());
        r != vulkan::success && r != vulkan::incomplete)
        return d->error("vkEnumeratePhysicalDevices", r);
    devices.resize(count);
    if (devices.empty())
        return unavailable("a Vulkan device", "vkEnumeratePhysicalDevices found none");
    if (options.physical_device >= static_cast<int>(devices.size()))
        return unavailable("Vulkan physical device " + std::to_string(options.physical_device),
                           "there are " + std::to_string(devices.size()));

    // The first suitable device of the best type (discrete, integrated, virtual, CPU, other).
    auto rank = [](int type) {
        switch (type) {
        case vulkan::physical_device_type_discrete_gpu:
            return 4;
        case vulkan::physical_device_type_integrated_gpu:
            return 3;
        case vulkan::physical_device_type_virtual_gpu:
            return 2;
        case vulkan::physical_device_type_cpu:
            return 1;
        default:
            return 0;
        }
    };
    std::string reasons;
    int best = -1;
    int best_rank = -1;
    std::uint32_t best_family = 0;
    for (std::size_t i = 0; i < devices.size(); ++i) {
        if (options.physical_device >= 0 && static_cast<std::size_t>(options.physical_device) != i)
            continue;
        d->handles_.physical_device = devices[i];
        std::uint32_t families = 0;
        d->instance_api_.get_physical_device_queue_family_properties(devices[i], &families,
                                                                     nullptr);
        std::vector<vulkan::queue_family_properties> props(families);
        d->instance_api_.get_physical_device_queue_family_properties(devices[i], &families,
                                                                     props.data());
        std::uint32_t family = 0;
        while (family < families && (props[family].queue_flags & vulkan::queue_compute_bit) == 0)
            ++family;
        d->handles_.queue_family = family; // past the end when none: the check names it
        if (auto e = d->check_physical_device()) {
            if (!reasons.empty()) reasons += "; ";
            reasons += e->message();
            continue;
        }
        vulkan::physical_device_properties p{};
        d->instance_api_.get_physical_device_properties(devices[i], &p);
        if (rank(p.device_type) > best_rank) {
            best = static_cast<int>(i);
            best_rank = rank(p.device_type);
            best_family = family;
        }
    }
    if (best < 0) return unavailable("a suitable Vulkan device", reasons);
    d->handles_.physical_device = devices[static_cast<std::size_t>(best)];
    d->handles_.queue_family = best_family;

    const float priority = 1.0f;
    vulkan::device_queue_create_info queue_info{};
    queue_info.queue_family_index = best_family;
    queue_info.queue_count = 1;
    queue_info.queue_priorities = &priority;
    vulkan::physical_device_timeline_semaphore_features timeline{};
    timeline.timeline_semaphore = 1;
    vulkan::physical_device_shader_atomic_int64_features atomics{};
    atomics.shader_buffer_int64_atomics = 1;
    atomics.next = &timeline;
    vulkan::physical_device_features2 features{};
    features.features.values[vulkan::physical_device_features::shader_int64_index] = 1;
    features.next = &atomics;
    vulkan::device_create_info device_info{};
    device_info.next = &features;
    device_info.queue_create_info_count = 1;
    device_info.queue_create_infos = &queue_info;
    // The doorbell's import, where the device has it (lines take no doorbell without).
    const char* const extensions[] = {vulkan::ext_external_memory_host};
    const bool host_import = d->has_extension(d->handles_.physical_device,
                                              vulkan::ext_external_memory_host, d->no_import_);
    if (host_import) {
        device_info.enabled_extension_count = 1;
        device_info.enabled_extension_names = extensions;
    }
    if (const auto r = d->instance_api_.create_device(d->handles_.physical_device, &device_info,
                                                      nullptr, &d->handles_.device);
        r != vulkan::success) {
        d->handles_.device = nullptr;
        return d->error("vkCreateDevice", r);
    }
    if (auto e = d->resolve_device()) {
        // Whatever was resolved: vkDestroyDevice may go with the rest. Without it the device
        // cannot go: leak it, and the instance under it.
        if (d->api_.destroy_device == nullptr) {
            d->handles_.device = nullptr;
            d->handles_.instance = nullptr;
        } else {
            const auto destroy = d->api_.destroy_device;
            d->api_ = {};
            destroy(d->handles_.device, nullptr);
            d->handles_.device = nullptr;
        }
        return std::move(*e);
    }
    d->api_.get_device_queue(d->handles_.device, best_family, 0, &d->handles_.queue);
    d->instance_api_.get_physical_device_memory_properties(d->handles_.physical_device,
                                                           &d->memory_);
    vulkan::physical_device_properties props{};
    d->instance_api_.get_physical_device_properties(d->handles_.physical_device, &props);
    d->name_ = detail::vulkan_impl::device_name(props);
    d->probe_host_import(host_import);
    std::uint32_t families = 0;
    d->instance_api_.get_physical_device_queue_family_properties(d->handles_.physical_device,
                                                                 &families, nullptr);
    for (std::uint32_t i = 0; i < families; ++i)
        d->queue_families_.push_back(i);
    if (auto e = d->make_pipeline()) return std::move(*e);
    return d;
}

GPU_ASYNC_DECL vulkan_device::vulkan_device(const vulkan_loader& loader) noexcept
    : loader_(&loader) {}

GPU_ASYNC_DECL vulkan_device::~vulkan_device() {
    // Close the lines still open: their waits end, their stores are awaited.
    for (;;) {
        detail::vulkan_line_state* s = nullptr;
        {
            std::lock_guard lk(lines_mutex_);
            if (lines_.empty()) break;
            s = lines_.back();
        }
        static_cast<void>(close_line(*s)); // removes it from lines_
    }
    // Settle the lines closed without blocking, waiting now, each up to its settle timeout.
    std::list<std::unique_ptr<detail::vulkan_line_state>> closing;
    {
        std::lock_guard lk(lines_mutex_);
        closing.swap(closing_);
    }
    for (const auto& s : closing) {
        detail::vulkan_settle settle = settle_wait(*s);
        finish_close(*s, settle, true);
    }
    std::size_t leaked = 0;
    {
        std::lock_guard lk(lines_mutex_);
        leaked = leaked_lines_;
    }
    // A leaked line may still have a store pending, which uses the pipeline and the device:
    // leak them too.
    if (leaked != 0) return;
    // The device's entry points are all resolved, or none (a failed resolution cleared them).
    const bool resolved = api_.destroy_device != nullptr;
    if (owned_ && resolved && handles_.device != nullptr) {
        // The caller's work on a device of ours, if any, ends before its objects go.
        std::lock_guard lk(queue_mutex_);
        static_cast<void>(api_.device_wait_idle(handles_.device));
    }
    if (resolved) {
        release_closed_lines();
        destroy_spare_batches();
        destroy_objects();
    }
    if (!owned_) return;
    if (handles_.device != nullptr && resolved) api_.destroy_device(handles_.device, nullptr);
    if (handles_.instance != nullptr && instance_api_.destroy_instance != nullptr)
        instance_api_.destroy_instance(handles_.instance, nullptr);
}

GPU_ASYNC_DECL vulkan::result_t vulkan_device::submit(std::uint32_t count,
                                                      const vulkan::submit_info* submits,
                                                      vulkan::fence_t fence) const {
    std::lock_guard lk(queue_mutex_);
    return api_.queue_submit(handles_.queue, count, submits, fence);
}

GPU_ASYNC_DECL std::size_t vulkan_device::open_lines() const {
    std::lock_guard lk(lines_mutex_);
    return lines_.size();
}

GPU_ASYNC_DECL void vulkan_device::add_line(detail::vulkan_line_state* line) {
    std::lock_guard lk(lines_mutex_);
    lines_.push_back(line);
}

namespace detail {

namespace vulkan_impl {

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
        std::uint64_t nap = 20000; // 20 us, doubling to 1 ms
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
            nap = std::min<std::uint64_t>(nap * 2, 1000000);
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

// --- the line ------------------------------------------------------------------------------

GPU_ASYNC_DECL vulkan_line::vulkan_line(std::unique_ptr<detail::vulkan_line_state> state) noexcept
    : state_(std::move(state)) {}

GPU_ASYNC_DECL vulkan_line::vulkan_line(vulkan_line&& other) noexcept
    : state_(std::move(other.state_)) {}

GPU_ASYNC_DECL vulkan_line::~vulkan_line() {
    if (state_ != nullptr && state_->line != nullptr)
        vulkan_device::close_detached(state_, nullptr);
}

GPU_ASYNC_DECL vulkan_line& vulkan_line::operator=(vulkan_line&& other) noexcept {
    if (this != &other) {
        if (state_ != nullptr && state_->line != nullptr)
            vulkan_device::close_detached(state_, nullptr);
        state_ = std::move(other.state_);
    }
    return *this;
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

GPU_ASYNC_DECL result<vulkan_line> vulkan_line::create(vulkan_device& device,
                                                       vulkan_line_options options) {
    using namespace detail::vulkan_impl;
    const vulkan::device_api& a = device.api();
    const vulkan::device_t dev = device.device();
    std::unique_ptr<detail::vulkan_line_state> s;
    try {
        s = std::make_unique<detail::vulkan_line_state>();
        s->spare.reserve(4);
    } catch (...) {
        return backend("no memory for a Vulkan line's records");
    }
    s->device = &device;
    s->settle_timeout = options.settle_timeout;
    static_cast<void>(device.settle_closed_lines()); // their batch objects come back to it
    bool recycled = false;
    // What was made before a failure goes (nothing was stored yet: no settle needed), but a
    // closed line's batch objects, which go back to the device.
    auto fail = [&](coded_error e) -> coded_error {
        if (recycled) device.keep_batch_objects(*s);
        destroy_line_objects(a, dev, *s);
        return e;
    };

    // 1. The buffer: the line's 64 bytes, usable from every queue family (a command buffer of
    //    any family may record a store; concurrent sharing needs no ownership transfers).
    vulkan::buffer_create_info buffer_info{};
    buffer_info.size = line_bytes;
    buffer_info.usage = vulkan::buffer_usage_storage_buffer_bit;
    if (device.queue_families_.size() > 1) {
        buffer_info.sharing_mode = vulkan::sharing_mode_concurrent;
        buffer_info.queue_family_index_count =
            static_cast<std::uint32_t>(device.queue_families_.size());
        buffer_info.queue_family_indices = device.queue_families_.data();
    }
    if (const auto r = a.create_buffer(dev, &buffer_info, nullptr, &s->buffer);
        r != vulkan::success) {
        s->buffer = {};
        return fail(device.error("vkCreateBuffer", r));
    }

    // 2. Its memory: host-visible and coherent, mapped; the line at offset 0.
    vulkan::memory_requirements needs{};
    a.get_buffer_memory_requirements(dev, s->buffer, &needs);
    const int type = line_memory_type(device.memory_, needs.memory_type_bits);
    if (type < 0)
        return fail(unavailable("a memory type for a completion line on Vulkan device '" +
                                    device.name() + "'",
                                "none is HOST_VISIBLE and HOST_COHERENT for a storage buffer"));
    vulkan::memory_allocate_info alloc_info{};
    alloc_info.allocation_size = std::max<vulkan::device_size_t>(needs.size, line_bytes);
    alloc_info.memory_type_index = static_cast<std::uint32_t>(type);
    if (const auto r = a.allocate_memory(dev, &alloc_info, nullptr, &s->memory);
        r != vulkan::success) {
        s->memory = {};
        return fail(device.error("vkAllocateMemory", r));
    }
    if (const auto r = a.bind_buffer_memory(dev, s->buffer, s->memory, 0); r != vulkan::success)
        return fail(device.error("vkBindBufferMemory", r));
    if (const auto r = a.map_memory(dev, s->memory, 0, vulkan::whole_size, 0, &s->mapped);
        r != vulkan::success) {
        s->mapped = nullptr;
        return fail(device.error("vkMapMemory", r));
    }
    if (s->mapped == nullptr || reinterpret_cast<std::uintptr_t>(s->mapped) % line_bytes != 0)
        return fail(backend("vkMapMemory returned a mapping that is null or not 64-byte aligned"));

    // 3. The descriptor set that binds the buffer to the store's pipeline.
    vulkan::descriptor_pool_size pool_size{};
    pool_size.type = vulkan::descriptor_type_storage_buffer;
    pool_size.descriptor_count = 4;
    vulkan::descriptor_pool_create_info pool_info{};
    pool_info.max_sets = 2; // the line's set, and the one attach_doorbell makes
    pool_info.pool_size_count = 1;
    pool_info.pool_sizes = &pool_size;
    if (const auto r = a.create_descriptor_pool(dev, &pool_info, nullptr, &s->descriptor_pool);
        r != vulkan::success) {
        s->descriptor_pool = {};
        return fail(device.error("vkCreateDescriptorPool", r));
    }
    vulkan::descriptor_set_allocate_info set_info{};
    set_info.descriptor_pool = s->descriptor_pool;
    set_info.descriptor_set_count = 1;
    set_info.set_layouts = &device.set_layout_;
    if (const auto r = a.allocate_descriptor_sets(dev, &set_info, &s->descriptor_set);
        r != vulkan::success)
        return fail(device.error("vkAllocateDescriptorSets", r));
    vulkan::descriptor_buffer_info buffer_ref{};
    buffer_ref.buffer = s->buffer;
    buffer_ref.range = line_bytes;
    std::array<vulkan::write_descriptor_set, 2> writes{};
    for (std::uint32_t b = 0; b < writes.size(); ++b) {
        writes[b].dst_set = s->descriptor_set;
        writes[b].dst_binding = b; // binding 1 without a doorbell: the line (never written)
        writes[b].descriptor_count = 1;
        writes[b].descriptor_type = vulkan::descriptor_type_storage_buffer;
        writes[b].buffer_info = &buffer_ref;
    }
    a.update_descriptor_sets(dev, static_cast<std::uint32_t>(writes.size()), writes.data(), 0,
                             nullptr);

    // 4. The batches' timeline semaphore and command pool: those of a closed line where the
    //    device has them (vulkan_device::keep_batch_objects), else new ones.
    recycled = device.take_spare_batch(*s);
    if (!recycled)
        if (auto e = make_batch_objects(device, *s)) return fail(std::move(*e));

    // 5. The line, its generation and its health query; then the device knows it.
    s->line = ::new (s->mapped) completion_line();
    for (std::size_t i = 0; i < line_words; ++i) {
        s->line->words[i].store(options.initial_sequence, std::memory_order_relaxed);
        s->sequence[i] = options.initial_sequence;
    }
    bool watched = false;
    try {
        const auto generation =
            adopt_line(*s->line); // retired by close(): its descriptors go stale
        s->generation = generation;
        s->health = std::make_unique<vulkan_line_health>(a, dev, s->timeline);
        watch_line_health(*s->line, *s->health);
        watched = true;
        device.add_line(s.get());
    } catch (...) {
        if (watched) unwatch_line_health(*s->line);
        s->line = nullptr;
        s->health.reset();
        return fail(backend("no memory for a Vulkan line's generation or health query"));
    }
    return vulkan_line(std::move(s));
}

GPU_ASYNC_DECL const completion_line& vulkan_line::line() const noexcept {
    return *state_->line;
}

GPU_ASYNC_DECL std::uint64_t vulkan_line::generation() const noexcept {
    return state_ != nullptr ? state_->generation : 0;
}

GPU_ASYNC_DECL vulkan_device* vulkan_line::device() const noexcept {
    return state_ != nullptr ? state_->device : nullptr;
}

GPU_ASYNC_DECL std::uint64_t vulkan_line::sequence(slot_id slot) const noexcept {
    return state_ != nullptr ? state_->sequence[slot.index()] : 0;
}

GPU_ASYNC_DECL memory_descriptor vulkan_line::last(slot_id slot) const noexcept {
    return detail::vulkan_descriptor(*state_->line, slot, state_->sequence[slot.index()],
                                     state_->generation);
}

GPU_ASYNC_DECL vulkan::semaphore_t vulkan_line::timeline() const noexcept {
    return state_ != nullptr ? state_->timeline : vulkan::semaphore_t{};
}

GPU_ASYNC_DECL std::uint64_t vulkan_line::submitted() const noexcept {
    return state_ != nullptr ? state_->submitted : 0;
}

GPU_ASYNC_DECL std::shared_ptr<doorbell> vulkan_line::attached_doorbell() const noexcept {
    return state_ != nullptr ? state_->bell : nullptr;
}

GPU_ASYNC_DECL std::optional<coded_error>
vulkan_line::attach_doorbell(std::shared_ptr<doorbell> bell) {
    using namespace detail::vulkan_impl;
    if (!is_open()) return backend("attach_doorbell on a closed or moved-from vulkan_line");
    if (bell == nullptr) return backend("attach_doorbell was given no doorbell");
    detail::vulkan_line_state& s = *state_;
    if (s.bell == bell) return std::nullopt;
    if (s.bell != nullptr)
        return backend("attach_doorbell: the Vulkan line already has another doorbell attached");
    vulkan_device& device = *s.device;
    if (!device.can_attach_doorbell())
        return unavailable("a doorbell on Vulkan device '" + device.name() + "'",
                           device.doorbell_unavailable());
    const vulkan::device_api& a = device.api();
    const vulkan::device_t dev = device.device();

    // The page(s) holding the doorbell's line, at the device's import alignment.
    const vulkan::device_size_t align = device.import_alignment();
    const auto at = reinterpret_cast<std::uintptr_t>(&bell->line());
    const std::uintptr_t base = at & ~static_cast<std::uintptr_t>(align - 1);
    const vulkan::device_size_t size = (at - base + line_bytes + align - 1) & ~(align - 1);
    void* const host = reinterpret_cast<void*>(base);

    vulkan::memory_host_pointer_properties host_props{};
    if (const auto r = a.get_memory_host_pointer_properties(
            dev, static_cast<int>(vulkan::external_memory_handle_type_host_allocation_bit), host,
            &host_props);
        r != vulkan::success)
        return device.error("vkGetMemoryHostPointerPropertiesEXT", r);

    vulkan::buffer_t buffer{};
    vulkan::device_memory_t memory{};
    auto fail = [&](coded_error e) -> std::optional<coded_error> {
        if (buffer != vulkan::buffer_t{}) a.destroy_buffer(dev, buffer, nullptr);
        if (memory != vulkan::device_memory_t{}) a.free_memory(dev, memory, nullptr);
        return e;
    };
    vulkan::external_memory_buffer_create_info external{};
    external.handle_types = vulkan::external_memory_handle_type_host_allocation_bit;
    vulkan::buffer_create_info buffer_info{};
    buffer_info.next = &external;
    buffer_info.size = size;
    buffer_info.usage = vulkan::buffer_usage_storage_buffer_bit;
    if (device.queue_families_.size() > 1) {
        buffer_info.sharing_mode = vulkan::sharing_mode_concurrent;
        buffer_info.queue_family_index_count =
            static_cast<std::uint32_t>(device.queue_families_.size());
        buffer_info.queue_family_indices = device.queue_families_.data();
    }
    if (const auto r = a.create_buffer(dev, &buffer_info, nullptr, &buffer); r != vulkan::success) {
        buffer = {};
        return fail(device.error("vkCreateBuffer", r));
    }
    vulkan::memory_requirements needs{};
    a.get_buffer_memory_requirements(dev, buffer, &needs);
    const int type =
        line_memory_type(device.memory_, needs.memory_type_bits & host_props.memory_type_bits);
    if (type < 0 || needs.size > size)
        return fail(unavailable("a doorbell on Vulkan device '" + device.name() + "'",
                                "no HOST_VISIBLE, HOST_COHERENT memory type imports host memory "
                                "for a storage buffer of " +
                                    std::to_string(size) + " bytes"));
    vulkan::import_memory_host_pointer_info import{};
    import.handle_type = static_cast<int>(vulkan::external_memory_handle_type_host_allocation_bit);
    import.host_pointer = host;
    vulkan::memory_allocate_info alloc_info{};
    alloc_info.next = &import;
    alloc_info.allocation_size = size;
    alloc_info.memory_type_index = static_cast<std::uint32_t>(type);
    if (const auto r = a.allocate_memory(dev, &alloc_info, nullptr, &memory);
        r != vulkan::success) {
        memory = {};
        return fail(device.error("vkAllocateMemory", r));
    }
    if (const auto r = a.bind_buffer_memory(dev, buffer, memory, 0); r != vulkan::success)
        return fail(device.error("vkBindBufferMemory", r));

    // A set of its own: the line's first set may be bound in command buffers still pending,
    // and a set must not change under them.
    vulkan::descriptor_set_t set{};
    vulkan::descriptor_set_allocate_info set_info{};
    set_info.descriptor_pool = s.descriptor_pool;
    set_info.descriptor_set_count = 1;
    set_info.set_layouts = &device.set_layout_;
    if (const auto r = a.allocate_descriptor_sets(dev, &set_info, &set); r != vulkan::success)
        return fail(device.error("vkAllocateDescriptorSets", r));
    vulkan::descriptor_buffer_info refs[2]{};
    refs[0].buffer = s.buffer;
    refs[0].range = line_bytes;
    refs[1].buffer = buffer;
    refs[1].range = size;
    std::array<vulkan::write_descriptor_set, 2> writes{};
    for (std::uint32_t b = 0; b < writes.size(); ++b) {
        writes[b].dst_set = set;
        writes[b].dst_binding = b;
        writes[b].descriptor_count = 1;
        writes[b].descriptor_type = vulkan::descriptor_type_storage_buffer;
        writes[b].buffer_info = &refs[b];
    }
    a.update_descriptor_sets(dev, static_cast<std::uint32_t>(writes.size()), writes.data(), 0,
                             nullptr);

    bell->add_device_producer();
    s.bell_word =
        static_cast<std::uint32_t>((at - base) / sizeof(std::uint64_t) + doorbell::device_word);
    s.bell_buffer = buffer;
    s.bell_memory = memory;
    s.descriptor_set = set;
    s.bell = std::move(bell);
    return std::nullopt;
}

GPU_ASYNC_DECL bool vulkan_line::is_open() const noexcept {
    return state_ != nullptr && state_->line != nullptr;
}

GPU_ASYNC_DECL bool vulkan_line::leaked() const noexcept {
    return state_ != nullptr && state_->leaked;
}

GPU_ASYNC_DECL std::optional<coded_error> vulkan_line::close() {
    if (state_ == nullptr) return std::nullopt;
    return vulkan_device::close_line(*state_);
}

namespace detail::vulkan_impl {

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
    const vulkan::device_api& a = dev.api();
    const vulkan::device_t device = dev.device();

    // Command buffers of batches the line's semaphore has passed are free again.
    std::uint64_t passed = 0;
    if (const auto r = a.get_semaphore_counter_value(device, s.timeline, &passed);
        r != vulkan::success)
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
        s.flying.reserve(s.flying.size() + 1); // no allocation may fail once submitted
        s.spare.reserve(s.spare.size() + 1);
    } catch (...) {
        return backend("no memory for a Vulkan line's batch records");
    }
    vulkan::command_buffer_t cb = nullptr;
    if (!s.spare.empty()) {
        cb = s.spare.back();
        s.spare.pop_back();
        if (const auto r = a.reset_command_buffer(cb, 0); r != vulkan::success) {
            s.spare.push_back(cb);
            return dev.error("vkResetCommandBuffer", r);
        }
    } else {
        vulkan::command_buffer_allocate_info alloc{};
        alloc.command_pool = s.command_pool;
        alloc.command_buffer_count = 1;
        if (const auto r = a.allocate_command_buffers(device, &alloc, &cb); r != vulkan::success)
            return dev.error("vkAllocateCommandBuffers", r);
    }
    vulkan::command_buffer_begin_info begin{};
    begin.flags = vulkan::command_buffer_usage_one_time_submit_bit;
    if (const auto r = a.begin_command_buffer(cb, &begin); r != vulkan::success) {
        s.spare.push_back(cb); // reserved above
        return dev.error("vkBeginCommandBuffer", r);
    }
    const std::size_t i = slot.index();
    const std::uint64_t next = s.sequence[i] + 1; // wraps modulo 2^64
    record_store_commands(dev, s, cb, slot, next, dev.pipeline_, dev.pipeline_layout_);
    if (const auto r = a.end_command_buffer(cb); r != vulkan::success) {
        s.spare.push_back(cb);
        return dev.error("vkEndCommandBuffer", r);
    }

    // Wait for the caller's value (every stage: the store's barrier orders after it), store,
    // then signal the line's own semaphore at its next value.
    const std::uint64_t signal = s.submitted + 1;
    const vulkan::flags_t wait_stage = vulkan::pipeline_stage_all_commands_bit;
    vulkan::timeline_semaphore_submit_info values{};
    values.wait_semaphore_value_count = 1;
    values.wait_semaphore_values = &value;
    values.signal_semaphore_value_count = 1;
    values.signal_semaphore_values = &signal;
    vulkan::submit_info submit{};
    submit.next = &values;
    submit.wait_semaphore_count = 1;
    submit.wait_semaphores = &semaphore;
    submit.wait_dst_stage_mask = &wait_stage;
    submit.command_buffer_count = 1;
    submit.command_buffers = &cb;
    submit.signal_semaphore_count = 1;
    submit.signal_semaphores = &s.timeline;
    if (const auto r = dev.submit(1, &submit); r != vulkan::success) {
        if (r == vulkan::error_device_lost) {
            // The batch may be pending on a lost device: count it as submitted, so close()
            // never frees under it (its wait reports the loss, and the line leaks).
            s.submitted = signal;
            s.flying.push_back({cb, signal}); // reserved above
        } else {
            s.spare.push_back(cb); // reserved above: a failed submission changes nothing
        }
        return dev.error("vkQueueSubmit", r);
    }
    s.submitted = signal;
    s.flying.push_back({cb, signal}); // reserved above
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

#endif // GPU_ASYNC_IMPL_VULKAN_IPP
