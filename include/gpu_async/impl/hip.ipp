// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/impl/hip.ipp: definitions of the HIP backend.
//
#ifndef GPU_ASYNC_IMPL_HIP_IPP
#define GPU_ASYNC_IMPL_HIP_IPP

#include <gpu_async/device/hip.hpp>

#include <gpu_async/detail/dynamic_library.hpp>

#include <string>
#include <type_traits>
#include <utility>

namespace gpu_async {

namespace detail::hip_impl {

using namespace gpu_async::hip;

inline const hip_driver& drv(void* self) noexcept {
    return *static_cast<const hip_driver*>(self);
}

// A HIP domain is a device's primary context; the handle the line keeps is the device, tagged so
// that device 0 is not a null handle.
inline void* domain_of(device_t device) noexcept {
    return reinterpret_cast<void*>(static_cast<std::uintptr_t>(device) + 1);
}
inline device_t device_of(void* domain) noexcept {
    return static_cast<device_t>(reinterpret_cast<std::uintptr_t>(domain) - 1);
}

/// Runs `call` with `device` current on the calling thread, then makes the previous one current.
template <class Call>
driver_status with_device(const hip_driver& d, device_t device, const char* call_name,
                          Call&& call) noexcept {
    const auto& a = d.api();
    device_t previous = 0;
    if (status_t st = a.get_device(&previous); st != success)
        return driver_status{st, "hipGetDevice"};
    if (previous != device)
        if (status_t st = a.set_device(device); st != success)
            return driver_status{st, "hipSetDevice"};
    const status_t st = call();
    const status_t back = previous != device ? a.set_device(previous) : success;
    if (st != success) return driver_status{st, call_name};
    if (back != success) return driver_status{back, "hipSetDevice", true};
    return driver_status{};
}

inline driver_status current_device(void* self, int* device) noexcept {
    return driver_status{drv(self).api().get_device(device)};
}

inline driver_status retain_domain(void* self, int device, void** domain) noexcept {
    context_t context = nullptr;
    const status_t st = drv(self).api().device_primary_ctx_retain(&context, device);
    *domain = domain_of(device);
    return driver_status{st};
}

inline driver_status release_domain(void* self, int device, void*) noexcept {
    return driver_status{drv(self).api().device_primary_ctx_release(device)};
}

inline driver_status alloc_page(void* self, void* domain, std::size_t bytes, void** host) noexcept {
    const hip_driver& d = drv(self);
    return with_device(d, device_of(domain), "hipHostMalloc", [&] {
        return d.api().host_malloc(host, bytes, host_malloc_mapped | host_malloc_coherent);
    });
}

inline driver_status device_pointer(void* self, void* domain, void* host,
                                    std::uint64_t* address) noexcept {
    const hip_driver& d = drv(self);
    return with_device(d, device_of(domain), "hipHostGetDevicePointer", [&] {
        void* p = nullptr;
        const status_t st = d.api().host_get_device_pointer(&p, host, 0);
        *address = reinterpret_cast<std::uintptr_t>(p);
        return st;
    });
}

inline driver_status free_page(void* self, void* domain, void* host) noexcept {
    const hip_driver& d = drv(self);
    return with_device(d, device_of(domain), "hipHostFree",
                       [&] { return d.api().host_free(host); });
}

inline driver_status settle(void* self, void* domain) noexcept {
    const hip_driver& d = drv(self);
    return with_device(d, device_of(domain), "hipDeviceSynchronize",
                       [&] { return d.api().device_synchronize(); });
}

inline driver_status stream_domain(void* self, void* stream, void** domain) noexcept {
    const auto& a = drv(self).api();
    if (a.stream_get_device == nullptr) return driver_status{error_not_found};
    device_t device = 0;
    const status_t st = a.stream_get_device(static_cast<stream_t>(stream), &device);
    *domain = domain_of(device);
    return driver_status{st};
}

inline driver_status write_value64(void* self, void* stream, std::uint64_t address,
                                   std::uint64_t value) noexcept {
    const auto& a = drv(self).api();
    if (a.stream_write_value64 == nullptr) return driver_status{error_not_found};
    return driver_status{a.stream_write_value64(
        static_cast<stream_t>(stream),
        reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)), value, 0)};
}

inline driver_status register_host(void* self, void* domain, void* host,
                                   std::size_t bytes) noexcept {
    const hip_driver& d = drv(self);
    return with_device(d, device_of(domain), "hipHostRegister", [&] {
        return d.api().host_register(host, bytes, host_register_mapped | host_register_portable);
    });
}

