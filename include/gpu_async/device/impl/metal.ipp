// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/device/impl/metal.ipp: definitions of the Metal backend.
//
#ifndef GPU_ASYNC_IMPL_METAL_IPP
#define GPU_ASYNC_IMPL_METAL_IPP

#include <gpu_async/device/metal.hpp>
#include <gpu_async/wait/detail/mono_clock.hpp>
#include <gpu_async/wait/detail/ranked_mutex.hpp>

#include <gpu_async/device/detail/dynamic_library.hpp>
#include <gpu_async/device/mapped_line.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

namespace gpu_async {

namespace detail::metal_impl {

inline coded_error unavailable(std::string what, std::string why) {
    return coded_error(errc::unavailable, {std::move(what), std::move(why)});
}

/// An autorelease pool around calls that may autorelease (getters returning objects, object
/// creation): a thread without a pool of its own would otherwise keep those objects until it
/// exits. Nothing where the runtime table has no pool functions.
class autorelease_pool {
public:
    explicit autorelease_pool(const metal::runtime_api& api) noexcept
        : api_(&api)
        , pool_(api.autorelease_pool_push != nullptr ? api.autorelease_pool_push() : nullptr) {}
    autorelease_pool(const autorelease_pool&) = delete;
    autorelease_pool& operator=(const autorelease_pool&) = delete;
    ~autorelease_pool() {
        if (pool_ != nullptr) api_->autorelease_pool_pop(pool_);
    }

private:
    const metal::runtime_api* api_;
    void* pool_;
};

inline void append(std::string& list, const std::string& name) {
    if (!list.empty()) list += ", ";
    list += name;
}

/// Sleeps the calling thread for `d` (the bounded poll's interval).
inline void sleep_for(dur_ns d) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(static_cast<std::int64_t>(d.ns)));
}

} // namespace detail::metal_impl

namespace detail {

/// Moves the mirror's word up to `v`, the event's signaledValue (forward only, in wrapping
/// order: the source's own reads store into it too).
inline void advance_mirror(completion_line& mirror, std::uint64_t v) noexcept {
    std::atomic<std::uint64_t>& word = mirror.words[0];
    std::uint64_t seen = word.load(std::memory_order_acquire);
    while (seen != v && sequence_reached(v, seen) &&
           !word.compare_exchange_weak(seen, v, std::memory_order_acq_rel,
                                       std::memory_order_acquire)) {
    }
}

/// A source's watched command buffers and its mirror's health query: the query reads the
/// buffers' status under `mutex` (the source changes the list under it too) and, at the first
/// in error, moves the mirror up to the event's signaledValue and faults the mirror's slot. The
/// runtime, event and mirror do not change while the query is registered.
class metal_health final : public line_health {
public:
    explicit metal_health(const metal_runtime& runtime) noexcept
        : runtime_(&runtime) {}

    void set(metal::object_t event, completion_line* mirror) noexcept {
        event_ = event;
        mirror_ = mirror;
    }

    void query(const completion_line& line) noexcept override {
        if (faulted_.load(std::memory_order_acquire) || &line != mirror_) return;
        const auto& a = runtime_->api();
        const auto& s = runtime_->sel();
        bool failed = false;
        {
            std::lock_guard lk(mutex);
            for (metal::object_t b : watched)
                if (a.status(b, s.status) == metal::command_buffer_status_error) {
                    failed = true;
                    break;
                }
        }
        if (!failed) return;
        faulted_.store(true, std::memory_order_release);
        // What the event signalled before the fault completes its waits.
        advance_mirror(*mirror_, a.signaled_value(event_, s.signaled_value));
        fault_slot(*mirror_, *slot_id::at(0));
    }

    ranked_mutex mutex{lock_rank::device};
    std::vector<metal::object_t> watched; ///< retained, under `mutex`

private:
    const metal_runtime* runtime_;
    metal::object_t event_ = nullptr;
    completion_line* mirror_ = nullptr;
    std::atomic<bool> faulted_{false};
};

} // namespace detail

// --- metal_runtime ------------------------------------------------------------------------------

