// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The HIP (AMD ROCm) backend: the runtime loaded at run time, a mapped
/// line on a device's primary context, and a completion source over one stream.
///
/// Nothing links libamdhip64: `hip_driver::load()` opens "libamdhip64.so" (then the versioned
/// names .so.7, .so.6, .so.5) with dlopen and takes every entry point with dlsym, so every binary
/// starts on a machine without ROCm and learns at run time, as a coded error, what is missing.
///
/// No HIP header is needed: the few types, statuses and flags used here are declared below with
/// the ABI values of hip_runtime_api.h for the AMD platform (scripts/ci/backends.sh checks them
/// against Debian's libamdhip64-dev headers, with `__HIP_PLATFORM_AMD__`). A hipStream_t converts
/// to `hip::stream_t` without a cast.
///
/// Ownership: the line retains the device's primary context (hipDevicePrimaryCtxRetain) before its
/// page is allocated (hipHostMalloc, mapped and coherent) and releases it only after the page is
/// freed; it accepts stores only from streams of that device (hipStreamGetDevice: a runtime without
/// it fails line creation, since the rule could not be checked); it synchronizes the device before
/// freeing, and leaks rather than free when that fails.
///
/// Health: where the runtime has hipStreamCreate and hipStreamDestroy, a line creates a stream of
/// its own on its device (nothing is ever enqueued on it) and registers a health query
/// (gpu_async::watch_line_health): hipStreamQuery on that stream with the line's device current,
/// which never blocks; an answer other than hipSuccess or hipErrorNotReady (the device's sticky
/// error) faults every slot of the line, once. A device fault thus reaches the plain descriptor
/// waits on the line within one fault backstop plus the reactor's park bound, while a reactor with
/// pending waits runs, even when the faulted stream is gone. close() unregisters the query before
/// it retires the line and destroys the stream after the synchronize (with no device switch: a
/// stream carries its device, so nothing can keep it alive).
///
/// Doorbell stores: `line.attach_doorbell(port.shared_bell())` registers the doorbell's line
/// (hipHostRegister, Mapped | Portable; ordinary write-back heap memory) and takes its device
/// pointer on the line's device; each later store is then two hipStreamWriteValue64 calls on the
/// same stream, the completion word first and the doorbell's device word second. Never one
/// hipStreamBatchMemOp: it is newer than the ROCm headers this backend's declarations are checked
/// against (scripts/ci/backends.sh), so its parameter layout could not be checked.
///
/// Events: a hip_event_waiter owns a stream of its own on one slot of a line; `await_event(ev)`
/// enqueues there hipStreamWaitEvent(ev) and the slot's next store. The event stays the caller's.
#ifndef GPU_ASYNC_DEVICE_HIP_HPP
#define GPU_ASYNC_DEVICE_HIP_HPP

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/completion_source.hpp>
#include <gpu_async/core/error.hpp>
#include <gpu_async/core/result.hpp>
#include <gpu_async/core/time.hpp>
#include <gpu_async/detail/config.hpp>
#include <gpu_async/device/detail/vendor_line.hpp>
#include <gpu_async/device/mapped_line.hpp>
#include <gpu_async/wordwait.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

// The runtime's own handle types (hip_runtime_api.h declares them the same way).
struct ihipCtx_t;
struct ihipEvent_t;
struct ihipStream_t;

