// SPDX-License-Identifier: BSL-1.0
//
// test/common/fake_vulkan_driver.hpp: a fake Vulkan loader and driver behind a fake
// vkGetInstanceProcAddr, for testing the Vulkan backend's failure paths (a failing call, a lost
// device, a settle that times out) that a real driver does not produce on demand.
//
// Every entry point records its call by its Vulkan name ("vkCreateBuffer"); `fail` makes an
// entry point that returns a VkResult fail at every call, and `fail_at` the n-th such call
// (fault injection: a test sweeps n). The fake executes what it is given: a queue runs its
// batches in order, each once its semaphore waits are met (at the submit, or at a later host
// signal); a dispatch with the store's 16 bytes of push constants stores into the word of the
// bound descriptor set's binding 0 buffer's memory and, with a doorbell word given, stores
// doorbell::device_signal into that word of binding 1's (VK_EXT_external_memory_host: the
// doorbell's imported host page, which the fake writes where it is and never frees). `lost` loses
// the device: every call that can report it returns VK_ERROR_DEVICE_LOST. `live` holds every object
// made and not destroyed, by kind.
//
// One fake at a time (the entry points are plain functions, which reach the fake through the
// `fake` pointer; `fixture` sets it). Calls are recorded and counted on the fixture's thread
// only; other threads (a reactor's health query) are served, under the fake's lock, unrecorded.
//
#ifndef GPU_ASYNC_TEST_COMMON_FAKE_VULKAN_DRIVER_HPP
#define GPU_ASYNC_TEST_COMMON_FAKE_VULKAN_DRIVER_HPP

#include <gpu_async/device/vulkan.hpp>
#include <gpu_async/line/detail/line_watchers.hpp>
#include <gpu_async/line/line_health.hpp>
#include <gpu_async/line/line_life.hpp>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace gpu_async::test::vulkan_fake {

using namespace gpu_async;
namespace vk = gpu_async::vulkan;

struct fake_vulkan {
    std::recursive_mutex mutex;
    std::thread::id owner = std::this_thread::get_id();
    std::vector<std::string> calls;
    std::set<std::string> missing;            // entry points the resolver does not find
    std::map<std::string, vk::result_t> fail; // entry point -> result it returns
    // Fault injection: the fail_at-th call (1-based) of an entry point that returns a VkResult
    // returns fail_result, and failed_call names it; 0: none.
    int fail_at = 0;
    vk::result_t fail_result = vk::error_unknown;
    int call_count = 0;
    std::string failed_call;
    bool lost = false;

    // What the physical device offers.
    std::uint32_t api_version = vk::api_version_1_2;
    int physical_devices = 1;
    bool int64 = true, int64_atomics = true, timelines = true, compute = true;
    bool host_visible = true;
    bool host_import = true;          // VK_EXT_external_memory_host offered
    bool host_import_enabled = false; // ... and enabled at vkCreateDevice
    vk::device_size_t import_alignment = 4096;
    std::set<std::uintptr_t> imported; // memory that is the caller's host memory

    // Objects made and not destroyed: handle -> kind ("VkBuffer", ...).
    std::map<std::uintptr_t, std::string> live;
    std::uintptr_t next_handle = 0x10000;

    struct store_command {
        std::uintptr_t set;
        std::uint64_t value;
        std::uint32_t slot;
        std::uint32_t bell;
    };
    struct command_buffer {
        std::uintptr_t bound_set = 0;
        std::uint32_t push[4] = {};
        std::uint32_t push_size = 0;
        std::vector<store_command> stores;
    };
    std::map<std::uintptr_t, command_buffer> command_buffers;
    std::map<std::uintptr_t, std::uintptr_t> pool_of;                   // command buffer -> pool
    std::map<std::uintptr_t, std::uintptr_t> buffer_memory;             // buffer -> memory
    std::map<std::uintptr_t, void*> memory;                             // memory -> host block
    std::map<std::uintptr_t, std::array<std::uintptr_t, 2>> set_buffer; // set -> buffer by binding
    std::map<std::uintptr_t, std::uintptr_t> set_pool;                  // descriptor set -> pool
    std::map<std::uintptr_t, std::uint64_t> semaphores;                 // timeline values

    struct batch {
        std::vector<std::pair<std::uintptr_t, std::uint64_t>> waits;
        std::vector<std::uintptr_t> command_buffers;
        std::vector<std::pair<std::uintptr_t, std::uint64_t>> signals;
    };
    std::deque<batch> queue;
    int batches_run = 0;

    bool recording() const { return std::this_thread::get_id() == owner; }

    // Records a call of an entry point that cannot fail.
    void note(const char* name) {
        if (recording()) calls.emplace_back(name);
    }
    // Records a call of an entry point that returns a VkResult, and what it is to return.
    vk::result_t result(const char* name) {
        if (!recording()) return lost ? vk::error_device_lost : vk::success;
        calls.emplace_back(name);
        if (++call_count == fail_at) {
            failed_call = name;
            return fail_result;
        }
        if (auto it = fail.find(name); it != fail.end()) return it->second;
        return vk::success;
    }