GPU_ASYNC_DECL std::optional<coded_error> metal_runtime::init(const metal::runtime_api& api) {
    using detail::metal_impl::append;
    using detail::metal_impl::unavailable;
    std::string missing;
    auto need = [&](auto fn, const char* name) {
        if (fn == nullptr) append(missing, name);
    };
    need(api.objc_get_class, "objc_getClass");
    need(api.sel_register_name, "sel_registerName");
    need(api.create_system_default_device, "MTLCreateSystemDefaultDevice");
#define GPU_ASYNC_METAL_NEED(member, text) need(api.member, text);
    GPU_ASYNC_METAL_MESSAGES(GPU_ASYNC_METAL_NEED)
#undef GPU_ASYNC_METAL_NEED
    // The pool functions come as a pair or not at all.
    if ((api.autorelease_pool_push == nullptr) != (api.autorelease_pool_pop == nullptr))
        append(missing, api.autorelease_pool_push == nullptr ? "objc_autoreleasePoolPush"
                                                             : "objc_autoreleasePoolPop");
    if (!missing.empty())
        return unavailable("the Objective-C runtime table's entries " + missing,
                           "the table leaves them unset");

    std::string unregistered;
    auto reg = [&](metal::selector_t& sel, const char* name) {
        sel = api.sel_register_name(name);
        if (sel == nullptr) append(unregistered, name);
    };
#define GPU_ASYNC_METAL_REGISTER(member, text) reg(sel_.member, text);
    GPU_ASYNC_METAL_MESSAGES(GPU_ASYNC_METAL_REGISTER)
#undef GPU_ASYNC_METAL_REGISTER
    if (!unregistered.empty())
        return unavailable("the selectors " + unregistered, "sel_registerName returned null");

    // MTLSharedEvent and its listener came together (macOS 10.14, iOS 12): a framework without
    // the class has no shared events.
    if (api.objc_get_class("MTLSharedEventListener") == nullptr)
        return unavailable("MTLSharedEvent",
                           "Metal.framework has no MTLSharedEventListener class (shared events "
                           "need macOS 10.14 or iOS 12)");
    api_ = api;
    return std::nullopt;
}

GPU_ASYNC_DECL result<std::unique_ptr<metal_runtime>>
metal_runtime::from_api(const metal::runtime_api& api) {
    std::unique_ptr<metal_runtime> r(new metal_runtime());
    if (auto e = r->init(api)) return std::move(*e);
    return r;
}

GPU_ASYNC_DECL result<std::unique_ptr<metal_runtime>>
metal_runtime::load_libraries(const char* objc_path, const char* metal_path) {
    using detail::metal_impl::append;
    using detail::metal_impl::unavailable;
    std::string why;
    void* objc = detail::open_library(objc_path, why);
    if (objc == nullptr)
        return unavailable(std::string("the Objective-C runtime (") + objc_path + ")",
                           why + "; Metal needs macOS or iOS");
    void* metal = detail::open_library(metal_path, why);
    if (metal == nullptr)
        return unavailable(std::string("Metal.framework (") + metal_path + ")", why);
    std::string ignored;
    detail::open_library(core_graphics_framework, ignored); // where present; see its comment

    std::string missing;
    auto get = [&](void* library, const char* library_path, const char* name, auto& fn,
                   bool required) {
        void* sym = detail::library_symbol(library, name);
        if (sym != nullptr)
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(sym);
        else if (required)
            append(missing, std::string(name) + " (" + library_path + ")");
    };
    metal::runtime_api a;
    get(objc, objc_path, "objc_getClass", a.objc_get_class, true);
    get(objc, objc_path, "sel_registerName", a.sel_register_name, true);
    get(objc, objc_path, "objc_msgSend", a.msg_send, true);
    get(objc, objc_path, "objc_autoreleasePoolPush", a.autorelease_pool_push, false);
    get(objc, objc_path, "objc_autoreleasePoolPop", a.autorelease_pool_pop, false);
    get(metal, metal_path, "MTLCreateSystemDefaultDevice", a.create_system_default_device, true);
    if (!missing.empty())
        return unavailable("the symbols " + missing, "dlsym found no such symbol");

    // objc_msgSend, cast once per message to that message's exact signature.
    auto message = [&](auto& fn) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(a.msg_send);
    };
#define GPU_ASYNC_METAL_CAST(member, text) message(a.member);
    GPU_ASYNC_METAL_MESSAGES(GPU_ASYNC_METAL_CAST)