namespace gpu_async {

/// The HIP runtime ABI this backend uses, declared here so no HIP header is needed.
namespace hip {

using status_t = int;             ///< hipError_t
using device_t = int;             ///< hipDevice_t
using context_t = ::ihipCtx_t*;   ///< hipCtx_t
using stream_t = ::ihipStream_t*; ///< hipStream_t
using event_t = ::ihipEvent_t*;   ///< hipEvent_t
using deviceptr_t = void*;        ///< hipDeviceptr_t (AMD platform)

inline constexpr status_t success = 0;                ///< hipSuccess
inline constexpr status_t error_invalid_value = 1;    ///< hipErrorInvalidValue
inline constexpr status_t error_no_device = 100;      ///< hipErrorNoDevice
inline constexpr status_t error_invalid_device = 101; ///< hipErrorInvalidDevice
inline constexpr status_t error_not_found = 500;      ///< hipErrorNotFound
inline constexpr status_t error_not_ready = 600;      ///< hipErrorNotReady
inline constexpr status_t error_launch_failure = 719; ///< hipErrorLaunchFailure

inline constexpr unsigned host_malloc_mapped = 0x2;          ///< hipHostMallocMapped
inline constexpr unsigned host_malloc_coherent = 0x40000000; ///< hipHostMallocCoherent
inline constexpr unsigned host_register_portable = 0x1;      ///< hipHostRegisterPortable
inline constexpr unsigned host_register_mapped = 0x2;        ///< hipHostRegisterMapped

/// The runtime entry points the backend uses, resolved by name at run time: each member is the
/// runtime function of the same name in camel case with the "hip" prefix (host_malloc is
/// hipHostMalloc; device_malloc and device_free are hipMalloc and hipFree). Null when the
/// runtime lacks one (only those marked optional may be null after a successful load).
struct entry_points {
    status_t (*init)(unsigned flags) = nullptr;
    status_t (*driver_get_version)(int* version) = nullptr;
    const char* (*get_error_name)(status_t error) = nullptr;
    status_t (*get_device_count)(int* count) = nullptr;
    status_t (*get_device)(device_t* device) = nullptr;
    status_t (*set_device)(device_t device) = nullptr;
    status_t (*device_primary_ctx_retain)(context_t* context, device_t device) = nullptr;
    status_t (*device_primary_ctx_release)(device_t device) = nullptr;
    status_t (*host_malloc)(void** host, std::size_t bytes, unsigned flags) = nullptr;
    status_t (*host_get_device_pointer)(void** device, void* host, unsigned flags) = nullptr;
    status_t (*host_free)(void* host) = nullptr;
    status_t (*device_synchronize)() = nullptr;
    status_t (*stream_query)(stream_t stream) = nullptr;
    status_t (*stream_synchronize)(stream_t stream) = nullptr;
    // Optional: a runtime without them fails only line creation.
    status_t (*stream_get_device)(stream_t stream, device_t* device) = nullptr;
    status_t (*stream_write_value64)(stream_t stream, void* address, std::uint64_t value,
                                     unsigned flags) = nullptr;
    // Optional: for programs and tests that make their own streams and work.
    status_t (*stream_create)(stream_t* stream) = nullptr;
    status_t (*stream_destroy)(stream_t stream) = nullptr;
    status_t (*device_malloc)(void** device, std::size_t bytes) = nullptr;
    status_t (*device_free)(void* device) = nullptr;
    status_t (*memset_d8_async)(deviceptr_t device, unsigned char value, std::size_t count,
                                stream_t stream) = nullptr;
    // Optional: a runtime without them fails only attach_doorbell.
    status_t (*host_register)(void* host, std::size_t bytes, unsigned flags) = nullptr;
    status_t (*host_unregister)(void* host) = nullptr;
    // Optional: a runtime without it fails only hip_event_waiter creation.
    status_t (*stream_wait_event)(stream_t stream, event_t event, unsigned flags) = nullptr;
};

/// A symbol resolver: dlsym itself fits (`context` is the library handle).
using resolve_fn = void* (*)(void* context, const char* symbol);

} // namespace hip

/// The HIP runtime, loaded at run time. Not copyable, not movable (its line table points at it).
class hip_driver {
public:
    /// The library names `load()` tries, in order.
    static constexpr const char* library_names[] = {"libamdhip64.so", "libamdhip64.so.7",
                                                    "libamdhip64.so.6", "libamdhip64.so.5"};

