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
#include <gpu_async/core/detail/config.hpp>
#include <gpu_async/core/error.hpp>
#include <gpu_async/core/result.hpp>
#include <gpu_async/core/time.hpp>
#include <gpu_async/device/detail/mapped_vendor.hpp>
#include <gpu_async/device/mapped_line.hpp>
#include <gpu_async/wait/wordwait.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <tuple>
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

namespace detail {

/// The HIP runtime as a mapped-line vendor (device/detail/mapped_vendor.hpp): its calls, types
/// and constants. A HIP domain is a device's primary context; its handle is the device, tagged so
/// that device 0 is not a null handle. Entering it makes the device current (hipSetDevice, where
/// another is), leaving makes the caller's current again.
struct hip_vendor {
    using api_type = hip::entry_points;
    using status_t = hip::status_t;
    using device_t = hip::device_t;
    using context_t = hip::context_t;
    using stream_t = hip::stream_t;
    using event_t = hip::event_t;
    using deviceptr_t = void*;            // hipHostGetDevicePointer, hipStreamWriteValue64
    using stream_owner_t = hip::device_t; // hipStreamGetDevice names a stream's device
    struct saved {
        device_t previous = 0;
    };

    static constexpr const char* backend = "HIP";
    static constexpr const char* noun = "the HIP runtime";
    static constexpr const char* status_prefix = "hipError";
    static constexpr const char* install_hint = "; is ROCm installed?";
    static constexpr const char* missing_why = "no such symbol";
    static constexpr const char* waiter_name = "hip_event_waiter";
    // Named, never resolved: see the file comment.
    static constexpr const char* batch_call_name = "hipStreamBatchMemOp";
    static constexpr status_t success = hip::success;
    static constexpr status_t not_ready = hip::error_not_ready;
    static constexpr status_t not_found = hip::error_not_found;
    static constexpr unsigned host_alloc_flags =
        hip::host_malloc_mapped | hip::host_malloc_coherent;
    static constexpr unsigned host_register_flags =
        hip::host_register_mapped | hip::host_register_portable;
    // A HIP stream carries its device, and hipStreamDestroy takes it from any device: a switch
    // could only fail and leave the stream alive.
    static constexpr bool destroy_in_domain = false;
    static constexpr bool has_batch = false;

    // Every entry point, in the order a load resolves them; `true`: a load fails without it.
    using E = api_type;
    static constexpr vendor_call init{&E::init, "hipInit", true};
    static constexpr vendor_call driver_get_version{&E::driver_get_version, "hipDriverGetVersion",
                                                    true};
    static constexpr vendor_call get_device_count{&E::get_device_count, "hipGetDeviceCount", true};
    static constexpr vendor_call current{&E::get_device, "hipGetDevice", true};
    static constexpr vendor_call set_device{&E::set_device, "hipSetDevice", true};
    static constexpr vendor_call retain{&E::device_primary_ctx_retain, "hipDevicePrimaryCtxRetain",
                                        true};
    static constexpr vendor_call release{&E::device_primary_ctx_release,
                                         "hipDevicePrimaryCtxRelease", true};
    static constexpr vendor_call host_alloc{&E::host_malloc, "hipHostMalloc", true};
    static constexpr vendor_call host_device_pointer{&E::host_get_device_pointer,
                                                     "hipHostGetDevicePointer", true};
    static constexpr vendor_call host_free{&E::host_free, "hipHostFree", true};
    static constexpr vendor_call settle{&E::device_synchronize, "hipDeviceSynchronize", true};
    static constexpr vendor_call stream_query{&E::stream_query, "hipStreamQuery", true};
    static constexpr vendor_call stream_synchronize{&E::stream_synchronize, "hipStreamSynchronize",
                                                    true};
    static constexpr vendor_call stream_owner{&E::stream_get_device, "hipStreamGetDevice"};
    static constexpr vendor_call write_value64{&E::stream_write_value64, "hipStreamWriteValue64"};
    static constexpr vendor_call stream_create{&E::stream_create, "hipStreamCreate"};
    static constexpr vendor_call stream_destroy{&E::stream_destroy, "hipStreamDestroy"};
    static constexpr vendor_call host_register{&E::host_register, "hipHostRegister"};
    static constexpr vendor_call host_unregister{&E::host_unregister, "hipHostUnregister"};
    static constexpr vendor_call stream_wait_event{&E::stream_wait_event, "hipStreamWaitEvent"};
    static constexpr vendor_call get_error_name{&E::get_error_name, "hipGetErrorName", true};
    static constexpr vendor_call device_malloc{&E::device_malloc, "hipMalloc"};
    static constexpr vendor_call device_free{&E::device_free, "hipFree"};
    static constexpr vendor_call memset_d8_async{&E::memset_d8_async, "hipMemsetD8Async"};
    static constexpr auto calls =
        std::tuple(init, driver_get_version, get_error_name, get_device_count, current, set_device,
                   retain, release, host_alloc, host_device_pointer, host_free, settle,
                   stream_query, stream_synchronize, stream_owner, write_value64, stream_create,
                   stream_destroy, device_malloc, device_free, memset_d8_async, host_register,
                   host_unregister, stream_wait_event);

