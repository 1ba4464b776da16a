// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/device/impl/mapped_vendor.ipp: the definitions behind the CUDA and HIP backends,
// written once over a vendor table (see device/detail/mapped_vendor.hpp). Included by
// device/impl/cuda.ipp and device/impl/hip.ipp, so its templates are instantiated where the
// backends are compiled.
//
#ifndef GPU_ASYNC_IMPL_MAPPED_VENDOR_IPP
#define GPU_ASYNC_IMPL_MAPPED_VENDOR_IPP

#include <gpu_async/device/detail/mapped_vendor.hpp>

#include <gpu_async/device/detail/dynamic_library.hpp>

#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace gpu_async::detail {

/// A device address as the vendor's pointer type (an integer on CUDA, a pointer on HIP).
template <class P>
P to_deviceptr(std::uint64_t address) noexcept {
    if constexpr (std::is_pointer_v<P>)
        return reinterpret_cast<P>(static_cast<std::uintptr_t>(address));
    else
        return static_cast<P>(address);
}

template <class P>
std::uint64_t from_deviceptr(P p) noexcept {
    if constexpr (std::is_pointer_v<P>)
        return reinterpret_cast<std::uintptr_t>(p);
    else
        return static_cast<std::uint64_t>(p);
}

/// What a call made with a domain current returns: the call's own failure first (named
/// `call_name`), then the restore's (`done`: the call's work stands).
inline driver_status in_domain_result(int status, const char* call_name,
                                      const driver_status& restored) noexcept {
    if (status != 0) return driver_status{status, call_name};
    if (!restored.ok()) return driver_status{restored.status, restored.call, true};
    return driver_status{};
}

/// Runs `call` with `domain` current on the calling thread, then restores the caller's state.
template <class V, class Call>
driver_status with_domain(const typename V::api_type& a, void* domain, const char* call_name,
                          Call&& call) noexcept {
    typename V::saved saved{};
    if (const driver_status in = V::enter(a, domain, saved); !in.ok()) return in;
    const auto st = call();
    return in_domain_result(st, call_name, V::leave(a, domain, saved));
}

/// Destroys a stream the library made, in its domain where the vendor needs that.
template <class V>
driver_status destroy_stream(const typename V::api_type& a, void* domain,
                             typename V::stream_t stream) noexcept {
    auto destroy = [&] { return V::stream_destroy(a)(stream); };
    if constexpr (V::destroy_in_domain)
        return with_domain<V>(a, domain, V::stream_destroy.name, destroy);
    else
        return driver_status{destroy(), V::stream_destroy.name};
}

/// The line_driver hooks, each over the vendor's calls (`self` is the vendor_driver).
template <class V>
struct vendor_hooks {
    using api_type = typename V::api_type;
    using stream_t = typename V::stream_t;

    static const api_type& api(void* self) noexcept {
        return static_cast<const vendor_driver<V>*>(self)->api();
    }

    static driver_status current_device(void* self, int* device) noexcept {
        return V::current_device(api(self), device);
    }

    static driver_status retain_domain(void* self, int device, void** domain) noexcept {
        typename V::context_t context = nullptr;
        const auto st = V::retain(api(self))(&context, device);
        *domain = V::domain_of(context, device);
        return driver_status{st};
    }

    static driver_status release_domain(void* self, int device, void*) noexcept {
        return driver_status{V::release(api(self))(device)};
    }

    static driver_status alloc_page(void* self, void* domain, std::size_t bytes,
                                    void** host) noexcept {
        const api_type& a = api(self);
        return with_domain<V>(a, domain, V::host_alloc.name,
                              [&] { return V::host_alloc(a)(host, bytes, V::host_alloc_flags); });
    }

    static driver_status device_pointer(void* self, void* domain, void* host,
                                        std::uint64_t* address) noexcept {
        const api_type& a = api(self);
        return with_domain<V>(a, domain, V::host_device_pointer.name, [&] {
            typename V::deviceptr_t p{};
            const auto st = V::host_device_pointer(a)(&p, host, 0);
            *address = from_deviceptr(p);
            return st;
        });
    }