    std::uintptr_t make(const char* kind) {
        const std::uintptr_t h = next_handle;
        next_handle += 0x40;
        live[h] = kind;
        return h;
    }
    void drop(std::uintptr_t h) { live.erase(h); }
    std::size_t count(const std::string& kind) const {
        std::size_t n = 0;
        for (const auto& [h, k] : live)
            if (k == kind) ++n;
        return n;
    }
    std::size_t count_calls(const std::string& name) const {
        std::size_t n = 0;
        for (const auto& c : calls)
            if (c == name) ++n;
        return n;
    }

    // The caller's objects a test uses: a command buffer in the recording state and a timeline
    // semaphore, made without calls (they are the caller's, not the backend's).
    vk::command_buffer_t caller_command_buffer() {
        const std::uintptr_t h = next_handle;
        next_handle += 0x40;
        command_buffers[h] = {};
        return reinterpret_cast<vk::command_buffer_t>(h);
    }
    vk::semaphore_t caller_semaphore() {
        const std::uintptr_t h = next_handle;
        next_handle += 0x40;
        semaphores[h] = 0;
        return to<vk::semaphore_t>(h);
    }
    // Runs the caller's command buffer now, as a submission with no waits would.
    void run(vk::command_buffer_t cb) {
        std::lock_guard lk(mutex);
        execute(reinterpret_cast<std::uintptr_t>(cb));
    }
    // Signals a semaphore from the host, and runs the batches that waited for it.
    void signal(vk::semaphore_t s, std::uint64_t value) {
        std::lock_guard lk(mutex);
        semaphores[from(s)] = value;
        drain();
    }

    template <class H>
    static H to(std::uintptr_t h) {
        if constexpr (std::is_pointer_v<H>)
            return reinterpret_cast<H>(h);
        else
            return static_cast<H>(h);
    }
    template <class H>
    static std::uintptr_t from(H h) {
        if constexpr (std::is_pointer_v<H>)
            return reinterpret_cast<std::uintptr_t>(h);
        else
            return static_cast<std::uintptr_t>(h);
    }

    void execute(std::uintptr_t cb) {
        auto it = command_buffers.find(cb);
        if (it == command_buffers.end()) return;
        for (const store_command& st : it->second.stores) {
            auto buffers = set_buffer.find(st.set);
            if (buffers == set_buffer.end()) continue;
            if (auto* words = words_of(buffers->second[0]))
                words[st.slot % 8].store(st.value, std::memory_order_release);
            if (st.bell == 0xffffffffu) continue; // no doorbell
            if (auto* words = words_of(buffers->second[1]))
                words[st.bell].store(doorbell::device_signal, std::memory_order_release);
        }
    }
    // The words of the memory bound to `buffer`, or null.
    std::atomic<std::uint64_t>* words_of(std::uintptr_t buffer) {
        auto mem = buffer_memory.find(buffer);
        if (mem == buffer_memory.end()) return nullptr;
        auto host = memory.find(mem->second);
        if (host == memory.end()) return nullptr;
        return reinterpret_cast<std::atomic<std::uint64_t>*>(host->second);
    }
    // Runs the queue's batches in order while the first one's waits are met.
    void drain() {
        while (!queue.empty() && !lost) {
            const batch& b = queue.front();
            bool ready = true;
            for (const auto& [s, v] : b.waits)
                if (semaphores[s] < v) ready = false;
            if (!ready) return;
            for (std::uintptr_t cb : b.command_buffers)
                execute(cb);
            for (const auto& [s, v] : b.signals)
                semaphores[s] = v;
            queue.pop_front();
            ++batches_run;
        }
    }
};

inline fake_vulkan* fake = nullptr;