    /// The process's runtime: opens the first of `library_names` that loads, once (thread-safe;
    /// later calls return the first answer), resolves the entry points, runs hipInit(0) and
    /// counts the devices. Errors: errc::unavailable naming what is missing (library, entry
    /// point, device) or why hipInit refused. The runtime is never unloaded.
    GPU_ASYNC_DECL static result<const hip_driver*> load();

    /// As load(), from the library `name` (opened, never closed), without caching.
    GPU_ASYNC_DECL static result<std::unique_ptr<hip_driver>> load_library(const char* name);

    /// As load(), with entry points resolved through `lookup(context, name)`.
    GPU_ASYNC_DECL static result<std::unique_ptr<hip_driver>> from_resolver(hip::resolve_fn lookup,
                                                                            void* context);

    hip_driver(const hip_driver&) = delete;
    hip_driver& operator=(const hip_driver&) = delete;

    const hip::entry_points& api() const noexcept { return api_; }

    /// The runtime's version (hipDriverGetVersion).
    int version() const noexcept { return version_; }

    /// The number of devices found at load.
    int device_count() const noexcept { return device_count_; }

    /// The table a mapped_line uses.
    const line_driver& line_table() const noexcept { return table_; }

    /// The runtime's name of a status ("hipErrorNotReady"), or "hipError<n>".
    GPU_ASYNC_DECL std::string status_name(hip::status_t status) const;

    /// errc::driver_status for `call` returning `status`.
    GPU_ASYNC_DECL coded_error error(const char* call, hip::status_t status) const;

    /// Checks that the runtime can run a line: it has hipStreamWriteValue64 and
    /// hipStreamGetDevice. Nothing when it can; otherwise errc::unavailable.
    GPU_ASYNC_DECL std::optional<coded_error> check_lines() const;

private:
    hip_driver() = default;
    GPU_ASYNC_DECL std::optional<coded_error> resolve(hip::resolve_fn lookup, void* context);
    GPU_ASYNC_DECL void fill_table() noexcept;

    hip::entry_points api_{};
    line_driver table_{};
    int version_ = 0;
    int device_count_ = 0;
};

/// A completion line of a HIP device: one pinned, mapped, coherent page on the device's primary
/// context, under the rules of mapped_line. Move-only; not thread-safe (one thread at a time).
/// line(), mapped(), device(), driver(), store(slot, stream) (hipStreamWriteValue64; a stream of
/// another device is refused with errc::foreign_stream) and close() (which synchronizes the
/// device) come from detail::vendor_line.
class hip_line : public detail::vendor_line<hip_driver, hip::device_t, hip::stream_t> {
public:
    /// A line on the calling thread's current device (hipGetDevice). Errors: errc::unavailable
    /// (the runtime lacks hipStreamWriteValue64 or hipStreamGetDevice), errc::driver_status.
    GPU_ASYNC_DECL static result<hip_line> create(const hip_driver& driver,
                                                  mapped_line_options options = {});