    static driver_status free_page(void* self, void* domain, void* host) noexcept {
        const api_type& a = api(self);
        return with_domain<V>(a, domain, V::host_free.name, [&] { return V::host_free(a)(host); });
    }

    static driver_status settle(void* self, void* domain) noexcept {
        const api_type& a = api(self);
        return with_domain<V>(a, domain, V::settle.name, [&] { return V::settle(a)(); });
    }

    static driver_status stream_domain(void* self, void* stream, void** domain) noexcept {
        const api_type& a = api(self);
        if (V::stream_owner(a) == nullptr) return driver_status{V::not_found};
        typename V::stream_owner_t owner{};
        const auto st = V::stream_owner(a)(static_cast<stream_t>(stream), &owner);
        *domain = V::owner_domain(owner);
        return driver_status{st};
    }

    // Default flags: each write is preceded by a memory fence, so the stream's earlier writes
    // are visible first.
    static driver_status write_value64(void* self, void* stream, std::uint64_t address,
                                       std::uint64_t value) noexcept {
        const api_type& a = api(self);
        if (V::write_value64(a) == nullptr) return driver_status{V::not_found};
        return driver_status{V::write_value64(a)(static_cast<stream_t>(stream),
                                                 to_deviceptr<typename V::deviceptr_t>(address),
                                                 value, 0)};
    }

    static driver_status register_host(void* self, void* domain, void* host,
                                       std::size_t bytes) noexcept {
        const api_type& a = api(self);
        return with_domain<V>(a, domain, V::host_register.name, [&] {
            return V::host_register(a)(host, bytes, V::host_register_flags);
        });
    }

    static driver_status unregister_host(void* self, void* domain, void* host) noexcept {
        const api_type& a = api(self);
        return with_domain<V>(a, domain, V::host_unregister.name,
                              [&] { return V::host_unregister(a)(host); });
    }

    static driver_status batch_write64(void* self, void* stream, const batch_store* stores,
                                       std::size_t count) noexcept {
        return V::batch_write64(api(self), stream, stores, count);
    }

    // The line's probe: a stream of its own in the line's domain, on which nothing is ever
    // enqueued. Its query answers success while the domain is healthy, and the domain's sticky
    // error once an asynchronous fault has corrupted it.
    static driver_status make_probe(void* self, void* domain, void** probe) noexcept {
        const api_type& a = api(self);
        stream_t stream = nullptr;
        const driver_status st = with_domain<V>(a, domain, V::stream_create.name,
                                                [&] { return V::create_stream(a, &stream); });
        *probe = stream;
        return st;
    }

    static driver_status query_probe(void* self, void* domain, void* probe) noexcept {
        const api_type& a = api(self);
        typename V::saved saved{};
        if (const driver_status in = V::enter(a, domain, saved); !in.ok()) return in;
        const auto st = V::stream_query(a)(static_cast<stream_t>(probe));
        // One restore for the enter, whatever the query answered: a refused restore is never
        // tried again (a second could take the caller's own state). A fault outranks a failed
        // restore: the fault is what the health query must tell.
        const driver_status restored = V::leave(a, domain, saved);
        if (st != V::success && st != V::not_ready) return driver_status{st}; // faulted
        return in_domain_result(0, nullptr, restored);
    }

    // Where the vendor destroys a stream in its domain and making the domain current fails, the
    // stream is destroyed as it is (it names its domain, and nothing was ever enqueued on it):
    // the line forgets its probe at close, so a probe kept here would never go. The enter's
    // failure is still the one reported (`done` when the stream is gone).
    static driver_status drop_probe(void* self, void* domain, void* probe) noexcept {
        const api_type& a = api(self);
        const auto stream = static_cast<stream_t>(probe);
        if constexpr (V::destroy_in_domain) {
            typename V::saved saved{};
            if (const driver_status in = V::enter(a, domain, saved); !in.ok()) {
                const bool destroyed = V::stream_destroy(a)(stream) == V::success;
                return driver_status{in.status, in.call, destroyed};
            }
            const auto st = V::stream_destroy(a)(stream);
            return in_domain_result(st, V::stream_destroy.name, V::leave(a, domain, saved));
        } else {
            return driver_status{V::stream_destroy(a)(stream)};
        }
    }