#undef GPU_ASYNC_METAL_CAST
    return from_api(a);
}

GPU_ASYNC_DECL result<const metal_runtime*> metal_runtime::load() {
    static const result<std::unique_ptr<metal_runtime>> loaded =
        load_libraries(objc_library, metal_framework);
    if (!loaded.has_value()) return loaded.error();
    return static_cast<const metal_runtime*>(loaded.value().get());
}

GPU_ASYNC_DECL void metal_runtime::retain(metal::object_t object) const noexcept {
    if (object != nullptr) api_.retain(object, sel_.retain);
}

GPU_ASYNC_DECL void metal_runtime::release(metal::object_t object) const noexcept {
    if (object != nullptr) api_.release(object, sel_.release);
}

GPU_ASYNC_DECL std::string metal_runtime::text(metal::object_t string) const {
    if (string == nullptr) return {};
    const char* s = api_.utf8_string(string, sel_.utf8_string);
    return s != nullptr ? std::string(s) : std::string();
}

// --- metal_device -------------------------------------------------------------------------------

GPU_ASYNC_DECL result<metal_device>
metal_device::create_system_default(const metal_runtime& runtime) {
    metal::object_t device = nullptr;
    {
        detail::metal_impl::autorelease_pool pool(runtime.api());
        device = runtime.api().create_system_default_device();
    }
    if (device == nullptr)
        return detail::metal_impl::unavailable(
            "a Metal device", "MTLCreateSystemDefaultDevice returned nil (no GPU, or no access "
                              "to one)");
    return metal_device(runtime, device);
}

GPU_ASYNC_DECL metal_device& metal_device::operator=(metal_device&& other) noexcept {
    if (this != &other) {
        runtime_->release(device_);
        runtime_ = other.runtime_;
        device_ = std::exchange(other.device_, nullptr);
    }
    return *this;
}

GPU_ASYNC_DECL std::string metal_device::name() const {
    if (device_ == nullptr) return {};
    detail::metal_impl::autorelease_pool pool(runtime_->api());
    return runtime_->text(runtime_->api().name(device_, runtime_->sel().name));
}

// --- metal_source -------------------------------------------------------------------------------

GPU_ASYNC_DECL metal_source::metal_source(const metal_runtime& runtime, metal::object_t event,
                                          std::uint64_t value, bool os_wait,
                                          std::unique_ptr<completion_line> mirror,
                                          std::unique_ptr<detail::metal_health> health,
                                          metal_source_options options) noexcept
    : runtime_(&runtime)
    , event_(event)
    , mirror_(std::move(mirror))
    , health_(health.release())
    , options_(options)
    , target_(value)
    , os_wait_(os_wait) {
    mirror_->words[0].store(value, std::memory_order_release);
    try {
        generation_ = adopt_line(*mirror_); // its descriptors go stale when the source goes
    } catch (...) {
        // No memory for the side table's entry: the mirror's descriptors go unchecked.
    }
    health_->set(event_, mirror_.get());
    try {
        watch_line_health(*mirror_, *health_); // unregistered by reset()
    } catch (...) {
        // No memory for the registration: faults reach only the plan-driven wait.
    }
}

GPU_ASYNC_DECL result<metal_source> metal_source::create(const metal_device& device,
                                                         metal_source_options options) {
    const metal_runtime& rt = device.runtime();
    const auto& a = rt.api();
    // First: nothing to release if they throw.
    auto mirror = std::make_unique<completion_line>();
    auto health = std::make_unique<detail::metal_health>(rt);
    metal::object_t event = nullptr;
    {
        detail::metal_impl::autorelease_pool pool(a);
        event = a.new_shared_event(device.native_handle(), rt.sel().new_shared_event);
    }
    if (event == nullptr)
        return detail::metal_impl::unavailable("an MTLSharedEvent",
                                               "[MTLDevice newSharedEvent] returned nil");
    const bool os_wait = a.responds_to_selector(event, rt.sel().responds_to_selector,
                                                rt.sel().wait_until_signaled_value) != 0;
    // A new event's signaledValue is 0.
    return metal_source(rt, event, 0, os_wait, std::move(mirror), std::move(health), options);
}

