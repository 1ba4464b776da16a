// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The Metal backend: the Objective-C runtime and Metal.framework
/// loaded at run time, and a completion source over an MTLSharedEvent.
///
/// Nothing links libobjc or Metal: `metal_runtime::load()` opens /usr/lib/libobjc.A.dylib and
/// /System/Library/Frameworks/Metal.framework/Metal with dlopen and takes objc_getClass,
/// sel_registerName, objc_msgSend and MTLCreateSystemDefaultDevice with dlsym. Off Apple systems
/// the load is a coded error (errc::unavailable) naming the library that is missing, so every
/// binary builds and starts anywhere. This header is plain C++: no Objective-C, no Apple SDK.
///
/// objc_msgSend is not variadic on arm64 (the callee reads its arguments as the method declares
/// them), so it is never called as declared: the runtime table holds it once per message, each
/// entry cast to that message's exact signature. A test fills the same table with plain C++
/// functions (test/common/fake_metal_runtime.hpp).
///
///     auto runtime = gpu_async::metal_runtime::load();              // errc::unavailable off Apple
///     auto device = gpu_async::metal_device::create_system_default(*runtime.value());
///     auto source = gpu_async::metal_source::create(device.value());    // a new event, at 0
///     // per step: encode the work, then
///     source.value().encode_signal(command_buffer);  // [cb encodeSignalEvent:e value:target+1]
///     // commit the command buffer, then wait: port.async_wait(source.value(), plan, "step", tok)
///
/// There is no completion line on Metal: the event's signaledValue is the word. The source keeps
/// a host line whose word mirrors the last signaledValue it read (each query, park and block
/// stores it), so descriptor() names the mirror and the target. A port's flag plan parks on the
/// reactor, which no Metal event stores to: such a wait sees the event at its status queries (the
/// backstop). A plan run on a thread (run_wait) parks in waitUntilSignaledValue:timeoutMS:.
///
/// Health: each source registers a health query for its mirror line (gpu_async::
/// watch_line_health): it reads the status of the source's watched command buffers (only a
/// status read, from the reactor's thread) and, at the first in MTLCommandBufferStatusError,
/// stores the event's signaledValue into the mirror (so a wait whose target was signalled
/// completes) and faults the mirror's slot (gpu_async::fault_slot). So a command buffer's fault
/// reaches the plain descriptor waits on descriptor() within one fault backstop plus the
/// reactor's park bound, while a reactor with pending waits runs. The fault is recorded on the
/// mirror until the source goes: later waits on its descriptors end with errc::device_fault.
///
/// Ownership: an object this backend creates (the device from MTLCreateSystemDefaultDevice, the
/// event from newSharedEvent) or retains (a wrapped event, a watched command buffer) is released
/// exactly once, by the owner's destructor (or, for a command buffer, once it is seen completed).
#ifndef GPU_ASYNC_DEVICE_METAL_HPP
#define GPU_ASYNC_DEVICE_METAL_HPP

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/completion_source.hpp>
#include <gpu_async/core/detail/config.hpp>
#include <gpu_async/core/error.hpp>
#include <gpu_async/core/result.hpp>
#include <gpu_async/core/time.hpp>
#include <gpu_async/line/line_health.hpp>
#include <gpu_async/line/line_life.hpp>

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

// The runtime's own handle types (objc/objc.h declares id, SEL and Class over the same structs),
// so values from Objective-C++ or metal-cpp convert with a plain (or __bridge) cast.
struct objc_object;
struct objc_selector;
struct objc_class;