    static const char* status_name(void* self, int status) noexcept {
        return V::error_name(api(self), status);
    }
};

template <class Vendor>
template <class Lookup>
std::optional<coded_error> vendor_driver<Vendor>::load_calls(Lookup lookup) {
    using V = Vendor;
    std::string missing;
    auto take = [&](const auto& c) {
        if (void* p = lookup(c.name, c.version))
            api_.*c.member = reinterpret_cast<std::remove_reference_t<decltype(api_.*c.member)>>(p);
        else if (c.required)
            missing += (missing.empty() ? "" : ", ") + std::string(c.name);
    };
    std::apply([&](const auto&... c) { (take(c), ...); }, V::calls);
    if (!missing.empty())
        return unavailable(std::string(V::noun) + "'s entry point(s) " + missing, V::missing_why);

    if (status_t st = V::init(api_)(0); st != V::success)
        return unavailable(V::noun, std::string(V::init.name) + " failed with " + status_name(st) +
                                        " (" + std::to_string(st) + ")");
    if (status_t st = V::driver_get_version(api_)(&version_); st != V::success)
        return error(V::driver_get_version.name, st);

    fill_table();
    return std::nullopt;
}

template <class Vendor>
void vendor_driver<Vendor>::fill_table() {
    using V = Vendor;
    using H = vendor_hooks<V>;
    table_.self = this;
    table_.current_device = &H::current_device;
    table_.retain_domain = &H::retain_domain;
    table_.release_domain = &H::release_domain;
    table_.alloc_page = &H::alloc_page;
    table_.device_pointer = &H::device_pointer;
    table_.free_page = &H::free_page;
    table_.settle = &H::settle;
    table_.stream_domain = &H::stream_domain;
    table_.write_value64 = &H::write_value64;
    table_.status_name = &H::status_name;
    // Optional hooks, present only with their entry points: without host registration a line
    // takes no doorbell; without batches a doorbell's store is a second write-value.
    const bool can_register =
        V::host_register(api_) != nullptr && V::host_unregister(api_) != nullptr;
    table_.register_host = can_register ? &H::register_host : nullptr;
    table_.unregister_host = can_register ? &H::unregister_host : nullptr;
    if constexpr (V::has_batch)
        table_.batch_write64 = V::stream_batch(api_) != nullptr ? &H::batch_write64 : nullptr;
    // Without stream creation a line has no probe, and so no health query.
    const bool can_probe = V::stream_create(api_) != nullptr && V::stream_destroy(api_) != nullptr;
    table_.make_probe = can_probe ? &H::make_probe : nullptr;
    table_.query_probe = can_probe ? &H::query_probe : nullptr;
    table_.drop_probe = can_probe ? &H::drop_probe : nullptr;
    table_.call_names = {V::current.name,
                         V::retain.name,
                         V::release.name,
                         V::host_alloc.name,
                         V::host_device_pointer.name,
                         V::host_free.name,
                         V::settle.name,
                         V::stream_owner.name,
                         V::write_value64.name,
                         V::host_register.name,
                         V::host_unregister.name,
                         V::batch_call_name,
                         V::stream_create.name,
                         V::stream_query.name,
                         V::stream_destroy.name};
    table_.backend = V::backend;
}

template <class Vendor, class Driver, class FromHandle>
result<std::unique_ptr<Driver>> open_vendor_library(std::span<const char* const> names,
                                                    FromHandle from_handle) {
    std::string tried;
    for (const char* name : names) {
        std::string why;
        if (void* handle = open_library(name, why)) return from_handle(handle, name);
        tried += (tried.empty() ? "" : "; ") + why;
    }
    return unavailable(std::string(Vendor::noun) + " (" + names.front() + ")",
                       tried + Vendor::install_hint);
}

