// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The part of the Vulkan ABI the Vulkan backend uses, declared so no
/// Vulkan header is needed.
///
/// Handles, result codes, flags, the create-info and submit structures and the entry points of
/// Vulkan 1.2 that <gpu_async/device/vulkan.hpp> calls, with the ABI values of vulkan_core.h
/// (test/abi/vulkan_abi.cpp checks every type, value, field offset and signature against it;
/// scripts/ci/backends.sh compiles that check). The handle types are the loader's own incomplete
/// structs, so a VkDevice, VkQueue, VkCommandBuffer or VkSemaphore converts to `vulkan::device_t`,
/// `vulkan::queue_t`, ... without a cast; the structures have the layout of their Vk namesakes
/// (instance_create_info is VkInstanceCreateInfo) with snake-case member names (`s_type`,
/// `next` for pNext, no `p` prefixes). Enumerations are `int` and flags `std::uint32_t`, as the
/// ABI passes them.
///
/// Standard library only.
#ifndef GPU_ASYNC_DEVICE_VULKAN_API_HPP
#define GPU_ASYNC_DEVICE_VULKAN_API_HPP

#include <cstddef>
#include <cstdint>

// The loader's own handle types (vulkan_core.h declares them the same way): dispatchable handles
// are pointers to these structs everywhere, non-dispatchable ones on 64-bit targets only (the
// condition below is vulkan_core.h's); elsewhere they are 64-bit integers.
struct VkInstance_T;
struct VkPhysicalDevice_T;
struct VkDevice_T;
struct VkQueue_T;
struct VkCommandBuffer_T;

#if defined(__LP64__) || defined(_WIN64) || (defined(__x86_64__) && !defined(__ILP32__)) ||        \
    defined(_M_X64) || defined(__ia64) || defined(_M_IA64) || defined(__aarch64__) ||              \
    defined(__powerpc64__)
#define GPU_ASYNC_VULKAN_POINTER_HANDLES 1
struct VkBuffer_T;
struct VkDeviceMemory_T;
struct VkShaderModule_T;
struct VkPipelineCache_T;
struct VkPipelineLayout_T;
struct VkPipeline_T;
struct VkDescriptorSetLayout_T;
struct VkDescriptorPool_T;
struct VkDescriptorSet_T;
struct VkCommandPool_T;
struct VkSemaphore_T;
struct VkFence_T;
#else
#define GPU_ASYNC_VULKAN_POINTER_HANDLES 0
#endif