    /// A line on device `device`. Errors as `create`, and errc::unavailable for a device the
    /// runtime did not find.
    GPU_ASYNC_DECL static result<hip_line> create_on(const hip_driver& driver, int device,
                                                     mapped_line_options options = {});

private:
    hip_line(const hip_driver& driver, mapped_line line) noexcept
        : vendor_line(driver, std::move(line)) {}
};

/// The HIP calls a hip_source makes.
struct hip_source_traits {
    using driver_type = hip_driver;
    using line_type = hip_line;
    using stream_type = hip::stream_t;
    using status_type = hip::status_t;
    static constexpr status_type success = hip::success;
    static constexpr status_type not_ready = hip::error_not_ready;
    static constexpr const char* query_call = "hipStreamQuery";
    static constexpr const char* synchronize_call = "hipStreamSynchronize";
    static status_type query(const hip_driver& driver, stream_type stream) noexcept {
        return driver.api().stream_query(stream);
    }
    static status_type synchronize(const hip_driver& driver, stream_type stream) noexcept {
        return driver.api().stream_synchronize(stream);
    }
};

/// A completion source over one HIP stream and one slot of a hip_line: query = hipStreamQuery
/// (pending on hipErrorNotReady), block = hipStreamSynchronize, arm = hipStreamWriteValue64 of
/// the slot's next sequence number, park = the word wait on the line (see
/// detail::vendor_source). The line must outlive the source; one thread at a time.
class hip_source : public detail::vendor_source<hip_source_traits> {
public:
    /// A source for `stream` on `slot` of `line`. Errors: errc::foreign_stream when the stream
    /// is not of the line's device; errc::driver_status when hipStreamGetDevice fails.
    GPU_ASYNC_DECL static result<hip_source> create(hip_line& line, slot_id slot,
                                                    hip::stream_t stream);

private:
    hip_source(hip_line& line, slot_id slot, hip::stream_t stream) noexcept
        : vendor_source(line, slot, stream) {}
};

static_assert(completion_source<hip_source>);

/// Awaits HIP events: owns a stream of its own on the line's device and one slot of the line.
/// `await_event(ev)` enqueues on that stream hipStreamWaitEvent(ev) and then the slot's next
/// store (with the doorbell's signal when the line has a doorbell), and returns the descriptor
/// that completes once the work captured in the event is done. The event is the caller's and is
/// never destroyed here; the stream is the waiter's (hipStreamCreate on the line's device,
/// hipStreamDestroy at close). The line must outlive the waiter. Move-only; one thread at a time.
class hip_event_waiter {
public:
    /// A waiter with its own stream on `slot` of `line` (no other stream may store to that
    /// slot). Errors: errc::unavailable (the runtime lacks hipStreamCreate, hipStreamDestroy or
    /// hipStreamWaitEvent), errc::backend (the line is closed), errc::driver_status.
    GPU_ASYNC_DECL static result<hip_event_waiter> create(hip_line& line, slot_id slot);

    hip_event_waiter(hip_event_waiter&& other) noexcept
        : line_(other.line_)
        , stream_(std::exchange(other.stream_, nullptr))
        , slot_(other.slot_) {}
    hip_event_waiter& operator=(hip_event_waiter&& other) noexcept {
        if (this != &other) {
            static_cast<void>(close());
            line_ = other.line_;
            stream_ = std::exchange(other.stream_, nullptr);
            slot_ = other.slot_;
        }
        return *this;
    }
    hip_event_waiter(const hip_event_waiter&) = delete;
    hip_event_waiter& operator=(const hip_event_waiter&) = delete;
    ~hip_event_waiter() { static_cast<void>(close()); }

    /// Enqueues on the waiter's stream a wait for `event` (hipStreamWaitEvent, flags 0) and then
    /// the slot's next store; returns its descriptor. The runtime names no event's device, so
    /// the event's device is taken to be the calling thread's current one (hipGetDevice): it must
    /// be the line's. Errors: errc::foreign_stream (another device is current; nothing is
    /// enqueued), errc::driver_status (hipGetDevice, hipStreamWaitEvent: nothing is enqueued; or
    /// the store, behind an enqueued wait), errc::backend (the waiter or the line is closed).
    GPU_ASYNC_DECL result<memory_descriptor> await_event(hip::event_t event);

    /// Destroys the waiter's stream. Errors: errc::driver_status. Closing twice does nothing.
    GPU_ASYNC_DECL std::optional<coded_error> close();

    /// The waiter's own stream (null once closed).
    hip::stream_t stream() const noexcept { return stream_; }
    slot_id slot() const noexcept { return slot_; }

private:
    hip_event_waiter(hip_line& line, hip::stream_t stream, slot_id slot) noexcept
        : line_(&line)
        , stream_(stream)
        , slot_(slot) {}

    hip_line* line_;
    hip::stream_t stream_;
    slot_id slot_;
};

} // namespace gpu_async

#if GPU_ASYNC_HEADER_ONLY
#include <gpu_async/impl/hip.ipp>
#endif

#endif // GPU_ASYNC_DEVICE_HIP_HPP