namespace gpu_async {

namespace detail {
class metal_health;
} // namespace detail

/// The Objective-C runtime and Metal ABI this backend uses, declared here so no Apple header is
/// needed.
namespace metal {

using object_t = ::objc_object*;     ///< id
using selector_t = ::objc_selector*; ///< SEL
using class_t = ::objc_class*;       ///< Class
#if defined(__aarch64__) || defined(__arm64__)
using bool_t = bool; ///< BOOL (bool on arm64)
#else
using bool_t = signed char; ///< BOOL (signed char on x86-64)
#endif
using uinteger_t = unsigned long; ///< NSUInteger (64-bit Apple platforms)
using integer_t = long;           ///< NSInteger

/// MTLCommandBufferStatusCompleted.
inline constexpr uinteger_t command_buffer_status_completed = 4;
/// MTLCommandBufferStatusError.
inline constexpr uinteger_t command_buffer_status_error = 5;

/// The entry points and messages the backend uses. Each message member is objc_msgSend cast to
/// the signature of the method named beside it (receiver, selector, then the method's
/// arguments); the runtime passes the matching selector. Every member is required unless marked
/// optional.
struct runtime_api {
    // libobjc
    class_t (*objc_get_class)(const char* name) = nullptr;       ///< objc_getClass
    selector_t (*sel_register_name)(const char* name) = nullptr; ///< sel_registerName
    void* (*autorelease_pool_push)() = nullptr;                  ///< optional
    void (*autorelease_pool_pop)(void* pool) = nullptr;          ///< optional
    /// Optional: objc_msgSend itself, for metal_runtime::send (messages not listed below).
    void (*msg_send)() = nullptr;

    // Metal.framework
    object_t (*create_system_default_device)() = nullptr; ///< MTLCreateSystemDefaultDevice

    // objc_msgSend, one cast per message
    object_t (*retain)(object_t, selector_t) = nullptr; ///< -retain
    void (*release)(object_t, selector_t) = nullptr;    ///< -release
    /// -respondsToSelector:
    bool_t (*responds_to_selector)(object_t, selector_t, selector_t) = nullptr;
    object_t (*name)(object_t device, selector_t) = nullptr;               ///< -[MTLDevice name]
    object_t (*new_shared_event)(object_t device, selector_t) = nullptr;   ///< -newSharedEvent
    std::uint64_t (*signaled_value)(object_t event, selector_t) = nullptr; ///< -signaledValue
    /// -waitUntilSignaledValue:timeoutMS: (macOS 12, iOS 15; an event of an older OS does not
    /// respond to it, and the source polls instead)
    bool_t (*wait_until_signaled_value)(object_t event, selector_t, std::uint64_t value,
                                        std::uint64_t timeout_ms) = nullptr;
    /// -[MTLCommandBuffer encodeSignalEvent:value:]
    void (*encode_signal_event)(object_t command_buffer, selector_t, object_t event,
                                std::uint64_t value) = nullptr;
    uinteger_t (*status)(object_t command_buffer, selector_t) = nullptr;     ///< -status
    object_t (*error)(object_t command_buffer, selector_t) = nullptr;        ///< -error (NSError)
    integer_t (*code)(object_t error, selector_t) = nullptr;                 ///< -[NSError code]
    object_t (*localized_description)(object_t error, selector_t) = nullptr; ///< NSError
    const char* (*utf8_string)(object_t string, selector_t) = nullptr; ///< -[NSString UTF8String]
};

/// The messages of runtime_api: X(member, "selector") for each, in one list, so the selectors,
/// the table's checks, the selector registration and the objc_msgSend casts cannot drift apart.
#define GPU_ASYNC_METAL_MESSAGES(X)                                                                \
    X(retain, "retain")                                                                            \
    X(release, "release")                                                                          \
    X(responds_to_selector, "respondsToSelector:")                                                 \
    X(name, "name")                                                                                \
    X(new_shared_event, "newSharedEvent")                                                          \
    X(signaled_value, "signaledValue")                                                             \
    X(wait_until_signaled_value, "waitUntilSignaledValue:timeoutMS:")                              \
    X(encode_signal_event, "encodeSignalEvent:value:")                                             \
    X(status, "status")                                                                            \
    X(error, "error")                                                                              \
    X(code, "code")                                                                                \
    X(localized_description, "localizedDescription")                                               \
    X(utf8_string, "UTF8String")

/// The selectors of the messages in runtime_api (same member names), registered once by the
/// runtime.
struct selectors {
#define GPU_ASYNC_METAL_SELECTOR_MEMBER(member, text) selector_t member = nullptr;
    GPU_ASYNC_METAL_MESSAGES(GPU_ASYNC_METAL_SELECTOR_MEMBER)
#undef GPU_ASYNC_METAL_SELECTOR_MEMBER
};

} // namespace metal

/// The Objective-C runtime and Metal.framework, loaded at run time. Not copyable, not movable
/// (devices and sources point at it); it must outlive them.
class metal_runtime {
public:
    /// The libraries `load()` opens.
    static constexpr const char* objc_library = "/usr/lib/libobjc.A.dylib";
    static constexpr const char* metal_framework =
        "/System/Library/Frameworks/Metal.framework/Metal";
    /// Opened too, where present, before MTLCreateSystemDefaultDevice: older macOS returns no
    /// device to a process that has not loaded CoreGraphics.
    static constexpr const char* core_graphics_framework =
        "/System/Library/Frameworks/CoreGraphics.framework/CoreGraphics";

