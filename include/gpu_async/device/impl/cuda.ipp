// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/device/impl/cuda.ipp: definitions of the CUDA backend: what its vendor table cannot say
// (the context push and pop, the batch of stores, the device checks, cuGetProcAddress); the
// rest is device/impl/mapped_vendor.ipp.
//
#ifndef GPU_ASYNC_IMPL_CUDA_IPP
#define GPU_ASYNC_IMPL_CUDA_IPP

#include <gpu_async/device/cuda.hpp>

#include <gpu_async/device/detail/dynamic_library.hpp>
#include <gpu_async/device/impl/mapped_vendor.ipp>

#include <string>
#include <utility>

namespace gpu_async {

GPU_ASYNC_DECL driver_status detail::cuda_vendor::enter(const api_type& a, void* domain,
                                                        saved&) noexcept {
    if (status_t st = a.ctx_push_current(static_cast<context_t>(domain)); st != success)
        return driver_status{st, push.name};
    return driver_status{};
}

GPU_ASYNC_DECL driver_status detail::cuda_vendor::leave(const api_type& a, void*,
                                                        const saved&) noexcept {
    context_t popped = nullptr;
    return driver_status{a.ctx_pop_current(&popped), pop.name};
}

GPU_ASYNC_DECL driver_status detail::cuda_vendor::current_device(const api_type& a,
                                                                 int* device) noexcept {
    context_t context = nullptr;
    if (status_t st = a.ctx_get_current(&context); st != success)
        return driver_status{st, current.name};
    if (context == nullptr) {
        *device = -1;
        return driver_status{};
    }
    device_t dev = 0;
    if (status_t st = a.ctx_get_device(&dev); st != success)
        return driver_status{st, ctx_get_device.name};
    *device = dev;
    return driver_status{};
}

namespace detail {
/// The most stores one batch_write64 takes (a line's store and its doorbell's need two).
inline constexpr std::size_t cuda_max_batch = 8;
} // namespace detail

GPU_ASYNC_DECL driver_status detail::cuda_vendor::batch_write64(const api_type& a, void* stream,
                                                                const batch_store* stores,
                                                                std::size_t count) noexcept {
    if (count == 0 || count > detail::cuda_max_batch)
        return driver_status{cuda::error_invalid_value};
    cuda::stream_batch_mem_op_params params[detail::cuda_max_batch] = {};
    for (std::size_t i = 0; i < count; ++i) {
        auto& w = params[i].write_value;
        w.operation = cuda::stream_mem_op_write_value_64;
        w.address = stores[i].device_address;
        w.value64 = stores[i].value;
        w.flags = cuda::stream_write_value_default; // each write is preceded by a memory fence
        w.alias = 0;
    }
    return driver_status{a.stream_batch_mem_op(static_cast<stream_t>(stream),
                                               static_cast<unsigned>(count), params, 0)};
}

GPU_ASYNC_DECL std::optional<coded_error>
detail::cuda_vendor::check_event_domain(const vendor_driver<cuda_vendor>& d,
                                        const mapped_line& line, event_t event) {
    context_t now = nullptr;
    if (status_t st = d.api().ctx_get_current(&now); st != success)
        return d.error(current.name, st);
    if (now == nullptr)
        return coded_error(errc::no_domain,
                           {"CUDA: await_event needs the event's context current on the calling "
                            "thread, and none is"});
    if (now != line.domain())
        return coded_error(errc::foreign_stream,
                           {"CUDA event " + hex(event) + " of the current context " + hex(now) +
                            " (the line is of device " + std::to_string(line.device()) +
                            ", context " + hex(line.domain()) + ")"});
    return std::nullopt;
}

GPU_ASYNC_DECL result<std::unique_ptr<cuda_driver>>
cuda_driver::from_resolver(cuda::get_proc_address_fn get_proc_address) {
    if (get_proc_address == nullptr)
        return detail::unavailable("cuGetProcAddress_v2", "no resolver was given");
    std::unique_ptr<cuda_driver> d(new cuda_driver());
    // `version`: the API version that introduced the entry point's current ABI (a request for
    // an older version than the symbol's fails as "version not sufficient").
    auto lookup = [&](const char* name, int version) -> void* {
        void* p = nullptr;
        int symbol_status = cuda::proc_address_symbol_not_found;
        const cuda::status_t st =
            get_proc_address(name, &p, version != 0 ? version : cuda::api_version,
                             cuda::get_proc_address_default, &symbol_status);
        return st == cuda::success && symbol_status == cuda::proc_address_success ? p : nullptr;
    };
    if (auto e = d->load_calls(lookup)) return std::move(*e);
    return d;
}

GPU_ASYNC_DECL result<std::unique_ptr<cuda_driver>> cuda_driver::load_library(const char* name) {
    return detail::open_vendor_library<detail::cuda_vendor, cuda_driver>(
        {&name, 1}, [](void* handle, const char* opened) -> result<std::unique_ptr<cuda_driver>> {
            void* sym = detail::library_symbol(handle, "cuGetProcAddress_v2");
            if (sym == nullptr)
                return detail::unavailable(
                    std::string("cuGetProcAddress_v2 in ") + opened,
                    "the library has no such symbol (a CUDA 12 or later driver needs it)");
            return from_resolver(reinterpret_cast<cuda::get_proc_address_fn>(sym));
        });
}

GPU_ASYNC_DECL result<const cuda_driver*> cuda_driver::load() {
    static const result<std::unique_ptr<cuda_driver>> loaded = load_library(library_name);
    if (!loaded.has_value()) return loaded.error();
    return static_cast<const cuda_driver*>(loaded.value().get());
}

GPU_ASYNC_DECL std::optional<coded_error> cuda_driver::check_device(cuda::device_t device) const {
    const std::string who = "CUDA device " + std::to_string(device);
    struct requirement {
        int attribute;
        const char* name;
        const char* meaning;
    };
    constexpr requirement needs[] = {
        {cuda::attribute_can_map_host_memory, "CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY",
         "it cannot map pinned host memory"},
        {cuda::attribute_can_use_64_bit_stream_mem_ops,
         "CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS",
         "it cannot run 64-bit stream memory operations (cuStreamWriteValue64)"},
    };
    for (const requirement& r : needs) {
        int value = 0;
        const cuda::status_t st = api_.device_get_attribute(&value, r.attribute, device);
        if (st == cuda::error_invalid_value)
            return detail::unavailable(who, std::string(r.name) + " is unknown to this driver (" +
                                                std::to_string(version_) + ")");
        if (st != cuda::success) return error("cuDeviceGetAttribute", st);
        if (value == 0)
            return detail::unavailable(who, std::string(r.name) + " is 0: " + r.meaning);
    }
    if (api_.stream_write_value64 == nullptr)
        return detail::unavailable("cuStreamWriteValue64_v2",
                                   "the CUDA driver (" + std::to_string(version_) + ") lacks it");
    return std::nullopt;
}

GPU_ASYNC_DECL result<cuda_line> cuda_line::create(const cuda_driver& driver,
                                                   mapped_line_options options) {
    const line_driver& t = driver.line_table();
    int device = -1;
    if (const driver_status st = t.current_device(t.self, &device); !st.ok())
        return driver_error(t, driver_op::current_device, st);
    if (device < 0)
        return coded_error(errc::no_domain,
                           {"CUDA: the calling thread has no current context to own a line"});
    if (auto e = driver.check_device(device)) return std::move(*e);
    auto made = mapped_line::create_on(t, device, options);
    if (!made.has_value()) return std::move(made).error();
    return cuda_line(driver, std::move(made).value());
}

GPU_ASYNC_DECL result<cuda_line> cuda_line::create_on(const cuda_driver& driver, int ordinal,
                                                      mapped_line_options options) {
    cuda::device_t device = 0;
    if (cuda::status_t st = driver.api().device_get(&device, ordinal); st != cuda::success)
        return driver.error("cuDeviceGet", st);
    if (auto e = driver.check_device(device)) return std::move(*e);
    auto made = mapped_line::create_on(driver.line_table(), device, options);
    if (!made.has_value()) return std::move(made).error();
    return cuda_line(driver, std::move(made).value());
}

GPU_ASYNC_DECL result<cuda_source> cuda_source::create(cuda_line& line, slot_id slot,
                                                       cuda::stream_t stream) {
    if (auto e = detail::check_stream(line.driver(), line.mapped(), stream)) return std::move(*e);
    return cuda_source(line, slot, stream);
}

GPU_ASYNC_DECL result<cuda_event_waiter> cuda_event_waiter::create(cuda_line& line, slot_id slot) {
    return make(line, slot);
}

GPU_ASYNC_DECL result<memory_descriptor> cuda_event_waiter::await_event(cuda::event_t event) {
    return await(event);
}

GPU_ASYNC_DECL std::optional<coded_error> cuda_event_waiter::close() {
    return close_stream();
}

} // namespace gpu_async

#endif // GPU_ASYNC_IMPL_CUDA_IPP
