// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/device/detail/mapped_vendor.hpp: the one implementation behind the CUDA and HIP
// backends, parameterised by a vendor table.
//
// The two vendors differ only in what their table says: the entry points (a `vendor_call` each:
// the member of the vendor's entry_points struct, the vendor's name, whether a load needs it),
// their types and constants, and a few short functions for what the calls alone cannot say
// (making a domain current and restoring the caller's, the current device, an error's name).
// Everything else is written once, here and in device/impl/mapped_vendor.ipp: loading the library
// and resolving the calls, the line_driver hooks a mapped_line runs, the status names and errors,
// the line (a mapped_line and its driver), the source over one stream and its stream check, and
// the event waiter. The vendor parts stay in device/cuda.hpp and device/hip.hpp: the table,
// creating a line (which device, what it must support), and the public names.
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
#include <gpu_async/core/completion_source.hpp>
#include <gpu_async/core/error.hpp>
#include <gpu_async/core/result.hpp>
#include <gpu_async/core/time.hpp>
#include <gpu_async/device/mapped_line.hpp>
#include <gpu_async/wait/doorbell.hpp>
#include <gpu_async/wait/wordwait.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <system_error>
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

private:
    /// Fills the line table with the hooks of the calls loaded (load_calls' last step).
    void fill_table();
};

/// A completion line of one driver's device: a mapped_line and the driver that made it.
/// Move-only; not thread-safe (one thread at a time). The vendor line derives from it and adds
/// its own creation.
template <class Driver, class Device, class Stream>
class vendor_line {
public:
    /// The line the host watches.
    const completion_line& line() const noexcept { return mapped_.line(); }
    /// The line's generation, stamped into its descriptors (<gpu_async/line/line_life.hpp>).
    std::uint64_t generation() const noexcept { return mapped_.generation(); }

    /// The mapped line underneath (ownership, sequences, device addresses).
    mapped_line& mapped() noexcept { return mapped_; }
    const mapped_line& mapped() const noexcept { return mapped_; }

    /// The device, whose primary context the line retains.
    Device device() const noexcept { return mapped_.device(); }

    const Driver& driver() const noexcept { return *driver_; }

    /// Enqueues on `stream` (the driver's 64-bit stream write; the stream's earlier writes are
    /// visible first) the slot's next sequence number; returns its descriptor. A stream of
    /// another context or device is refused with errc::foreign_stream and nothing is enqueued.
    result<memory_descriptor> store(slot_id slot, Stream stream) {
        return mapped_.store(slot, stream);
    }

    /// Attaches `bell` (a port's shared_bell()): each later store is followed, in the same
    /// stream, by the doorbell's device signal (see mapped_line::attach_doorbell).
    std::optional<coded_error> attach_doorbell(std::shared_ptr<doorbell> bell) {
        return mapped_.attach_doorbell(std::move(bell));
    }

    /// Synchronizes the context or device, frees the page, releases the context (see
    /// mapped_line::close).
    std::optional<coded_error> close() { return mapped_.close(); }

protected:
    vendor_line(const Driver& driver, mapped_line line) noexcept
        : driver_(&driver)
        , mapped_(std::move(line)) {}

private:
    const Driver* driver_;
    mapped_line mapped_;
};

/// A completion source over one stream and one slot of a vendor line: query and block are the
/// vendor's stream query and synchronize, arm is the line's store of the slot's next sequence
/// number, park is the word wait on the line. The line must outlive the source; one thread at a
/// time. The vendor source derives from it and adds its own creation (the stream's check).
template <class Vendor, class Line>
class vendor_source {
public:
    using line_type = Line;
    using stream_type = typename Vendor::stream_t;
    using status_type = typename Vendor::status_t;

    /// The stream query: done, pending (the driver's "not ready"), or failed with
    /// errc::device_fault (last_error() names the status).
    query_result query() {
        const status_type st = Vendor::stream_query(line_->driver().api())(stream_);
        if (st == Vendor::success) return query_result::done();
        if (st == Vendor::not_ready) return query_result::pending();
        last_error_ = line_->driver().error(Vendor::stream_query.name, st);
        return query_result::failed(make_error_code(errc::device_fault));
    }

    /// The stream synchronize: empty, or errc::device_fault (last_error() names the status).
    std::error_code block() {
        const status_type st = Vendor::stream_synchronize(line_->driver().api())(stream_);
        if (st == Vendor::success) return {};
        last_error_ = line_->driver().error(Vendor::stream_synchronize.name, st);
        return make_error_code(errc::device_fault);
    }

    /// Enqueues the slot's next sequence number behind the stream's work; descriptor() then
    /// names it. Errors: the code of last_error() (driver_status, foreign_stream).
    std::error_code arm() {
        auto stored = line_->store(slot_, stream_);
        if (!stored.has_value()) {
            last_error_ = stored.error();
            return stored.error().code();
        }
        target_ = stored.value().target();
        return {};
    }

    /// The descriptor of the last store armed (of the line's slot before the first arm).
    memory_descriptor descriptor() const noexcept {
        return memory_descriptor(line_->line(), slot_, target_, line_->generation());
    }

    /// Parks on the line (the word wait) for at most `bound`; true when the word has reached the
    /// descriptor's target.
    bool park(dur_ns bound) const {
        const memory_descriptor d = descriptor();
        return word_wait::probe().park(
            d.line(), [&d] { return d.is_complete(); }, bound);
    }

    stream_type stream() const noexcept { return stream_; }
    slot_id slot() const noexcept { return slot_; }

    /// The detail of the last failure (call, status name, number), if any.
    const std::optional<coded_error>& last_error() const noexcept { return last_error_; }

protected:
    vendor_source(line_type& line, slot_id slot, stream_type stream) noexcept
        : line_(&line)
        , stream_(stream)
        , target_(line.mapped().sequence(slot))
        , slot_(slot) {}

private:
    line_type* line_;
    stream_type stream_;
    std::uint64_t target_;
    slot_id slot_;
    std::optional<coded_error> last_error_;
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