    /// The process's runtime: opens the runtime and the framework once (thread-safe; later calls
    /// return the first answer) and resolves the table. Errors: errc::unavailable naming what is
    /// missing (the Objective-C runtime, Metal.framework, a symbol) or what the OS lacks
    /// (MTLSharedEvent, macOS 10.14 / iOS 12). The libraries are never unloaded.
    GPU_ASYNC_DECL static result<const metal_runtime*> load();

    /// As load(), from the libraries at `objc_path` and `metal_path` (opened, never closed),
    /// without caching.
    GPU_ASYNC_DECL static result<std::unique_ptr<metal_runtime>>
    load_libraries(const char* objc_path, const char* metal_path);

    /// As load(), over a table the caller filled (a program's own loader, or a test's fake).
    /// Errors: errc::unavailable naming the entries that are missing, a selector the runtime did
    /// not register, or the MTLSharedEventListener class the framework lacks.
    GPU_ASYNC_DECL static result<std::unique_ptr<metal_runtime>>
    from_api(const metal::runtime_api& api);

    metal_runtime(const metal_runtime&) = delete;
    metal_runtime& operator=(const metal_runtime&) = delete;

    /// The table.
    const metal::runtime_api& api() const noexcept { return api_; }

    /// The selectors the table's messages take.
    const metal::selectors& sel() const noexcept { return sel_; }

    /// Sends `selector` to `receiver` through objc_msgSend cast to `R(id, SEL, Args...)`: for
    /// messages this backend does not wrap (a command queue, a blit encoder). The arguments and
    /// `R` must be exactly the method's (scalars, pointers, small structs such as NSRange; no
    /// struct returns). Precondition: api().msg_send is set (load() sets it).
    template <class R, class... Args>
    R send(metal::object_t receiver, const char* selector, Args... args) const {
        assert(api_.msg_send != nullptr);
        using message = R (*)(metal::object_t, metal::selector_t, Args...);
        return reinterpret_cast<message>(api_.msg_send)(receiver, api_.sel_register_name(selector),
                                                        args...);
    }

    /// -retain / -release of `object` (nothing for null).
    GPU_ASYNC_DECL void retain(metal::object_t object) const noexcept;
    GPU_ASYNC_DECL void release(metal::object_t object) const noexcept;

    /// The UTF-8 text of an NSString, or "" for null.
    GPU_ASYNC_DECL std::string text(metal::object_t string) const;

private:
    metal_runtime() = default;
    GPU_ASYNC_DECL std::optional<coded_error> init(const metal::runtime_api& api);

    metal::runtime_api api_{};
    metal::selectors sel_{};
};

/// A Metal device (id<MTLDevice>), owned: released once when destroyed. Move-only.
class metal_device {
public:
    /// MTLCreateSystemDefaultDevice(). Errors: errc::unavailable when it returns nil (no GPU,
    /// or a process without access to one).
    GPU_ASYNC_DECL static result<metal_device> create_system_default(const metal_runtime& runtime);