template <class Vendor>
std::optional<coded_error> check_stream(const vendor_driver<Vendor>& driver,
                                        const mapped_line& line, typename Vendor::stream_t stream) {
    const line_driver& t = driver.line_table();
    void* domain = nullptr;
    if (const driver_status st = t.stream_domain(t.self, stream, &domain); !st.ok())
        return driver.error(Vendor::stream_owner.name, st.status);
    if (domain != line.domain())
        return coded_error(errc::foreign_stream,
                           {std::string(Vendor::backend) + " stream " + hex(stream) +
                            " (the line is of device " + std::to_string(line.device()) + ")"});
    return std::nullopt;
}

template <class Vendor, class Derived, class Line>
result<Derived> vendor_event_waiter<Vendor, Derived, Line>::make(Line& line, slot_id slot) {
    using V = Vendor;
    const auto& d = line.driver();
    const auto& a = d.api();
    if (V::stream_create(a) == nullptr || V::stream_destroy(a) == nullptr ||
        V::stream_wait_event(a) == nullptr)
        return unavailable(std::string(V::stream_create.name) + ", " + V::stream_destroy.name +
                               " and " + V::stream_wait_event.name,
                           std::string(V::noun) + " (" + std::to_string(d.version()) +
                               ") lacks one of them");
    if (!line.mapped().is_open())
        return coded_error(errc::backend,
                           {std::string(V::waiter_name) + " on a closed or moved-from line"});
    void* domain = line.mapped().domain();
    stream_t stream = nullptr;
    const driver_status st = with_domain<V>(a, domain, V::stream_create.name,
                                            [&] { return V::create_stream(a, &stream); });
    if (!st.ok()) {
        // Made, but the restore failed: the stream is ours to destroy (the error names it).
        if (st.done) static_cast<void>(destroy_stream<V>(a, domain, stream));
        return d.error(st.call, st.status);
    }
    return Derived(line, stream, slot);
}

template <class Vendor, class Derived, class Line>
result<memory_descriptor>
vendor_event_waiter<Vendor, Derived, Line>::await(typename Vendor::event_t event) {
    using V = Vendor;
    if (stream_ == nullptr)
        return coded_error(errc::backend, {std::string("await_event on a closed or moved-from ") +
                                           V::waiter_name});
    if (!line_->mapped().is_open())
        return coded_error(errc::backend, {"await_event on a waiter whose line is closed"});
    const auto& d = line_->driver();
    if (auto e = V::check_event_domain(d, line_->mapped(), event)) return std::move(*e);
    if (auto st = V::stream_wait_event(d.api())(stream_, event, 0); st != V::success)
        return d.error(V::stream_wait_event.name, st);
    return line_->store(slot_, stream_);
}

// The stream is forgotten once its destroy ran, whatever it (or the restore) returned; a failed
// enter of the line's domain leaves it for a later close(). A line closed first (against the
// rule that it outlives the waiter) no longer holds its domain: the stream is then destroyed as
// it is.
template <class Vendor, class Derived, class Line>
std::optional<coded_error> vendor_event_waiter<Vendor, Derived, Line>::close_stream() {
    using V = Vendor;
    if (stream_ == nullptr) return std::nullopt;
    const auto& d = line_->driver();
    bool destroyed = false;
    auto destroy = [&] {
        destroyed = true;
        return V::stream_destroy(d.api())(stream_);
    };
    const driver_status st =
        V::destroy_in_domain && line_->mapped().is_open()
            ? with_domain<V>(d.api(), line_->mapped().domain(), V::stream_destroy.name, destroy)
            : driver_status{destroy(), V::stream_destroy.name};
    if (destroyed) stream_ = nullptr;
    if (!st.ok()) return d.error(st.call, st.status);
    return std::nullopt;
}

} // namespace gpu_async::detail

#endif // GPU_ASYNC_IMPL_MAPPED_VENDOR_IPP