// The entry points. Names follow the Vulkan functions they stand for.
namespace fn {

using vk::result_t;

#define GPU_ASYNC_FAKE_LOCK std::lock_guard lk_(fake->mutex)

inline result_t enumerate_instance_version(std::uint32_t* v) {
    GPU_ASYNC_FAKE_LOCK;
    *v = fake->api_version;
    return fake->result("vkEnumerateInstanceVersion");
}
inline result_t create_instance(const vk::instance_create_info*, const void*, vk::instance_t* i) {
    GPU_ASYNC_FAKE_LOCK;
    if (const result_t r = fake->result("vkCreateInstance")) return r;
    *i = fake_vulkan::to<vk::instance_t>(fake->make("VkInstance"));
    return vk::success;
}
inline void destroy_instance(vk::instance_t i, const void*) {
    GPU_ASYNC_FAKE_LOCK;
    fake->note("vkDestroyInstance");
    fake->drop(fake_vulkan::from(i));
}
inline result_t enumerate_physical_devices(vk::instance_t, std::uint32_t* n,
                                           vk::physical_device_t* out) {
    GPU_ASYNC_FAKE_LOCK;
    if (const result_t r = fake->result("vkEnumeratePhysicalDevices")) return r;
    if (out == nullptr) {
        *n = static_cast<std::uint32_t>(fake->physical_devices);
        return vk::success;
    }
    for (std::uint32_t i = 0; i < *n; ++i)
        out[i] = fake_vulkan::to<vk::physical_device_t>(0x100 + 0x40 * i);
    return vk::success;
}
inline void get_physical_device_properties(vk::physical_device_t,
                                           vk::physical_device_properties* p) {
    GPU_ASYNC_FAKE_LOCK;
    fake->note("vkGetPhysicalDeviceProperties");
    *p = {};
    p->api_version = fake->api_version;
    p->device_type = vk::physical_device_type_cpu;
    std::strcpy(p->device_name, "fake Vulkan device");
}
inline void get_physical_device_queue_family_properties(vk::physical_device_t, std::uint32_t* n,
                                                        vk::queue_family_properties* p) {
    GPU_ASYNC_FAKE_LOCK;
    fake->note("vkGetPhysicalDeviceQueueFamilyProperties");
    if (p == nullptr) {
        *n = 1;
        return;
    }
    p[0] = {};
    p[0].queue_flags = fake->compute ? vk::queue_compute_bit : 0u;
    p[0].queue_count = 1;
}
inline void get_physical_device_memory_properties(vk::physical_device_t,
                                                  vk::physical_device_memory_properties* m) {
    GPU_ASYNC_FAKE_LOCK;
    fake->note("vkGetPhysicalDeviceMemoryProperties");
    *m = {};
    m->memory_type_count = 2;
    m->memory_types[0].property_flags = vk::memory_property_device_local_bit;
    m->memory_types[1].property_flags = fake->host_visible
                                            ? vk::memory_property_host_visible_bit |
                                                  vk::memory_property_host_coherent_bit |
                                                  vk::memory_property_host_cached_bit
                                            : 0u;
    m->memory_heap_count = 1;
    m->memory_heaps[0].size = 1u << 30;
}
inline void get_physical_device_features2(vk::physical_device_t, vk::physical_device_features2* f) {
    GPU_ASYNC_FAKE_LOCK;
    fake->note("vkGetPhysicalDeviceFeatures2");
    f->features.values[vk::physical_device_features::shader_int64_index] = fake->int64 ? 1 : 0;
    for (auto* next = static_cast<int*>(f->next); next != nullptr;) {
        if (*next == vk::structure_type::physical_device_shader_atomic_int64_features) {
            auto* a = reinterpret_cast<vk::physical_device_shader_atomic_int64_features*>(next);
            a->shader_buffer_int64_atomics = fake->int64_atomics ? 1 : 0;
            next = static_cast<int*>(a->next);
        } else if (*next == vk::structure_type::physical_device_timeline_semaphore_features) {
            auto* t = reinterpret_cast<vk::physical_device_timeline_semaphore_features*>(next);
            t->timeline_semaphore = fake->timelines ? 1 : 0;
            next = static_cast<int*>(t->next);
        } else {
            break;
        }
    }
}
inline void get_physical_device_properties2(vk::physical_device_t pd,
                                            vk::physical_device_properties2* p) {
    get_physical_device_properties(pd, &p->properties);
    GPU_ASYNC_FAKE_LOCK;
    fake->note("vkGetPhysicalDeviceProperties2");
    for (auto* next = static_cast<int*>(p->next); next != nullptr;) {
        if (*next != vk::structure_type::physical_device_external_memory_host_properties) break;
        auto* h = reinterpret_cast<vk::physical_device_external_memory_host_properties*>(next);
        h->min_imported_host_pointer_alignment = fake->import_alignment;
        next = static_cast<int*>(h->next);
    }
}
inline result_t enumerate_device_extension_properties(vk::physical_device_t, const char*,
                                                      std::uint32_t* n,
                                                      vk::extension_properties* out) {
    GPU_ASYNC_FAKE_LOCK;
    if (const result_t r = fake->result("vkEnumerateDeviceExtensionProperties")) return r;
    const std::uint32_t offered = fake->host_import ? 1u : 0u;
    if (out == nullptr) {
        *n = offered;
        return vk::success;
    }
    *n = std::min(*n, offered);
    if (*n == 1) {
        out[0] = {};
        std::strcpy(out[0].extension_name, vk::ext_external_memory_host);
        out[0].spec_version = 1;
    }
    return vk::success;
}
inline result_t create_device(vk::physical_device_t, const vk::device_create_info* info,
                              const void*, vk::device_t* d) {
    GPU_ASYNC_FAKE_LOCK;
    if (const result_t r = fake->result("vkCreateDevice")) return r;
    for (std::uint32_t i = 0; i < info->enabled_extension_count; ++i)
        if (std::strcmp(info->enabled_extension_names[i], vk::ext_external_memory_host) == 0)
            fake->host_import_enabled = true;
    *d = fake_vulkan::to<vk::device_t>(fake->make("VkDevice"));
    return vk::success;
}
inline void destroy_device(vk::device_t d, const void*) {
    GPU_ASYNC_FAKE_LOCK;
    fake->note("vkDestroyDevice");
    fake->drop(fake_vulkan::from(d));
}
inline void get_device_queue(vk::device_t, std::uint32_t, std::uint32_t, vk::queue_t* q) {
    GPU_ASYNC_FAKE_LOCK;
    fake->note("vkGetDeviceQueue");
    *q = fake_vulkan::to<vk::queue_t>(0x200);
}
inline result_t device_wait_idle(vk::device_t) {
    GPU_ASYNC_FAKE_LOCK;
    if (const result_t r = fake->result("vkDeviceWaitIdle")) return r;
    return fake->lost ? vk::error_device_lost : vk::success;
}
inline result_t queue_wait_idle(vk::queue_t) {
    GPU_ASYNC_FAKE_LOCK;
    if (const result_t r = fake->result("vkQueueWaitIdle")) return r;
    return fake->lost ? vk::error_device_lost : vk::success;
}
inline result_t queue_submit(vk::queue_t, std::uint32_t count, const vk::submit_info* s,
                             vk::fence_t) {
    GPU_ASYNC_FAKE_LOCK;
    if (const result_t r = fake->result("vkQueueSubmit")) return r;
    if (fake->lost) return vk::error_device_lost;
    for (std::uint32_t i = 0; i < count; ++i) {
        fake_vulkan::batch b;
        const auto* values = static_cast<const vk::timeline_semaphore_submit_info*>(s[i].next);
        for (std::uint32_t w = 0; w < s[i].wait_semaphore_count; ++w)
            b.waits.emplace_back(fake_vulkan::from(s[i].wait_semaphores[w]),
                                 values != nullptr ? values->wait_semaphore_values[w] : 1);
        for (std::uint32_t c = 0; c < s[i].command_buffer_count; ++c)
            b.command_buffers.push_back(fake_vulkan::from(s[i].command_buffers[c]));
        for (std::uint32_t g = 0; g < s[i].signal_semaphore_count; ++g)
            b.signals.emplace_back(fake_vulkan::from(s[i].signal_semaphores[g]),
                                   values != nullptr ? values->signal_semaphore_values[g] : 1);
        fake->queue.push_back(std::move(b));
    }
    fake->drain();
    return vk::success;
}

template <class Handle>
result_t create(const char* call, const char* kind, Handle* out) {
    GPU_ASYNC_FAKE_LOCK;
    if (const result_t r = fake->result(call)) return r;
    *out = fake_vulkan::to<Handle>(fake->make(kind));
    return vk::success;
}
template <class Handle>
void destroy(const char* call, Handle h) {
    GPU_ASYNC_FAKE_LOCK;
    fake->note(call);
    fake->drop(fake_vulkan::from(h));
}

inline result_t create_buffer(vk::device_t, const vk::buffer_create_info*, const void*,
                              vk::buffer_t* b) {
    return create("vkCreateBuffer", "VkBuffer", b);
}
inline void destroy_buffer(vk::device_t, vk::buffer_t b, const void*) {
    destroy("vkDestroyBuffer", b);
}
inline void get_buffer_memory_requirements(vk::device_t, vk::buffer_t, vk::memory_requirements* r) {
    GPU_ASYNC_FAKE_LOCK;
    fake->note("vkGetBufferMemoryRequirements");
    r->size = 64;
    r->alignment = 64;
    r->memory_type_bits = 0x3;
}
inline result_t get_memory_host_pointer_properties(vk::device_t, int handle_type, const void* host,
                                                   vk::memory_host_pointer_properties* p) {
    GPU_ASYNC_FAKE_LOCK;
    if (const result_t r = fake->result("vkGetMemoryHostPointerPropertiesEXT")) return r;
    BOOST_TEST(handle_type ==
               static_cast<int>(vk::external_memory_handle_type_host_allocation_bit));
    BOOST_TEST(reinterpret_cast<std::uintptr_t>(host) % fake->import_alignment == 0u);
    p->memory_type_bits = 0x2; // the host-visible type
    return vk::success;
}
inline result_t allocate_memory(vk::device_t, const vk::memory_allocate_info* info, const void*,
                                vk::device_memory_t* m) {
    GPU_ASYNC_FAKE_LOCK;
    if (const result_t r = create("vkAllocateMemory", "VkDeviceMemory", m)) return r;
    if (const auto* import = static_cast<const vk::import_memory_host_pointer_info*>(info->next);
        import != nullptr &&
        import->s_type == vk::structure_type::import_memory_host_pointer_info) {
        BOOST_TEST(info->allocation_size % fake->import_alignment == 0u);
        fake->memory[fake_vulkan::from(*m)] = import->host_pointer; // the caller's: not freed
        fake->imported.insert(fake_vulkan::from(*m));
        return vk::success;
    }
    void* host = std::aligned_alloc(64, (info->allocation_size + 63) / 64 * 64);
    std::memset(host, 0, info->allocation_size);
    fake->memory[fake_vulkan::from(*m)] = host;
    return vk::success;
}
inline void free_memory(vk::device_t, vk::device_memory_t m, const void*) {
    GPU_ASYNC_FAKE_LOCK;
    destroy("vkFreeMemory", m);
    if (auto it = fake->memory.find(fake_vulkan::from(m)); it != fake->memory.end()) {
        if (fake->imported.erase(it->first) == 0) std::free(it->second);
        fake->memory.erase(it);
    }
}
inline result_t bind_buffer_memory(vk::device_t, vk::buffer_t b, vk::device_memory_t m,
                                   vk::device_size_t) {
    GPU_ASYNC_FAKE_LOCK;
    if (const result_t r = fake->result("vkBindBufferMemory")) return r;
    fake->buffer_memory[fake_vulkan::from(b)] = fake_vulkan::from(m);
    return vk::success;
}
inline result_t map_memory(vk::device_t, vk::device_memory_t m, vk::device_size_t,
                           vk::device_size_t, vk::flags_t, void** data) {
    GPU_ASYNC_FAKE_LOCK;
    if (const result_t r = fake->result("vkMapMemory")) return r;
    *data = fake->memory.at(fake_vulkan::from(m));
    fake->live[fake_vulkan::from(m) + 1] = "mapping";
    return vk::success;
}
inline void unmap_memory(vk::device_t, vk::device_memory_t m) {
    GPU_ASYNC_FAKE_LOCK;
    fake->note("vkUnmapMemory");
    fake->drop(fake_vulkan::from(m) + 1);
}
inline result_t create_shader_module(vk::device_t, const vk::shader_module_create_info*,
                                     const void*, vk::shader_module_t* s) {
    return create("vkCreateShaderModule", "VkShaderModule", s);
}
inline void destroy_shader_module(vk::device_t, vk::shader_module_t s, const void*) {
    destroy("vkDestroyShaderModule", s);
}
inline result_t create_descriptor_set_layout(vk::device_t,
                                             const vk::descriptor_set_layout_create_info*,
                                             const void*, vk::descriptor_set_layout_t* l) {
    return create("vkCreateDescriptorSetLayout", "VkDescriptorSetLayout", l);
}
inline void destroy_descriptor_set_layout(vk::device_t, vk::descriptor_set_layout_t l,
                                          const void*) {
    destroy("vkDestroyDescriptorSetLayout", l);
}
inline result_t create_pipeline_layout(vk::device_t, const vk::pipeline_layout_create_info*,
                                       const void*, vk::pipeline_layout_t* l) {
    return create("vkCreatePipelineLayout", "VkPipelineLayout", l);
}
inline void destroy_pipeline_layout(vk::device_t, vk::pipeline_layout_t l, const void*) {
    destroy("vkDestroyPipelineLayout", l);
}
inline result_t create_compute_pipelines(vk::device_t, vk::pipeline_cache_t, std::uint32_t,
                                         const vk::compute_pipeline_create_info*, const void*,
                                         vk::pipeline_t* p) {
    return create("vkCreateComputePipelines", "VkPipeline", p);
}
inline void destroy_pipeline(vk::device_t, vk::pipeline_t p, const void*) {
    destroy("vkDestroyPipeline", p);
}
inline result_t create_descriptor_pool(vk::device_t, const vk::descriptor_pool_create_info*,
                                       const void*, vk::descriptor_pool_t* p) {
    return create("vkCreateDescriptorPool", "VkDescriptorPool", p);
}
inline void destroy_descriptor_pool(vk::device_t, vk::descriptor_pool_t p, const void*) {
    GPU_ASYNC_FAKE_LOCK;
    destroy("vkDestroyDescriptorPool", p);
    for (auto it = fake->set_pool.begin(); it != fake->set_pool.end();) {
        if (it->second == fake_vulkan::from(p)) {
            fake->drop(it->first);
            fake->set_buffer.erase(it->first);
            it = fake->set_pool.erase(it);
        } else {
            ++it;
        }
    }
}
inline result_t allocate_descriptor_sets(vk::device_t, const vk::descriptor_set_allocate_info* info,
                                         vk::descriptor_set_t* s) {
    GPU_ASYNC_FAKE_LOCK;
    if (const result_t r = create("vkAllocateDescriptorSets", "VkDescriptorSet", s)) return r;
    fake->set_pool[fake_vulkan::from(*s)] = fake_vulkan::from(info->descriptor_pool);
    return vk::success;
}
inline void update_descriptor_sets(vk::device_t, std::uint32_t n, const vk::write_descriptor_set* w,
                                   std::uint32_t, const void*) {
    GPU_ASYNC_FAKE_LOCK;
    fake->note("vkUpdateDescriptorSets");
    for (std::uint32_t i = 0; i < n; ++i)
        fake->set_buffer[fake_vulkan::from(w[i].dst_set)].at(w[i].dst_binding) =
            fake_vulkan::from(w[i].buffer_info->buffer);
}
inline result_t create_command_pool(vk::device_t, const vk::command_pool_create_info*, const void*,
                                    vk::command_pool_t* p) {
    return create("vkCreateCommandPool", "VkCommandPool", p);
}
inline void destroy_command_pool(vk::device_t, vk::command_pool_t p, const void*) {
    GPU_ASYNC_FAKE_LOCK;
    destroy("vkDestroyCommandPool", p);
    for (auto it = fake->pool_of.begin(); it != fake->pool_of.end();) {
        if (it->second == fake_vulkan::from(p)) {
            fake->drop(it->first);
            fake->command_buffers.erase(it->first);
            it = fake->pool_of.erase(it);
        } else {
            ++it;
        }
    }
}
inline result_t allocate_command_buffers(vk::device_t, const vk::command_buffer_allocate_info* info,
                                         vk::command_buffer_t* b) {
    GPU_ASYNC_FAKE_LOCK;
    if (const result_t r = create("vkAllocateCommandBuffers", "VkCommandBuffer", b)) return r;
    fake->pool_of[fake_vulkan::from(*b)] = fake_vulkan::from(info->command_pool);
    fake->command_buffers[fake_vulkan::from(*b)] = {};
    return vk::success;
}
inline void free_command_buffers(vk::device_t, vk::command_pool_t, std::uint32_t n,
                                 const vk::command_buffer_t* b) {
    GPU_ASYNC_FAKE_LOCK;
    fake->note("vkFreeCommandBuffers");
    for (std::uint32_t i = 0; i < n; ++i) {
        fake->drop(fake_vulkan::from(b[i]));
        fake->command_buffers.erase(fake_vulkan::from(b[i]));
        fake->pool_of.erase(fake_vulkan::from(b[i]));
    }
}
inline result_t reset_command_buffer(vk::command_buffer_t b, vk::flags_t) {
    GPU_ASYNC_FAKE_LOCK;
    if (const result_t r = fake->result("vkResetCommandBuffer")) return r;
    fake->command_buffers[fake_vulkan::from(b)] = {};
    return vk::success;
}
inline result_t begin_command_buffer(vk::command_buffer_t b, const vk::command_buffer_begin_info*) {
    GPU_ASYNC_FAKE_LOCK;
    if (const result_t r = fake->result("vkBeginCommandBuffer")) return r;
    fake->command_buffers[fake_vulkan::from(b)] = {};
    return vk::success;
}
inline result_t end_command_buffer(vk::command_buffer_t) {
    GPU_ASYNC_FAKE_LOCK;
    return fake->result("vkEndCommandBuffer");
}
inline void cmd_pipeline_barrier(vk::command_buffer_t, vk::flags_t, vk::flags_t, vk::flags_t,
                                 std::uint32_t, const vk::memory_barrier*, std::uint32_t,
                                 const void*, std::uint32_t, const void*) {
    GPU_ASYNC_FAKE_LOCK;
    fake->note("vkCmdPipelineBarrier");
}
inline void cmd_bind_pipeline(vk::command_buffer_t, int, vk::pipeline_t) {
    GPU_ASYNC_FAKE_LOCK;
    fake->note("vkCmdBindPipeline");
}
inline void cmd_bind_descriptor_sets(vk::command_buffer_t b, int, vk::pipeline_layout_t,
                                     std::uint32_t, std::uint32_t, const vk::descriptor_set_t* s,
                                     std::uint32_t, const std::uint32_t*) {
    GPU_ASYNC_FAKE_LOCK;
    fake->note("vkCmdBindDescriptorSets");
    fake->command_buffers[fake_vulkan::from(b)].bound_set = fake_vulkan::from(s[0]);
}
inline void cmd_push_constants(vk::command_buffer_t b, vk::pipeline_layout_t, vk::flags_t,
                               std::uint32_t, std::uint32_t size, const void* values) {
    GPU_ASYNC_FAKE_LOCK;
    fake->note("vkCmdPushConstants");
    auto& cb = fake->command_buffers[fake_vulkan::from(b)];
    cb.push_size = size;
    std::memcpy(cb.push, values, size < sizeof(cb.push) ? size : sizeof(cb.push));
}
inline void cmd_dispatch(vk::command_buffer_t b, std::uint32_t, std::uint32_t, std::uint32_t) {
    GPU_ASYNC_FAKE_LOCK;
    fake->note("vkCmdDispatch");
    auto& cb = fake->command_buffers[fake_vulkan::from(b)];
    if (cb.push_size == 16) // the store's (vulkan_line_store.comp's store_args)
        cb.stores.push_back(
            {cb.bound_set, cb.push[0] | (std::uint64_t{cb.push[1]} << 32), cb.push[2], cb.push[3]});
}
inline result_t create_semaphore(vk::device_t, const vk::semaphore_create_info*, const void*,
                                 vk::semaphore_t* s) {
    GPU_ASYNC_FAKE_LOCK;
    if (const result_t r = create("vkCreateSemaphore", "VkSemaphore", s)) return r;
    fake->semaphores[fake_vulkan::from(*s)] = 0;
    return vk::success;
}
inline void destroy_semaphore(vk::device_t, vk::semaphore_t s, const void*) {
    GPU_ASYNC_FAKE_LOCK;
    destroy("vkDestroySemaphore", s);
    fake->semaphores.erase(fake_vulkan::from(s));
}
inline result_t get_semaphore_counter_value(vk::device_t, vk::semaphore_t s, std::uint64_t* v) {
    GPU_ASYNC_FAKE_LOCK;
    if (const result_t r = fake->result("vkGetSemaphoreCounterValue")) return r;
    if (fake->lost) return vk::error_device_lost;
    *v = fake->semaphores[fake_vulkan::from(s)];
    return vk::success;
}
inline result_t wait_semaphores(vk::device_t, const vk::semaphore_wait_info* info, std::uint64_t) {
    GPU_ASYNC_FAKE_LOCK;
    if (const result_t r = fake->result("vkWaitSemaphores")) return r;
    if (fake->lost) return vk::error_device_lost;
    for (std::uint32_t i = 0; i < info->semaphore_count; ++i)
        if (fake->semaphores[fake_vulkan::from(info->semaphores[i])] < info->values[i])
            return vk::timeout; // nothing runs while the caller waits: the wait times out
    return vk::success;
}
inline result_t signal_semaphore(vk::device_t, const vk::semaphore_signal_info* info) {
    GPU_ASYNC_FAKE_LOCK;
    if (const result_t r = fake->result("vkSignalSemaphore")) return r;
    fake->semaphores[fake_vulkan::from(info->semaphore)] = info->value;
    fake->drain();
    return vk::success;
}

#undef GPU_ASYNC_FAKE_LOCK

template <class F>
vk::void_function_t as_void(F f) {
    return reinterpret_cast<vk::void_function_t>(f);
}

/// vkGetDeviceProcAddr and vkGetInstanceProcAddr: every entry point above by its Vulkan name,
/// but those in `missing`.
inline vk::void_function_t get_proc(const char* name) {
    static const std::map<std::string, vk::void_function_t> table = {
        {"vkEnumerateInstanceVersion", as_void(&enumerate_instance_version)},
        {"vkCreateInstance", as_void(&create_instance)},
        {"vkDestroyInstance", as_void(&destroy_instance)},
        {"vkEnumeratePhysicalDevices", as_void(&enumerate_physical_devices)},
        {"vkGetPhysicalDeviceProperties", as_void(&get_physical_device_properties)},
        {"vkGetPhysicalDeviceQueueFamilyProperties",
         as_void(&get_physical_device_queue_family_properties)},
        {"vkGetPhysicalDeviceMemoryProperties", as_void(&get_physical_device_memory_properties)},
        {"vkGetPhysicalDeviceFeatures2", as_void(&get_physical_device_features2)},
        {"vkGetPhysicalDeviceProperties2", as_void(&get_physical_device_properties2)},
        {"vkEnumerateDeviceExtensionProperties", as_void(&enumerate_device_extension_properties)},
        {"vkCreateDevice", as_void(&create_device)},
        {"vkDestroyDevice", as_void(&destroy_device)},
        {"vkGetDeviceQueue", as_void(&get_device_queue)},
        {"vkDeviceWaitIdle", as_void(&device_wait_idle)},
        {"vkQueueSubmit", as_void(&queue_submit)},
        {"vkQueueWaitIdle", as_void(&queue_wait_idle)},
        {"vkCreateBuffer", as_void(&create_buffer)},
        {"vkDestroyBuffer", as_void(&destroy_buffer)},
        {"vkGetBufferMemoryRequirements", as_void(&get_buffer_memory_requirements)},
        {"vkAllocateMemory", as_void(&allocate_memory)},
        {"vkFreeMemory", as_void(&free_memory)},
        {"vkBindBufferMemory", as_void(&bind_buffer_memory)},
        {"vkMapMemory", as_void(&map_memory)},
        {"vkUnmapMemory", as_void(&unmap_memory)},
        {"vkCreateShaderModule", as_void(&create_shader_module)},
        {"vkDestroyShaderModule", as_void(&destroy_shader_module)},
        {"vkCreateDescriptorSetLayout", as_void(&create_descriptor_set_layout)},
        {"vkDestroyDescriptorSetLayout", as_void(&destroy_descriptor_set_layout)},
        {"vkCreatePipelineLayout", as_void(&create_pipeline_layout)},
        {"vkDestroyPipelineLayout", as_void(&destroy_pipeline_layout)},
        {"vkCreateComputePipelines", as_void(&create_compute_pipelines)},
        {"vkDestroyPipeline", as_void(&destroy_pipeline)},
        {"vkCreateDescriptorPool", as_void(&create_descriptor_pool)},
        {"vkDestroyDescriptorPool", as_void(&destroy_descriptor_pool)},
        {"vkAllocateDescriptorSets", as_void(&allocate_descriptor_sets)},
        {"vkUpdateDescriptorSets", as_void(&update_descriptor_sets)},
        {"vkCreateCommandPool", as_void(&create_command_pool)},
        {"vkDestroyCommandPool", as_void(&destroy_command_pool)},
        {"vkAllocateCommandBuffers", as_void(&allocate_command_buffers)},
        {"vkFreeCommandBuffers", as_void(&free_command_buffers)},
        {"vkResetCommandBuffer", as_void(&reset_command_buffer)},
        {"vkBeginCommandBuffer", as_void(&begin_command_buffer)},
        {"vkEndCommandBuffer", as_void(&end_command_buffer)},
        {"vkCmdPipelineBarrier", as_void(&cmd_pipeline_barrier)},
        {"vkCmdBindPipeline", as_void(&cmd_bind_pipeline)},
        {"vkCmdBindDescriptorSets", as_void(&cmd_bind_descriptor_sets)},
        {"vkCmdPushConstants", as_void(&cmd_push_constants)},
        {"vkCmdDispatch", as_void(&cmd_dispatch)},
        {"vkCreateSemaphore", as_void(&create_semaphore)},
        {"vkDestroySemaphore", as_void(&destroy_semaphore)},
        {"vkGetSemaphoreCounterValue", as_void(&get_semaphore_counter_value)},
        {"vkWaitSemaphores", as_void(&wait_semaphores)},
        {"vkSignalSemaphore", as_void(&signal_semaphore)},
        {"vkGetMemoryHostPointerPropertiesEXT", as_void(&get_memory_host_pointer_properties)},
    };
    if (fake == nullptr || fake->missing.count(name) != 0) return nullptr;
    // An extension's entry point resolves only on a device that enabled it.
    if (std::strcmp(name, "vkGetMemoryHostPointerPropertiesEXT") == 0 && !fake->host_import_enabled)
        return nullptr;
    if (std::strcmp(name, "vkGetDeviceProcAddr") == 0)
        return as_void(+[](vk::device_t, const char* n) { return get_proc(n); });
    auto it = table.find(name);
    return it == table.end() ? nullptr : it->second;
}

inline vk::void_function_t get_instance_proc_addr(vk::instance_t, const char* name) {
    return get_proc(name);
}

} // namespace fn

