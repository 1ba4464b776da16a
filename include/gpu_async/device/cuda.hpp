// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The CUDA backend: the driver loaded at run time, a mapped line on a
/// device's primary context, and a completion source over one stream.
///
/// Nothing links libcuda: `cuda_driver::load()` opens "libcuda.so.1" by name with dlopen and takes
/// every entry point through cuGetProcAddress_v2 (CUDA 12+ drivers), so every binary starts on a
/// machine without a driver and learns at run time, as a coded error, what is missing.
///
/// No CUDA header is needed: the few driver types, statuses and constants used here are declared
/// below with the driver's ABI values (scripts/ci/backends.sh checks them against cuda.h). The
/// handle types are the driver's own incomplete structs, so a CUstream or cudaStream_t converts
/// to `cuda::stream_t` without a cast.
///
///     auto driver = gpu_async::cuda_driver::load();          // errc::unavailable without one
///     auto line = gpu_async::cuda_line::create(*driver.value());   // current context's device
///     auto source = gpu_async::cuda_source::create(line.value(), *slot_id::at(0), stream);
///
/// Ownership: the line retains the device's primary context before its page is allocated and
/// releases it only after the page is freed; it accepts stores only from streams of that context;
/// it synchronizes the context before freeing, and leaks rather than free when that fails.
///
/// Health: where the driver has cuStreamCreate and cuStreamDestroy, a line creates a non-blocking
/// stream of its own in its context (nothing is ever enqueued on it) and registers a health query
/// (gpu_async::watch_line_health): cuStreamQuery on that stream with the line's context pushed,
/// which never blocks; an answer other than CUDA_SUCCESS or CUDA_ERROR_NOT_READY (the context's
/// sticky error, e.g. CUDA_ERROR_ILLEGAL_ADDRESS) faults every slot of the line, once. A device
/// fault thus reaches the plain descriptor waits on the line within one fault backstop plus the
/// reactor's park bound, while a reactor with pending waits runs, even when the faulted stream is
/// gone. close() unregisters the query before it retires the line and destroys the stream after
/// the synchronize (with the context pushed; as it is when the push fails, so it never stays).
///
/// Doorbell stores: `line.attach_doorbell(port.shared_bell())` registers the doorbell's line
/// (cuMemHostRegister, PORTABLE | DEVICEMAP: write-back heap memory, pinned and mapped, not
/// write-combined) and takes its device pointer in the line's context (cuMemHostGetDevicePointer);
/// each later store is then one cuStreamBatchMemOp of two CU_STREAM_MEM_OP_WRITE_VALUE_64
/// operations, the completion word first and the doorbell's device word second (two
/// cuStreamWriteValue64 calls on a driver without cuStreamBatchMemOp). See mapped_line.
///
/// Events and graphs: a cuda_event_waiter owns a stream of its own on one slot of a line;
/// `await_event(ev)` enqueues there cuStreamWaitEvent(ev) and the slot's next store, and returns
/// the descriptor the port awaits. The event stays the caller's (never destroyed here). A graph
/// is awaited the same way: cuGraphLaunch(graph, stream), cuEventRecord(ev, stream), then
/// await_event(ev).
#ifndef GPU_ASYNC_DEVICE_CUDA_HPP
#define GPU_ASYNC_DEVICE_CUDA_HPP

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

// The driver's own handle types (cuda.h declares them the same way), so CUstream, CUcontext and
// cudaStream_t values convert without casts.
struct CUctx_st;
struct CUevent_st;
struct CUstream_st;