namespace gpu_async::vulkan {

using instance_t = ::VkInstance_T*;              ///< VkInstance
using physical_device_t = ::VkPhysicalDevice_T*; ///< VkPhysicalDevice
using device_t = ::VkDevice_T*;                  ///< VkDevice
using queue_t = ::VkQueue_T*;                    ///< VkQueue
using command_buffer_t = ::VkCommandBuffer_T*;   ///< VkCommandBuffer
#if GPU_ASYNC_VULKAN_POINTER_HANDLES
using buffer_t = ::VkBuffer_T*;                             ///< VkBuffer
using device_memory_t = ::VkDeviceMemory_T*;                ///< VkDeviceMemory
using shader_module_t = ::VkShaderModule_T*;                ///< VkShaderModule
using pipeline_cache_t = ::VkPipelineCache_T*;              ///< VkPipelineCache
using pipeline_layout_t = ::VkPipelineLayout_T*;            ///< VkPipelineLayout
using pipeline_t = ::VkPipeline_T*;                         ///< VkPipeline
using descriptor_set_layout_t = ::VkDescriptorSetLayout_T*; ///< VkDescriptorSetLayout
using descriptor_pool_t = ::VkDescriptorPool_T*;            ///< VkDescriptorPool
using descriptor_set_t = ::VkDescriptorSet_T*;              ///< VkDescriptorSet
using command_pool_t = ::VkCommandPool_T*;                  ///< VkCommandPool
using semaphore_t = ::VkSemaphore_T*;                       ///< VkSemaphore
using fence_t = ::VkFence_T*;                               ///< VkFence
#else
using buffer_t = std::uint64_t;
using device_memory_t = std::uint64_t;
using shader_module_t = std::uint64_t;
using pipeline_cache_t = std::uint64_t;
using pipeline_layout_t = std::uint64_t;
using pipeline_t = std::uint64_t;
using descriptor_set_layout_t = std::uint64_t;
using descriptor_pool_t = std::uint64_t;
using descriptor_set_t = std::uint64_t;
using command_pool_t = std::uint64_t;
using semaphore_t = std::uint64_t;
using fence_t = std::uint64_t;
#endif

using result_t = int;                ///< VkResult
using bool32_t = std::uint32_t;      ///< VkBool32
using flags_t = std::uint32_t;       ///< VkFlags (every *Flags type used here)
using device_size_t = std::uint64_t; ///< VkDeviceSize
using void_function_t = void (*)();  ///< PFN_vkVoidFunction

// VkResult
inline constexpr result_t success = 0;                      ///< VK_SUCCESS
inline constexpr result_t not_ready = 1;                    ///< VK_NOT_READY
inline constexpr result_t timeout = 2;                      ///< VK_TIMEOUT
inline constexpr result_t incomplete = 5;                   ///< VK_INCOMPLETE
inline constexpr result_t error_out_of_host_memory = -1;    ///< VK_ERROR_OUT_OF_HOST_MEMORY
inline constexpr result_t error_out_of_device_memory = -2;  ///< VK_ERROR_OUT_OF_DEVICE_MEMORY
inline constexpr result_t error_initialization_failed = -3; ///< VK_ERROR_INITIALIZATION_FAILED
inline constexpr result_t error_device_lost = -4;           ///< VK_ERROR_DEVICE_LOST
inline constexpr result_t error_memory_map_failed = -5;     ///< VK_ERROR_MEMORY_MAP_FAILED
inline constexpr result_t error_layer_not_present = -6;     ///< VK_ERROR_LAYER_NOT_PRESENT
inline constexpr result_t error_extension_not_present = -7; ///< VK_ERROR_EXTENSION_NOT_PRESENT
inline constexpr result_t error_feature_not_present = -8;   ///< VK_ERROR_FEATURE_NOT_PRESENT
inline constexpr result_t error_incompatible_driver = -9;   ///< VK_ERROR_INCOMPATIBLE_DRIVER
inline constexpr result_t error_too_many_objects = -10;     ///< VK_ERROR_TOO_MANY_OBJECTS
inline constexpr result_t error_format_not_supported = -11; ///< VK_ERROR_FORMAT_NOT_SUPPORTED
inline constexpr result_t error_fragmented_pool = -12;      ///< VK_ERROR_FRAGMENTED_POOL
inline constexpr result_t error_unknown = -13;              ///< VK_ERROR_UNKNOWN
inline constexpr result_t error_out_of_pool_memory = -1000069000; ///< VK_ERROR_OUT_OF_POOL_MEMORY

/// VK_API_VERSION_1_2: the version the backend needs of the instance and the device.
inline constexpr std::uint32_t api_version_1_2 = (1u << 22) | (2u << 12);
/// VK_API_VERSION_MAJOR and VK_API_VERSION_MINOR of a packed version.
constexpr std::uint32_t version_major(std::uint32_t v) noexcept {
    return (v >> 22) & 0x7fu;
}
constexpr std::uint32_t version_minor(std::uint32_t v) noexcept {
    return (v >> 12) & 0x3ffu;
}

/// VkStructureType values of the structures below.
namespace structure_type {
inline constexpr int application_info = 0;
inline constexpr int instance_create_info = 1;
inline constexpr int device_queue_create_info = 2;
inline constexpr int device_create_info = 3;
inline constexpr int submit_info = 4;
inline constexpr int memory_allocate_info = 5;
inline constexpr int semaphore_create_info = 9;
inline constexpr int buffer_create_info = 12;
inline constexpr int shader_module_create_info = 16;
inline constexpr int pipeline_shader_stage_create_info = 18;
inline constexpr int compute_pipeline_create_info = 29;
inline constexpr int pipeline_layout_create_info = 30;
inline constexpr int descriptor_set_layout_create_info = 32;
inline constexpr int descriptor_pool_create_info = 33;
inline constexpr int descriptor_set_allocate_info = 34;
inline constexpr int write_descriptor_set = 35;
inline constexpr int command_pool_create_info = 39;
inline constexpr int command_buffer_allocate_info = 40;
inline constexpr int command_buffer_begin_info = 42;
inline constexpr int memory_barrier = 46;
inline constexpr int physical_device_features_2 = 1000059000;
inline constexpr int physical_device_shader_atomic_int64_features = 1000180000;
inline constexpr int physical_device_timeline_semaphore_features = 1000207000;
inline constexpr int semaphore_type_create_info = 1000207002;
inline constexpr int timeline_semaphore_submit_info = 1000207003;
inline constexpr int semaphore_wait_info = 1000207004;
inline constexpr int semaphore_signal_info = 1000207005;
inline constexpr int physical_device_properties_2 = 1000059001;
inline constexpr int external_memory_buffer_create_info = 1000072000;
inline constexpr int import_memory_host_pointer_info = 1000178000;
inline constexpr int memory_host_pointer_properties = 1000178001;
inline constexpr int physical_device_external_memory_host_properties = 1000178002;
} // namespace structure_type

// VkPhysicalDeviceType
inline constexpr int physical_device_type_other = 0;
inline constexpr int physical_device_type_integrated_gpu = 1;
inline constexpr int physical_device_type_discrete_gpu = 2;
inline constexpr int physical_device_type_virtual_gpu = 3;
inline constexpr int physical_device_type_cpu = 4;

inline constexpr flags_t queue_compute_bit = 0x2; ///< VK_QUEUE_COMPUTE_BIT

inline constexpr flags_t memory_property_device_local_bit = 0x1;  ///< ..._DEVICE_LOCAL_BIT
inline constexpr flags_t memory_property_host_visible_bit = 0x2;  ///< ..._HOST_VISIBLE_BIT
inline constexpr flags_t memory_property_host_coherent_bit = 0x4; ///< ..._HOST_COHERENT_BIT
inline constexpr flags_t memory_property_host_cached_bit = 0x8;   ///< ..._HOST_CACHED_BIT

inline constexpr flags_t buffer_usage_storage_buffer_bit = 0x20; ///< ..._STORAGE_BUFFER_BIT
inline constexpr int sharing_mode_exclusive = 0;                 ///< VK_SHARING_MODE_EXCLUSIVE
inline constexpr int sharing_mode_concurrent = 1;                ///< VK_SHARING_MODE_CONCURRENT
inline constexpr int descriptor_type_storage_buffer = 7;  ///< VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
inline constexpr flags_t shader_stage_compute_bit = 0x20; ///< VK_SHADER_STAGE_COMPUTE_BIT
inline constexpr int pipeline_bind_point_compute = 1;     ///< VK_PIPELINE_BIND_POINT_COMPUTE
inline constexpr flags_t command_pool_create_transient_bit = 0x1;
inline constexpr flags_t command_pool_create_reset_command_buffer_bit = 0x2;
inline constexpr int command_buffer_level_primary = 0; ///< VK_COMMAND_BUFFER_LEVEL_PRIMARY
inline constexpr flags_t command_buffer_usage_one_time_submit_bit = 0x1;
/// VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT
inline constexpr flags_t external_memory_handle_type_host_allocation_bit = 0x80;
/// VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME
inline constexpr const char* ext_external_memory_host = "VK_EXT_external_memory_host";
inline constexpr std::size_t max_extension_name_size = 256;    ///< VK_MAX_EXTENSION_NAME_SIZE
inline constexpr int semaphore_type_timeline = 1;              ///< VK_SEMAPHORE_TYPE_TIMELINE
inline constexpr device_size_t whole_size = ~device_size_t{0}; ///< VK_WHOLE_SIZE

// VkPipelineStageFlagBits
inline constexpr flags_t pipeline_stage_top_of_pipe_bit = 0x1;
inline constexpr flags_t pipeline_stage_compute_shader_bit = 0x800;
inline constexpr flags_t pipeline_stage_transfer_bit = 0x1000;
inline constexpr flags_t pipeline_stage_bottom_of_pipe_bit = 0x2000;
inline constexpr flags_t pipeline_stage_host_bit = 0x4000;
inline constexpr flags_t pipeline_stage_all_commands_bit = 0x10000;

// VkAccessFlagBits
inline constexpr flags_t access_shader_read_bit = 0x20;
inline constexpr flags_t access_shader_write_bit = 0x40;
inline constexpr flags_t access_transfer_write_bit = 0x1000;
inline constexpr flags_t access_host_read_bit = 0x2000;
inline constexpr flags_t access_host_write_bit = 0x4000;
inline constexpr flags_t access_memory_read_bit = 0x8000;
inline constexpr flags_t access_memory_write_bit = 0x10000;

inline constexpr std::size_t max_physical_device_name_size = 256; ///< VK_MAX_..._NAME_SIZE
inline constexpr std::size_t uuid_size = 16;                      ///< VK_UUID_SIZE
inline constexpr std::size_t max_memory_types = 32;               ///< VK_MAX_MEMORY_TYPES
inline constexpr std::size_t max_memory_heaps = 16;               ///< VK_MAX_MEMORY_HEAPS

/// VkApplicationInfo
struct application_info {
    int s_type = structure_type::application_info;
    const void* next = nullptr;
    const char* application_name = nullptr;
    std::uint32_t application_version = 0;
    const char* engine_name = nullptr;
    std::uint32_t engine_version = 0;
    std::uint32_t api_version = 0;
};

/// VkInstanceCreateInfo
struct instance_create_info {
    int s_type = structure_type::instance_create_info;
    const void* next = nullptr;
    flags_t flags = 0;
    const application_info* application = nullptr;
    std::uint32_t enabled_layer_count = 0;
    const char* const* enabled_layer_names = nullptr;
    std::uint32_t enabled_extension_count = 0;
    const char* const* enabled_extension_names = nullptr;
};

/// VkPhysicalDeviceProperties: the fields before the limits by name; the limits
/// (VkPhysicalDeviceLimits) and the sparse properties as the bytes they take.
struct physical_device_properties {
    std::uint32_t api_version = 0;
    std::uint32_t driver_version = 0;
    std::uint32_t vendor_id = 0;
    std::uint32_t device_id = 0;
    int device_type = 0; ///< VkPhysicalDeviceType
    char device_name[max_physical_device_name_size] = {};
    std::uint8_t pipeline_cache_uuid[uuid_size] = {};
    alignas(8) std::byte limits[504] = {};
    std::byte sparse_properties[20] = {};
};

/// VkPhysicalDeviceProperties2
struct physical_device_properties2 {
    int s_type = structure_type::physical_device_properties_2;
    void* next = nullptr;
    physical_device_properties properties{};
};

/// VkPhysicalDeviceExternalMemoryHostPropertiesEXT (VK_EXT_external_memory_host)
struct physical_device_external_memory_host_properties {
    int s_type = structure_type::physical_device_external_memory_host_properties;
    void* next = nullptr;
    device_size_t min_imported_host_pointer_alignment = 0;
};

/// VkExtensionProperties
struct extension_properties {
    char extension_name[max_extension_name_size] = {};
    std::uint32_t spec_version = 0;
};

/// VkQueueFamilyProperties
struct queue_family_properties {
    flags_t queue_flags = 0;
    std::uint32_t queue_count = 0;
    std::uint32_t timestamp_valid_bits = 0;
    std::uint32_t min_image_transfer_granularity[3] = {}; ///< VkExtent3D
};

/// VkPhysicalDeviceFeatures: 55 VkBool32 in the order of vulkan_core.h; the backend reads and
/// sets shaderInt64 only (`shader_int64_index`).
struct physical_device_features {
    static constexpr std::size_t count = 55;
    static constexpr std::size_t shader_int64_index = 40; ///< shaderInt64
    bool32_t values[count] = {};
};

/// VkPhysicalDeviceFeatures2
struct physical_device_features2 {
    int s_type = structure_type::physical_device_features_2;
    void* next = nullptr;
    physical_device_features features{};
};

/// VkPhysicalDeviceShaderAtomicInt64Features (core in Vulkan 1.2)
struct physical_device_shader_atomic_int64_features {
    int s_type = structure_type::physical_device_shader_atomic_int64_features;
    void* next = nullptr;
    bool32_t shader_buffer_int64_atomics = 0;
    bool32_t shader_shared_int64_atomics = 0;
};

/// VkPhysicalDeviceTimelineSemaphoreFeatures (core in Vulkan 1.2)
struct physical_device_timeline_semaphore_features {
    int s_type = structure_type::physical_device_timeline_semaphore_features;
    void* next = nullptr;
    bool32_t timeline_semaphore = 0;
};

/// VkDeviceQueueCreateInfo
struct device_queue_create_info {
    int s_type = structure_type::device_queue_create_info;
    const void* next = nullptr;
    flags_t flags = 0;
    std::uint32_t queue_family_index = 0;
    std::uint32_t queue_count = 0;
    const float* queue_priorities = nullptr;
};

/// VkDeviceCreateInfo
struct device_create_info {
    int s_type = structure_type::device_create_info;
    const void* next = nullptr;
    flags_t flags = 0;
    std::uint32_t queue_create_info_count = 0;
    const device_queue_create_info* queue_create_infos = nullptr;
    std::uint32_t enabled_layer_count = 0;
    const char* const* enabled_layer_names = nullptr;
    std::uint32_t enabled_extension_count = 0;
    const char* const* enabled_extension_names = nullptr;
    const physical_device_features* enabled_features = nullptr;
};

/// VkMemoryType
struct memory_type {
    flags_t property_flags = 0;
    std::uint32_t heap_index = 0;
};

/// VkMemoryHeap
struct memory_heap {
    device_size_t size = 0;
    flags_t flags = 0;
};

/// VkPhysicalDeviceMemoryProperties
struct physical_device_memory_properties {
    std::uint32_t memory_type_count = 0;
    memory_type memory_types[max_memory_types] = {};
    std::uint32_t memory_heap_count = 0;
    memory_heap memory_heaps[max_memory_heaps] = {};
};

/// VkBufferCreateInfo
struct buffer_create_info {
    int s_type = structure_type::buffer_create_info;
    const void* next = nullptr;
    flags_t flags = 0;
    device_size_t size = 0;
    flags_t usage = 0;
    int sharing_mode = sharing_mode_exclusive;
    std::uint32_t queue_family_index_count = 0;
    const std::uint32_t* queue_family_indices = nullptr;
};

/// VkExternalMemoryBufferCreateInfo (core in Vulkan 1.1)
struct external_memory_buffer_create_info {
    int s_type = structure_type::external_memory_buffer_create_info;
    const void* next = nullptr;
    flags_t handle_types = 0;
};

/// VkImportMemoryHostPointerInfoEXT (VK_EXT_external_memory_host)
struct import_memory_host_pointer_info {
    int s_type = structure_type::import_memory_host_pointer_info;
    const void* next = nullptr;
    int handle_type = 0; ///< VkExternalMemoryHandleTypeFlagBits
    void* host_pointer = nullptr;
};

/// VkMemoryHostPointerPropertiesEXT (VK_EXT_external_memory_host)
struct memory_host_pointer_properties {
    int s_type = structure_type::memory_host_pointer_properties;
    void* next = nullptr;
    std::uint32_t memory_type_bits = 0;
};

/// VkMemoryRequirements
struct memory_requirements {
    device_size_t size = 0;
    device_size_t alignment = 0;
    std::uint32_t memory_type_bits = 0;
};

/// VkMemoryAllocateInfo
struct memory_allocate_info {
    int s_type = structure_type::memory_allocate_info;
    const void* next = nullptr;
    device_size_t allocation_size = 0;
    std::uint32_t memory_type_index = 0;
};

/// VkShaderModuleCreateInfo (`code_size` in bytes)
struct shader_module_create_info {
    int s_type = structure_type::shader_module_create_info;
    const void* next = nullptr;
    flags_t flags = 0;
    std::size_t code_size = 0;
    const std::uint32_t* code = nullptr;
};

/// VkDescriptorSetLayoutBinding
struct descriptor_set_layout_binding {
    std::uint32_t binding = 0;
    int descriptor_type = 0;
    std::uint32_t descriptor_count = 0;
    flags_t stage_flags = 0;
    const void* immutable_samplers = nullptr; ///< const VkSampler*
};

/// VkDescriptorSetLayoutCreateInfo
struct descriptor_set_layout_create_info {
    int s_type = structure_type::descriptor_set_layout_create_info;
    const void* next = nullptr;
    flags_t flags = 0;
    std::uint32_t binding_count = 0;
    const descriptor_set_layout_binding* bindings = nullptr;
};

/// VkPushConstantRange
struct push_constant_range {
    flags_t stage_flags = 0;
    std::uint32_t offset = 0;
    std::uint32_t size = 0;
};

/// VkPipelineLayoutCreateInfo
struct pipeline_layout_create_info {
    int s_type = structure_type::pipeline_layout_create_info;
    const void* next = nullptr;
    flags_t flags = 0;
    std::uint32_t set_layout_count = 0;
    const descriptor_set_layout_t* set_layouts = nullptr;
    std::uint32_t push_constant_range_count = 0;
    const push_constant_range* push_constant_ranges = nullptr;
};

/// VkPipelineShaderStageCreateInfo
struct pipeline_shader_stage_create_info {
    int s_type = structure_type::pipeline_shader_stage_create_info;
    const void* next = nullptr;
    flags_t flags = 0;
    flags_t stage = 0; ///< VkShaderStageFlagBits
    shader_module_t module{};
    const char* name = nullptr;
    const void* specialization_info = nullptr; ///< const VkSpecializationInfo*
};

/// VkComputePipelineCreateInfo
struct compute_pipeline_create_info {
    int s_type = structure_type::compute_pipeline_create_info;
    const void* next = nullptr;
    flags_t flags = 0;
    pipeline_shader_stage_create_info stage{};
    pipeline_layout_t layout{};
    pipeline_t base_pipeline_handle{};
    std::int32_t base_pipeline_index = -1;
};

/// VkDescriptorPoolSize
struct descriptor_pool_size {
    int type = 0;
    std::uint32_t descriptor_count = 0;
};

/// VkDescriptorPoolCreateInfo
struct descriptor_pool_create_info {
    int s_type = structure_type::descriptor_pool_create_info;
    const void* next = nullptr;
    flags_t flags = 0;
    std::uint32_t max_sets = 0;
    std::uint32_t pool_size_count = 0;
    const descriptor_pool_size* pool_sizes = nullptr;
};

/// VkDescriptorSetAllocateInfo
struct descriptor_set_allocate_info {
    int s_type = structure_type::descriptor_set_allocate_info;
    const void* next = nullptr;
    descriptor_pool_t descriptor_pool{};
    std::uint32_t descriptor_set_count = 0;
    const descriptor_set_layout_t* set_layouts = nullptr;
};

/// VkDescriptorBufferInfo
struct descriptor_buffer_info {
    buffer_t buffer{};
    device_size_t offset = 0;
    device_size_t range = 0;
};

/// VkWriteDescriptorSet
struct write_descriptor_set {
    int s_type = structure_type::write_descriptor_set;
    const void* next = nullptr;
    descriptor_set_t dst_set{};
    std::uint32_t dst_binding = 0;
    std::uint32_t dst_array_element = 0;
    std::uint32_t descriptor_count = 0;
    int descriptor_type = 0;
    const void* image_info = nullptr; ///< const VkDescriptorImageInfo*
    const descriptor_buffer_info* buffer_info = nullptr;
    const void* texel_buffer_view = nullptr; ///< const VkBufferView*
};

/// VkCommandPoolCreateInfo
struct command_pool_create_info {
    int s_type = structure_type::command_pool_create_info;
    const void* next = nullptr;
    flags_t flags = 0;
    std::uint32_t queue_family_index = 0;
};

/// VkCommandBufferAllocateInfo
struct command_buffer_allocate_info {
    int s_type = structure_type::command_buffer_allocate_info;
    const void* next = nullptr;
    command_pool_t command_pool{};
    int level = command_buffer_level_primary;
    std::uint32_t command_buffer_count = 0;
};

/// VkCommandBufferBeginInfo
struct command_buffer_begin_info {
    int s_type = structure_type::command_buffer_begin_info;
    const void* next = nullptr;
    flags_t flags = 0;
    const void* inheritance_info = nullptr; ///< const VkCommandBufferInheritanceInfo*
};

/// VkMemoryBarrier
struct memory_barrier {
    int s_type = structure_type::memory_barrier;
    const void* next = nullptr;
    flags_t src_access_mask = 0;
    flags_t dst_access_mask = 0;
};

/// VkSemaphoreTypeCreateInfo
struct semaphore_type_create_info {
    int s_type = structure_type::semaphore_type_create_info;
    const void* next = nullptr;
    int semaphore_type = 0;
    std::uint64_t initial_value = 0;
};

/// VkSemaphoreCreateInfo
struct semaphore_create_info {
    int s_type = structure_type::semaphore_create_info;
    const void* next = nullptr;
    flags_t flags = 0;
};

/// VkTimelineSemaphoreSubmitInfo
struct timeline_semaphore_submit_info {
    int s_type = structure_type::timeline_semaphore_submit_info;
    const void* next = nullptr;
    std::uint32_t wait_semaphore_value_count = 0;
    const std::uint64_t* wait_semaphore_values = nullptr;
    std::uint32_t signal_semaphore_value_count = 0;
    const std::uint64_t* signal_semaphore_values = nullptr;
};

/// VkSubmitInfo
struct submit_info {
    int s_type = structure_type::submit_info;
    const void* next = nullptr;
    std::uint32_t wait_semaphore_count = 0;
    const semaphore_t* wait_semaphores = nullptr;
    const flags_t* wait_dst_stage_mask = nullptr;
    std::uint32_t command_buffer_count = 0;
    const command_buffer_t* command_buffers = nullptr;
    std::uint32_t signal_semaphore_count = 0;
    const semaphore_t* signal_semaphores = nullptr;
};

/// VkSemaphoreWaitInfo
struct semaphore_wait_info {
    int s_type = structure_type::semaphore_wait_info;
    const void* next = nullptr;
    flags_t flags = 0;
    std::uint32_t semaphore_count = 0;
    const semaphore_t* semaphores = nullptr;
    const std::uint64_t* values = nullptr;
};

/// VkSemaphoreSignalInfo
struct semaphore_signal_info {
    int s_type = structure_type::semaphore_signal_info;
    const void* next = nullptr;
    semaphore_t semaphore{};
    std::uint64_t value = 0;
};

/// vkGetInstanceProcAddr: the one entry point taken from the loader library by name.
using get_instance_proc_addr_fn = void_function_t (*)(instance_t instance, const char* name);

/// The entry points taken with vkGetInstanceProcAddr(nullptr, name): each member is the
/// function of the same name in camel case with the "vk" prefix.
struct global_api {
    get_instance_proc_addr_fn get_instance_proc_addr = nullptr;
    result_t (*enumerate_instance_version)(std::uint32_t* version) = nullptr; ///< optional (1.0)
    result_t (*create_instance)(const instance_create_info* info, const void* allocator,
                                instance_t* instance) = nullptr;
};

/// The instance's entry points (vkGetInstanceProcAddr(instance, name)).
struct instance_api {
    void (*destroy_instance)(instance_t instance, const void* allocator) = nullptr;
    result_t (*enumerate_physical_devices)(instance_t instance, std::uint32_t* count,
                                           physical_device_t* devices) = nullptr;
    void (*get_physical_device_properties)(physical_device_t device,
                                           physical_device_properties* properties) = nullptr;
    void (*get_physical_device_queue_family_properties)(
        physical_device_t device, std::uint32_t* count,
        queue_family_properties* properties) = nullptr;
    void (*get_physical_device_memory_properties)(
        physical_device_t device, physical_device_memory_properties* properties) = nullptr;
    void (*get_physical_device_features2)(physical_device_t device,
                                          physical_device_features2* features) = nullptr;
    void (*get_physical_device_properties2)(physical_device_t device,
                                            physical_device_properties2* properties) = nullptr;
    result_t (*enumerate_device_extension_properties)(physical_device_t device, const char* layer,
                                                      std::uint32_t* count,
                                                      extension_properties* properties) = nullptr;
    result_t (*create_device)(physical_device_t physical_device, const device_create_info* info,
                              const void* allocator, device_t* device) = nullptr;
    void_function_t (*get_device_proc_addr)(device_t device, const char* name) = nullptr;
};

/// The device's entry points (vkGetDeviceProcAddr(device, name)), all core in Vulkan 1.2 but
/// get_memory_host_pointer_properties (VK_EXT_external_memory_host: null without it).
struct device_api {
    void (*destroy_device)(device_t device, const void* allocator) = nullptr;
    void (*get_device_queue)(device_t device, std::uint32_t family, std::uint32_t index,
                             queue_t* queue) = nullptr;
    result_t (*device_wait_idle)(device_t device) = nullptr;
    result_t (*queue_submit)(queue_t queue, std::uint32_t count, const submit_info* submits,
                             fence_t fence) = nullptr;
    result_t (*queue_wait_idle)(queue_t queue) = nullptr;
    result_t (*create_buffer)(device_t device, const buffer_create_info* info,
                              const void* allocator, buffer_t* buffer) = nullptr;
    void (*destroy_buffer)(device_t device, buffer_t buffer, const void* allocator) = nullptr;
    void (*get_buffer_memory_requirements)(device_t device, buffer_t buffer,
                                           memory_requirements* requirements) = nullptr;
    result_t (*allocate_memory)(device_t device, const memory_allocate_info* info,
                                const void* allocator, device_memory_t* memory) = nullptr;
    void (*free_memory)(device_t device, device_memory_t memory, const void* allocator) = nullptr;
    result_t (*bind_buffer_memory)(device_t device, buffer_t buffer, device_memory_t memory,
                                   device_size_t offset) = nullptr;
    result_t (*map_memory)(device_t device, device_memory_t memory, device_size_t offset,
                           device_size_t size, flags_t flags, void** data) = nullptr;
    void (*unmap_memory)(device_t device, device_memory_t memory) = nullptr;
    result_t (*create_shader_module)(device_t device, const shader_module_create_info* info,
                                     const void* allocator, shader_module_t* module) = nullptr;
    void (*destroy_shader_module)(device_t device, shader_module_t module,
                                  const void* allocator) = nullptr;
    result_t (*create_descriptor_set_layout)(device_t device,
                                             const descriptor_set_layout_create_info* info,
                                             const void* allocator,
                                             descriptor_set_layout_t* layout) = nullptr;
    void (*destroy_descriptor_set_layout)(device_t device, descriptor_set_layout_t layout,
                                          const void* allocator) = nullptr;
    result_t (*create_pipeline_layout)(device_t device, const pipeline_layout_create_info* info,
                                       const void* allocator, pipeline_layout_t* layout) = nullptr;
    void (*destroy_pipeline_layout)(device_t device, pipeline_layout_t layout,
                                    const void* allocator) = nullptr;
    result_t (*create_compute_pipelines)(device_t device, pipeline_cache_t cache,
                                         std::uint32_t count,
                                         const compute_pipeline_create_info* infos,
                                         const void* allocator, pipeline_t* pipelines) = nullptr;
    void (*destroy_pipeline)(device_t device, pipeline_t pipeline, const void* allocator) = nullptr;
    result_t (*create_descriptor_pool)(device_t device, const descriptor_pool_create_info* info,
                                       const void* allocator, descriptor_pool_t* pool) = nullptr;
    void (*destroy_descriptor_pool)(device_t device, descriptor_pool_t pool,
                                    const void* allocator) = nullptr;
    result_t (*allocate_descriptor_sets)(device_t device, const descriptor_set_allocate_info* info,
                                         descriptor_set_t* sets) = nullptr;
    void (*update_descriptor_sets)(device_t device, std::uint32_t write_count,
                                   const write_descriptor_set* writes, std::uint32_t copy_count,
                                   const void* copies) = nullptr;
    result_t (*create_command_pool)(device_t device, const command_pool_create_info* info,
                                    const void* allocator, command_pool_t* pool) = nullptr;
    void (*destroy_command_pool)(device_t device, command_pool_t pool,
                                 const void* allocator) = nullptr;
    result_t (*allocate_command_buffers)(device_t device, const command_buffer_allocate_info* info,
                                         command_buffer_t* buffers) = nullptr;
    void (*free_command_buffers)(device_t device, command_pool_t pool, std::uint32_t count,
                                 const command_buffer_t* buffers) = nullptr;
    result_t (*reset_command_buffer)(command_buffer_t buffer, flags_t flags) = nullptr;
    result_t (*begin_command_buffer)(command_buffer_t buffer,
                                     const command_buffer_begin_info* info) = nullptr;
    result_t (*end_command_buffer)(command_buffer_t buffer) = nullptr;
    void (*cmd_pipeline_barrier)(command_buffer_t buffer, flags_t src_stages, flags_t dst_stages,
                                 flags_t dependency_flags, std::uint32_t memory_barrier_count,
                                 const memory_barrier* memory_barriers,
                                 std::uint32_t buffer_barrier_count, const void* buffer_barriers,
                                 std::uint32_t image_barrier_count,
                                 const void* image_barriers) = nullptr;
    void (*cmd_bind_pipeline)(command_buffer_t buffer, int bind_point,
                              pipeline_t pipeline) = nullptr;
    void (*cmd_bind_descriptor_sets)(command_buffer_t buffer, int bind_point,
                                     pipeline_layout_t layout, std::uint32_t first_set,
                                     std::uint32_t count, const descriptor_set_t* sets,
                                     std::uint32_t dynamic_offset_count,
                                     const std::uint32_t* dynamic_offsets) = nullptr;
    void (*cmd_push_constants)(command_buffer_t buffer, pipeline_layout_t layout, flags_t stages,
                               std::uint32_t offset, std::uint32_t size,
                               const void* values) = nullptr;
    void (*cmd_dispatch)(command_buffer_t buffer, std::uint32_t x, std::uint32_t y,
                         std::uint32_t z) = nullptr;
    result_t (*create_semaphore)(device_t device, const semaphore_create_info* info,
                                 const void* allocator, semaphore_t* semaphore) = nullptr;
    void (*destroy_semaphore)(device_t device, semaphore_t semaphore,
                              const void* allocator) = nullptr;
    result_t (*get_semaphore_counter_value)(device_t device, semaphore_t semaphore,
                                            std::uint64_t* value) = nullptr;
    result_t (*wait_semaphores)(device_t device, const semaphore_wait_info* info,
                                std::uint64_t timeout_ns) = nullptr;
    result_t (*signal_semaphore)(device_t device, const semaphore_signal_info* info) = nullptr;
    result_t (*get_memory_host_pointer_properties)(device_t device, int handle_type,
                                                   const void* host_pointer,
                                                   memory_host_pointer_properties* properties) =
        nullptr; ///< vkGetMemoryHostPointerPropertiesEXT
};

} // namespace gpu_async::vulkan

#endif // GPU_ASYNC_DEVICE_VULKAN_API_HPP