    metal_device(metal_device&& other) noexcept
        : runtime_(other.runtime_)
        , device_(std::exchange(other.device_, nullptr)) {}
    GPU_ASYNC_DECL metal_device& operator=(metal_device&& other) noexcept;
    metal_device(const metal_device&) = delete;
    metal_device& operator=(const metal_device&) = delete;
    ~metal_device() { runtime_->release(device_); }

    /// The id<MTLDevice> (null after a move).
    metal::object_t native_handle() const noexcept { return device_; }

    const metal_runtime& runtime() const noexcept { return *runtime_; }

    /// The device's name (-[MTLDevice name]), e.g. "Apple M3 Max".
    GPU_ASYNC_DECL std::string name() const;

private:
    metal_device(const metal_runtime& runtime, metal::object_t device) noexcept
        : runtime_(&runtime)
        , device_(device) {}

    const metal_runtime* runtime_;
    metal::object_t device_;
};

/// Options of a metal_source.
struct metal_source_options {
    /// Between two reads of signaledValue in a bounded poll: a park shorter than 1 ms, a park or
    /// block on an OS without waitUntilSignaledValue:timeoutMS:, and a target the OS wait cannot
    /// express (see park).
    dur_ns poll_interval = dur_ns::from_us(50);
    /// The longest single OS wait of block() (at least 1 ms): between two, block() checks the
    /// watched command buffers for an error, since a failed buffer never signals.
    dur_ns block_slice = dur_ns::from_ms(100);
};

/// A completion source over an MTLSharedEvent (gpu_async::completion_source).
///
/// - The target is the value the pending work signals: set it with set_target() or advance(), or
///   let encode_signal() encode the next value into a command buffer and watch that buffer.
/// - query(): signaledValue at or past the target in wrapping order (sequence_reached); first,
///   each watched command buffer's status: one in MTLCommandBufferStatusError fails the query
///   with errc::device_fault (last_error() holds the NSError's description and code).
/// - park(bound): waitUntilSignaledValue:timeoutMS: for the bound's whole milliseconds; a bound
///   under 1 ms, an OS without that method, or a target the method's plain (non-wrapping)
///   comparison would get wrong (the value is numerically past a target it has not reached:
///   the sequence must pass 2^64 first) poll signaledValue every poll_interval until the bound.
///   Never longer than the bound (plus the OS's sleep slack); true when the target is reached.
/// - block(): the same without a bound, in slices, checking the watched buffers between them.
/// - arm(): nothing: the command buffer encodes its signal behind its work.
///
/// Every read of signaledValue is stored into the source's mirror word; descriptor() names it.
/// Move-only (a moved-from source may only be assigned or destroyed); not thread-safe (one thread
/// at a time); the runtime must outlive it. The device that made the event need not.
class metal_source {
public:
    /// A new event of `device` ([device newSharedEvent], starting at 0; target 0). Errors:
    /// errc::unavailable when the device makes no event.
    GPU_ASYNC_DECL static result<metal_source> create(const metal_device& device,
                                                      metal_source_options options = {});

    /// A source over the caller's `event` (an id<MTLSharedEvent>), which it retains (and releases
    /// once when destroyed); the target starts at the event's signaledValue. Errors:
    /// errc::unavailable for null or an object that does not respond to signaledValue.
    GPU_ASYNC_DECL static result<metal_source>
    wrap(const metal_runtime& runtime, metal::object_t event, metal_source_options options = {});

    GPU_ASYNC_DECL metal_source(metal_source&& other) noexcept;
    GPU_ASYNC_DECL metal_source& operator=(metal_source&& other) noexcept;
    metal_source(const metal_source&) = delete;
    metal_source& operator=(const metal_source&) = delete;
    /// Unregisters the mirror's health query and retires the mirror line (waits on it end:
    /// success where the mirror reached the target, else operation_aborted), then releases every
    /// watched command buffer and the event, once each.
    ~metal_source() { reset(); }

    /// Done when signaledValue has reached the target; pending; or failed with
    /// errc::device_fault when a watched command buffer is in error. A watched buffer seen
    /// completed is released and no longer watched.
    GPU_ASYNC_DECL query_result query();