inline driver_status unregister_host(void* self, void* domain, void* host) noexcept {
    const hip_driver& d = drv(self);
    return with_device(d, device_of(domain), "hipHostUnregister",
                       [&] { return d.api().host_unregister(host); });
}

// The line's probe: a stream of its own on the line's device, on which nothing is ever enqueued.
// hipStreamQuery on it answers hipSuccess while the device is healthy, and the sticky error
// once an asynchronous fault has corrupted the device's context.
inline driver_status make_probe(void* self, void* domain, void** probe) noexcept {
    const hip_driver& d = drv(self);
    stream_t stream = nullptr;
    const driver_status st = with_device(d, device_of(domain), "hipStreamCreate",
                                         [&] { return d.api().stream_create(&stream); });
    *probe = stream;
    return st;
}

inline driver_status query_probe(void* self, void* domain, void* probe) noexcept {
    const auto& a = drv(self).api();
    const device_t device = device_of(domain);
    device_t previous = 0;
    if (status_t st = a.get_device(&previous); st != success)
        return driver_status{st, "hipGetDevice"};
    if (previous != device)
        if (status_t st = a.set_device(device); st != success)
            return driver_status{st, "hipSetDevice"};
    const status_t st = a.stream_query(static_cast<stream_t>(probe));
    const status_t back = previous != device ? a.set_device(previous) : success;
    if (st != success && st != error_not_ready) return driver_status{st}; // the device faulted
    if (back != success) return driver_status{back, "hipSetDevice", true};
    return driver_status{};
}

// No switch to the line's device: a HIP stream carries its device, and hipStreamDestroy takes
// it from any device (as hip_event_waiter::close destroys its stream). A switch could only fail
// and leave the probe alive.
inline driver_status drop_probe(void* self, void*, void* probe) noexcept {
    return driver_status{drv(self).api().stream_destroy(static_cast<stream_t>(probe))};
}

inline const char* status_name(void* self, int status) noexcept {
    const auto& a = drv(self).api();
    return a.get_error_name != nullptr ? a.get_error_name(status) : nullptr;
}

inline coded_error unavailable(std::string what, std::string why) {
    return coded_error(errc::unavailable, {std::move(what), std::move(why)});
}

} // namespace detail::hip_impl

GPU_ASYNC_DECL std::optional<coded_error> hip_driver::resolve(hip::resolve_fn lookup,
                                                              void* context) {
    using detail::hip_impl::unavailable;
    std::string missing;
    auto get = [&](const char* name, auto& fn, bool required) {
        if (void* p = lookup(context, name))
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
        else if (required)
            missing += (missing.empty() ? "" : ", ") + std::string(name);
    };
    auto& a = api_;
    get("hipInit", a.init, true);
    get("hipDriverGetVersion", a.driver_get_version, true);
    get("hipGetErrorName", a.get_error_name, true);
    get("hipGetDeviceCount", a.get_device_count, true);
    get("hipGetDevice", a.get_device, true);
    get("hipSetDevice", a.set_device, true);
    get("hipDevicePrimaryCtxRetain", a.device_primary_ctx_retain, true);
    get("hipDevicePrimaryCtxRelease", a.device_primary_ctx_release, true);
    get("hipHostMalloc", a.host_malloc, true);
    get("hipHostGetDevicePointer", a.host_get_device_pointer, true);
    get("hipHostFree", a.host_free, true);
    get("hipDeviceSynchronize", a.device_synchronize, true);
    get("hipStreamQuery", a.stream_query, true);
    get("hipStreamSynchronize", a.stream_synchronize, true);
    get("hipStreamGetDevice", a.stream_get_device, false);
    get("hipStreamWriteValue64", a.stream_write_value64, false);
    get("hipStreamCreate", a.stream_create, false);
    get("hipStreamDestroy", a.stream_destroy, false);
    get("hipMalloc", a.device_malloc, false);
    get("hipFree", a.device_free, false);
    get("hipMemsetD8Async", a.memset_d8_async, false);
    get("hipHostRegister", a.host_register, false);
    get("hipHostUnregister", a.host_unregister, false);
    get("hipStreamWaitEvent", a.stream_wait_event, false);
    if (!missing.empty())
        return unavailable("the HIP runtime's entry point(s) " + missing, "no such symbol");

    if (hip::status_t st = a.init(0); st != hip::success)
        return unavailable("the HIP runtime", "hipInit failed with " + status_name(st) + " (" +
                                                  std::to_string(st) + ")");
    if (hip::status_t st = a.driver_get_version(&version_); st != hip::success)
        return error("hipDriverGetVersion", st);
    if (hip::status_t st = a.get_device_count(&device_count_); st != hip::success)
        return unavailable("a HIP device", "hipGetDeviceCount failed with " + status_name(st) +
                                               " (" + std::to_string(st) + ")");
    if (device_count_ <= 0) return unavailable("a HIP device", "hipGetDeviceCount found none");
    fill_table();
    return std::nullopt;
}

