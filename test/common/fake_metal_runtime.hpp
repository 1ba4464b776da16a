// SPDX-License-Identifier: BSL-1.0
//
// test/common/fake_metal_runtime.hpp: a fake Objective-C runtime and Metal.framework behind a
// gpu_async::metal::runtime_api, for testing the Metal backend with no Apple hardware.
//
// Objects are fake_objc_object records; an id is the record's address. Every message records
// its call ("signaledValue event1"), checks that it got the selector its entry is for and a
// receiver of the right kind, and keeps a retain count, so a test can check the call order and
// that each object ends at the count its owner holds. An event answers signaledValue from a
// script, then holds the last value; waitUntilSignaledValue:timeoutMS: never sleeps: it applies
// the next scripted value (or none: a time-out) and answers in Metal's plain order.
//
// One fake at a time (the runtime table's functions are plain function pointers, which reach
// the fake through a static pointer); use it from one thread at a time.
//
#ifndef GPU_ASYNC_TEST_COMMON_FAKE_METAL_RUNTIME_HPP
#define GPU_ASYNC_TEST_COMMON_FAKE_METAL_RUNTIME_HPP

#include <gpu_async/device/metal.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace gpu_async::test {

struct fake_objc_object {
    enum class kind { device, event, command_buffer, error, string };

    kind what = kind::string;
    std::string label;
    long refs = 1;     ///< the retain count
    long expected = 1; ///< the count it must end at: 0 for objects the backend owns (+1 returned)

    // event
    std::uint64_t value = 0;         ///< signaledValue
    std::deque<std::uint64_t> reads; ///< the next signaledValue answers (each becomes `value`)
    bool has_wait = true;            ///< responds to waitUntilSignaledValue:timeoutMS:

    // command buffer
    metal::uinteger_t status = 2;           ///< MTLCommandBufferStatusCommitted
    std::deque<metal::uinteger_t> statuses; ///< the first status answers, then `status`
    fake_objc_object* error = nullptr;      ///< its NSError, if any
    std::vector<std::uint64_t> signals;     ///< values encoded by encodeSignalEvent:value:
    fake_objc_object* signalled = nullptr;  ///< the event those signals are for

    // NSError
    metal::integer_t code = 0;
    fake_objc_object* description = nullptr; ///< its localizedDescription

    // NSString
    std::string text;
};

class fake_metal_runtime {
public:
    using object_t = metal::object_t;
    using selector_t = metal::selector_t;

    // --- configuration -------------------------------------------------------------------
    bool no_device = false;             ///< MTLCreateSystemDefaultDevice returns nil
    bool no_event = false;              ///< newSharedEvent returns nil
    bool no_listener_class = false;     ///< objc_getClass("MTLSharedEventListener") returns nil
    bool os_wait = true;                ///< new events respond to waitUntilSignaledValue:timeoutMS:
    bool pools = true;                  ///< the table has the autorelease pool functions
    std::set<std::string> unregistered; ///< sel_registerName returns null for these
    /// What each waitUntilSignaledValue:timeoutMS: does, in order: the value its event takes
    /// during the wait, or none (it times out unchanged). With the script empty it times out.
    std::deque<std::optional<std::uint64_t>> waits;

    // --- what happened -------------------------------------------------------------------
    std::vector<std::string> calls; ///< every call, in order, e.g. "signaledValue event1"
    std::vector<std::string> bad;   ///< violations: wrong selector or receiver, over-release
    int pool_depth = 0;
    int pools_pushed = 0;

    // The fake serves one thread: while it lives no reactor runs the lines' health queries into
    // it (a test that wants them sets a backstop of its own around detail::query_line_health).
    fake_metal_runtime() {
        active() = this;
        set_fault_backstop(dur_ns::max());
    }
    fake_metal_runtime(const fake_metal_runtime&) = delete;
    fake_metal_runtime& operator=(const fake_metal_runtime&) = delete;
    ~fake_metal_runtime() {
        set_fault_backstop(backstop_before_);
        active() = nullptr;
    }

    /// The table: plain functions standing in for libobjc, objc_msgSend and Metal. msg_send is
    /// the signaledValue function (for metal_runtime::send with that one signature).
    metal::runtime_api api() const {
        metal::runtime_api a;
        a.objc_get_class = &f_get_class;
        a.sel_register_name = &f_register;
        if (pools) {
            a.autorelease_pool_push = &f_pool_push;
            a.autorelease_pool_pop = &f_pool_pop;
        }
        a.msg_send = reinterpret_cast<void (*)()>(&f_signaled_value);
        a.create_system_default_device = &f_create_device;
        a.retain = &f_retain;
        a.release = &f_release;
        a.responds_to_selector = &f_responds;
        a.name = &f_name;
        a.new_shared_event = &f_new_shared_event;
        a.signaled_value = &f_signaled_value;
        a.wait_until_signaled_value = &f_wait;
        a.encode_signal_event = &f_encode_signal;
        a.status = &f_status;
        a.error = &f_error;
        a.code = &f_code;
        a.localized_description = &f_localized_description;
        a.utf8_string = &f_utf8;
        return a;
    }