    /// Waits until signaledValue reaches the target: empty; or errc::device_fault when a watched
    /// command buffer is in error (checked before each OS wait or poll sleep, so a failed buffer
    /// ends the wait within block_slice).
    GPU_ASYNC_DECL std::error_code block();

    /// Nothing to enqueue: the command buffer's encodeSignalEvent:value: is the store. Empty.
    std::error_code arm() noexcept { return {}; }

    /// The mirror word's descriptor for the target.
    memory_descriptor descriptor() const noexcept {
        return memory_descriptor(*mirror_, *slot_id::at(0), target_, generation_);
    }

    /// Waits at most `bound` (see the class comment); true when the target was seen reached.
    GPU_ASYNC_DECL bool park(dur_ns bound);

    /// The id<MTLSharedEvent>, for encodeSignalEvent:value: (null after a move).
    metal::object_t event() const noexcept { return event_; }

    /// The value the pending work signals.
    std::uint64_t target() const noexcept { return target_; }

    /// Sets the value the next wait waits for.
    void set_target(std::uint64_t value) noexcept { target_ = value; }

    /// target + 1 (wrapping) becomes the target; returns it (the value to encode).
    std::uint64_t advance() noexcept { return ++target_; }

    /// Encodes into `command_buffer` (not yet committed) a signal of the event to advance()'s
    /// value behind the buffer's work, and watches the buffer. Returns that value.
    GPU_ASYNC_DECL std::uint64_t encode_signal(metal::object_t command_buffer);

    /// Watches `command_buffer` (retained until it is seen completed, unwatch_all(), or the
    /// source's end): query() and block() report its error.
    GPU_ASYNC_DECL void watch(metal::object_t command_buffer);

    /// Releases and forgets every watched command buffer (a failed one included).
    GPU_ASYNC_DECL void unwatch_all() noexcept;

    /// How many command buffers are watched.
    GPU_ASYNC_DECL std::size_t watched() const noexcept;

    /// True when the event responds to waitUntilSignaledValue:timeoutMS: (macOS 12, iOS 15).
    bool has_os_wait() const noexcept { return os_wait_; }

    /// The last signaledValue read (the mirror word).
    std::uint64_t last_value() const noexcept {
        return mirror_->words[0].load(std::memory_order_acquire);
    }

    /// The detail of the last device fault, if any.
    const std::optional<coded_error>& last_error() const noexcept { return last_error_; }

private:
    GPU_ASYNC_DECL metal_source(const metal_runtime& runtime, metal::object_t event,
                                std::uint64_t value, bool os_wait,
                                std::unique_ptr<completion_line> mirror,
                                std::unique_ptr<detail::metal_health> health,
                                metal_source_options options) noexcept;
    GPU_ASYNC_DECL std::uint64_t read_value();
    GPU_ASYNC_DECL bool reached();
    GPU_ASYNC_DECL std::optional<coded_error> check_watched();
    GPU_ASYNC_DECL void os_wait(std::uint64_t timeout_ms);
    GPU_ASYNC_DECL bool poll(dur_ns bound);
    GPU_ASYNC_DECL void reset() noexcept;

    const metal_runtime* runtime_;
    metal::object_t event_;
    std::unique_ptr<completion_line> mirror_; // heap: descriptors keep its address across moves
    std::uint64_t generation_ = 0;            // the mirror's (retired with it)
    // Owned (null only when moved from): the watched command buffers, under its lock, and the
    // mirror's health query, which reads them from a reactor's thread.
    detail::metal_health* health_ = nullptr;
    std::optional<coded_error> last_error_;
    metal_source_options options_;
    std::uint64_t target_;
    bool os_wait_ = false;
};

static_assert(completion_source<metal_source>);

} // namespace gpu_async

#if GPU_ASYNC_HEADER_ONLY
#include <gpu_async/device/impl/metal.ipp>
#endif

#endif // GPU_ASYNC_DEVICE_METAL_HPP