GPU_ASYNC_DECL void hip_driver::fill_table() noexcept {
    namespace impl = detail::hip_impl;
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
    // Without host registration a line takes no doorbell. No batch hook: a doorbell's store is
    // a second hipStreamWriteValue64 (see hip.hpp).
    const bool can_register = api_.host_register != nullptr && api_.host_unregister != nullptr;
    table_.register_host = can_register ? &impl::register_host : nullptr;
    table_.unregister_host = can_register ? &impl::unregister_host : nullptr;
    table_.batch_write64 = nullptr;
    // Without stream creation a line has no probe, and so no health query.
    const bool can_probe = api_.stream_create != nullptr && api_.stream_destroy != nullptr;
    table_.make_probe = can_probe ? &impl::make_probe : nullptr;
    table_.query_probe = can_probe ? &impl::query_probe : nullptr;
    table_.drop_probe = can_probe ? &impl::drop_probe : nullptr;
    table_.call_names = {"hipGetDevice",
                         "hipDevicePrimaryCtxRetain",
                         "hipDevicePrimaryCtxRelease",
                         "hipHostMalloc",
                         "hipHostGetDevicePointer",
                         "hipHostFree",
                         "hipDeviceSynchronize",
                         "hipStreamGetDevice",
                         "hipStreamWriteValue64",
                         "hipHostRegister",
                         "hipHostUnregister",
                         "hipStreamBatchMemOp",
                         "hipStreamCreate",
                         "hipStreamQuery",
                         "hipStreamDestroy"};
    table_.backend = "HIP";
}

GPU_ASYNC_DECL result<std::unique_ptr<hip_driver>> hip_driver::from_resolver(hip::resolve_fn lookup,
                                                                             void* context) {
    if (lookup == nullptr)
        return detail::hip_impl::unavailable("the HIP runtime", "no resolver was given");
    std::unique_ptr<hip_driver> d(new hip_driver());
    if (auto e = d->resolve(lookup, context)) return std::move(*e);
    return d;
}

GPU_ASYNC_DECL result<std::unique_ptr<hip_driver>> hip_driver::load_library(const char* name) {
    std::string why;
    void* handle = detail::open_library(name, why);
    if (handle == nullptr)
        return detail::hip_impl::unavailable(std::string("the HIP runtime (") + name + ")",
                                             why + "; is ROCm installed?");
    return from_resolver(&::dlsym, handle);
}

GPU_ASYNC_DECL result<const hip_driver*> hip_driver::load() {
    static const result<std::unique_ptr<hip_driver>> loaded = [] {
        std::string tried;
        for (const char* name : library_names) {
            std::string why;
            void* handle = detail::open_library(name, why);
            if (handle == nullptr) {
                tried += (tried.empty() ? "" : "; ") + why;
                continue;
            }
            return from_resolver(&::dlsym, handle);
        }
        return result<std::unique_ptr<hip_driver>>(detail::hip_impl::unavailable(
            "the HIP runtime (libamdhip64.so)", tried + "; is ROCm installed?"));
    }();
    if (!loaded.has_value()) return loaded.error();
    return static_cast<const hip_driver*>(loaded.value().get());
}

GPU_ASYNC_DECL std::string hip_driver::status_name(hip::status_t status) const {
    if (const char* n = detail::hip_impl::status_name(const_cast<hip_driver*>(this), status))
        return n;
    return "hipError" + std::to_string(status);
}

GPU_ASYNC_DECL coded_error hip_driver::error(const char* call, hip::status_t status) const {
    return coded_error(errc::driver_status,
                       {std::string(call), status_name(status), std::to_string(status)});
}

GPU_ASYNC_DECL std::optional<coded_error> hip_driver::check_lines() const {
    using detail::hip_impl::unavailable;
    if (api_.stream_write_value64 == nullptr)
        return unavailable("hipStreamWriteValue64",
                           "the HIP runtime (" + std::to_string(version_) + ") lacks it");
    if (api_.stream_get_device == nullptr)
        return unavailable("hipStreamGetDevice",
                           "the HIP runtime (" + std::to_string(version_) +
                               ") lacks it, so a stream's device cannot be checked");
    return std::nullopt;
}

