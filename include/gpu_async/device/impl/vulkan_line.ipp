// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/device/impl/vulkan_line.ipp: a Vulkan line's memory, descriptor set and doorbell.
//
#ifndef GPU_ASYNC_IMPL_VULKAN_LINE_IPP
#define GPU_ASYNC_IMPL_VULKAN_LINE_IPP

#include <gpu_async/device/impl/vulkan_common.ipp>

namespace gpu_async {

namespace detail::vulkan_impl {

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

/// Lets every queue family of the device use the buffer of `info` (a command buffer of any family
/// may record a store; concurrent sharing needs no ownership transfers).
inline void share_across_families(buffer_create_info& info,
                                  const std::vector<std::uint32_t>& families) noexcept {
    if (families.size() > 1) {
        info.sharing_mode = sharing_mode_concurrent;
        info.queue_family_index_count = static_cast<std::uint32_t>(families.size());
        info.queue_family_indices = families.data();
    }
}

/// Allocates one set of the store's layout from `pool`.
inline result_t allocate_store_set(const device_api& a, device_t dev, descriptor_pool_t pool,
                                   const descriptor_set_layout_t& layout, descriptor_set_t* set) {
    descriptor_set_allocate_info set_info{};
    set_info.descriptor_pool = pool;
    set_info.descriptor_set_count = 1;
    set_info.set_layouts = &layout;
    return a.allocate_descriptor_sets(dev, &set_info, set);
}

/// Points `set`'s binding 0 at the line and binding 1 at the doorbell's word (or the line again).
inline void write_store_set(const device_api& a, device_t dev, descriptor_set_t set,
                            const descriptor_buffer_info& line,
                            const descriptor_buffer_info& bell) noexcept {
    const descriptor_buffer_info* refs[2] = {&line, &bell};
    std::array<write_descriptor_set, 2> writes{};
    for (std::uint32_t b = 0; b < writes.size(); ++b) {
        writes[b].dst_set = set;
        writes[b].dst_binding = b;
        writes[b].descriptor_count = 1;
        writes[b].descriptor_type = descriptor_type_storage_buffer;
        writes[b].buffer_info = refs[b];
    }
    a.update_descriptor_sets(dev, static_cast<std::uint32_t>(writes.size()), writes.data(), 0,
                             nullptr);
}

} // namespace detail::vulkan_impl

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

GPU_ASYNC_DECL std::optional<coded_error> vulkan_line::make_memory(vulkan_device& device,
                                                                   detail::vulkan_line_state& s) {
    using namespace detail::vulkan_impl;
    const vulkan::device_api& a = device.api();
    const vulkan::device_t dev = device.device();
    // 1. The buffer: the line's 64 bytes, usable from every queue family.
    vulkan::buffer_create_info buffer_info{};
    buffer_info.size = line_bytes;
    buffer_info.usage = vulkan::buffer_usage_storage_buffer_bit;
    share_across_families(buffer_info, device.queue_families_);
    if (const auto r = a.create_buffer(dev, &buffer_info, nullptr, &s.buffer);
        r != vulkan::success) {
        s.buffer = {};
        return device.error("vkCreateBuffer", r);
    }

    // 2. Its memory: host-visible and coherent, mapped; the line at offset 0.
    vulkan::memory_requirements needs{};
    a.get_buffer_memory_requirements(dev, s.buffer, &needs);
    const int type = line_memory_type(device.memory_, needs.memory_type_bits);
    if (type < 0)
        return unavailable("a memory type for a completion line on Vulkan device '" +
                               device.name() + "'",
                           "none is HOST_VISIBLE and HOST_COHERENT for a storage buffer");
    vulkan::memory_allocate_info alloc_info{};
    alloc_info.allocation_size = std::max<vulkan::device_size_t>(needs.size, line_bytes);
    alloc_info.memory_type_index = static_cast<std::uint32_t>(type);
    if (const auto r = a.allocate_memory(dev, &alloc_info, nullptr, &s.memory);
        r != vulkan::success) {
        s.memory = {};
        return device.error("vkAllocateMemory", r);
    }
    if (const auto r = a.bind_buffer_memory(dev, s.buffer, s.memory, 0); r != vulkan::success)
        return device.error("vkBindBufferMemory", r);
    if (const auto r = a.map_memory(dev, s.memory, 0, vulkan::whole_size, 0, &s.mapped);
        r != vulkan::success) {
        s.mapped = nullptr;
        return device.error("vkMapMemory", r);
    }
    if (s.mapped == nullptr || reinterpret_cast<std::uintptr_t>(s.mapped) % line_bytes != 0)
        return backend("vkMapMemory returned a mapping that is null or not 64-byte aligned");
    return std::nullopt;
}

GPU_ASYNC_DECL std::optional<coded_error>
vulkan_line::make_descriptor_set(vulkan_device& device, detail::vulkan_line_state& s) {
    using namespace detail::vulkan_impl;
    const vulkan::device_api& a = device.api();
    const vulkan::device_t dev = device.device();
    // 3. The descriptor set that binds the buffer to the store's pipeline.
    vulkan::descriptor_pool_size pool_size{};
    pool_size.type = vulkan::descriptor_type_storage_buffer;
    pool_size.descriptor_count = 4;
    vulkan::descriptor_pool_create_info pool_info{};
    pool_info.max_sets = 2; // the line's set, and the one attach_doorbell makes
    pool_info.pool_size_count = 1;
    pool_info.pool_sizes = &pool_size;
    if (const auto r = a.create_descriptor_pool(dev, &pool_info, nullptr, &s.descriptor_pool);
        r != vulkan::success) {
        s.descriptor_pool = {};
        return device.error("vkCreateDescriptorPool", r);
    }
    if (const auto r =
            allocate_store_set(a, dev, s.descriptor_pool, device.set_layout_, &s.descriptor_set);
        r != vulkan::success)
        return device.error("vkAllocateDescriptorSets", r);
    vulkan::descriptor_buffer_info buffer_ref{};
    buffer_ref.buffer = s.buffer;
    buffer_ref.range = line_bytes;
    // Binding 1 without a doorbell: the line (never written).
    write_store_set(a, dev, s.descriptor_set, buffer_ref, buffer_ref);
    return std::nullopt;
}

GPU_ASYNC_DECL std::optional<coded_error>
vulkan_line::start_line(vulkan_device& device, detail::vulkan_line_state& s,
                        const vulkan_line_options& options) {
    using namespace detail::vulkan_impl;
    // 5. The line, its generation and its health query; then the device knows it.
    s.line = ::new (s.mapped) completion_line();
    for (std::size_t i = 0; i < line_words; ++i) {
        s.line->words[i].store(options.initial_sequence, std::memory_order_relaxed);
        s.sequence[i] = options.initial_sequence;
    }
    bool watched = false;
    try {
        const auto generation = adopt_line(*s.line); // retired by close(): its descriptors go stale
        s.generation = generation;
        s.health = std::make_unique<vulkan_line_health>(device.api(), device.device(), s.timeline);
        watch_line_health(*s.line, *s.health);
        watched = true;
        device.add_line(&s);
    } catch (...) {
        if (watched) unwatch_line_health(*s.line);
        s.line = nullptr;
        s.health.reset();
        return backend("no memory for a Vulkan line's generation or health query");
    }
    return std::nullopt;
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
    if (auto e = make_memory(device, *s)) return fail(std::move(*e));
    if (auto e = make_descriptor_set(device, *s)) return fail(std::move(*e));

    // 4. The batches' timeline semaphore and command pool: those of a closed line where the
    //    device has them (vulkan_device::keep_batch_objects), else new ones.
    recycled = device.take_spare_batch(*s);
    if (!recycled)
        if (auto e = make_batch_objects(device, *s)) return fail(std::move(*e));
    if (auto e = start_line(device, *s, options)) return fail(std::move(*e));
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
vulkan_line::import_doorbell(const vulkan_device& device, void* host, vulkan::device_size_t size,
                             std::uint32_t host_types, vulkan::buffer_t& buffer,
                             vulkan::device_memory_t& memory) {
    using namespace detail::vulkan_impl;
    const vulkan::device_api& a = device.api();
    const vulkan::device_t dev = device.device();
    vulkan::external_memory_buffer_create_info external{};
    external.handle_types = vulkan::external_memory_handle_type_host_allocation_bit;
    vulkan::buffer_create_info buffer_info{};
    buffer_info.next = &external;
    buffer_info.size = size;
    buffer_info.usage = vulkan::buffer_usage_storage_buffer_bit;
    share_across_families(buffer_info, device.queue_families_);
    if (const auto r = a.create_buffer(dev, &buffer_info, nullptr, &buffer); r != vulkan::success) {
        buffer = {};
        return device.error("vkCreateBuffer", r);
    }
    vulkan::memory_requirements needs{};
    a.get_buffer_memory_requirements(dev, buffer, &needs);
    const int type = line_memory_type(device.memory_, needs.memory_type_bits & host_types);
    if (type < 0 || needs.size > size)
        return unavailable("a doorbell on Vulkan device '" + device.name() + "'",
                           "no HOST_VISIBLE, HOST_COHERENT memory type imports host memory "
                           "for a storage buffer of " +
                               std::to_string(size) + " bytes");
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
        return device.error("vkAllocateMemory", r);
    }
    if (const auto r = a.bind_buffer_memory(dev, buffer, memory, 0); r != vulkan::success)
        return device.error("vkBindBufferMemory", r);
    return std::nullopt;
}

GPU_ASYNC_DECL std::optional<coded_error>
vulkan_line::make_doorbell_set(const vulkan_device& device, const detail::vulkan_line_state& s,
                               vulkan::buffer_t bell_buffer, vulkan::device_size_t size,
                               vulkan::descriptor_set_t& set) {
    using namespace detail::vulkan_impl;
    const vulkan::device_api& a = device.api();
    const vulkan::device_t dev = device.device();
    // A set of its own: the line's first set may be bound in command buffers still pending,
    // and a set must not change under them.
    if (const auto r = allocate_store_set(a, dev, s.descriptor_pool, device.set_layout_, &set);
        r != vulkan::success)
        return device.error("vkAllocateDescriptorSets", r);
    vulkan::descriptor_buffer_info refs[2]{};
    refs[0].buffer = s.buffer;
    refs[0].range = line_bytes;
    refs[1].buffer = bell_buffer;
    refs[1].range = size;
    write_store_set(a, dev, set, refs[0], refs[1]);
    return std::nullopt;
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
    vulkan::descriptor_set_t set{};
    auto fail = [&](coded_error e) -> std::optional<coded_error> {
        if (buffer != vulkan::buffer_t{}) a.destroy_buffer(dev, buffer, nullptr);
        if (memory != vulkan::device_memory_t{}) a.free_memory(dev, memory, nullptr);
        return e;
    };
    if (auto e = import_doorbell(device, host, size, host_props.memory_type_bits, buffer, memory))
        return fail(std::move(*e));
    if (auto e = make_doorbell_set(device, s, buffer, size, set)) return fail(std::move(*e));

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

} // namespace gpu_async

#endif // GPU_ASYNC_IMPL_VULKAN_LINE_IPP
