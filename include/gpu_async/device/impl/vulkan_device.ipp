// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/device/impl/vulkan_device.ipp: the Vulkan loader and device: creation, entry points.
//
#ifndef GPU_ASYNC_IMPL_VULKAN_DEVICE_IPP
#define GPU_ASYNC_IMPL_VULKAN_DEVICE_IPP

#include <gpu_async/device/impl/vulkan_common.ipp>

#include <gpu_async/device/detail/dynamic_library.hpp>
#include <gpu_async/device/detail/vulkan_line_store_spirv.hpp>

namespace gpu_async {

namespace detail::vulkan_impl {

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

} // namespace detail::vulkan_impl

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

namespace detail::vulkan_impl {

/// The rank of a physical device's type: discrete, integrated, virtual, CPU, other.
inline int device_type_rank(int type) noexcept {
    switch (type) {
    case physical_device_type_discrete_gpu:
        return 4;
    case physical_device_type_integrated_gpu:
        return 3;
    case physical_device_type_virtual_gpu:
        return 2;
    case physical_device_type_cpu:
        return 1;
    default:
        return 0;
    }
}

/// The first queue family of `pd` with compute; the family count (past the end) when none.
inline std::uint32_t first_compute_family(const instance_api& api, physical_device_t pd) {
    std::uint32_t families = 0;
    api.get_physical_device_queue_family_properties(pd, &families, nullptr);
    std::vector<queue_family_properties> props(families);
    api.get_physical_device_queue_family_properties(pd, &families, props.data());
    std::uint32_t family = 0;
    while (family < families && (props[family].queue_flags & queue_compute_bit) == 0)
        ++family;
    return family;
}

/// The physical devices of `instance` into `devices` (vkEnumeratePhysicalDevices, twice).
inline std::optional<coded_error> list_physical_devices(const instance_api& api,
                                                        instance_t instance,
                                                        std::vector<physical_device_t>& devices) {
    std::uint32_t count = 0;
    if (const auto r = api.enumerate_physical_devices(instance, &count, nullptr);
        r != success && r != incomplete)
        return vulkan_loader::error("vkEnumeratePhysicalDevices", r);
    devices.resize(count);
    if (const auto r = api.enumerate_physical_devices(instance, &count, devices.data());
        r != success && r != incomplete)
        return vulkan_loader::error("vkEnumeratePhysicalDevices", r);
    devices.resize(count);
    return std::nullopt;
}

} // namespace detail::vulkan_impl

GPU_ASYNC_DECL std::optional<coded_error> vulkan_device::make_instance() {
    using namespace detail::vulkan_impl;
    vulkan::application_info app{};
    app.application_name = "gpu_async";
    app.engine_name = "gpu_async";
    app.api_version = vulkan::api_version_1_2;
    vulkan::instance_create_info instance_info{};
    instance_info.application = &app;
    if (const auto r = loader_->api().create_instance(&instance_info, nullptr, &handles_.instance);
        r != vulkan::success) {
        handles_.instance = nullptr;
        return unavailable("a Vulkan instance", "vkCreateInstance failed with " +
                                                    vulkan_loader::result_name(r) + " (" +
                                                    std::to_string(r) + ")" +
                                                    (r == vulkan::error_incompatible_driver
                                                         ? ": no Vulkan driver (ICD) is installed?"
                                                         : ""));
    }
    if (auto e = resolve_instance()) {
        // Without vkDestroyInstance the instance cannot go: leak it with the device object.
        if (instance_api_.destroy_instance == nullptr) handles_.instance = nullptr;
        return e;
    }
    return std::nullopt;
}

GPU_ASYNC_DECL std::optional<coded_error> vulkan_device::choose_physical_device(int wanted) {
    using namespace detail::vulkan_impl;
    std::vector<vulkan::physical_device_t> devices;
    if (auto e = list_physical_devices(instance_api_, handles_.instance, devices)) return e;
    if (devices.empty())
        return unavailable("a Vulkan device", "vkEnumeratePhysicalDevices found none");
    if (wanted >= static_cast<int>(devices.size()))
        return unavailable("Vulkan physical device " + std::to_string(wanted),
                           "there are " + std::to_string(devices.size()));

    // The first suitable device of the best type (discrete, integrated, virtual, CPU, other).
    std::string reasons;
    int best = -1;
    int best_rank = -1;
    std::uint32_t best_family = 0;
    for (std::size_t i = 0; i < devices.size(); ++i) {
        if (wanted >= 0 && static_cast<std::size_t>(wanted) != i) continue;
        handles_.physical_device = devices[i];
        const std::uint32_t family = first_compute_family(instance_api_, devices[i]);
        handles_.queue_family = family; // past the end when none: the check names it
        if (auto e = check_physical_device()) {
            if (!reasons.empty()) reasons += "; ";
            reasons += e->message();
            continue;
        }
        vulkan::physical_device_properties p{};
        instance_api_.get_physical_device_properties(devices[i], &p);
        if (device_type_rank(p.device_type) > best_rank) {
            best = static_cast<int>(i);
            best_rank = device_type_rank(p.device_type);
            best_family = family;
        }
    }
    if (best < 0) return unavailable("a suitable Vulkan device", reasons);
    handles_.physical_device = devices[static_cast<std::size_t>(best)];
    handles_.queue_family = best_family;
    return std::nullopt;
}

GPU_ASYNC_DECL std::optional<coded_error> vulkan_device::make_device(bool host_import) {
    const float priority = 1.0f;
    vulkan::device_queue_create_info queue_info{};
    queue_info.queue_family_index = handles_.queue_family;
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
    if (host_import) {
        device_info.enabled_extension_count = 1;
        device_info.enabled_extension_names = extensions;
    }
    if (const auto r = instance_api_.create_device(handles_.physical_device, &device_info, nullptr,
                                                   &handles_.device);
        r != vulkan::success) {
        handles_.device = nullptr;
        return error("vkCreateDevice", r);
    }
    if (auto e = resolve_device()) {
        // Whatever was resolved: vkDestroyDevice may go with the rest. Without it the device
        // cannot go: leak it, and the instance under it.
        if (api_.destroy_device == nullptr) {
            handles_.device = nullptr;
            handles_.instance = nullptr;
        } else {
            const auto destroy = api_.destroy_device;
            api_ = {};
            destroy(handles_.device, nullptr);
            handles_.device = nullptr;
        }
        return e;
    }
    return std::nullopt;
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
    if (auto e = d->make_instance()) return std::move(*e);
    if (auto e = d->choose_physical_device(options.physical_device)) return std::move(*e);
    const bool host_import = d->has_extension(d->handles_.physical_device,
                                              vulkan::ext_external_memory_host, d->no_import_);
    if (auto e = d->make_device(host_import)) return std::move(*e);
    d->api_.get_device_queue(d->handles_.device, d->handles_.queue_family, 0, &d->handles_.queue);
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

} // namespace gpu_async

#endif // GPU_ASYNC_IMPL_VULKAN_DEVICE_IPP