namespace gpu_async {

/// The CUDA driver ABI this backend uses, declared here so no CUDA header is needed.
namespace cuda {

using status_t = int;                        ///< CUresult
using device_t = int;                        ///< CUdevice
using context_t = ::CUctx_st*;               ///< CUcontext
using stream_t = ::CUstream_st*;             ///< CUstream (and cudaStream_t)
using event_t = ::CUevent_st*;               ///< CUevent
using host_fn_t = void (*)(void* user_data); ///< CUhostFn
using deviceptr_t = unsigned long long;      ///< CUdeviceptr

inline constexpr status_t success = 0;                 ///< CUDA_SUCCESS
inline constexpr status_t error_invalid_value = 1;     ///< CUDA_ERROR_INVALID_VALUE
inline constexpr status_t error_not_initialized = 3;   ///< CUDA_ERROR_NOT_INITIALIZED
inline constexpr status_t error_no_device = 100;       ///< CUDA_ERROR_NO_DEVICE
inline constexpr status_t error_invalid_context = 201; ///< CUDA_ERROR_INVALID_CONTEXT
inline constexpr status_t error_not_found = 500;       ///< CUDA_ERROR_NOT_FOUND
inline constexpr status_t error_not_ready = 600;       ///< CUDA_ERROR_NOT_READY
inline constexpr status_t error_launch_failed = 719;   ///< CUDA_ERROR_LAUNCH_FAILED
inline constexpr status_t error_not_supported = 801;   ///< CUDA_ERROR_NOT_SUPPORTED

inline constexpr int attribute_can_map_host_memory =
    19; ///< CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY
/// CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS
inline constexpr int attribute_can_use_64_bit_stream_mem_ops = 122;

inline constexpr unsigned memhostalloc_portable = 0x01;     ///< CU_MEMHOSTALLOC_PORTABLE
inline constexpr unsigned memhostalloc_devicemap = 0x02;    ///< CU_MEMHOSTALLOC_DEVICEMAP
inline constexpr unsigned memhostregister_portable = 0x01;  ///< CU_MEMHOSTREGISTER_PORTABLE
inline constexpr unsigned memhostregister_devicemap = 0x02; ///< CU_MEMHOSTREGISTER_DEVICEMAP
inline constexpr int stream_mem_op_write_value_64 = 5;      ///< CU_STREAM_MEM_OP_WRITE_VALUE_64
inline constexpr unsigned stream_write_value_default = 0;   ///< CU_STREAM_WRITE_VALUE_DEFAULT
inline constexpr unsigned stream_non_blocking = 0x1;
inline constexpr unsigned ctx_sched_spin = 0x01;          ///< CU_CTX_SCHED_SPIN
inline constexpr unsigned ctx_sched_blocking_sync = 0x04; ///< CU_CTX_SCHED_BLOCKING_SYNC
inline constexpr unsigned event_disable_timing =
    0x2; ///< CU_EVENT_DISABLE_TIMING      ///< CU_STREAM_NON_BLOCKING

inline constexpr std::uint64_t get_proc_address_default = 0; ///< CU_GET_PROC_ADDRESS_DEFAULT
inline constexpr int proc_address_success = 0;               ///< CU_GET_PROC_ADDRESS_SUCCESS
inline constexpr int proc_address_symbol_not_found = 1; ///< CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
inline constexpr int proc_address_version_not_sufficient = 2;

/// CUstreamBatchMemOpParams (a 48-byte union); only its writeValue member is used. The value
/// sits in a union of cuuint32_t and cuuint64_t in cuda.h: here its 64-bit member alone.
union stream_batch_mem_op_params {
    int operation; ///< CUstreamBatchMemOpType, the tag of every member
    struct write_value_params {
        int operation;         ///< stream_mem_op_write_value_64
        deviceptr_t address;   ///< the word's device address
        std::uint64_t value64; ///< the value stored
        unsigned flags;        ///< CUstreamWriteValue_flags (stream_write_value_default)
        deviceptr_t alias;     ///< for the driver's use
    } write_value;
    std::uint64_t pad[6];
};

/// The API version asked of cuGetProcAddress: the CUDA 12.0 ABI of every entry point (so
/// cuStreamWriteValue64 resolves to cuStreamWriteValue64_v2), served by 12.x and 13.x drivers.
inline constexpr int api_version = 12000;

/// cuGetProcAddress_v2 (cuda.h of CUDA 12.0 and later, CUDA 13 included):
/// CUresult (const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
///           CUdriverProcAddressQueryResult* symbolStatus).
using get_proc_address_fn = status_t (*)(const char* symbol, void** pfn, int cuda_version,
                                         std::uint64_t flags, int* symbol_status);

/// The driver entry points the backend uses, resolved by name at run time: each member is the
/// driver function of the same name in camel case with the "cu" prefix (ctx_push_current is
/// cuCtxPushCurrent), in its CUDA 12.0 ABI version. (Snake case, so cuda.h's renaming macros,
/// e.g. cuCtxPushCurrent -> cuCtxPushCurrent_v2, never touch these names.) Null when the driver
/// lacks one (only those marked optional may be null after a successful load).
struct entry_points {
    status_t (*init)(unsigned flags) = nullptr;
    status_t (*driver_get_version)(int* version) = nullptr;
    status_t (*get_error_name)(status_t error, const char** name) = nullptr;
    status_t (*device_get_count)(int* count) = nullptr;
    status_t (*device_get)(device_t* device, int ordinal) = nullptr;
    status_t (*device_get_attribute)(int* value, int attribute, device_t device) = nullptr;
    status_t (*ctx_get_current)(context_t* context) = nullptr;
    status_t (*ctx_set_current)(context_t context) = nullptr;
    status_t (*ctx_get_device)(device_t* device) = nullptr;
    status_t (*ctx_push_current)(context_t context) = nullptr;
    status_t (*ctx_pop_current)(context_t* context) = nullptr;
    status_t (*ctx_synchronize)() = nullptr;
    status_t (*device_primary_ctx_retain)(context_t* context, device_t device) = nullptr;
    status_t (*device_primary_ctx_release)(device_t device) = nullptr;
    status_t (*mem_host_alloc)(void** host, std::size_t bytes, unsigned flags) = nullptr;
    status_t (*mem_host_get_device_pointer)(deviceptr_t* device, void* host,
                                            unsigned flags) = nullptr;
    status_t (*mem_free_host)(void* host) = nullptr;
    status_t (*stream_get_ctx)(stream_t stream, context_t* context) = nullptr;
    status_t (*stream_query)(stream_t stream) = nullptr;
    status_t (*stream_synchronize)(stream_t stream) = nullptr;
    // Optional: a driver without it fails only line creation.
    status_t (*stream_write_value64)(stream_t stream, deviceptr_t address, std::uint64_t value,
                                     unsigned flags) = nullptr;
    // Optional: a driver without it enqueues a doorbell's store as a second write-value.
    status_t (*stream_batch_mem_op)(stream_t stream, unsigned count,
                                    stream_batch_mem_op_params* params, unsigned flags) = nullptr;
    // Optional: a driver without them fails only attach_doorbell.
    status_t (*mem_host_register)(void* host, std::size_t bytes, unsigned flags) = nullptr;
    status_t (*mem_host_unregister)(void* host) = nullptr;
    // Optional: a driver without it fails only cuda_event_waiter creation.
    status_t (*stream_wait_event)(stream_t stream, event_t event, unsigned flags) = nullptr;
    // Optional: for programs and tests that make their own streams and work.
    status_t (*stream_create)(stream_t* stream, unsigned flags) = nullptr;
    status_t (*stream_destroy)(stream_t stream) = nullptr;
    status_t (*mem_alloc)(deviceptr_t* device, std::size_t bytes) = nullptr;
    status_t (*mem_free)(deviceptr_t device) = nullptr;
    status_t (*memset_d8_async)(deviceptr_t device, unsigned char value, std::size_t count,
                                stream_t stream) = nullptr;
    status_t (*ctx_set_flags)(unsigned flags) = nullptr; // CUDA 12.1 and later
    status_t (*event_create)(event_t* event, unsigned flags) = nullptr;
    status_t (*event_record)(event_t event, stream_t stream) = nullptr;
    status_t (*event_query)(event_t event) = nullptr;
    status_t (*event_destroy)(event_t event) = nullptr;
    status_t (*launch_host_func)(stream_t stream, host_fn_t fn, void* user_data) = nullptr;
};

} // namespace cuda

class cuda_driver;

namespace detail {

/// The CUDA driver as a mapped-line vendor (device/detail/mapped_vendor.hpp): its calls, types
/// and constants. A CUDA domain is a context: entering it pushes it, leaving pops it.
struct cuda_vendor {
    using api_type = cuda::entry_points;
    using status_t = cuda::status_t;
    using device_t = cuda::device_t;
    using context_t = cuda::context_t;
    using stream_t = cuda::stream_t;
    using event_t = cuda::event_t;
    using deviceptr_t = cuda::deviceptr_t;
    using stream_owner_t = cuda::context_t; // cuStreamGetCtx names a stream's context
    struct saved {};                        // a pop undoes a push

