// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/device/impl/hip.ipp: definitions of the HIP backend: what its vendor table cannot say
// (the device switch, the device count and checks, dlsym); the rest is
// device/impl/mapped_vendor.ipp.
//
#ifndef GPU_ASYNC_IMPL_HIP_IPP
#define GPU_ASYNC_IMPL_HIP_IPP

#include <gpu_async/device/hip.hpp>

#include <gpu_async/device/detail/dynamic_library.hpp>
#include <gpu_async/device/impl/mapped_vendor.ipp>

#include <string>
#include <utility>

namespace gpu_async {

GPU_ASYNC_DECL driver_status detail::hip_vendor::enter(const api_type& a, void* domain,
                                                       saved& s) noexcept {
    const device_t device = device_of(domain);
    if (status_t st = a.get_device(&s.previous); st != success)
        return driver_status{st, current.name};
    if (s.previous != device)
        if (status_t st = a.set_device(device); st != success)
            return driver_status{st, set_device.name};
    return driver_status{};
}

GPU_ASYNC_DECL driver_status detail::hip_vendor::leave(const api_type& a, void* domain,
                                                       const saved& s) noexcept {
    if (s.previous == device_of(domain)) return driver_status{};
    return driver_status{a.set_device(s.previous), set_device.name};
}

GPU_ASYNC_DECL std::optional<coded_error>
detail::hip_vendor::check_event_domain(const vendor_driver<hip_vendor>& d, const mapped_line& line,
                                       event_t event) {
    device_t now = 0;
    if (status_t st = d.api().get_device(&now); st != success) return d.error(current.name, st);
    if (now != line.device())
        return coded_error(errc::foreign_stream,
                           {"HIP event " + hex(event) + " of the current device " +
                            std::to_string(now) + " (the line is of device " +
                            std::to_string(line.device()) + ")"});
    return std::nullopt;
}

GPU_ASYNC_DECL result<std::unique_ptr<hip_driver>> hip_driver::from_resolver(hip::resolve_fn lookup,
                                                                             void* context) {
    using detail::unavailable;
    if (lookup == nullptr) return unavailable("the HIP runtime", "no resolver was given");
    std::unique_ptr<hip_driver> d(new hip_driver());
    if (auto e = d->load_calls([&](const char* name, int) { return lookup(context, name); }))
        return std::move(*e);
    const auto count = d->api().get_device_count(&d->device_count_);
    if (count != hip::success)
        return unavailable("a HIP device", "hipGetDeviceCount failed with " +
                                               d->status_name(count) + " (" +
                                               std::to_string(count) + ")");
    if (d->device_count_ <= 0) return unavailable("a HIP device", "hipGetDeviceCount found none");
    return d;
}

GPU_ASYNC_DECL result<std::unique_ptr<hip_driver>> hip_driver::load_library(const char* name) {
    return detail::open_vendor_library<detail::hip_vendor, hip_driver>(
        {&name, 1}, [](void* handle, const char*) { return from_resolver(&::dlsym, handle); });
}

GPU_ASYNC_DECL result<const hip_driver*> hip_driver::load() {
    static const result<std::unique_ptr<hip_driver>> loaded =
        detail::open_vendor_library<detail::hip_vendor, hip_driver>(
            library_names,
            [](void* handle, const char*) { return from_resolver(&::dlsym, handle); });
    if (!loaded.has_value()) return loaded.error();
    return static_cast<const hip_driver*>(loaded.value().get());
}

GPU_ASYNC_DECL std::optional<coded_error> hip_driver::check_lines() const {
    using detail::unavailable;
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
        return detail::unavailable("HIP device " + std::to_string(device),
                                   "the runtime found " + std::to_string(driver.device_count()) +
                                       " device(s)");
    if (auto e = driver.check_lines()) return std::move(*e);
    auto made = mapped_line::create_on(driver.line_table(), device, options);
    if (!made.has_value()) return std::move(made).error();
    return hip_line(driver, std::move(made).value());
}

GPU_ASYNC_DECL result<hip_source> hip_source::create(hip_line& line, slot_id slot,
                                                     hip::stream_t stream) {
    if (auto e = detail::check_stream(line.driver(), line.mapped(), stream)) return std::move(*e);
    return hip_source(line, slot, stream);
}

GPU_ASYNC_DECL result<hip_event_waiter> hip_event_waiter::create(hip_line& line, slot_id slot) {
    return make(line, slot);
}

GPU_ASYNC_DECL result<memory_descriptor> hip_event_waiter::await_event(hip::event_t event) {
    return await(event);
}

GPU_ASYNC_DECL std::optional<coded_error> hip_event_waiter::close() {
    return close_stream();
}

} // namespace gpu_async

#endif // GPU_ASYNC_IMPL_HIP_IPP
