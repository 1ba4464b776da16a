// SPDX-License-Identifier: BSL-1.0
//
// test/common/fake_line_driver.hpp: a line_driver that records every call, for testing the
// ownership rules of mapped_line (and anything built on it) with no GPU.
//
// Devices 0..3 each have one domain; a stream is a fake_stream naming its domain. Stores land in
// the page at once, so a descriptor a store returns is complete right away. Host registration
// (a doorbell's line) is recorded per address; batches of stores are recorded as one call.
//
#ifndef GPU_ASYNC_TEST_COMMON_FAKE_LINE_DRIVER_HPP
#define GPU_ASYNC_TEST_COMMON_FAKE_LINE_DRIVER_HPP

#include <gpu_async/device/mapped_line.hpp>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace gpu_async::test {

struct fake_stream {
    void* domain = nullptr;
};

class fake_line_driver {
public:
    /// Device addresses are host addresses plus this offset.
    static constexpr std::uint64_t device_offset = 0x7000'0000'0000;

    fake_line_driver() = default;
    fake_line_driver(const fake_line_driver&) = delete;
    fake_line_driver& operator=(const fake_line_driver&) = delete;
    ~fake_line_driver() {
        for (void* p : pages)
            std::free(p);
    }

    // --- configuration -------------------------------------------------------------------
    int current = 0;                ///< the current device; -1: no current context
    std::map<driver_op, int> fail;  ///< hooks that fail, with the status they return
    bool misaligned_page = false;   ///< alloc_page returns a page off by 8 bytes
    bool hold_writes = false;       ///< stores are enqueued but land only at land()
    bool batches = true;            ///< the table has batch_write64 (else a null hook)
    bool registers = true;          ///< the table has register_host/unregister_host
    std::uint64_t fail_address = 0; ///< write_value64 to this device address fails with status 5

    // --- what happened ---------------------------------------------------------------------
    std::vector<std::string> calls; ///< every call, in order, e.g. "retain 0"
    std::array<int, 4> refs{};      ///< references held per device
    std::set<void*> pages;          ///< pages allocated and not freed
    struct write {
        void* stream;
        std::uint64_t address;
        std::uint64_t value;
        std::size_t batch = 0; ///< 0: its own write_value64 call; n: in the n-th batch call
    };
    std::vector<write> writes;        ///< every store enqueued
    std::size_t batch_calls = 0;      ///< batch_write64 calls that enqueued
    std::map<void*, int> registered;  ///< host address -> device it was registered on
    std::vector<int> pointer_devices; ///< the device of each device_pointer call

    void* domain_of(int device) noexcept { return &domains_[static_cast<std::size_t>(device)]; }
    fake_stream stream_on(int device) noexcept { return fake_stream{domain_of(device)}; }
    int device_of(void* domain) const noexcept {
        for (std::size_t i = 0; i < domains_.size(); ++i)
            if (domain == &domains_[i]) return static_cast<int>(i);
        return -1;
    }

