// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/device/detail/vendor_line.hpp: what the CUDA and HIP backends share above their
// driver tables: a line that owns a mapped_line for one driver, and a completion source over
// one stream and one slot of such a line.
//
// The vendor parts stay in device/cuda.hpp and device/hip.hpp: creating a line (which device,
// what it must support) and the vendor table (device/detail/mapped_vendor.hpp), whose
// stream_query and stream_synchronize calls a source makes.
//
#ifndef GPU_ASYNC_DEVICE_DETAIL_VENDOR_LINE_HPP
#define GPU_ASYNC_DEVICE_DETAIL_VENDOR_LINE_HPP

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/completion_source.hpp>
#include <gpu_async/core/error.hpp>
#include <gpu_async/core/result.hpp>
#include <gpu_async/core/time.hpp>
#include <gpu_async/device/mapped_line.hpp>
#include <gpu_async/doorbell.hpp>
#include <gpu_async/wordwait.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <system_error>
#include <utility>

namespace gpu_async::detail {

/// A completion line of one driver's device: a mapped_line and the driver that made it.
/// Move-only; not thread-safe (one thread at a time). The vendor line derives from it and adds
/// its own creation.
template <class Driver, class Device, class Stream>
class vendor_line {
public:
    /// The line the host watches.
    const completion_line& line() const noexcept { return mapped_.line(); }
    /// The line's generation, stamped into its descriptors (<gpu_async/line_retirement.hpp>).
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

} // namespace gpu_async::detail

#endif // GPU_ASYNC_DEVICE_DETAIL_VENDOR_LINE_HPP