    // --- objects the test owns (count 1, and back to 1 at the end) ----------------------------

    object_t command_buffer() {
        fake_objc_object& o = make(fake_objc_object::kind::command_buffer, "cb", 1);
        return id(o);
    }

    /// An NSError with `code` and a localizedDescription of `text` (none when null).
    object_t error(metal::integer_t code, const char* text) {
        fake_objc_object& e = make(fake_objc_object::kind::error, "error", 1);
        e.code = code;
        if (text != nullptr) e.description = &string(text);
        return id(e);
    }

    /// An event the test made itself, at `value`.
    object_t own_event(std::uint64_t value) {
        fake_objc_object& e = make(fake_objc_object::kind::event, "event", 1);
        e.value = value;
        e.has_wait = os_wait;
        return id(e);
    }

    // --- inspection ------------------------------------------------------------------------

    static fake_objc_object& of(object_t o) { return *reinterpret_cast<fake_objc_object*>(o); }
    static object_t id(fake_objc_object& o) { return reinterpret_cast<object_t>(&o); }

    /// The last event newSharedEvent made.
    fake_objc_object& event() { return *last_event_; }

    /// Objects not at the count their owner holds ("event1 refs 1, expected 0").
    std::vector<std::string> unbalanced() const {
        std::vector<std::string> out;
        for (const auto& o : objects_)
            if (o.refs != o.expected)
                out.push_back(o.label + " refs " + std::to_string(o.refs) + ", expected " +
                              std::to_string(o.expected));
        return out;
    }

    /// How many calls start with `prefix`.
    std::size_t count(const std::string& prefix) const {
        std::size_t n = 0;
        for (const auto& c : calls)
            n += c.rfind(prefix, 0) == 0 ? 1 : 0;
        return n;
    }

private:
    dur_ns backstop_before_ = fault_backstop(); // initialized before the constructor's body

    static fake_metal_runtime*& active() {
        static fake_metal_runtime* p = nullptr;
        return p;
    }
    static fake_metal_runtime& self() { return *active(); }

    fake_objc_object& make(fake_objc_object::kind k, const char* prefix, long expected) {
        fake_objc_object& o = objects_.emplace_back();
        o.what = k;
        o.label = prefix + std::to_string(++made_[static_cast<std::size_t>(k)]);
        o.expected = expected;
        return o;
    }

    fake_objc_object& string(const char* text) {
        fake_objc_object& s = make(fake_objc_object::kind::string, "string", 1);
        s.text = text;
        return s;
    }

    /// Records `call` on `o`; checks the selector and the receiver's kind.
    static fake_objc_object& message(object_t receiver, selector_t sel, const char* expected_sel,
                                     fake_objc_object::kind k, const std::string& call) {
        fake_metal_runtime& f = self();
        fake_objc_object& o = of(receiver);
        f.calls.push_back(call + " " + o.label);
        if (sel_name(sel) != expected_sel) f.bad.push_back(call + " sent as " + sel_name(sel));
        if (o.what != k) f.bad.push_back(call + " sent to " + o.label);
        return o;
    }

    static std::string sel_name(selector_t sel) {
        return sel == nullptr ? std::string("(null)") : *reinterpret_cast<std::string*>(sel);
    }

    // --- libobjc ---------------------------------------------------------------------------

    static metal::class_t f_get_class(const char* name) {
        fake_metal_runtime& f = self();
        f.calls.push_back(std::string("objc_getClass ") + name);
        if (std::string(name) == "MTLSharedEventListener" && !f.no_listener_class)
            return reinterpret_cast<metal::class_t>(&f.listener_class_);
        return nullptr;
    }

    static selector_t f_register(const char* name) {
        fake_metal_runtime& f = self();
        if (f.unregistered.count(name) != 0) return nullptr;
        for (auto& s : f.selectors_)
            if (s == name) return reinterpret_cast<selector_t>(&s);
        return reinterpret_cast<selector_t>(&f.selectors_.emplace_back(name));
    }

    static void* f_pool_push() {
        fake_metal_runtime& f = self();
        f.calls.emplace_back("pool push");
        ++f.pools_pushed;
        return &f.pool_tokens_.at(static_cast<std::size_t>(f.pool_depth++));
    }

    static void f_pool_pop(void* token) {
        fake_metal_runtime& f = self();
        f.calls.emplace_back("pool pop");
        if (f.pool_depth == 0 ||
            token != &f.pool_tokens_.at(static_cast<std::size_t>(f.pool_depth - 1)))
            f.bad.emplace_back("pool pop of a pool that is not the innermost");
        else
            --f.pool_depth;
    }

    // --- Metal.framework -------------------------------------------------------------------

    static object_t f_create_device() {
        fake_metal_runtime& f = self();
        f.calls.emplace_back("MTLCreateSystemDefaultDevice");
        if (f.no_device) return nullptr;
        return id(f.make(fake_objc_object::kind::device, "device", 0));
    }

    // --- messages --------------------------------------------------------------------------

