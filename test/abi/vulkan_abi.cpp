// SPDX-License-Identifier: BSL-1.0
// test/abi/vulkan_abi.cpp: <gpu_async/device/vulkan_api.hpp>'s own Vulkan declarations against
// vulkan_core.h. Compiled (not run) by scripts/ci/backends.sh, and by the test build wherever
// the Vulkan headers are installed (libvulkan-dev).
#include <gpu_async/device/vulkan_api.hpp>

#include "abi_check.hpp"

#include <vulkan/vulkan_core.h>

#include <cstddef>
#include <type_traits>

namespace v = gpu_async::vulkan;

static_assert(VK_HEADER_VERSION_COMPLETE >= VK_API_VERSION_1_2, "the backend uses Vulkan 1.2");

// Handles: the same types, so a caller's handles convert without casts.
static_assert(std::is_same_v<v::instance_t, VkInstance>);
static_assert(std::is_same_v<v::physical_device_t, VkPhysicalDevice>);
static_assert(std::is_same_v<v::device_t, VkDevice>);
static_assert(std::is_same_v<v::queue_t, VkQueue>);
static_assert(std::is_same_v<v::command_buffer_t, VkCommandBuffer>);
static_assert(std::is_same_v<v::buffer_t, VkBuffer>);
static_assert(std::is_same_v<v::device_memory_t, VkDeviceMemory>);
static_assert(std::is_same_v<v::shader_module_t, VkShaderModule>);
static_assert(std::is_same_v<v::pipeline_cache_t, VkPipelineCache>);
static_assert(std::is_same_v<v::pipeline_layout_t, VkPipelineLayout>);
static_assert(std::is_same_v<v::pipeline_t, VkPipeline>);
static_assert(std::is_same_v<v::descriptor_set_layout_t, VkDescriptorSetLayout>);
static_assert(std::is_same_v<v::descriptor_pool_t, VkDescriptorPool>);
static_assert(std::is_same_v<v::descriptor_set_t, VkDescriptorSet>);
static_assert(std::is_same_v<v::command_pool_t, VkCommandPool>);
static_assert(std::is_same_v<v::semaphore_t, VkSemaphore>);
static_assert(std::is_same_v<v::fence_t, VkFence>);
static_assert(std::is_same_v<v::bool32_t, VkBool32>);
static_assert(std::is_same_v<v::flags_t, VkFlags>);
static_assert(std::is_same_v<v::device_size_t, VkDeviceSize>);
static_assert(std::is_same_v<v::void_function_t, PFN_vkVoidFunction>);
static_assert(sizeof(v::result_t) == sizeof(VkResult));

// Values.
static_assert(v::success == VK_SUCCESS);
static_assert(v::not_ready == VK_NOT_READY);
static_assert(v::timeout == VK_TIMEOUT);
static_assert(v::incomplete == VK_INCOMPLETE);
static_assert(v::error_out_of_host_memory == VK_ERROR_OUT_OF_HOST_MEMORY);
static_assert(v::error_out_of_device_memory == VK_ERROR_OUT_OF_DEVICE_MEMORY);
static_assert(v::error_initialization_failed == VK_ERROR_INITIALIZATION_FAILED);
static_assert(v::error_device_lost == VK_ERROR_DEVICE_LOST);
static_assert(v::error_memory_map_failed == VK_ERROR_MEMORY_MAP_FAILED);
static_assert(v::error_layer_not_present == VK_ERROR_LAYER_NOT_PRESENT);
static_assert(v::error_extension_not_present == VK_ERROR_EXTENSION_NOT_PRESENT);
static_assert(v::error_feature_not_present == VK_ERROR_FEATURE_NOT_PRESENT);
static_assert(v::error_incompatible_driver == VK_ERROR_INCOMPATIBLE_DRIVER);
static_assert(v::error_too_many_objects == VK_ERROR_TOO_MANY_OBJECTS);
static_assert(v::error_format_not_supported == VK_ERROR_FORMAT_NOT_SUPPORTED);
static_assert(v::error_fragmented_pool == VK_ERROR_FRAGMENTED_POOL);
static_assert(v::error_unknown == VK_ERROR_UNKNOWN);
static_assert(v::error_out_of_pool_memory == VK_ERROR_OUT_OF_POOL_MEMORY);
static_assert(v::api_version_1_2 == VK_API_VERSION_1_2);
static_assert(v::version_major(VK_API_VERSION_1_3) == 1 &&
              v::version_minor(VK_API_VERSION_1_3) == 3);