    static constexpr const char* backend = "CUDA";
    static constexpr const char* noun = "the CUDA driver";
    static constexpr const char* status_prefix = "CUDA_ERROR_";
    static constexpr const char* install_hint = "; is the NVIDIA driver installed?";
    static constexpr const char* missing_why =
        "cuGetProcAddress found no such symbol for API version 12000";
    static constexpr const char* waiter_name = "cuda_event_waiter";
    static constexpr const char* batch_call_name = "cuStreamBatchMemOp";
    static constexpr status_t success = cuda::success;
    static constexpr status_t not_ready = cuda::error_not_ready;
    static constexpr status_t not_found = cuda::error_not_found;
    static constexpr unsigned host_alloc_flags =
        cuda::memhostalloc_devicemap | cuda::memhostalloc_portable;
    static constexpr unsigned host_register_flags =
        cuda::memhostregister_portable | cuda::memhostregister_devicemap;
    static constexpr bool destroy_in_domain = true; // cuStreamDestroy with the context pushed
    static constexpr bool has_batch = true;

    // Every entry point, in the order a load resolves them; `true`: a load fails without it.
    using E = api_type;
    static constexpr vendor_call init{&E::init, "cuInit", true};
    static constexpr vendor_call driver_get_version{&E::driver_get_version, "cuDriverGetVersion",
                                                    true};
    static constexpr vendor_call get_error_name{&E::get_error_name, "cuGetErrorName", true};
    static constexpr vendor_call device_get_count{&E::device_get_count, "cuDeviceGetCount", true};
    static constexpr vendor_call device_get{&E::device_get, "cuDeviceGet", true};
    static constexpr vendor_call device_get_attribute{&E::device_get_attribute,
                                                      "cuDeviceGetAttribute", true};
    static constexpr vendor_call current{&E::ctx_get_current, "cuCtxGetCurrent", true};
    static constexpr vendor_call ctx_set_current{&E::ctx_set_current, "cuCtxSetCurrent", true};
    static constexpr vendor_call ctx_get_device{&E::ctx_get_device, "cuCtxGetDevice", true};
    static constexpr vendor_call push{&E::ctx_push_current, "cuCtxPushCurrent", true};
    static constexpr vendor_call pop{&E::ctx_pop_current, "cuCtxPopCurrent", true};
    static constexpr vendor_call settle{&E::ctx_synchronize, "cuCtxSynchronize", true};
    static constexpr vendor_call retain{&E::device_primary_ctx_retain, "cuDevicePrimaryCtxRetain",
                                        true};
    static constexpr vendor_call release{&E::device_primary_ctx_release,
                                         "cuDevicePrimaryCtxRelease", true};
    static constexpr vendor_call host_alloc{&E::mem_host_alloc, "cuMemHostAlloc", true};
    static constexpr vendor_call host_device_pointer{&E::mem_host_get_device_pointer,
                                                     "cuMemHostGetDevicePointer", true};
    static constexpr vendor_call host_free{&E::mem_free_host, "cuMemFreeHost", true};
    static constexpr vendor_call stream_owner{&E::stream_get_ctx, "cuStreamGetCtx", true};
    static constexpr vendor_call stream_query{&E::stream_query, "cuStreamQuery", true};
    static constexpr vendor_call stream_synchronize{&E::stream_synchronize, "cuStreamSynchronize",
                                                    true};
    static constexpr vendor_call write_value64{&E::stream_write_value64, "cuStreamWriteValue64"};
    static constexpr vendor_call stream_batch{&E::stream_batch_mem_op, batch_call_name};
    static constexpr vendor_call host_register{&E::mem_host_register, "cuMemHostRegister"};
    static constexpr vendor_call host_unregister{&E::mem_host_unregister, "cuMemHostUnregister"};
    static constexpr vendor_call stream_wait_event{&E::stream_wait_event, "cuStreamWaitEvent"};
    static constexpr vendor_call stream_create{&E::stream_create, "cuStreamCreate"};
    static constexpr vendor_call stream_destroy{&E::stream_destroy, "cuStreamDestroy"};
    static constexpr vendor_call mem_alloc{&E::mem_alloc, "cuMemAlloc"};
    static constexpr vendor_call mem_free{&E::mem_free, "cuMemFree"};
    static constexpr vendor_call memset_d8_async{&E::memset_d8_async, "cuMemsetD8Async"};
    static constexpr vendor_call ctx_set_flags{&E::ctx_set_flags, "cuCtxSetFlags", false,
                                               12010}; // CUDA 12.1 and later
    static constexpr vendor_call event_create{&E::event_create, "cuEventCreate"};
    static constexpr vendor_call event_record{&E::event_record, "cuEventRecord"};
    static constexpr vendor_call event_query{&E::event_query, "cuEventQuery"};
    static constexpr vendor_call event_destroy{&E::event_destroy, "cuEventDestroy"};
    static constexpr vendor_call launch_host_func{&E::launch_host_func, "cuLaunchHostFunc"};
    static constexpr auto calls = std::tuple(
        init, driver_get_version, get_error_name, device_get_count, device_get,
        device_get_attribute, current, ctx_set_current, ctx_get_device, push, pop, settle, retain,
        release, host_alloc, host_device_pointer, host_free, stream_owner, stream_query,
        stream_synchronize, write_value64, stream_batch, host_register, host_unregister,
        stream_wait_event, stream_create, stream_destroy, mem_alloc, mem_free, memset_d8_async,
        ctx_set_flags, event_create, event_record, event_query, event_destroy, launch_host_func);