GPU_ASYNC_DECL result<metal_source> metal_source::wrap(const metal_runtime& runtime,
                                                       metal::object_t event,
                                                       metal_source_options options) {
    using detail::metal_impl::unavailable;
    const auto& a = runtime.api();
    const auto& s = runtime.sel();
    if (event == nullptr) return unavailable("an MTLSharedEvent", "no event was given (null)");
    if (a.responds_to_selector(event, s.responds_to_selector, s.signaled_value) == 0)
        return unavailable("object " + detail::hex(event),
                           "it does not respond to signaledValue: not an MTLSharedEvent");
    auto mirror = std::make_unique<completion_line>();
    auto health = std::make_unique<detail::metal_health>(runtime);
    const bool os_wait =
        a.responds_to_selector(event, s.responds_to_selector, s.wait_until_signaled_value) != 0;
    const std::uint64_t value = a.signaled_value(event, s.signaled_value);
    runtime.retain(event);
    return metal_source(runtime, event, value, os_wait, std::move(mirror), std::move(health),
                        options);
}

GPU_ASYNC_DECL metal_source::metal_source(metal_source&& other) noexcept
    : runtime_(other.runtime_)
    , event_(std::exchange(other.event_, nullptr))
    , mirror_(std::move(other.mirror_))
    , generation_(other.generation_)
    , health_(std::exchange(other.health_, nullptr))
    , last_error_(std::move(other.last_error_))
    , options_(other.options_)
    , target_(other.target_)
    , os_wait_(other.os_wait_) {}

GPU_ASYNC_DECL metal_source& metal_source::operator=(metal_source&& other) noexcept {
    if (this != &other) {
        reset();
        runtime_ = other.runtime_;
        event_ = std::exchange(other.event_, nullptr);
        mirror_ = std::move(other.mirror_);
        generation_ = other.generation_;
        health_ = std::exchange(other.health_, nullptr);
        last_error_ = std::move(other.last_error_);
        options_ = other.options_;
        target_ = other.target_;
        os_wait_ = other.os_wait_;
    }
    return *this;
}

GPU_ASYNC_DECL void metal_source::reset() noexcept {
    // The mirror line goes with the source (or is replaced): its health query stops, the mirror
    // moves up to what the event signalled (the retirement completes the waits it reached, as a
    // stream's give-back does, and nothing else reads the event for them), then every reactor
    // ends its waits on it (gpu_async::retire_line).
    if (mirror_) {
        unwatch_line_health(*mirror_);
        if (event_ != nullptr)
            detail::advance_mirror(
                *mirror_, runtime_->api().signaled_value(event_, runtime_->sel().signaled_value));
        retire_line(*mirror_);
    }
    unwatch_all();
    delete std::exchange(health_, nullptr);
    runtime_->release(std::exchange(event_, nullptr));
}

GPU_ASYNC_DECL std::size_t metal_source::watched() const noexcept {
    if (health_ == nullptr) return 0;
    std::lock_guard lk(health_->mutex);
    return health_->watched.size();
}

GPU_ASYNC_DECL void metal_source::unwatch_all() noexcept {
    if (health_ == nullptr) return;
    std::vector<metal::object_t> gone;
    {
        std::lock_guard lk(health_->mutex);
        gone.swap(health_->watched);
    }
    for (metal::object_t b : gone)
        runtime_->release(b);
}

GPU_ASYNC_DECL void metal_source::watch(metal::object_t command_buffer) {
    if (command_buffer == nullptr) return;
    std::lock_guard lk(health_->mutex);
    health_->watched.reserve(health_->watched.size() + 1); // may throw: before the retain
    runtime_->retain(command_buffer);
    health_->watched.push_back(command_buffer);
}

GPU_ASYNC_DECL std::uint64_t metal_source::encode_signal(metal::object_t command_buffer) {
    {
        // May throw: before anything is encoded (watch() then has the room).
        std::lock_guard lk(health_->mutex);
        health_->watched.reserve(health_->watched.size() + 1);
    }
    const std::uint64_t value = target_ + 1;
    runtime_->api().encode_signal_event(command_buffer, runtime_->sel().encode_signal_event, event_,
                                        value);
    target_ = value;
    watch(command_buffer);
    return value;
}

