// SPDX-License-Identifier: BSL-1.0
//
// test/common/fake_mapped_vendor.hpp: what the fake CUDA driver and the fake HIP runtime share
// (fake_cuda_driver.hpp, fake_hip_driver.hpp), as the two backends share one implementation: the
// call log, the two kinds of injected failure, what the driver holds for its callers, the
// streams it hands out, and the fixture that installs a fake and loads a driver from it. Each
// vendor's fake adds its entry points (which record their calls in the vendor's own words) and
// its own state.
//
#ifndef GPU_ASYNC_TEST_COMMON_FAKE_MAPPED_VENDOR_HPP
#define GPU_ASYNC_TEST_COMMON_FAKE_MAPPED_VENDOR_HPP

#include <gpu_async/line/detail/line_watchers.hpp>
#include <gpu_async/line/line_health.hpp>
#include <gpu_async/line/line_life.hpp>

#include <boost/test/unit_test.hpp>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace gpu_async::test {

/// What the fakes add to a host address to make its device address.
inline constexpr std::uint64_t fake_device_offset = 0x7000'0000'0000;

/// A fake vendor's state that both vendors have. Counters of what the driver holds for its
/// callers: pinned pages (`pages`), primary context references (`refs`), registered host memory
/// (`registered`), streams (`live_streams`). Failures: `fail` makes a call return a status at
/// every call; `fail_at` makes the n-th call of any entry point fail (fault injection: a test
/// sweeps n).
template <class Stream>
struct fake_vendor_state {
    std::vector<std::string> calls;
    std::set<std::string> missing;   // symbols the resolver does not find
    std::map<std::string, int> fail; // call (as the vendor's fake keys it) -> status it returns
    std::array<int, 2> refs{};
    std::set<void*> pages;
    unsigned alloc_flags = 0;
    int stream_status = 0;
    int sticky = 0; // nonzero: the domain faulted; every stream query answers it
    std::map<void*, std::size_t> registered; // host address -> bytes
    // Fault injection: entry-point call number fail_at (1-based, every entry point but the
    // error name counts; 0: none) returns fail_status, and failed_call names it.
    int fail_at = 0;
    int fail_status = 999; // the vendor's "unknown"
    int call_count = 0;
    std::string failed_call;
    int live_streams = 0; // stream creations minus destructions
    std::array<char, 3> stream_storage{};

    Stream stream(int i) { return reinterpret_cast<Stream>(&stream_storage.at(i)); }
    int stream_index(Stream s) {
        for (int i = 0; i < 3; ++i)
            if (s == stream(i)) return i;
        return -1;
    }
    /// How many calls start with `prefix`.
    std::size_t count_prefix(const std::string& prefix) const {
        std::size_t n = 0;
        for (const auto& c : calls)
            if (c.rfind(prefix, 0) == 0) ++n;
        return n;
    }
    // The fail-the-n-th-call switch: records the call; fail_status when it is call fail_at.
    int nth(const std::string& call) {
        calls.push_back(call);
        if (++call_count != fail_at) return 0;
        failed_call = call;
        return fail_status;
    }
    int failed(const std::string& call) {
        if (int st = nth(call)) return st;
        auto it = fail.find(call);
        return it == fail.end() ? 0 : it->second;
    }
    void* alloc_page(std::size_t bytes) {
        void* p = std::aligned_alloc(4096, bytes);
        pages.insert(p);
        return p;
    }
    void free_page(void* p) {
        pages.erase(p);
        std::free(p);
    }
    /// Lands a store at a device address the fake made.
    static void write_word(std::uint64_t address, std::uint64_t value) {
        reinterpret_cast<std::atomic<std::uint64_t>*>(
            static_cast<std::uintptr_t>(address - fake_device_offset))
            ->store(value, std::memory_order_release);
    }
};

/// The entry point `symbol` among `symbols`, or null when there is none or the test made it
/// missing.
inline void* fake_symbol(const std::map<std::string, void*>& symbols,
                         const std::set<std::string>& missing, const char* symbol) {
    auto it = symbols.find(symbol);
    return it == symbols.end() || missing.count(symbol) != 0 ? nullptr : it->second;
}

/// Installs a fresh `State` as the fake (`Current`, through which the entry points reach it)
/// and loads drivers from it with `Load(state)`.
template <class State, State*& Current, auto Load>
struct fake_vendor_fixture {
    State state;
    // The fake serves one thread: while it lives no reactor runs the lines' health queries into
    // it (a test that wants them sets a backstop of its own around detail::query_line_health).
    dur_ns backstop_before = fault_backstop();
    fake_vendor_fixture() {
        Current = &state;
        set_fault_backstop(dur_ns::max());
    }
    ~fake_vendor_fixture() {
        set_fault_backstop(backstop_before);
        Current = nullptr;
        for (void* p : state.pages)
            std::free(p);
    }
    fake_vendor_fixture(const fake_vendor_fixture&) = delete;
    fake_vendor_fixture& operator=(const fake_vendor_fixture&) = delete;
    auto driver() {
        auto d = Load(state);
        BOOST_TEST_REQUIRE(d.has_value());
        state.calls.clear();
        state.call_count = 0; // fail_at counts from the first call after the load
        return std::move(d).value();
    }
};

} // namespace gpu_async::test

#endif // GPU_ASYNC_TEST_COMMON_FAKE_MAPPED_VENDOR_HPP