    static void* domain_of(context_t context, device_t) noexcept { return context; }
    static void* owner_domain(context_t context) noexcept { return context; }
    static status_t create_stream(const api_type& a, stream_t* stream) noexcept {
        return a.stream_create(stream, cuda::stream_non_blocking);
    }
    static const char* error_name(const api_type& a, status_t status) noexcept {
        const char* name = nullptr;
        if (a.get_error_name == nullptr || a.get_error_name(status, &name) != success)
            return nullptr;
        return name;
    }
    GPU_ASYNC_DECL static driver_status enter(const api_type& a, void* domain, saved&) noexcept;
    GPU_ASYNC_DECL static driver_status leave(const api_type& a, void*, const saved&) noexcept;
    GPU_ASYNC_DECL static driver_status current_device(const api_type& a, int* device) noexcept;
    GPU_ASYNC_DECL static driver_status batch_write64(const api_type& a, void* stream,
                                                      const batch_store* stores,
                                                      std::size_t count) noexcept;
    GPU_ASYNC_DECL static std::optional<coded_error>
    check_event_domain(const vendor_driver<cuda_vendor>& d, const mapped_line& line, event_t event);
};

} // namespace detail

/// The CUDA driver, loaded at run time. Not copyable, not movable (its line table points at it).
/// api(), version() (cuDriverGetVersion, e.g. 13000), line_table(), status_name(status) (the
/// driver's name, "CUDA_ERROR_NOT_READY", or "CUDA_ERROR_<n>") and error(call, status)
/// (errc::driver_status) come from detail::vendor_driver.
class cuda_driver : public detail::vendor_driver<detail::cuda_vendor> {
public:
    /// The library `load()` opens.
    static constexpr const char* library_name = "libcuda.so.1";

