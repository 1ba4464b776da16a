// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/device/detail/mapped_vendor.hpp: the one implementation behind the CUDA and HIP
// backends, parameterised by a vendor table.
//
// The two vendors differ only in what their table says: the entry points (a `vendor_call` each:
// the member of the vendor's entry_points struct, the vendor's name, whether a load needs it),
// their types and constants, and a few short functions for what the calls alone cannot say
// (making a domain current and restoring the caller's, the current device, an error's name).
// Everything else is written once, here and in impl/mapped_vendor.ipp: loading the library and
// resolving the calls, the line_driver hooks a mapped_line runs, the status names and errors,
// the stream check of a source, and the event waiter.
//
// A vendor table (detail::cuda_vendor in device/cuda.hpp, detail::hip_vendor in device/hip.hpp)
// names its types (api_type, status_t, device_t, context_t, stream_t, event_t, deviceptr_t,
// stream_owner_t: what a stream names its domain by), its constants (the messages' words, the
// statuses, the allocation flags, destroy_in_domain, has_batch), one vendor_call per entry point
// (the generic code uses those it names alike: retain, host_alloc, stream_query, ...) with
// `calls` listing them all in load order, and its functions: enter and leave (make a domain
// current and restore the caller's), current_device, domain_of and owner_domain (a domain's
// handle), create_stream, error_name, check_event_domain, and batch_write64 where has_batch.
//
#ifndef GPU_ASYNC_DEVICE_DETAIL_MAPPED_VENDOR_HPP
#define GPU_ASYNC_DEVICE_DETAIL_MAPPED_VENDOR_HPP

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/error.hpp>
#include <gpu_async/core/result.hpp>
#include <gpu_async/device/mapped_line.hpp>

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

namespace gpu_async::detail {

/// One entry point of a vendor: the member of the vendor's entry_points struct that holds it, the
/// vendor's name for it, whether a load fails without it, and (CUDA) the API version to ask for
/// (0: the vendor's default).
template <class Api, class Fn>
struct vendor_call {
    Fn Api::*member;
    const char* name;
    bool required = false;
    int version = 0;

    /// The entry point in `api` (null when the driver lacks it).
    constexpr Fn operator()(const Api& api) const noexcept { return api.*member; }
};

template <class Api, class Fn>
vendor_call(Fn Api::*, const char*, bool = false, int = 0) -> vendor_call<Api, Fn>;

/// errc::unavailable: `what` is missing, because `why`.
inline coded_error unavailable(std::string what, std::string why) {
    return coded_error(errc::unavailable, {std::move(what), std::move(why)});
}

/// A vendor's driver, loaded at run time: its entry points, its version and the line_driver
/// table its lines use. Not copyable, not movable (the table points at it). The vendor's driver
/// class derives from it and adds its loading and checks.
template <class Vendor>
class vendor_driver {
public:
    using api_type = typename Vendor::api_type;
    using status_t = typename Vendor::status_t;

    vendor_driver(const vendor_driver&) = delete;
    vendor_driver& operator=(const vendor_driver&) = delete;

    /// The entry points.
    const api_type& api() const noexcept { return api_; }

    /// The driver's version (cuDriverGetVersion, hipDriverGetVersion).
    int version() const noexcept { return version_; }

    /// The table a mapped_line uses.
    const line_driver& line_table() const noexcept { return table_; }

    /// The vendor's name of a status ("CUDA_ERROR_NOT_READY", "hipErrorNotReady"), or the
    /// vendor's prefix and the number ("CUDA_ERROR_<n>", "hipError<n>").
    std::string status_name(status_t status) const {
        if (const char* n = Vendor::error_name(api_, status)) return n;
        return Vendor::status_prefix + std::to_string(status);
    }

    /// errc::driver_status for `call` returning `status`.
    coded_error error(const char* call, status_t status) const {
        return coded_error(errc::driver_status,
                           {std::string(call), status_name(status), std::to_string(status)});
    }

protected:
    vendor_driver() = default;
    ~vendor_driver() = default;

    /// Resolves every call of the vendor through `lookup(name, version)`, runs its init(0), reads
    /// its version and fills the line table. Errors: errc::unavailable naming the missing calls
    /// or why init refused; errc::driver_status.
    template <class Lookup>
    std::optional<coded_error> load_calls(Lookup lookup);

    api_type api_{};
    line_driver table_{};
    int version_ = 0;
};

/// The first of `names` that opens, made a driver by `from_handle(handle, name)`; else
/// errc::unavailable naming the first name and why each failed.
template <class Vendor, class Driver, class FromHandle>
result<std::unique_ptr<Driver>> open_vendor_library(std::span<const char* const> names,
                                                    FromHandle from_handle);

/// Nothing when `stream` belongs to the line's domain (the line table's stream_domain);
/// errc::foreign_stream when not, errc::driver_status when the driver cannot say.
template <class Vendor>
std::optional<coded_error> check_stream(const vendor_driver<Vendor>& driver,
                                        const mapped_line& line, typename Vendor::stream_t stream);

/// The event waiter of a vendor: a stream of its own in the line's domain and one slot of the
/// line. `Derived` (cuda_event_waiter, hip_event_waiter) names its public calls and forwards
/// them to make(), await() and close_stream(). Move-only; one thread at a time.
template <class Vendor, class Derived, class Line>
class vendor_event_waiter {
public:
    using stream_t = typename Vendor::stream_t;

    vendor_event_waiter(vendor_event_waiter&& other) noexcept
        : line_(other.line_)
        , stream_(std::exchange(other.stream_, nullptr))
        , slot_(other.slot_) {}
    vendor_event_waiter& operator=(vendor_event_waiter&& other) noexcept {
        if (this != &other) {
            static_cast<void>(static_cast<Derived*>(this)->close());
            line_ = other.line_;
            stream_ = std::exchange(other.stream_, nullptr);
            slot_ = other.slot_;
        }
        return *this;
    }
    vendor_event_waiter(const vendor_event_waiter&) = delete;
    vendor_event_waiter& operator=(const vendor_event_waiter&) = delete;

    /// The waiter's own stream (null once closed).
    stream_t stream() const noexcept { return stream_; }
    slot_id slot() const noexcept { return slot_; }

protected:
    vendor_event_waiter(Line& line, stream_t stream, slot_id slot) noexcept
        : line_(&line)
        , stream_(stream)
        , slot_(slot) {}
    ~vendor_event_waiter() = default;

    static result<Derived> make(Line& line, slot_id slot);
    result<memory_descriptor> await(typename Vendor::event_t event);
    std::optional<coded_error> close_stream();

private:
    Line* line_;
    stream_t stream_;
    slot_id slot_;
};

} // namespace gpu_async::detail

#endif // GPU_ASYNC_DEVICE_DETAIL_MAPPED_VENDOR_HPP