    static void* domain_of(context_t, device_t device) noexcept { return owner_domain(device); }
    static void* owner_domain(device_t device) noexcept {
        return reinterpret_cast<void*>(static_cast<std::uintptr_t>(device) + 1);
    }
    static device_t device_of(void* domain) noexcept {
        return static_cast<device_t>(reinterpret_cast<std::uintptr_t>(domain) - 1);
    }
    static status_t create_stream(const api_type& a, stream_t* stream) noexcept {
        return a.stream_create(stream);
    }
    static const char* error_name(const api_type& a, status_t status) noexcept {
        return a.get_error_name != nullptr ? a.get_error_name(status) : nullptr;
    }
    GPU_ASYNC_DECL static driver_status enter(const api_type& a, void* domain, saved& s) noexcept;
    GPU_ASYNC_DECL static driver_status leave(const api_type& a, void* domain,
                                              const saved& s) noexcept;
    static driver_status current_device(const api_type& a, int* device) noexcept {
        return driver_status{a.get_device(device)};
    }
    GPU_ASYNC_DECL static std::optional<coded_error>
    check_event_domain(const vendor_driver<hip_vendor>& d, const mapped_line& line, event_t event);
};

} // namespace detail

/// The HIP runtime, loaded at run time. Not copyable, not movable (its line table points at it).
/// api(), version() (hipDriverGetVersion), line_table(), status_name(status) (the runtime's
/// name, "hipErrorNotReady", or "hipError<n>") and error(call, status) (errc::driver_status)
/// come from detail::vendor_driver.
class hip_driver : public detail::vendor_driver<detail::hip_vendor> {
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

    /// The number of devices found at load.
    int device_count() const noexcept { return device_count_; }

    /// Checks that the runtime can run a line: it has hipStreamWriteValue64 and
    /// hipStreamGetDevice. Nothing when it can; otherwise errc::unavailable.
    GPU_ASYNC_DECL std::optional<coded_error> check_lines() const;

private:
    hip_driver() = default;

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

/// A completion source over one HIP stream and one slot of a hip_line: query = hipStreamQuery
/// (pending on hipErrorNotReady), block = hipStreamSynchronize, arm = hipStreamWriteValue64 of
/// the slot's next sequence number, park = the word wait on the line (see
/// detail::vendor_source). The line must outlive the source; one thread at a time.
class hip_source : public detail::vendor_source<detail::hip_vendor, hip_line> {
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
/// stream() (null once closed) and slot() come from detail::vendor_event_waiter.
class hip_event_waiter
    : public detail::vendor_event_waiter<detail::hip_vendor, hip_event_waiter, hip_line> {
public:
    /// A waiter with its own stream on `slot` of `line` (no other stream may store to that
    /// slot). Errors: errc::unavailable (the runtime lacks hipStreamCreate, hipStreamDestroy or
    /// hipStreamWaitEvent), errc::backend (the line is closed), errc::driver_status.
    GPU_ASYNC_DECL static result<hip_event_waiter> create(hip_line& line, slot_id slot);

    hip_event_waiter(hip_event_waiter&&) noexcept = default;
    hip_event_waiter& operator=(hip_event_waiter&&) noexcept = default;
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

private:
    friend vendor_event_waiter;
    using vendor_event_waiter::vendor_event_waiter;
};

} // namespace gpu_async

#if GPU_ASYNC_HEADER_ONLY
#include <gpu_async/device/impl/hip.ipp>
#endif

#endif // GPU_ASYNC_DEVICE_HIP_HPP