    /// The table; valid while this object lives.
    const line_driver& table() noexcept {
        table_.self = this;
        table_.current_device = [](void* s, int* device) {
            auto& f = self(s);
            f.calls.emplace_back("current");
            if (auto st = f.failed(driver_op::current_device)) return *st;
            *device = f.current;
            return driver_status{};
        };
        table_.retain_domain = [](void* s, int device, void** domain) {
            auto& f = self(s);
            f.calls.push_back("retain " + std::to_string(device));
            if (auto st = f.failed(driver_op::retain_domain)) return *st;
            ++f.refs.at(static_cast<std::size_t>(device));
            *domain = f.domain_of(device);
            return driver_status{};
        };
        table_.release_domain = [](void* s, int device, void* domain) {
            auto& f = self(s);
            f.calls.push_back("release " + std::to_string(device));
            if (domain != f.domain_of(device)) f.calls.emplace_back("BAD release domain");
            if (auto st = f.failed(driver_op::release_domain)) return *st;
            --f.refs.at(static_cast<std::size_t>(device));
            return driver_status{};
        };
        table_.alloc_page = [](void* s, void*, std::size_t bytes, void** host) {
            auto& f = self(s);
            f.calls.push_back("alloc " + std::to_string(bytes));
            if (auto st = f.failed(driver_op::alloc_page)) return *st;
            void* p = std::aligned_alloc(4096, bytes);
            f.pages.insert(p);
            *host = f.misaligned_page ? static_cast<char*>(p) + 8 : p;
            return driver_status{};
        };
        table_.device_pointer = [](void* s, void* domain, void* host, std::uint64_t* address) {
            auto& f = self(s);
            f.calls.emplace_back("device_pointer");
            f.pointer_devices.push_back(f.device_of(domain));
            if (auto st = f.failed(driver_op::device_pointer)) return *st;
            *address = reinterpret_cast<std::uintptr_t>(host) + device_offset;
            return driver_status{};
        };
        table_.free_page = [](void* s, void*, void* host) {
            auto& f = self(s);
            f.calls.emplace_back("free");
            if (auto st = f.failed(driver_op::free_page)) return *st;
            auto it = f.pages.find(host);
            if (it == f.pages.end()) it = f.pages.find(static_cast<char*>(host) - 8);
            if (it == f.pages.end()) {
                f.calls.emplace_back("BAD free");
                return driver_status{1};
            }
            std::free(*it);
            f.pages.erase(it);
            return driver_status{};
        };
        table_.settle = [](void* s, void*) {
            auto& f = self(s);
            f.calls.emplace_back("settle");
            if (auto st = f.failed(driver_op::settle)) return *st;
            return driver_status{};
        };
        table_.stream_domain = [](void* s, void* stream, void** domain) {
            auto& f = self(s);
            f.calls.emplace_back("stream_domain");
            if (auto st = f.failed(driver_op::stream_domain)) return *st;
            *domain = static_cast<fake_stream*>(stream)->domain;
            return driver_status{};
        };
        table_.write_value64 = [](void* s, void* stream, std::uint64_t address,
                                  std::uint64_t value) {
            auto& f = self(s);
            f.calls.push_back("write " + std::to_string(value));
            if (auto st = f.failed(driver_op::write_value64)) return *st;
            if (address == f.fail_address) return driver_status{5};
            f.writes.push_back({stream, address, value});
            // The "device" stores at once, through the mapping, unless told to hold them.
            if (f.hold_writes)
                f.held_.push_back(f.writes.back());
            else
                f.deliver(f.writes.back());
            return driver_status{};
        };
        table_.register_host = nullptr;
        table_.unregister_host = nullptr;
        if (registers) {
            table_.register_host = [](void* s, void* domain, void* host, std::size_t bytes) {
                auto& f = self(s);
                f.calls.push_back("register " + std::to_string(f.device_of(domain)) + " " +
                                  std::to_string(bytes));
                if (auto st = f.failed(driver_op::register_host)) return *st;
                if (!f.registered.emplace(host, f.device_of(domain)).second) {
                    f.calls.emplace_back("BAD register twice");
                    return driver_status{712};
                }
                return driver_status{};
            };
            table_.unregister_host = [](void* s, void* domain, void* host) {
                auto& f = self(s);
                f.calls.push_back("unregister " + std::to_string(f.device_of(domain)));
                if (auto st = f.failed(driver_op::unregister_host)) return *st;
                auto it = f.registered.find(host);
                if (it == f.registered.end()) {
                    f.calls.emplace_back("BAD unregister");
                    return driver_status{713};
                }
                if (it->second != f.device_of(domain))
                    f.calls.emplace_back("BAD unregister domain");
                f.registered.erase(it);
                return driver_status{};
            };
        }
        table_.batch_write64 = nullptr;
        if (batches)
            table_.batch_write64 = [](void* s, void* stream, const batch_store* stores,
                                      std::size_t count) {
                auto& f = self(s);
                std::string call = "batch";
                for (std::size_t i = 0; i < count; ++i)
                    call += " " + std::to_string(stores[i].value);
                f.calls.push_back(call);
                if (auto st = f.failed(driver_op::batch_write64)) return *st;
                ++f.batch_calls;
                for (std::size_t i = 0; i < count; ++i) {
                    f.writes.push_back(
                        {stream, stores[i].device_address, stores[i].value, f.batch_calls});
                    if (f.hold_writes)
                        f.held_.push_back(f.writes.back());
                    else
                        f.deliver(f.writes.back());
                }
                return driver_status{};
            };
        table_.status_name = [](void*, int status) -> const char* {
            return status == 0 ? "FAKE_SUCCESS" : "FAKE_ERROR";
        };
        table_.call_names = {"fakeCurrentDevice", "fakeRetain",       "fakeRelease",
                             "fakeAlloc",         "fakeDevPtr",       "fakeFree",
                             "fakeSettle",        "fakeStreamDomain", "fakeWrite64",
                             "fakeRegister",      "fakeUnregister",   "fakeBatch64"};
        table_.backend = "fake";
        return table_;
    }

    /// Number of calls whose text starts with `prefix`.
    std::size_t count(const std::string& prefix) const {
        std::size_t n = 0;
        for (const auto& c : calls)
            if (c.rfind(prefix, 0) == 0) ++n;
        return n;
    }

    /// Lands the stores held so far (hold_writes), in the order they were enqueued.
    void land() {
        for (const write& w : held_)
            deliver(w);
        held_.clear();
    }

private:
    static fake_line_driver& self(void* s) noexcept { return *static_cast<fake_line_driver*>(s); }

    static void deliver(const write& w) noexcept {
        auto* word = reinterpret_cast<std::uint64_t*>(
            static_cast<std::uintptr_t>(w.address - device_offset));
        __atomic_store_n(word, w.value, __ATOMIC_RELEASE);
    }

    std::optional<driver_status> failed(driver_op op) const {
        auto it = fail.find(op);
        if (it == fail.end()) return std::nullopt;
        return driver_status{it->second};
    }

    std::array<char, 4> domains_{};
    line_driver table_{};
    std::vector<write> held_;
};

} // namespace gpu_async::test

#endif // GPU_ASYNC_TEST_COMMON_FAKE_LINE_DRIVER_HPP