namespace st = v::structure_type;
static_assert(st::application_info == VK_STRUCTURE_TYPE_APPLICATION_INFO);
static_assert(st::instance_create_info == VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO);
static_assert(st::device_queue_create_info == VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO);
static_assert(st::device_create_info == VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO);
static_assert(st::submit_info == VK_STRUCTURE_TYPE_SUBMIT_INFO);
static_assert(st::memory_allocate_info == VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
static_assert(st::semaphore_create_info == VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO);
static_assert(st::buffer_create_info == VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
static_assert(st::shader_module_create_info == VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO);
static_assert(st::pipeline_shader_stage_create_info ==
              VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO);
static_assert(st::compute_pipeline_create_info == VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO);
static_assert(st::pipeline_layout_create_info == VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO);
static_assert(st::descriptor_set_layout_create_info ==
              VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO);
static_assert(st::descriptor_pool_create_info == VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO);
static_assert(st::descriptor_set_allocate_info == VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO);
static_assert(st::write_descriptor_set == VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
static_assert(st::command_pool_create_info == VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
static_assert(st::command_buffer_allocate_info == VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
static_assert(st::command_buffer_begin_info == VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
static_assert(st::memory_barrier == VK_STRUCTURE_TYPE_MEMORY_BARRIER);
static_assert(st::physical_device_features_2 == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
static_assert(st::physical_device_shader_atomic_int64_features ==
              VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_INT64_FEATURES);
static_assert(st::physical_device_timeline_semaphore_features ==
              VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES);
static_assert(st::semaphore_type_create_info == VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO);
static_assert(st::timeline_semaphore_submit_info ==
              VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO);
static_assert(st::semaphore_wait_info == VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO);
static_assert(st::semaphore_signal_info == VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO);
static_assert(st::physical_device_properties_2 == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
static_assert(st::external_memory_buffer_create_info ==
              VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO);
static_assert(st::import_memory_host_pointer_info ==
              VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT);
static_assert(st::memory_host_pointer_properties ==
              VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT);
static_assert(st::physical_device_external_memory_host_properties ==
              VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT);

static_assert(v::physical_device_type_other == VK_PHYSICAL_DEVICE_TYPE_OTHER);
static_assert(v::physical_device_type_integrated_gpu == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU);
static_assert(v::physical_device_type_discrete_gpu == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU);
static_assert(v::physical_device_type_virtual_gpu == VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU);
static_assert(v::physical_device_type_cpu == VK_PHYSICAL_DEVICE_TYPE_CPU);
static_assert(v::queue_compute_bit == VK_QUEUE_COMPUTE_BIT);
static_assert(v::memory_property_device_local_bit == VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
static_assert(v::memory_property_host_visible_bit == VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT);
static_assert(v::memory_property_host_coherent_bit == VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
static_assert(v::memory_property_host_cached_bit == VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
static_assert(v::buffer_usage_storage_buffer_bit == VK_BUFFER_USAGE_STORAGE_BUFFER_BIT);
static_assert(v::sharing_mode_exclusive == VK_SHARING_MODE_EXCLUSIVE);
static_assert(v::sharing_mode_concurrent == VK_SHARING_MODE_CONCURRENT);
static_assert(v::descriptor_type_storage_buffer == VK_DESCRIPTOR_TYPE_STORAGE_BUFFER);
static_assert(v::shader_stage_compute_bit == VK_SHADER_STAGE_COMPUTE_BIT);
static_assert(v::pipeline_bind_point_compute == VK_PIPELINE_BIND_POINT_COMPUTE);
static_assert(v::command_pool_create_transient_bit == VK_COMMAND_POOL_CREATE_TRANSIENT_BIT);
static_assert(v::command_pool_create_reset_command_buffer_bit ==
              VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT);
static_assert(v::command_buffer_level_primary == VK_COMMAND_BUFFER_LEVEL_PRIMARY);
static_assert(v::command_buffer_usage_one_time_submit_bit ==
              VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT);
static_assert(v::semaphore_type_timeline == VK_SEMAPHORE_TYPE_TIMELINE);
static_assert(v::external_memory_handle_type_host_allocation_bit ==
              VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT);
static_assert(v::max_extension_name_size == VK_MAX_EXTENSION_NAME_SIZE);
static_assert(v::whole_size == VK_WHOLE_SIZE);
static_assert(v::pipeline_stage_top_of_pipe_bit == VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT);
static_assert(v::pipeline_stage_compute_shader_bit == VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT);
static_assert(v::pipeline_stage_transfer_bit == VK_PIPELINE_STAGE_TRANSFER_BIT);
static_assert(v::pipeline_stage_bottom_of_pipe_bit == VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT);
static_assert(v::pipeline_stage_host_bit == VK_PIPELINE_STAGE_HOST_BIT);
static_assert(v::pipeline_stage_all_commands_bit == VK_PIPELINE_STAGE_ALL_COMMANDS_BIT);
static_assert(v::access_shader_read_bit == VK_ACCESS_SHADER_READ_BIT);
static_assert(v::access_shader_write_bit == VK_ACCESS_SHADER_WRITE_BIT);
static_assert(v::access_transfer_write_bit == VK_ACCESS_TRANSFER_WRITE_BIT);
static_assert(v::access_host_read_bit == VK_ACCESS_HOST_READ_BIT);
static_assert(v::access_host_write_bit == VK_ACCESS_HOST_WRITE_BIT);
static_assert(v::access_memory_read_bit == VK_ACCESS_MEMORY_READ_BIT);
static_assert(v::access_memory_write_bit == VK_ACCESS_MEMORY_WRITE_BIT);
static_assert(v::max_physical_device_name_size == VK_MAX_PHYSICAL_DEVICE_NAME_SIZE);
static_assert(v::uuid_size == VK_UUID_SIZE);
static_assert(v::max_memory_types == VK_MAX_MEMORY_TYPES);
static_assert(v::max_memory_heaps == VK_MAX_MEMORY_HEAPS);

// Structures: the same size and alignment, and each named field at the same offset with the
// same size. GPU_ASYNC_VK_STRUCT also maps pointers to the vendor's structure onto ours, so
// the signature checks below compare like with like.
#define GPU_ASYNC_VK_STRUCT(ours, theirs)                                                          \
    static_assert(sizeof(v::ours) == sizeof(theirs), #ours " differs in size from " #theirs);      \
    static_assert(alignof(v::ours) == alignof(theirs), #ours " differs in alignment");             \
    template <>                                                                                    \
    struct gpu_async::abi::norm<theirs*> {                                                         \
        using type = v::ours*;                                                                     \
    };                                                                                             \
    template <>                                                                                    \
    struct gpu_async::abi::norm<const theirs*> {                                                   \
        using type = const v::ours*;                                                               \
    }
#define GPU_ASYNC_VK_FIELD(ours, theirs, om, tm)                                                   \
    static_assert(offsetof(v::ours, om) == offsetof(theirs, tm) &&                                 \
                      sizeof(v::ours::om) == sizeof(theirs::tm),                                   \
                  #ours "::" #om " differs from " #theirs "::" #tm)
// Pointers the backend always passes as null (allocation callbacks, barriers and copies it
// never makes): `const void*` in its declarations.
#define GPU_ASYNC_VK_OPAQUE(theirs)                                                                \
    template <>                                                                                    \
    struct gpu_async::abi::norm<const theirs*> {                                                   \
        using type = const void*;                                                                  \
    }

GPU_ASYNC_VK_OPAQUE(VkAllocationCallbacks);
GPU_ASYNC_VK_OPAQUE(VkBufferMemoryBarrier);
GPU_ASYNC_VK_OPAQUE(VkImageMemoryBarrier);
GPU_ASYNC_VK_OPAQUE(VkCopyDescriptorSet);

GPU_ASYNC_VK_STRUCT(application_info, VkApplicationInfo);
GPU_ASYNC_VK_FIELD(application_info, VkApplicationInfo, s_type, sType);
GPU_ASYNC_VK_FIELD(application_info, VkApplicationInfo, next, pNext);
GPU_ASYNC_VK_FIELD(application_info, VkApplicationInfo, application_name, pApplicationName);
GPU_ASYNC_VK_FIELD(application_info, VkApplicationInfo, application_version, applicationVersion);
GPU_ASYNC_VK_FIELD(application_info, VkApplicationInfo, engine_name, pEngineName);
GPU_ASYNC_VK_FIELD(application_info, VkApplicationInfo, engine_version, engineVersion);
GPU_ASYNC_VK_FIELD(application_info, VkApplicationInfo, api_version, apiVersion);

GPU_ASYNC_VK_STRUCT(instance_create_info, VkInstanceCreateInfo);
GPU_ASYNC_VK_FIELD(instance_create_info, VkInstanceCreateInfo, s_type, sType);
GPU_ASYNC_VK_FIELD(instance_create_info, VkInstanceCreateInfo, next, pNext);
GPU_ASYNC_VK_FIELD(instance_create_info, VkInstanceCreateInfo, flags, flags);
GPU_ASYNC_VK_FIELD(instance_create_info, VkInstanceCreateInfo, application, pApplicationInfo);
GPU_ASYNC_VK_FIELD(instance_create_info, VkInstanceCreateInfo, enabled_layer_count,
                   enabledLayerCount);
GPU_ASYNC_VK_FIELD(instance_create_info, VkInstanceCreateInfo, enabled_layer_names,
                   ppEnabledLayerNames);
GPU_ASYNC_VK_FIELD(instance_create_info, VkInstanceCreateInfo, enabled_extension_count,
                   enabledExtensionCount);
GPU_ASYNC_VK_FIELD(instance_create_info, VkInstanceCreateInfo, enabled_extension_names,
                   ppEnabledExtensionNames);

GPU_ASYNC_VK_STRUCT(physical_device_properties, VkPhysicalDeviceProperties);
GPU_ASYNC_VK_FIELD(physical_device_properties, VkPhysicalDeviceProperties, api_version, apiVersion);
GPU_ASYNC_VK_FIELD(physical_device_properties, VkPhysicalDeviceProperties, driver_version,
                   driverVersion);
GPU_ASYNC_VK_FIELD(physical_device_properties, VkPhysicalDeviceProperties, vendor_id, vendorID);
GPU_ASYNC_VK_FIELD(physical_device_properties, VkPhysicalDeviceProperties, device_id, deviceID);
GPU_ASYNC_VK_FIELD(physical_device_properties, VkPhysicalDeviceProperties, device_type, deviceType);
GPU_ASYNC_VK_FIELD(physical_device_properties, VkPhysicalDeviceProperties, device_name, deviceName);
GPU_ASYNC_VK_FIELD(physical_device_properties, VkPhysicalDeviceProperties, pipeline_cache_uuid,
                   pipelineCacheUUID);
GPU_ASYNC_VK_FIELD(physical_device_properties, VkPhysicalDeviceProperties, limits, limits);
GPU_ASYNC_VK_FIELD(physical_device_properties, VkPhysicalDeviceProperties, sparse_properties,
                   sparseProperties);

GPU_ASYNC_VK_STRUCT(queue_family_properties, VkQueueFamilyProperties);
GPU_ASYNC_VK_FIELD(queue_family_properties, VkQueueFamilyProperties, queue_flags, queueFlags);
GPU_ASYNC_VK_FIELD(queue_family_properties, VkQueueFamilyProperties, queue_count, queueCount);
GPU_ASYNC_VK_FIELD(queue_family_properties, VkQueueFamilyProperties, timestamp_valid_bits,
                   timestampValidBits);
GPU_ASYNC_VK_FIELD(queue_family_properties, VkQueueFamilyProperties, min_image_transfer_granularity,
                   minImageTransferGranularity);

GPU_ASYNC_VK_STRUCT(physical_device_features, VkPhysicalDeviceFeatures);
static_assert(v::physical_device_features::count * sizeof(VkBool32) ==
              sizeof(VkPhysicalDeviceFeatures));
static_assert(v::physical_device_features::shader_int64_index * sizeof(VkBool32) ==
              offsetof(VkPhysicalDeviceFeatures, shaderInt64));

GPU_ASYNC_VK_STRUCT(physical_device_features2, VkPhysicalDeviceFeatures2);
GPU_ASYNC_VK_FIELD(physical_device_features2, VkPhysicalDeviceFeatures2, s_type, sType);
GPU_ASYNC_VK_FIELD(physical_device_features2, VkPhysicalDeviceFeatures2, next, pNext);
GPU_ASYNC_VK_FIELD(physical_device_features2, VkPhysicalDeviceFeatures2, features, features);

GPU_ASYNC_VK_STRUCT(physical_device_shader_atomic_int64_features,
                    VkPhysicalDeviceShaderAtomicInt64Features);
GPU_ASYNC_VK_FIELD(physical_device_shader_atomic_int64_features,
                   VkPhysicalDeviceShaderAtomicInt64Features, s_type, sType);
GPU_ASYNC_VK_FIELD(physical_device_shader_atomic_int64_features,
                   VkPhysicalDeviceShaderAtomicInt64Features, next, pNext);
GPU_ASYNC_VK_FIELD(physical_device_shader_atomic_int64_features,
                   VkPhysicalDeviceShaderAtomicInt64Features, shader_buffer_int64_atomics,
                   shaderBufferInt64Atomics);
GPU_ASYNC_VK_FIELD(physical_device_shader_atomic_int64_features,
                   VkPhysicalDeviceShaderAtomicInt64Features, shader_shared_int64_atomics,
                   shaderSharedInt64Atomics);

GPU_ASYNC_VK_STRUCT(physical_device_timeline_semaphore_features,
                    VkPhysicalDeviceTimelineSemaphoreFeatures);
GPU_ASYNC_VK_FIELD(physical_device_timeline_semaphore_features,
                   VkPhysicalDeviceTimelineSemaphoreFeatures, s_type, sType);
GPU_ASYNC_VK_FIELD(physical_device_timeline_semaphore_features,
                   VkPhysicalDeviceTimelineSemaphoreFeatures, next, pNext);
GPU_ASYNC_VK_FIELD(physical_device_timeline_semaphore_features,
                   VkPhysicalDeviceTimelineSemaphoreFeatures, timeline_semaphore,
                   timelineSemaphore);

GPU_ASYNC_VK_STRUCT(device_queue_create_info, VkDeviceQueueCreateInfo);
GPU_ASYNC_VK_FIELD(device_queue_create_info, VkDeviceQueueCreateInfo, s_type, sType);
GPU_ASYNC_VK_FIELD(device_queue_create_info, VkDeviceQueueCreateInfo, next, pNext);
GPU_ASYNC_VK_FIELD(device_queue_create_info, VkDeviceQueueCreateInfo, flags, flags);
GPU_ASYNC_VK_FIELD(device_queue_create_info, VkDeviceQueueCreateInfo, queue_family_index,
                   queueFamilyIndex);
GPU_ASYNC_VK_FIELD(device_queue_create_info, VkDeviceQueueCreateInfo, queue_count, queueCount);
GPU_ASYNC_VK_FIELD(device_queue_create_info, VkDeviceQueueCreateInfo, queue_priorities,
                   pQueuePriorities);

GPU_ASYNC_VK_STRUCT(device_create_info, VkDeviceCreateInfo);
GPU_ASYNC_VK_FIELD(device_create_info, VkDeviceCreateInfo, s_type, sType);
GPU_ASYNC_VK_FIELD(device_create_info, VkDeviceCreateInfo, next, pNext);
GPU_ASYNC_VK_FIELD(device_create_info, VkDeviceCreateInfo, flags, flags);
GPU_ASYNC_VK_FIELD(device_create_info, VkDeviceCreateInfo, queue_create_info_count,
                   queueCreateInfoCount);
GPU_ASYNC_VK_FIELD(device_create_info, VkDeviceCreateInfo, queue_create_infos, pQueueCreateInfos);
GPU_ASYNC_VK_FIELD(device_create_info, VkDeviceCreateInfo, enabled_layer_count, enabledLayerCount);
GPU_ASYNC_VK_FIELD(device_create_info, VkDeviceCreateInfo, enabled_layer_names,
                   ppEnabledLayerNames);
GPU_ASYNC_VK_FIELD(device_create_info, VkDeviceCreateInfo, enabled_extension_count,
                   enabledExtensionCount);
GPU_ASYNC_VK_FIELD(device_create_info, VkDeviceCreateInfo, enabled_extension_names,
                   ppEnabledExtensionNames);
GPU_ASYNC_VK_FIELD(device_create_info, VkDeviceCreateInfo, enabled_features, pEnabledFeatures);

GPU_ASYNC_VK_STRUCT(memory_type, VkMemoryType);
GPU_ASYNC_VK_FIELD(memory_type, VkMemoryType, property_flags, propertyFlags);
GPU_ASYNC_VK_FIELD(memory_type, VkMemoryType, heap_index, heapIndex);
GPU_ASYNC_VK_STRUCT(memory_heap, VkMemoryHeap);
GPU_ASYNC_VK_FIELD(memory_heap, VkMemoryHeap, size, size);
GPU_ASYNC_VK_FIELD(memory_heap, VkMemoryHeap, flags, flags);
GPU_ASYNC_VK_STRUCT(physical_device_memory_properties, VkPhysicalDeviceMemoryProperties);
GPU_ASYNC_VK_FIELD(physical_device_memory_properties, VkPhysicalDeviceMemoryProperties,
                   memory_type_count, memoryTypeCount);
GPU_ASYNC_VK_FIELD(physical_device_memory_properties, VkPhysicalDeviceMemoryProperties,
                   memory_types, memoryTypes);
GPU_ASYNC_VK_FIELD(physical_device_memory_properties, VkPhysicalDeviceMemoryProperties,
                   memory_heap_count, memoryHeapCount);
GPU_ASYNC_VK_FIELD(physical_device_memory_properties, VkPhysicalDeviceMemoryProperties,
                   memory_heaps, memoryHeaps);

GPU_ASYNC_VK_STRUCT(buffer_create_info, VkBufferCreateInfo);
GPU_ASYNC_VK_FIELD(buffer_create_info, VkBufferCreateInfo, s_type, sType);
GPU_ASYNC_VK_FIELD(buffer_create_info, VkBufferCreateInfo, next, pNext);
GPU_ASYNC_VK_FIELD(buffer_create_info, VkBufferCreateInfo, flags, flags);
GPU_ASYNC_VK_FIELD(buffer_create_info, VkBufferCreateInfo, size, size);
GPU_ASYNC_VK_FIELD(buffer_create_info, VkBufferCreateInfo, usage, usage);
GPU_ASYNC_VK_FIELD(buffer_create_info, VkBufferCreateInfo, sharing_mode, sharingMode);
GPU_ASYNC_VK_FIELD(buffer_create_info, VkBufferCreateInfo, queue_family_index_count,
                   queueFamilyIndexCount);
GPU_ASYNC_VK_FIELD(buffer_create_info, VkBufferCreateInfo, queue_family_indices,
                   pQueueFamilyIndices);

GPU_ASYNC_VK_STRUCT(physical_device_properties2, VkPhysicalDeviceProperties2);
GPU_ASYNC_VK_FIELD(physical_device_properties2, VkPhysicalDeviceProperties2, s_type, sType);
GPU_ASYNC_VK_FIELD(physical_device_properties2, VkPhysicalDeviceProperties2, next, pNext);
GPU_ASYNC_VK_FIELD(physical_device_properties2, VkPhysicalDeviceProperties2, properties,
                   properties);

GPU_ASYNC_VK_STRUCT(physical_device_external_memory_host_properties,
                    VkPhysicalDeviceExternalMemoryHostPropertiesEXT);
GPU_ASYNC_VK_FIELD(physical_device_external_memory_host_properties,
                   VkPhysicalDeviceExternalMemoryHostPropertiesEXT, s_type, sType);
GPU_ASYNC_VK_FIELD(physical_device_external_memory_host_properties,
                   VkPhysicalDeviceExternalMemoryHostPropertiesEXT, next, pNext);
GPU_ASYNC_VK_FIELD(physical_device_external_memory_host_properties,
                   VkPhysicalDeviceExternalMemoryHostPropertiesEXT,
                   min_imported_host_pointer_alignment, minImportedHostPointerAlignment);

GPU_ASYNC_VK_STRUCT(extension_properties, VkExtensionProperties);
GPU_ASYNC_VK_FIELD(extension_properties, VkExtensionProperties, extension_name, extensionName);
GPU_ASYNC_VK_FIELD(extension_properties, VkExtensionProperties, spec_version, specVersion);

GPU_ASYNC_VK_STRUCT(external_memory_buffer_create_info, VkExternalMemoryBufferCreateInfo);
GPU_ASYNC_VK_FIELD(external_memory_buffer_create_info, VkExternalMemoryBufferCreateInfo, s_type,
                   sType);
GPU_ASYNC_VK_FIELD(external_memory_buffer_create_info, VkExternalMemoryBufferCreateInfo, next,
                   pNext);
GPU_ASYNC_VK_FIELD(external_memory_buffer_create_info, VkExternalMemoryBufferCreateInfo,
                   handle_types, handleTypes);

GPU_ASYNC_VK_STRUCT(import_memory_host_pointer_info, VkImportMemoryHostPointerInfoEXT);
GPU_ASYNC_VK_FIELD(import_memory_host_pointer_info, VkImportMemoryHostPointerInfoEXT, s_type,
                   sType);
GPU_ASYNC_VK_FIELD(import_memory_host_pointer_info, VkImportMemoryHostPointerInfoEXT, next, pNext);
GPU_ASYNC_VK_FIELD(import_memory_host_pointer_info, VkImportMemoryHostPointerInfoEXT, handle_type,
                   handleType);
GPU_ASYNC_VK_FIELD(import_memory_host_pointer_info, VkImportMemoryHostPointerInfoEXT, host_pointer,
                   pHostPointer);

GPU_ASYNC_VK_STRUCT(memory_host_pointer_properties, VkMemoryHostPointerPropertiesEXT);
GPU_ASYNC_VK_FIELD(memory_host_pointer_properties, VkMemoryHostPointerPropertiesEXT, s_type, sType);
GPU_ASYNC_VK_FIELD(memory_host_pointer_properties, VkMemoryHostPointerPropertiesEXT, next, pNext);
GPU_ASYNC_VK_FIELD(memory_host_pointer_properties, VkMemoryHostPointerPropertiesEXT,
                   memory_type_bits, memoryTypeBits);

GPU_ASYNC_VK_STRUCT(memory_requirements, VkMemoryRequirements);
GPU_ASYNC_VK_FIELD(memory_requirements, VkMemoryRequirements, size, size);
GPU_ASYNC_VK_FIELD(memory_requirements, VkMemoryRequirements, alignment, alignment);
GPU_ASYNC_VK_FIELD(memory_requirements, VkMemoryRequirements, memory_type_bits, memoryTypeBits);

GPU_ASYNC_VK_STRUCT(memory_allocate_info, VkMemoryAllocateInfo);
GPU_ASYNC_VK_FIELD(memory_allocate_info, VkMemoryAllocateInfo, s_type, sType);
GPU_ASYNC_VK_FIELD(memory_allocate_info, VkMemoryAllocateInfo, next, pNext);
GPU_ASYNC_VK_FIELD(memory_allocate_info, VkMemoryAllocateInfo, allocation_size, allocationSize);
GPU_ASYNC_VK_FIELD(memory_allocate_info, VkMemoryAllocateInfo, memory_type_index, memoryTypeIndex);

GPU_ASYNC_VK_STRUCT(shader_module_create_info, VkShaderModuleCreateInfo);
GPU_ASYNC_VK_FIELD(shader_module_create_info, VkShaderModuleCreateInfo, s_type, sType);
GPU_ASYNC_VK_FIELD(shader_module_create_info, VkShaderModuleCreateInfo, next, pNext);
GPU_ASYNC_VK_FIELD(shader_module_create_info, VkShaderModuleCreateInfo, flags, flags);
GPU_ASYNC_VK_FIELD(shader_module_create_info, VkShaderModuleCreateInfo, code_size, codeSize);
GPU_ASYNC_VK_FIELD(shader_module_create_info, VkShaderModuleCreateInfo, code, pCode);

GPU_ASYNC_VK_STRUCT(descriptor_set_layout_binding, VkDescriptorSetLayoutBinding);
GPU_ASYNC_VK_FIELD(descriptor_set_layout_binding, VkDescriptorSetLayoutBinding, binding, binding);
GPU_ASYNC_VK_FIELD(descriptor_set_layout_binding, VkDescriptorSetLayoutBinding, descriptor_type,
                   descriptorType);
GPU_ASYNC_VK_FIELD(descriptor_set_layout_binding, VkDescriptorSetLayoutBinding, descriptor_count,
                   descriptorCount);
GPU_ASYNC_VK_FIELD(descriptor_set_layout_binding, VkDescriptorSetLayoutBinding, stage_flags,
                   stageFlags);
GPU_ASYNC_VK_FIELD(descriptor_set_layout_binding, VkDescriptorSetLayoutBinding, immutable_samplers,
                   pImmutableSamplers);

GPU_ASYNC_VK_STRUCT(descriptor_set_layout_create_info, VkDescriptorSetLayoutCreateInfo);
GPU_ASYNC_VK_FIELD(descriptor_set_layout_create_info, VkDescriptorSetLayoutCreateInfo, s_type,
                   sType);
GPU_ASYNC_VK_FIELD(descriptor_set_layout_create_info, VkDescriptorSetLayoutCreateInfo, next, pNext);
GPU_ASYNC_VK_FIELD(descriptor_set_layout_create_info, VkDescriptorSetLayoutCreateInfo, flags,
                   flags);
GPU_ASYNC_VK_FIELD(descriptor_set_layout_create_info, VkDescriptorSetLayoutCreateInfo,
                   binding_count, bindingCount);
GPU_ASYNC_VK_FIELD(descriptor_set_layout_create_info, VkDescriptorSetLayoutCreateInfo, bindings,
                   pBindings);

GPU_ASYNC_VK_STRUCT(push_constant_range, VkPushConstantRange);
GPU_ASYNC_VK_FIELD(push_constant_range, VkPushConstantRange, stage_flags, stageFlags);
GPU_ASYNC_VK_FIELD(push_constant_range, VkPushConstantRange, offset, offset);
GPU_ASYNC_VK_FIELD(push_constant_range, VkPushConstantRange, size, size);

GPU_ASYNC_VK_STRUCT(pipeline_layout_create_info, VkPipelineLayoutCreateInfo);
GPU_ASYNC_VK_FIELD(pipeline_layout_create_info, VkPipelineLayoutCreateInfo, s_type, sType);
GPU_ASYNC_VK_FIELD(pipeline_layout_create_info, VkPipelineLayoutCreateInfo, next, pNext);
GPU_ASYNC_VK_FIELD(pipeline_layout_create_info, VkPipelineLayoutCreateInfo, flags, flags);
GPU_ASYNC_VK_FIELD(pipeline_layout_create_info, VkPipelineLayoutCreateInfo, set_layout_count,
                   setLayoutCount);
GPU_ASYNC_VK_FIELD(pipeline_layout_create_info, VkPipelineLayoutCreateInfo, set_layouts,
                   pSetLayouts);
GPU_ASYNC_VK_FIELD(pipeline_layout_create_info, VkPipelineLayoutCreateInfo,
                   push_constant_range_count, pushConstantRangeCount);
GPU_ASYNC_VK_FIELD(pipeline_layout_create_info, VkPipelineLayoutCreateInfo, push_constant_ranges,
                   pPushConstantRanges);

GPU_ASYNC_VK_STRUCT(pipeline_shader_stage_create_info, VkPipelineShaderStageCreateInfo);
GPU_ASYNC_VK_FIELD(pipeline_shader_stage_create_info, VkPipelineShaderStageCreateInfo, s_type,
                   sType);
GPU_ASYNC_VK_FIELD(pipeline_shader_stage_create_info, VkPipelineShaderStageCreateInfo, next, pNext);
GPU_ASYNC_VK_FIELD(pipeline_shader_stage_create_info, VkPipelineShaderStageCreateInfo, flags,
                   flags);
GPU_ASYNC_VK_FIELD(pipeline_shader_stage_create_info, VkPipelineShaderStageCreateInfo, stage,
                   stage);
GPU_ASYNC_VK_FIELD(pipeline_shader_stage_create_info, VkPipelineShaderStageCreateInfo, module,
                   module);
GPU_ASYNC_VK_FIELD(pipeline_shader_stage_create_info, VkPipelineShaderStageCreateInfo, name, pName);
GPU_ASYNC_VK_FIELD(pipeline_shader_stage_create_info, VkPipelineShaderStageCreateInfo,
                   specialization_info, pSpecializationInfo);

GPU_ASYNC_VK_STRUCT(compute_pipeline_create_info, VkComputePipelineCreateInfo);
GPU_ASYNC_VK_FIELD(compute_pipeline_create_info, VkComputePipelineCreateInfo, s_type, sType);
GPU_ASYNC_VK_FIELD(compute_pipeline_create_info, VkComputePipelineCreateInfo, next, pNext);
GPU_ASYNC_VK_FIELD(compute_pipeline_create_info, VkComputePipelineCreateInfo, flags, flags);
GPU_ASYNC_VK_FIELD(compute_pipeline_create_info, VkComputePipelineCreateInfo, stage, stage);
GPU_ASYNC_VK_FIELD(compute_pipeline_create_info, VkComputePipelineCreateInfo, layout, layout);
GPU_ASYNC_VK_FIELD(compute_pipeline_create_info, VkComputePipelineCreateInfo, base_pipeline_handle,
                   basePipelineHandle);
GPU_ASYNC_VK_FIELD(compute_pipeline_create_info, VkComputePipelineCreateInfo, base_pipeline_index,
                   basePipelineIndex);

GPU_ASYNC_VK_STRUCT(descriptor_pool_size, VkDescriptorPoolSize);
GPU_ASYNC_VK_FIELD(descriptor_pool_size, VkDescriptorPoolSize, type, type);
GPU_ASYNC_VK_FIELD(descriptor_pool_size, VkDescriptorPoolSize, descriptor_count, descriptorCount);

GPU_ASYNC_VK_STRUCT(descriptor_pool_create_info, VkDescriptorPoolCreateInfo);
GPU_ASYNC_VK_FIELD(descriptor_pool_create_info, VkDescriptorPoolCreateInfo, s_type, sType);
GPU_ASYNC_VK_FIELD(descriptor_pool_create_info, VkDescriptorPoolCreateInfo, next, pNext);
GPU_ASYNC_VK_FIELD(descriptor_pool_create_info, VkDescriptorPoolCreateInfo, flags, flags);
GPU_ASYNC_VK_FIELD(descriptor_pool_create_info, VkDescriptorPoolCreateInfo, max_sets, maxSets);
GPU_ASYNC_VK_FIELD(descriptor_pool_create_info, VkDescriptorPoolCreateInfo, pool_size_count,
                   poolSizeCount);
GPU_ASYNC_VK_FIELD(descriptor_pool_create_info, VkDescriptorPoolCreateInfo, pool_sizes, pPoolSizes);

GPU_ASYNC_VK_STRUCT(descriptor_set_allocate_info, VkDescriptorSetAllocateInfo);
GPU_ASYNC_VK_FIELD(descriptor_set_allocate_info, VkDescriptorSetAllocateInfo, s_type, sType);
GPU_ASYNC_VK_FIELD(descriptor_set_allocate_info, VkDescriptorSetAllocateInfo, next, pNext);
GPU_ASYNC_VK_FIELD(descriptor_set_allocate_info, VkDescriptorSetAllocateInfo, descriptor_pool,
                   descriptorPool);
GPU_ASYNC_VK_FIELD(descriptor_set_allocate_info, VkDescriptorSetAllocateInfo, descriptor_set_count,
                   descriptorSetCount);
GPU_ASYNC_VK_FIELD(descriptor_set_allocate_info, VkDescriptorSetAllocateInfo, set_layouts,
                   pSetLayouts);

GPU_ASYNC_VK_STRUCT(descriptor_buffer_info, VkDescriptorBufferInfo);
GPU_ASYNC_VK_FIELD(descriptor_buffer_info, VkDescriptorBufferInfo, buffer, buffer);
GPU_ASYNC_VK_FIELD(descriptor_buffer_info, VkDescriptorBufferInfo, offset, offset);
GPU_ASYNC_VK_FIELD(descriptor_buffer_info, VkDescriptorBufferInfo, range, range);

GPU_ASYNC_VK_STRUCT(write_descriptor_set, VkWriteDescriptorSet);
GPU_ASYNC_VK_FIELD(write_descriptor_set, VkWriteDescriptorSet, s_type, sType);
GPU_ASYNC_VK_FIELD(write_descriptor_set, VkWriteDescriptorSet, next, pNext);
GPU_ASYNC_VK_FIELD(write_descriptor_set, VkWriteDescriptorSet, dst_set, dstSet);
GPU_ASYNC_VK_FIELD(write_descriptor_set, VkWriteDescriptorSet, dst_binding, dstBinding);
GPU_ASYNC_VK_FIELD(write_descriptor_set, VkWriteDescriptorSet, dst_array_element, dstArrayElement);
GPU_ASYNC_VK_FIELD(write_descriptor_set, VkWriteDescriptorSet, descriptor_count, descriptorCount);
GPU_ASYNC_VK_FIELD(write_descriptor_set, VkWriteDescriptorSet, descriptor_type, descriptorType);
GPU_ASYNC_VK_FIELD(write_descriptor_set, VkWriteDescriptorSet, image_info, pImageInfo);
GPU_ASYNC_VK_FIELD(write_descriptor_set, VkWriteDescriptorSet, buffer_info, pBufferInfo);
GPU_ASYNC_VK_FIELD(write_descriptor_set, VkWriteDescriptorSet, texel_buffer_view, pTexelBufferView);

GPU_ASYNC_VK_STRUCT(command_pool_create_info, VkCommandPoolCreateInfo);
GPU_ASYNC_VK_FIELD(command_pool_create_info, VkCommandPoolCreateInfo, s_type, sType);
GPU_ASYNC_VK_FIELD(command_pool_create_info, VkCommandPoolCreateInfo, next, pNext);
GPU_ASYNC_VK_FIELD(command_pool_create_info, VkCommandPoolCreateInfo, flags, flags);
GPU_ASYNC_VK_FIELD(command_pool_create_info, VkCommandPoolCreateInfo, queue_family_index,
                   queueFamilyIndex);

GPU_ASYNC_VK_STRUCT(command_buffer_allocate_info, VkCommandBufferAllocateInfo);
GPU_ASYNC_VK_FIELD(command_buffer_allocate_info, VkCommandBufferAllocateInfo, s_type, sType);
GPU_ASYNC_VK_FIELD(command_buffer_allocate_info, VkCommandBufferAllocateInfo, next, pNext);
GPU_ASYNC_VK_FIELD(command_buffer_allocate_info, VkCommandBufferAllocateInfo, command_pool,
                   commandPool);
GPU_ASYNC_VK_FIELD(command_buffer_allocate_info, VkCommandBufferAllocateInfo, level, level);
GPU_ASYNC_VK_FIELD(command_buffer_allocate_info, VkCommandBufferAllocateInfo, command_buffer_count,
                   commandBufferCount);

GPU_ASYNC_VK_STRUCT(command_buffer_begin_info, VkCommandBufferBeginInfo);
GPU_ASYNC_VK_FIELD(command_buffer_begin_info, VkCommandBufferBeginInfo, s_type, sType);
GPU_ASYNC_VK_FIELD(command_buffer_begin_info, VkCommandBufferBeginInfo, next, pNext);
GPU_ASYNC_VK_FIELD(command_buffer_begin_info, VkCommandBufferBeginInfo, flags, flags);
GPU_ASYNC_VK_FIELD(command_buffer_begin_info, VkCommandBufferBeginInfo, inheritance_info,
                   pInheritanceInfo);

GPU_ASYNC_VK_STRUCT(memory_barrier, VkMemoryBarrier);
GPU_ASYNC_VK_FIELD(memory_barrier, VkMemoryBarrier, s_type, sType);
GPU_ASYNC_VK_FIELD(memory_barrier, VkMemoryBarrier, next, pNext);
GPU_ASYNC_VK_FIELD(memory_barrier, VkMemoryBarrier, src_access_mask, srcAccessMask);
GPU_ASYNC_VK_FIELD(memory_barrier, VkMemoryBarrier, dst_access_mask, dstAccessMask);

GPU_ASYNC_VK_STRUCT(semaphore_type_create_info, VkSemaphoreTypeCreateInfo);
GPU_ASYNC_VK_FIELD(semaphore_type_create_info, VkSemaphoreTypeCreateInfo, s_type, sType);
GPU_ASYNC_VK_FIELD(semaphore_type_create_info, VkSemaphoreTypeCreateInfo, next, pNext);
GPU_ASYNC_VK_FIELD(semaphore_type_create_info, VkSemaphoreTypeCreateInfo, semaphore_type,
                   semaphoreType);
GPU_ASYNC_VK_FIELD(semaphore_type_create_info, VkSemaphoreTypeCreateInfo, initial_value,
                   initialValue);

GPU_ASYNC_VK_STRUCT(semaphore_create_info, VkSemaphoreCreateInfo);
GPU_ASYNC_VK_FIELD(semaphore_create_info, VkSemaphoreCreateInfo, s_type, sType);
GPU_ASYNC_VK_FIELD(semaphore_create_info, VkSemaphoreCreateInfo, next, pNext);
GPU_ASYNC_VK_FIELD(semaphore_create_info, VkSemaphoreCreateInfo, flags, flags);

GPU_ASYNC_VK_STRUCT(timeline_semaphore_submit_info, VkTimelineSemaphoreSubmitInfo);
GPU_ASYNC_VK_FIELD(timeline_semaphore_submit_info, VkTimelineSemaphoreSubmitInfo, s_type, sType);
GPU_ASYNC_VK_FIELD(timeline_semaphore_submit_info, VkTimelineSemaphoreSubmitInfo, next, pNext);
GPU_ASYNC_VK_FIELD(timeline_semaphore_submit_info, VkTimelineSemaphoreSubmitInfo,
                   wait_semaphore_value_count, waitSemaphoreValueCount);
GPU_ASYNC_VK_FIELD(timeline_semaphore_submit_info, VkTimelineSemaphoreSubmitInfo,
                   wait_semaphore_values, pWaitSemaphoreValues);
GPU_ASYNC_VK_FIELD(timeline_semaphore_submit_info, VkTimelineSemaphoreSubmitInfo,
                   signal_semaphore_value_count, signalSemaphoreValueCount);
GPU_ASYNC_VK_FIELD(timeline_semaphore_submit_info, VkTimelineSemaphoreSubmitInfo,
                   signal_semaphore_values, pSignalSemaphoreValues);

GPU_ASYNC_VK_STRUCT(submit_info, VkSubmitInfo);
GPU_ASYNC_VK_FIELD(submit_info, VkSubmitInfo, s_type, sType);
GPU_ASYNC_VK_FIELD(submit_info, VkSubmitInfo, next, pNext);
GPU_ASYNC_VK_FIELD(submit_info, VkSubmitInfo, wait_semaphore_count, waitSemaphoreCount);
GPU_ASYNC_VK_FIELD(submit_info, VkSubmitInfo, wait_semaphores, pWaitSemaphores);
GPU_ASYNC_VK_FIELD(submit_info, VkSubmitInfo, wait_dst_stage_mask, pWaitDstStageMask);
GPU_ASYNC_VK_FIELD(submit_info, VkSubmitInfo, command_buffer_count, commandBufferCount);
GPU_ASYNC_VK_FIELD(submit_info, VkSubmitInfo, command_buffers, pCommandBuffers);
GPU_ASYNC_VK_FIELD(submit_info, VkSubmitInfo, signal_semaphore_count, signalSemaphoreCount);
GPU_ASYNC_VK_FIELD(submit_info, VkSubmitInfo, signal_semaphores, pSignalSemaphores);

GPU_ASYNC_VK_STRUCT(semaphore_wait_info, VkSemaphoreWaitInfo);
GPU_ASYNC_VK_FIELD(semaphore_wait_info, VkSemaphoreWaitInfo, s_type, sType);
GPU_ASYNC_VK_FIELD(semaphore_wait_info, VkSemaphoreWaitInfo, next, pNext);
GPU_ASYNC_VK_FIELD(semaphore_wait_info, VkSemaphoreWaitInfo, flags, flags);
GPU_ASYNC_VK_FIELD(semaphore_wait_info, VkSemaphoreWaitInfo, semaphore_count, semaphoreCount);
GPU_ASYNC_VK_FIELD(semaphore_wait_info, VkSemaphoreWaitInfo, semaphores, pSemaphores);
GPU_ASYNC_VK_FIELD(semaphore_wait_info, VkSemaphoreWaitInfo, values, pValues);

GPU_ASYNC_VK_STRUCT(semaphore_signal_info, VkSemaphoreSignalInfo);
GPU_ASYNC_VK_FIELD(semaphore_signal_info, VkSemaphoreSignalInfo, s_type, sType);
GPU_ASYNC_VK_FIELD(semaphore_signal_info, VkSemaphoreSignalInfo, next, pNext);
GPU_ASYNC_VK_FIELD(semaphore_signal_info, VkSemaphoreSignalInfo, semaphore, semaphore);
GPU_ASYNC_VK_FIELD(semaphore_signal_info, VkSemaphoreSignalInfo, value, value);

// Entry points: the signature of each, with the structures above in place of the vendor's.
using gapi = v::global_api;
using iapi = v::instance_api;
using dapi = v::device_api;
static_assert(std::is_same_v<v::get_instance_proc_addr_fn, PFN_vkGetInstanceProcAddr>);
GPU_ASYNC_ABI_SAME_SIGNATURE(gapi, get_instance_proc_addr, vkGetInstanceProcAddr);
GPU_ASYNC_ABI_SAME_SIGNATURE(gapi, enumerate_instance_version, vkEnumerateInstanceVersion);
GPU_ASYNC_ABI_SAME_SIGNATURE(gapi, create_instance, vkCreateInstance);
GPU_ASYNC_ABI_SAME_SIGNATURE(iapi, destroy_instance, vkDestroyInstance);
GPU_ASYNC_ABI_SAME_SIGNATURE(iapi, enumerate_physical_devices, vkEnumeratePhysicalDevices);
GPU_ASYNC_ABI_SAME_SIGNATURE(iapi, get_physical_device_properties, vkGetPhysicalDeviceProperties);
GPU_ASYNC_ABI_SAME_SIGNATURE(iapi, get_physical_device_queue_family_properties,
                             vkGetPhysicalDeviceQueueFamilyProperties);
GPU_ASYNC_ABI_SAME_SIGNATURE(iapi, get_physical_device_memory_properties,
                             vkGetPhysicalDeviceMemoryProperties);
GPU_ASYNC_ABI_SAME_SIGNATURE(iapi, get_physical_device_features2, vkGetPhysicalDeviceFeatures2);
GPU_ASYNC_ABI_SAME_SIGNATURE(iapi, get_physical_device_properties2, vkGetPhysicalDeviceProperties2);
GPU_ASYNC_ABI_SAME_SIGNATURE(iapi, enumerate_device_extension_properties,
                             vkEnumerateDeviceExtensionProperties);
GPU_ASYNC_ABI_SAME_SIGNATURE(iapi, create_device, vkCreateDevice);
GPU_ASYNC_ABI_SAME_SIGNATURE(iapi, get_device_proc_addr, vkGetDeviceProcAddr);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, destroy_device, vkDestroyDevice);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, get_device_queue, vkGetDeviceQueue);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, device_wait_idle, vkDeviceWaitIdle);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, queue_submit, vkQueueSubmit);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, queue_wait_idle, vkQueueWaitIdle);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, create_buffer, vkCreateBuffer);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, destroy_buffer, vkDestroyBuffer);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, get_buffer_memory_requirements, vkGetBufferMemoryRequirements);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, allocate_memory, vkAllocateMemory);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, free_memory, vkFreeMemory);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, bind_buffer_memory, vkBindBufferMemory);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, map_memory, vkMapMemory);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, unmap_memory, vkUnmapMemory);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, create_shader_module, vkCreateShaderModule);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, destroy_shader_module, vkDestroyShaderModule);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, create_descriptor_set_layout, vkCreateDescriptorSetLayout);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, destroy_descriptor_set_layout, vkDestroyDescriptorSetLayout);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, create_pipeline_layout, vkCreatePipelineLayout);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, destroy_pipeline_layout, vkDestroyPipelineLayout);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, create_compute_pipelines, vkCreateComputePipelines);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, destroy_pipeline, vkDestroyPipeline);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, create_descriptor_pool, vkCreateDescriptorPool);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, destroy_descriptor_pool, vkDestroyDescriptorPool);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, allocate_descriptor_sets, vkAllocateDescriptorSets);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, update_descriptor_sets, vkUpdateDescriptorSets);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, create_command_pool, vkCreateCommandPool);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, destroy_command_pool, vkDestroyCommandPool);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, allocate_command_buffers, vkAllocateCommandBuffers);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, free_command_buffers, vkFreeCommandBuffers);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, reset_command_buffer, vkResetCommandBuffer);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, begin_command_buffer, vkBeginCommandBuffer);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, end_command_buffer, vkEndCommandBuffer);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, cmd_pipeline_barrier, vkCmdPipelineBarrier);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, cmd_bind_pipeline, vkCmdBindPipeline);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, cmd_bind_descriptor_sets, vkCmdBindDescriptorSets);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, cmd_push_constants, vkCmdPushConstants);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, cmd_dispatch, vkCmdDispatch);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, create_semaphore, vkCreateSemaphore);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, destroy_semaphore, vkDestroySemaphore);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, get_semaphore_counter_value, vkGetSemaphoreCounterValue);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, wait_semaphores, vkWaitSemaphores);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, signal_semaphore, vkSignalSemaphore);
GPU_ASYNC_ABI_SAME_SIGNATURE(dapi, get_memory_host_pointer_properties,
                             vkGetMemoryHostPointerPropertiesEXT);

int main() {
    return 0;
}