    /// The process's driver: opens libcuda.so.1 once (thread-safe; later calls return the first
    /// answer), resolves the entry points and runs cuInit(0). Errors: errc::unavailable naming
    /// what is missing (library, cuGetProcAddress_v2, an entry point) or why cuInit refused
    /// (e.g. CUDA_ERROR_NO_DEVICE). The driver is never unloaded.
    GPU_ASYNC_DECL static result<const cuda_driver*> load();

    /// As load(), from the library `name` (opened, never closed), without caching.
    GPU_ASYNC_DECL static result<std::unique_ptr<cuda_driver>> load_library(const char* name);

    /// As load(), with entry points resolved through `get_proc_address` (a program's own
    /// loader, or a test's fake driver).
    GPU_ASYNC_DECL static result<std::unique_ptr<cuda_driver>>
    from_resolver(cuda::get_proc_address_fn get_proc_address);

    /// Checks that `device` can own a line: it maps host memory and runs 64-bit stream memory
    /// operations, and the driver has cuStreamWriteValue64. Nothing when it can; otherwise
    /// errc::unavailable naming the device and what it lacks, or errc::driver_status.
    GPU_ASYNC_DECL std::optional<coded_error> check_device(cuda::device_t device) const;

private:
    cuda_driver() = default;
};

/// A completion line of a CUDA device: one pinned, device-mapped page on the device's primary
/// context, under the rules of mapped_line. Move-only; not thread-safe (one thread at a time).
/// line(), mapped(), device(), driver(), store(slot, stream) (cuStreamWriteValue64, default
/// fence; a stream of another context is refused with errc::foreign_stream) and close() (which
/// synchronizes the context) come from detail::vendor_line.
class cuda_line : public detail::vendor_line<cuda_driver, cuda::device_t, cuda::stream_t> {
public:
    /// A line on the device of the calling thread's current context. Errors: errc::no_domain
    /// (no current context), errc::unavailable (the device cannot map host memory or run 64-bit
    /// stream memory operations, or the driver lacks cuStreamWriteValue64), errc::driver_status.
    GPU_ASYNC_DECL static result<cuda_line> create(const cuda_driver& driver,
                                                   mapped_line_options options = {});

    /// A line on the device with ordinal `ordinal`. Errors as `create`, without no_domain.
    GPU_ASYNC_DECL static result<cuda_line> create_on(const cuda_driver& driver, int ordinal,
                                                      mapped_line_options options = {});

