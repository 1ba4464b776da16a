// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/impl/cuda.ipp: definitions of the CUDA backend.
//
#ifndef GPU_ASYNC_IMPL_CUDA_IPP
#define GPU_ASYNC_IMPL_CUDA_IPP

#include <gpu_async/device/cuda.hpp>

#include <gpu_async/detail/dynamic_library.hpp>

#include <string>
#include <type_traits>
#include <utility>

namespace gpu_async {

namespace detail::cuda_impl {

using namespace gpu_async::cuda;

inline const cuda_driver& drv(void* self) noexcept {
    return *static_cast<const cuda_driver*>(self);
}

/// Runs `call` with `context` pushed current on the calling thread, then pops it.
template <class Call>
driver_status with_context(const cuda_driver& d, context_t context, const char* call_name,
                           Call&& call) noexcept {
    const auto& a = d.api();
    if (status_t st = a.ctx_push_current(context); st != success)
        return driver_status{st, "cuCtxPushCurrent"};
    const status_t st = call();
    context_t popped = nullptr;
    const status_t pop = a.ctx_pop_current(&popped);
    if (st != success) return driver_status{st, call_name};
    if (pop != success) return driver_status{pop, "cuCtxPopCurrent", true};
    return driver_status{};
}

inline driver_status current_device(void* self, int* device) noexcept {
    const auto& a = drv(self).api();
    context_t context = nullptr;
    if (status_t st = a.ctx_get_current(&context); st != success)
        return driver_status{st, "cuCtxGetCurrent"};
    if (context == nullptr) {
        *device = -1;
        return driver_status{};
    }
    device_t dev = 0;
    if (status_t st = a.ctx_get_device(&dev); st != success)
        return driver_status{st, "cuCtxGetDevice"};
    *device = dev;
    return driver_status{};
}

inline driver_status retain_domain(void* self, int device, void** domain) noexcept {
    context_t context = nullptr;
    const status_t st = drv(self).api().device_primary_ctx_retain(&context, device);
    *domain = context;
    return driver_status{st};
}

inline driver_status release_domain(void* self, int device, void*) noexcept {
    return driver_status{drv(self).api().device_primary_ctx_release(device)};
}

inline driver_status alloc_page(void* self, void* domain, std::size_t bytes, void** host) noexcept {
    const cuda_driver& d = drv(self);
    return with_context(d, static_cast<context_t>(domain), "cuMemHostAlloc", [&] {
        return d.api().mem_host_alloc(host, bytes, memhostalloc_devicemap | memhostalloc_portable);
    });
}

inline driver_status device_pointer(void* self, void* domain, void* host,
                                    std::uint64_t* address) noexcept {
    const cuda_driver& d = drv(self);
    return with_context(d, static_cast<context_t>(domain), "cuMemHostGetDevicePointer", [&] {
        deviceptr_t p = 0;
        const status_t st = d.api().mem_host_get_device_pointer(&p, host, 0);
        *address = p;
        return st;
    });
}

inline driver_status free_page(void* self, void* domain, void* host) noexcept {
    const cuda_driver& d = drv(self);
    return with_context(d, static_cast<context_t>(domain), "cuMemFreeHost",
                        [&] { return d.api().mem_free_host(host); });
}

inline driver_status settle(void* self, void* domain) noexcept {
    const cuda_driver& d = drv(self);
    return with_context(d, static_cast<context_t>(domain), "cuCtxSynchronize",
                        [&] { return d.api().ctx_synchronize(); });
}

inline driver_status stream_domain(void* self, void* stream, void** domain) noexcept {
    context_t context = nullptr;
    const status_t st = drv(self).api().stream_get_ctx(static_cast<stream_t>(stream), &context);
    *domain = context;
    return driver_status{st};
}

inline driver_status write_value64(void* self, void* stream, std::uint64_t address,
                                   std::uint64_t value) noexcept {
    const auto& a = drv(self).api();
    if (a.stream_write_value64 == nullptr) return driver_status{error_not_found};
    return driver_status{a.stream_write_value64(static_cast<stream_t>(stream), address, value,
                                                stream_write_value_default)};
}

inline driver_status register_host(void* self, void* domain, void* host,
                                   std::size_t bytes) noexcept {
    const cuda_driver& d = drv(self);
    return with_context(d, static_cast<context_t>(domain), "cuMemHostRegister", [&] {
        return d.api().mem_host_register(host, bytes,
                                         memhostregister_portable | memhostregister_devicemap);
    });
}

inline driver_status unregister_host(void* self, void* domain, void* host) noexcept {
    const cuda_driver& d = drv(self);
    return with_context(d, static_cast<context_t>(domain), "cuMemHostUnregister",
                        [&] { return d.api().mem_host_unregister(host); });
}

/// The most stores one batch_write64 takes (a line's store and its doorbell's need two).
inline constexpr std::size_t max_batch = 8;

inline driver_status batch_write64(void* self, void* stream, const batch_store* stores,
                                   std::size_t count) noexcept {
    if (count == 0 || count > max_batch) return driver_status{error_invalid_value};
    stream_batch_mem_op_params params[max_batch] = {};
    for (std::size_t i = 0; i < count; ++i) {
        auto& w = params[i].write_value;
        w.operation = stream_mem_op_write_value_64;
        w.address = stores[i].device_address;
        w.value64 = stores[i].value;
        w.flags = stream_write_value_default; // each write is preceded by a memory fence
        w.alias = 0;
    }
    return driver_status{drv(self).api().stream_batch_mem_op(
        static_cast<stream_t>(stream), static_cast<unsigned>(count), params, 0)};
}

// The line's probe: a non-blocking stream of its own in the line's context, on which nothing is
// ever enqueued. cuStreamQuery on it answers CUDA_SUCCESS while the context is healthy, and the
// context's sticky error once an asynchronous fault has corrupted it.
inline driver_status make_probe(void* self, void* domain, void** probe) noexcept {
    const cuda_driver& d = drv(self);
    stream_t stream = nullptr;
    const driver_status st = with_context(d, static_cast<context_t>(domain), "cuStreamCreate", [&] {
        return d.api().stream_create(&stream, stream_non_blocking);
    });
    *probe = stream;
    return st;
}

inline driver_status query_probe(void* self, void* domain, void* probe) noexcept {
    const auto& a = drv(self).api();
    if (status_t st = a.ctx_push_current(static_cast<context_t>(domain)); st != success)
        return driver_status{st, "cuCtxPushCurrent"};
    const status_t st = a.stream_query(static_cast<stream_t>(probe));
    // One pop for the push, whatever the query answered. A refused pop is never tried again: it
    // may have popped or not, and a second could take the caller's own context off its stack.
    context_t popped = nullptr;
    const status_t pop = a.ctx_pop_current(&popped);
    // A fault outranks a failed pop: the fault is what the health query must tell.
    if (st != success && st != error_not_ready) return driver_status{st}; // the context faulted
    if (pop != success) return driver_status{pop, "cuCtxPopCurrent", true};
    return driver_status{};
}

// With the line's context pushed. When the push fails the stream is destroyed as it is (it
// names its context, and nothing was ever enqueued on it), as cuda_event_waiter::close does once
// its line is closed: the line forgets its probe at close, so a probe kept here would never go.
// The push's failure is still the one reported (`done` when the stream is gone).
inline driver_status drop_probe(void* self, void* domain, void* probe) noexcept {
    const auto& a = drv(self).api();
    const auto stream = static_cast<stream_t>(probe);
    if (status_t pushed = a.ctx_push_current(static_cast<context_t>(domain)); pushed != success) {
        const bool destroyed = a.stream_destroy(stream) == success;
        return driver_status{pushed, "cuCtxPushCurrent", destroyed};
    }
    const status_t st = a.stream_destroy(stream);
    context_t popped = nullptr;
    const status_t pop = a.ctx_pop_current(&popped);
    if (st != success) return driver_status{st, "cuStreamDestroy"};
    if (pop != success) return driver_status{pop, "cuCtxPopCurrent", true};
    return driver_status{};
}

inline const char* status_name(void* self, int status) noexcept {
    const auto& a = drv(self).api();
    const char* name = nullptr;
    if (a.get_error_name == nullptr || a.get_error_name(status, &name) != success) return nullptr;
    return name;
}

inline coded_error unavailable(std::string what, std::string why) {
    return coded_error(errc::unavailable, {std::move(what), std::move(why)});
}

} // namespace detail::cuda_impl

GPU_ASYNC_DECL std::optional<coded_error>
cuda_driver::resolve(cuda::get_proc_address_fn get_proc_address) {
    using detail::cuda_impl::unavailable;
    std::string missing;
    // `version`: the API version that introduced the entry point's current ABI (a request for
    // an older version than the symbol's fails as "version not sufficient").
    auto get = [&](const char* name, auto& fn, bool required, int version = cuda::api_version) {
        void* p = nullptr;
        int symbol_status = cuda::proc_address_symbol_not_found;
        const cuda::status_t st =
            get_proc_address(name, &p, version, cuda::get_proc_address_default, &symbol_status);
        if (st == cuda::success && symbol_status == cuda::proc_address_success && p != nullptr) {
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
        } else if (required) {
            if (!missing.empty()) missing += ", ";
            missing += name;
        }
    };
    auto& a = api_;
    get("cuInit", a.init, true);
    get("cuDriverGetVersion", a.driver_get_version, true);
    get("cuGetErrorName", a.get_error_name, true);
    get("cuDeviceGetCount", a.device_get_count, true);
    get("cuDeviceGet", a.device_get, true);
    get("cuDeviceGetAttribute", a.device_get_attribute, true);
    get("cuCtxGetCurrent", a.ctx_get_current, true);
    get("cuCtxSetCurrent", a.ctx_set_current, true);
    get("cuCtxGetDevice", a.ctx_get_device, true);
    get("cuCtxPushCurrent", a.ctx_push_current, true);
    get("cuCtxPopCurrent", a.ctx_pop_current, true);
    get("cuCtxSynchronize", a.ctx_synchronize, true);
    get("cuDevicePrimaryCtxRetain", a.device_primary_ctx_retain, true);
    get("cuDevicePrimaryCtxRelease", a.device_primary_ctx_release, true);
    get("cuMemHostAlloc", a.mem_host_alloc, true);
    get("cuMemHostGetDevicePointer", a.mem_host_get_device_pointer, true);
    get("cuMemFreeHost", a.mem_free_host, true);
    get("cuStreamGetCtx", a.stream_get_ctx, true);
    get("cuStreamQuery", a.stream_query, true);
    get("cuStreamSynchronize", a.stream_synchronize, true);
    get("cuStreamWriteValue64", a.stream_write_value64, false);
    get("cuStreamBatchMemOp", a.stream_batch_mem_op, false);
    get("cuMemHostRegister", a.mem_host_register, false);
    get("cuMemHostUnregister", a.mem_host_unregister, false);
    get("cuStreamWaitEvent", a.stream_wait_event, false);
    get("cuStreamCreate", a.stream_create, false);
    get("cuStreamDestroy", a.stream_destroy, false);
    get("cuMemAlloc", a.mem_alloc, false);
    get("cuMemFree", a.mem_free, false);
    get("cuMemsetD8Async", a.memset_d8_async, false);
    get("cuCtxSetFlags", a.ctx_set_flags, false, 12010); // introduced in CUDA 12.1
    get("cuEventCreate", a.event_create, false);
    get("cuEventRecord", a.event_record, false);
    get("cuEventQuery", a.event_query, false);
    get("cuEventDestroy", a.event_destroy, false);
    get("cuLaunchHostFunc", a.launch_host_func, false);
    if (!missing.empty())
        return unavailable("the CUDA driver's entry point(s) " + missing,
                           "cuGetProcAddress found no such symbol for API version 12000");

    if (cuda::status_t st = a.init(0); st != cuda::success)
        return unavailable("the CUDA driver", "cuInit failed with " + status_name(st) + " (" +
                                                  std::to_string(st) + ")");
    if (cuda::status_t st = a.driver_get_version(&version_); st != cuda::success)
        return error("cuDriverGetVersion", st);
    fill_table();
    return std::nullopt;
}

GPU_ASYNC_DECL void cuda_driver::fill_table() noexcept {
    namespace impl = detail::cuda_impl;
    table_.self = this;
    table_.current_device = &impl::current_device;
    table_.retain_domain = &impl::retain_domain;
    table_.release_domain = &impl::release_domain;
    table_.alloc_page = &impl::alloc_page;
    table_.device_pointer = &impl::device_pointer;
    table_.free_page = &impl::free_page;
    table_.settle = &impl::settle;
    table_.stream_domain = &impl::stream_domain;
    table_.write_value64 = &impl::write_value64;
    table_.status_name = &impl::status_name;
    // Optional hooks, present only with their entry points: without host registration a line
    // takes no doorbell; without batches a doorbell's store is a second write-value.
    const bool can_register =
        api_.mem_host_register != nullptr && api_.mem_host_unregister != nullptr;
    table_.register_host = can_register ? &impl::register_host : nullptr;
    table_.unregister_host = can_register ? &impl::unregister_host : nullptr;
    table_.batch_write64 = api_.stream_batch_mem_op != nullptr ? &impl::batch_write64 : nullptr;
    // Without stream creation a line has no probe, and so no health query.
    const bool can_probe = api_.stream_create != nullptr && api_.stream_destroy != nullptr;
    table_.make_probe = can_probe ? &impl::make_probe : nullptr;
    table_.query_probe = can_probe ? &impl::query_probe : nullptr;
    table_.drop_probe = can_probe ? &impl::drop_probe : nullptr;
    table_.call_names = {"cuCtxGetCurrent",
                         "cuDevicePrimaryCtxRetain",
                         "cuDevicePrimaryCtxRelease",
                         "cuMemHostAlloc",
                         "cuMemHostGetDevicePointer",
                         "cuMemFreeHost",
                         "cuCtxSynchronize",
                         "cuStreamGetCtx",
                         "cuStreamWriteValue64",
                         "cuMemHostRegister",
                         "cuMemHostUnregister",
                         "cuStreamBatchMemOp",
                         "cuStreamCreate",
                         "cuStreamQuery",
                         "cuStreamDestroy"};
    table_.backend = "CUDA";
}

GPU_ASYNC_DECL result<std::unique_ptr<cuda_driver>>
cuda_driver::from_resolver(cuda::get_proc_address_fn get_proc_address) {
    if (get_proc_address == nullptr)
        return detail::cuda_impl::unavailable("cuGetProcAddress_v2", "no resolver was given");
    std::unique_ptr<cuda_driver> d(new cuda_driver());
    if (auto e = d->resolve(get_proc_address)) return std::move(*e);
    return d;
}

GPU_ASYNC_DECL result<std::unique_ptr<cuda_driver>> cuda_driver::load_library(const char* name) {
    using detail::cuda_impl::unavailable;
    std::string why;
    void* handle = detail::open_library(name, why);
    if (handle == nullptr)
        return unavailable(std::string("the CUDA driver (") + name + ")",
                           why + "; is the NVIDIA driver installed?");
    void* sym = detail::library_symbol(handle, "cuGetProcAddress_v2");
    if (sym == nullptr)
        return unavailable(std::string("cuGetProcAddress_v2 in ") + name,
                           "the library has no such symbol (a CUDA 12 or later driver needs it)");
    return from_resolver(reinterpret_cast<cuda::get_proc_address_fn>(sym));
}

GPU_ASYNC_DECL result<const cuda_driver*> cuda_driver::load() {
    static const result<std::unique_ptr<cuda_driver>> loaded = load_library(library_name);
    if (!loaded.has_value()) return loaded.error();
    return static_cast<const cuda_driver*>(loaded.value().get());
}

GPU_ASYNC_DECL std::string cuda_driver::status_name(cuda::status_t status) const {
    if (const char* n = detail::cuda_impl::status_name(const_cast<cuda_driver*>(this), status))
        return n;
    return "CUDA_ERROR_" + std::to_string(status);
}

GPU_ASYNC_DECL coded_error cuda_driver::error(const char* call, cuda::status_t status) const {
    return coded_error(errc::driver_status,
                       {std::string(call), status_name(status), std::to_string(status)});
}

GPU_ASYNC_DECL std::optional<coded_error> cuda_driver::check_device(cuda::device_t device) const {
    using detail::cuda_impl::unavailable;
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
            return unavailable(who, std::string(r.name) + " is unknown to this driver (" +
                                        std::to_string(version_) + ")");
        if (st != cuda::success) return error("cuDeviceGetAttribute", st);
        if (value == 0) return unavailable(who, std::string(r.name) + " is 0: " + r.meaning);
    }
    if (api_.stream_write_value64 == nullptr)
        return unavailable("cuStreamWriteValue64_v2",
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
    const cuda_driver& d = line.driver();
    cuda::context_t context = nullptr;
    if (cuda::status_t st = d.api().stream_get_ctx(stream, &context); st != cuda::success)
        return d.error("cuStreamGetCtx", st);
    if (context != line.context())
        return coded_error(errc::foreign_stream,
                           {"CUDA stream " + detail::hex(stream) + " (the line is of device " +
                            std::to_string(line.device()) + ")"});
    return cuda_source(line, slot, stream);
}

GPU_ASYNC_DECL result<cuda_event_waiter> cuda_event_waiter::create(cuda_line& line, slot_id slot) {
    const cuda_driver& d = line.driver();
    const auto& a = d.api();
    if (a.stream_create == nullptr || a.stream_destroy == nullptr || a.stream_wait_event == nullptr)
        return detail::cuda_impl::unavailable(
            "cuStreamCreate, cuStreamDestroy and cuStreamWaitEvent",
            "the CUDA driver (" + std::to_string(d.version()) + ") lacks one of them");
    if (!line.mapped().is_open())
        return coded_error(errc::backend, {"cuda_event_waiter on a closed or moved-from line"});
    cuda::stream_t stream = nullptr;
    const driver_status st =
        detail::cuda_impl::with_context(d, line.context(), "cuStreamCreate", [&] {
            return a.stream_create(&stream, cuda::stream_non_blocking);
        });
    if (!st.ok()) {
        // Made, but the pop failed: the stream is ours to destroy (the error names the pop).
        if (st.done)
            static_cast<void>(detail::cuda_impl::with_context(
                d, line.context(), "cuStreamDestroy", [&] { return a.stream_destroy(stream); }));
        return d.error(st.call, st.status);
    }
    return cuda_event_waiter(line, stream, slot);
}

GPU_ASYNC_DECL result<memory_descriptor> cuda_event_waiter::await_event(cuda::event_t event) {
    if (stream_ == nullptr)
        return coded_error(errc::backend,
                           {"await_event on a closed or moved-from cuda_event_waiter"});
    if (!line_->mapped().is_open())
        return coded_error(errc::backend, {"await_event on a waiter whose line is closed"});
    const cuda_driver& d = line_->driver();
    cuda::context_t current = nullptr;
    if (cuda::status_t st = d.api().ctx_get_current(&current); st != cuda::success)
        return d.error("cuCtxGetCurrent", st);
    if (current == nullptr)
        return coded_error(errc::no_domain,
                           {"CUDA: await_event needs the event's context current on the calling "
                            "thread, and none is"});
    if (current != line_->context())
        return coded_error(errc::foreign_stream,
                           {"CUDA event " + detail::hex(event) + " of the current context " +
                            detail::hex(current) + " (the line is of device " +
                            std::to_string(line_->device()) + ", context " +
                            detail::hex(line_->context()) + ")"});
    if (cuda::status_t st = d.api().stream_wait_event(stream_, event, 0); st != cuda::success)
        return d.error("cuStreamWaitEvent", st);
    return line_->store(slot_, stream_);
}

GPU_ASYNC_DECL std::optional<coded_error> cuda_event_waiter::close() {
    if (stream_ == nullptr) return std::nullopt;
    const cuda_driver& d = line_->driver();
    // The line's context pushed while it holds it (a line closed first, against the rule that it
    // outlives the waiter, has released it: the stream is then destroyed as it is). The stream
    // is forgotten once cuStreamDestroy ran, whatever it or the pop returned; a failed push
    // leaves it for a later close().
    bool destroyed = false;
    auto destroy = [&] {
        destroyed = true;
        return d.api().stream_destroy(stream_);
    };
    const driver_status st =
        line_->mapped().is_open()
            ? detail::cuda_impl::with_context(d, line_->context(), "cuStreamDestroy", destroy)
            : driver_status{destroy(), "cuStreamDestroy"};
    if (destroyed) stream_ = nullptr;
    if (!st.ok()) return d.error(st.call, st.status);
    return std::nullopt;
}

} // namespace gpu_async

#endif // GPU_ASYNC_IMPL_CUDA_IPP