    static object_t f_retain(object_t o, selector_t sel) {
        fake_objc_object& x = of(o);
        self().calls.push_back("retain " + x.label);
        if (sel_name(sel) != "retain") self().bad.push_back("retain sent as " + sel_name(sel));
        ++x.refs;
        return o;
    }

    static void f_release(object_t o, selector_t sel) {
        fake_objc_object& x = of(o);
        self().calls.push_back("release " + x.label);
        if (sel_name(sel) != "release") self().bad.push_back("release sent as " + sel_name(sel));
        if (x.refs <= 0) self().bad.push_back("over-release of " + x.label);
        --x.refs;
    }

    static metal::bool_t f_responds(object_t o, selector_t sel, selector_t asked) {
        fake_objc_object& x = of(o);
        self().calls.push_back("respondsToSelector: " + x.label + " " + sel_name(asked));
        if (sel_name(sel) != "respondsToSelector:")
            self().bad.push_back("respondsToSelector: sent as " + sel_name(sel));
        if (x.what != fake_objc_object::kind::event) return false;
        const std::string a = sel_name(asked);
        return a == "signaledValue" || (a == "waitUntilSignaledValue:timeoutMS:" && x.has_wait);
    }

    static object_t f_name(object_t o, selector_t sel) {
        message(o, sel, "name", fake_objc_object::kind::device, "name");
        return id(self().string("Fake Metal GPU"));
    }

    static object_t f_new_shared_event(object_t o, selector_t sel) {
        message(o, sel, "newSharedEvent", fake_objc_object::kind::device, "newSharedEvent");
        fake_metal_runtime& f = self();
        if (f.no_event) return nullptr;
        fake_objc_object& e = f.make(fake_objc_object::kind::event, "event", 0);
        e.has_wait = f.os_wait;
        f.last_event_ = &e;
        return id(e);
    }

    static std::uint64_t f_signaled_value(object_t o, selector_t sel) {
        fake_objc_object& e =
            message(o, sel, "signaledValue", fake_objc_object::kind::event, "signaledValue");
        if (!e.reads.empty()) {
            e.value = e.reads.front();
            e.reads.pop_front();
        }
        return e.value;
    }

    static metal::bool_t f_wait(object_t o, selector_t sel, std::uint64_t value,
                                std::uint64_t timeout_ms) {
        fake_metal_runtime& f = self();
        fake_objc_object& e =
            message(o, sel, "waitUntilSignaledValue:timeoutMS:", fake_objc_object::kind::event,
                    "waitUntilSignaledValue");
        f.calls.back() += " " + std::to_string(value) + " " + std::to_string(timeout_ms);
        if (!e.has_wait) f.bad.push_back("waitUntilSignaledValue sent to an event without it");
        if (!f.waits.empty()) {
            if (f.waits.front()) e.value = *f.waits.front();
            f.waits.pop_front();
        }
        return e.value >= value; // Metal's plain order
    }

    static void f_encode_signal(object_t o, selector_t sel, object_t event, std::uint64_t value) {
        fake_objc_object& b =
            message(o, sel, "encodeSignalEvent:value:", fake_objc_object::kind::command_buffer,
                    "encodeSignalEvent");
        self().calls.back() += " " + of(event).label + " " + std::to_string(value);
        b.signalled = &of(event);
        b.signals.push_back(value);
    }

    static metal::uinteger_t f_status(object_t o, selector_t sel) {
        fake_objc_object& b =
            message(o, sel, "status", fake_objc_object::kind::command_buffer, "status");
        if (b.statuses.empty()) return b.status;
        const metal::uinteger_t st = b.statuses.front();
        b.statuses.pop_front();
        return st;
    }

    static object_t f_error(object_t o, selector_t sel) {
        fake_objc_object& b =
            message(o, sel, "error", fake_objc_object::kind::command_buffer, "error");
        return b.error != nullptr ? id(*b.error) : nullptr;
    }

    static metal::integer_t f_code(object_t o, selector_t sel) {
        return message(o, sel, "code", fake_objc_object::kind::error, "code").code;
    }

    static object_t f_localized_description(object_t o, selector_t sel) {
        fake_objc_object& e = message(o, sel, "localizedDescription", fake_objc_object::kind::error,
                                      "localizedDescription");
        return e.description != nullptr ? id(*e.description) : nullptr;
    }

    static const char* f_utf8(object_t o, selector_t sel) {
        return message(o, sel, "UTF8String", fake_objc_object::kind::string, "UTF8String")
            .text.c_str();
    }

    std::deque<fake_objc_object> objects_; // a deque: ids stay valid as objects are added
    std::deque<std::string> selectors_;    // a SEL is the address of its interned name
    std::array<int, 5> made_{};            // per kind, for labels
    std::array<char, 16> pool_tokens_{};
    fake_objc_object* last_event_ = nullptr;
    char listener_class_ = 0;
};

} // namespace gpu_async::test

#endif // GPU_ASYNC_TEST_COMMON_FAKE_METAL_RUNTIME_HPP