GPU_ASYNC_DECL result<hip_line> hip_line::create(const hip_driver& driver,
                                                 mapped_line_options options) {
    if (auto e = driver.check_lines()) return std::move(*e);
    auto made = mapped_line::create(driver.line_table(), options);
    if (!made.has_value()) return std::move(made).error();
    return hip_line(driver, std::move(made).value());
}

GPU_ASYNC_DECL result<hip_line> hip_line::create_on(const hip_driver& driver, int device,
                                                    mapped_line_options options) {
    if (device < 0 || device >= driver.device_count())
        return detail::hip_impl::unavailable(
            "HIP device " + std::to_string(device),
            "the runtime found " + std::to_string(driver.device_count()) + " device(s)");
    if (auto e = driver.check_lines()) return std::move(*e);
    auto made = mapped_line::create_on(driver.line_table(), device, options);
    if (!made.has_value()) return std::move(made).error();
    return hip_line(driver, std::move(made).value());
}

GPU_ASYNC_DECL result<hip_source> hip_source::create(hip_line& line, slot_id slot,
                                                     hip::stream_t stream) {
    const hip_driver& d = line.driver();
    hip::device_t device = 0;
    if (hip::status_t st = d.api().stream_get_device(stream, &device); st != hip::success)
        return d.error("hipStreamGetDevice", st);
    if (device != line.device())
        return coded_error(errc::foreign_stream,
                           {"HIP stream " + detail::hex(stream) + " (the line is of device " +
                            std::to_string(line.device()) + ")"});
    return hip_source(line, slot, stream);
}

GPU_ASYNC_DECL result<hip_event_waiter> hip_event_waiter::create(hip_line& line, slot_id slot) {
    const hip_driver& d = line.driver();
    const auto& a = d.api();
    if (a.stream_create == nullptr || a.stream_destroy == nullptr || a.stream_wait_event == nullptr)
        return detail::hip_impl::unavailable(
            "hipStreamCreate, hipStreamDestroy and hipStreamWaitEvent",
            "the HIP runtime (" + std::to_string(d.version()) + ") lacks one of them");
    if (!line.mapped().is_open())
        return coded_error(errc::backend, {"hip_event_waiter on a closed or moved-from line"});
    hip::stream_t stream = nullptr;
    const driver_status st = detail::hip_impl::with_device(
        d, line.device(), "hipStreamCreate", [&] { return a.stream_create(&stream); });
    if (!st.ok()) {
        // Made, but the switch back failed: the stream is ours to destroy (the error names it).
        if (st.done) static_cast<void>(a.stream_destroy(stream));
        return d.error(st.call, st.status);
    }
    return hip_event_waiter(line, stream, slot);
}

GPU_ASYNC_DECL result<memory_descriptor> hip_event_waiter::await_event(hip::event_t event) {
    if (stream_ == nullptr)
        return coded_error(errc::backend,
                           {"await_event on a closed or moved-from hip_event_waiter"});
    if (!line_->mapped().is_open())
        return coded_error(errc::backend, {"await_event on a waiter whose line is closed"});
    const hip_driver& d = line_->driver();
    hip::device_t current = 0;
    if (hip::status_t st = d.api().get_device(&current); st != hip::success)
        return d.error("hipGetDevice", st);
    if (current != line_->device())
        return coded_error(errc::foreign_stream,
                           {"HIP event " + detail::hex(event) + " of the current device " +
                            std::to_string(current) + " (the line is of device " +
                            std::to_string(line_->device()) + ")"});
    if (hip::status_t st = d.api().stream_wait_event(stream_, event, 0); st != hip::success)
        return d.error("hipStreamWaitEvent", st);
    return line_->store(slot_, stream_);
}

GPU_ASYNC_DECL std::optional<coded_error> hip_event_waiter::close() {
    if (stream_ == nullptr) return std::nullopt;
    const hip_driver& d = line_->driver();
    const hip::stream_t stream = std::exchange(stream_, nullptr);
    if (hip::status_t st = d.api().stream_destroy(stream); st != hip::success)
        return d.error("hipStreamDestroy", st);
    return std::nullopt;
}

} // namespace gpu_async

#endif // GPU_ASYNC_IMPL_HIP_IPP