/// Sets `fake` for the test's life, and turns the health queries off meanwhile (a test that
/// wants them sets a backstop of its own): the fake serves the fixture's thread.
struct fixture {
    fake_vulkan state;
    dur_ns backstop_before = fault_backstop();
    fixture() {
        fake = &state;
        set_fault_backstop(dur_ns::max());
    }
    fixture(const fixture&) = delete;
    fixture& operator=(const fixture&) = delete;
    ~fixture() {
        set_fault_backstop(backstop_before);
        fake = nullptr;
        for (auto& [h, p] : state.memory)
            if (state.imported.count(h) == 0) std::free(p); // leaked on purpose by a test
    }
    std::unique_ptr<vulkan_loader> loader() {
        auto l = vulkan_loader::from_resolver(&fn::get_instance_proc_addr);
        BOOST_TEST_REQUIRE(l.has_value());
        state.calls.clear();
        state.call_count = 0; // fail_at counts from the first call after the load
        return std::move(l).value();
    }
};

/// A device and a line of the fake; the test fails where either cannot be made.
struct rig {
    std::unique_ptr<vulkan_loader> loader;
    std::unique_ptr<vulkan_device> device;
    std::optional<vulkan_line> line;

    explicit rig(fixture& f, vulkan_line_options options = {})
        : loader(f.loader()) {
        auto d = vulkan_device::create(*loader);
        BOOST_TEST_REQUIRE(d.has_value(), fake->failed_call);
        device = std::move(d).value();
        auto l = vulkan_line::create(*device, options);
        BOOST_TEST_REQUIRE(l.has_value());
        line.emplace(std::move(l).value());
    }
};

} // namespace gpu_async::test::vulkan_fake

#endif // GPU_ASYNC_TEST_COMMON_FAKE_VULKAN_DRIVER_HPP