GPU_ASYNC_DECL std::uint64_t metal_source::read_value() {
    const std::uint64_t v = runtime_->api().signaled_value(event_, runtime_->sel().signaled_value);
    mirror_->words[0].store(v, std::memory_order_release);
    return v;
}

GPU_ASYNC_DECL bool metal_source::reached() {
    return sequence_reached(read_value(), target_);
}

GPU_ASYNC_DECL std::optional<coded_error> metal_source::check_watched() {
    const auto& a = runtime_->api();
    const auto& s = runtime_->sel();
    std::lock_guard lk(health_->mutex);
    auto& list = health_->watched;
    for (auto it = list.begin(); it != list.end();) {
        const metal::uinteger_t status = a.status(*it, s.status);
        if (status == metal::command_buffer_status_error) {
            detail::metal_impl::autorelease_pool pool(a);
            std::string what = "Metal command buffer " + detail::hex(*it) + ": ";
            const metal::object_t error = a.error(*it, s.error);
            if (error == nullptr) {
                what += "MTLCommandBufferStatusError without an NSError";
            } else {
                const std::string text =
                    runtime_->text(a.localized_description(error, s.localized_description));
                what += (text.empty() ? std::string("no description") : text) +
                        " (MTLCommandBufferError code " + std::to_string(a.code(error, s.code)) +
                        ")";
            }
            return coded_error(errc::device_fault, {what});
        }
        if (status == metal::command_buffer_status_completed) {
            // Done without error: it can no longer fail.
            runtime_->release(*it);
            it = list.erase(it);
        } else {
            ++it;
        }
    }
    return std::nullopt;
}

GPU_ASYNC_DECL query_result metal_source::query() {
    if (auto e = check_watched()) {
        last_error_ = std::move(*e);
        return query_result::failed(make_error_code(errc::device_fault));
    }
    return reached() ? query_result::done() : query_result::pending();
}

GPU_ASYNC_DECL void metal_source::os_wait(std::uint64_t timeout_ms) {
    // The answer is not the authority: waitUntilSignaledValue compares in plain order, so the
    // caller reads signaledValue again and decides in wrapping order. At most a day per wait, so
    // the OS's conversion to nanoseconds cannot overflow (a longer park returns early: allowed).
    constexpr std::uint64_t longest_ms = 86'400'000;
    runtime_->api().wait_until_signaled_value(event_, runtime_->sel().wait_until_signaled_value,
                                              target_,
                                              timeout_ms < longest_ms ? timeout_ms : longest_ms);
}

GPU_ASYNC_DECL bool metal_source::poll(dur_ns bound) {
    const mono_ns deadline = detail::mono_now().after(bound);
    // At least one read after a sleep, however late this thread runs.
    for (;;) {
        const dur_ns left = deadline.since(detail::mono_now());
        detail::metal_impl::sleep_for(min(options_.poll_interval, left));
        if (reached()) return true;
        if (detail::mono_now() >= deadline) return false;
    }
}

GPU_ASYNC_DECL bool metal_source::park(dur_ns bound) {
    const std::uint64_t v = read_value();
    if (sequence_reached(v, target_)) return true;
    const std::uint64_t ms = bound.ns / 1'000'000;
    // Not reached in wrapping order and numerically below the target: the OS wait's plain
    // comparison agrees. Numerically above (the sequence must pass 2^64 first), it would return
    // at once every time: poll instead.
    if (os_wait_ && ms > 0 && v < target_) {
        os_wait(ms);
        return reached();
    }
    return poll(bound);
}

GPU_ASYNC_DECL std::error_code metal_source::block() {
    const std::uint64_t slice_ms =
        options_.block_slice.ns < 1'000'000 ? 1 : options_.block_slice.ns / 1'000'000;
    for (;;) {
        // A failed command buffer never signals: check before every wait.
        if (auto e = check_watched()) {
            last_error_ = std::move(*e);
            return make_error_code(errc::device_fault);
        }
        const std::uint64_t v = read_value();
        if (sequence_reached(v, target_)) return {};
        if (os_wait_ && v < target_)
            os_wait(slice_ms);
        else
            detail::metal_impl::sleep_for(options_.poll_interval);
    }
}

} // namespace gpu_async

#endif // GPU_ASYNC_IMPL_METAL_IPP