    /// The device's primary context, which the line retains.
    cuda::context_t context() const noexcept {
        return static_cast<cuda::context_t>(mapped().domain());
    }

private:
    cuda_line(const cuda_driver& driver, mapped_line line) noexcept
        : vendor_line(driver, std::move(line)) {}
};

/// A completion source over one CUDA stream and one slot of a cuda_line: query = cuStreamQuery
/// (pending on CUDA_ERROR_NOT_READY), block = cuStreamSynchronize, arm = cuStreamWriteValue64
/// of the slot's next sequence number, park = the word wait on the line (see
/// detail::vendor_source). The line must outlive the source; use one thread at a time.
class cuda_source : public detail::vendor_source<detail::cuda_vendor, cuda_line> {
public:
    /// A source for `stream` on `slot` of `line`. Errors: errc::foreign_stream when the stream
    /// is not of the line's context; errc::driver_status when cuStreamGetCtx fails.
    GPU_ASYNC_DECL static result<cuda_source> create(cuda_line& line, slot_id slot,
                                                     cuda::stream_t stream);

private:
    cuda_source(cuda_line& line, slot_id slot, cuda::stream_t stream) noexcept
        : vendor_source(line, slot, stream) {}
};

static_assert(completion_source<cuda_source>);

/// Awaits CUDA events (and, through an event recorded behind them, graphs and any stream work):
/// owns a non-blocking stream of its own in the line's context and one slot of the line.
/// `await_event(ev)` enqueues on that stream cuStreamWaitEvent(ev) and then the slot's next
/// store (with the doorbell's signal when the line has a doorbell), and returns the descriptor
/// that completes once the work captured in the event is done. stream() (null once closed) and
/// slot() come from detail::vendor_event_waiter.
///
/// Ownership: the event is the caller's and is never destroyed here; cuStreamWaitEvent captures
/// its work at the call, so the caller may record it again or destroy it once await_event has
/// returned. The stream is the waiter's: created with the line's context pushed, destroyed by
/// close() or the destructor (cuStreamDestroy returns at once; the stream's pending wait and
/// store still run, and the line's close synchronizes the context before its page goes). The
/// line must outlive the waiter. Move-only; one thread at a time.
class cuda_event_waiter
    : public detail::vendor_event_waiter<detail::cuda_vendor, cuda_event_waiter, cuda_line> {
public:
    /// A waiter with its own stream on `slot` of `line` (no other stream may store to that
    /// slot). Errors: errc::unavailable (the driver lacks cuStreamCreate, cuStreamDestroy or
    /// cuStreamWaitEvent), errc::backend (the line is closed), errc::driver_status.
    GPU_ASYNC_DECL static result<cuda_event_waiter> create(cuda_line& line, slot_id slot);

    cuda_event_waiter(cuda_event_waiter&&) noexcept = default;
    cuda_event_waiter& operator=(cuda_event_waiter&&) noexcept = default;
    ~cuda_event_waiter() { static_cast<void>(close()); }

    /// Enqueues on the waiter's stream a wait for `event` (cuStreamWaitEvent, flags 0) and then
    /// the slot's next store; returns its descriptor, for gpu_completion_port::async_wait.
    ///
    /// The driver names no event's context, so the event's context is taken to be the calling
    /// thread's current one (where the caller recorded it): it must be the line's. Errors:
    /// errc::no_domain (no current context), errc::foreign_stream (the current context is not the
    /// line's; nothing is enqueued), errc::driver_status (cuCtxGetCurrent, cuStreamWaitEvent:
    /// nothing is enqueued; or the store, behind an enqueued wait: see mapped_line::store),
    /// errc::backend (the waiter or the line is closed).
    GPU_ASYNC_DECL result<memory_descriptor> await_event(cuda::event_t event);

    /// Destroys the waiter's stream (with the line's context pushed). Errors:
    /// errc::driver_status. When the push fails the stream is kept, and a later close() (or the
    /// destructor) tries again; once cuStreamDestroy ran the stream is forgotten, whatever it
    /// or the pop returned. Closing a closed waiter does nothing.
    GPU_ASYNC_DECL std::optional<coded_error> close();

private:
    friend vendor_event_waiter;
    using vendor_event_waiter::vendor_event_waiter;
};

} // namespace gpu_async

#if GPU_ASYNC_HEADER_ONLY
#include <gpu_async/device/impl/cuda.ipp>
#endif

#endif // GPU_ASYNC_DEVICE_CUDA_HPP
