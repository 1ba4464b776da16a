// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/device/hip.hpp>
#include <gpu_async/doorbell.hpp>
#include <gpu_async/error.hpp>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

using namespace gpu_async;

// A fake HIP runtime behind a fake dlsym: every entry point records its call, so the tests check
// the HIP table's wiring with no GPU and no ROCm.
namespace {

constexpr std::uint64_t device_offset = 0x7000'0000'0000;

struct fake_hip {
    std::vector<std::string> calls;
    std::set<std::string> missing;
    std::map<std::string, int> fail;
    int device_count = 2;
    int current = 0;
    std::array<int, 2> refs{};
    std::set<void*> pages;
    unsigned alloc_flags = 0;
    int stream_status = 0;
    std::array<char, 3> stream_storage{};
    std::array<char, 1> event_storage{};
    struct store {
        hip::stream_t stream;
        std::uintptr_t address;
        std::uint64_t value;
    };
    std::vector<store> stores;               // every store enqueued, in order
    std::map<void*, std::size_t> registered; // host address -> bytes (hipHostRegister)

    hip::stream_t stream(int i) { return reinterpret_cast<hip::stream_t>(&stream_storage.at(i)); }
    hip::event_t event() { return reinterpret_cast<hip::event_t>(&event_storage.at(0)); }
    int stream_index(hip::stream_t s) {
        for (int i = 0; i < 3; ++i)
            if (s == stream(i)) return i;
        return -1;
    }
    int failed(std::string call) {
        calls.push_back(call);
        auto it = fail.find(call);
        return it == fail.end() ? 0 : it->second;
    }
};

fake_hip* fake = nullptr;

int f_hipInit(unsigned) {
    return fake->failed("hipInit");
}
int f_hipDriverGetVersion(int* v) {
    *v = 50221153;
    return fake->failed("hipDriverGetVersion");
}
const char* f_hipGetErrorName(int e) {
    switch (e) {
    case 600:
        return "hipErrorNotReady";
    case 719:
        return "hipErrorLaunchFailure";
    case 101:
        return "hipErrorInvalidDevice";
    default:
        return nullptr;
    }
}
int f_hipGetDeviceCount(int* n) {
    *n = fake->device_count;
    return fake->failed("hipGetDeviceCount");
}
int f_hipGetDevice(int* d) {
    *d = fake->current;
    return fake->failed("hipGetDevice");
}
int f_hipSetDevice(int d) {
    if (int st = fake->failed("hipSetDevice " + std::to_string(d))) return st;
    fake->current = d;
    return 0;
}
int f_hipDevicePrimaryCtxRetain(hip::context_t* c, int d) {
    if (int st = fake->failed("hipDevicePrimaryCtxRetain " + std::to_string(d))) return st;
    ++fake->refs.at(d);
    *c = nullptr;
    return 0;
}
int f_hipDevicePrimaryCtxRelease(int d) {
    if (int st = fake->failed("hipDevicePrimaryCtxRelease " + std::to_string(d))) return st;
    --fake->refs.at(d);
    return 0;
}
int f_hipHostMalloc(void** p, std::size_t bytes, unsigned flags) {
    if (int st = fake->failed("hipHostMalloc " + std::to_string(bytes) + " on " +
                              std::to_string(fake->current)))
        return st;
    fake->alloc_flags = flags;
    *p = std::aligned_alloc(4096, bytes);
    fake->pages.insert(*p);
    return 0;
}
int f_hipHostGetDevicePointer(void** d, void* host, unsigned) {
    *d = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(host) + device_offset);
    return fake->failed("hipHostGetDevicePointer");
}
int f_hipHostFree(void* p) {
    if (int st = fake->failed("hipHostFree")) return st;
    fake->pages.erase(p);
    std::free(p);
    return 0;
}
int f_hipDeviceSynchronize() {
    return fake->failed("hipDeviceSynchronize on " + std::to_string(fake->current));
}
int f_hipStreamQuery(hip::stream_t) {
    fake->calls.emplace_back("hipStreamQuery");
    return fake->stream_status;
}
int f_hipStreamSynchronize(hip::stream_t) {
    fake->calls.emplace_back("hipStreamSynchronize");
    return fake->stream_status;
}
int f_hipStreamGetDevice(hip::stream_t s, int* d) {
    *d = s == fake->stream(1) ? 1 : 0; // stream 1 is on device 1, others on device 0
    return fake->failed("hipStreamGetDevice");
}
int f_hipStreamWriteValue64(hip::stream_t s, void* address, std::uint64_t value, unsigned flags) {
    if (int st = fake->failed("hipStreamWriteValue64 " + std::to_string(value) + " flags " +
                              std::to_string(flags)))
        return st;
    fake->stores.push_back({s, reinterpret_cast<std::uintptr_t>(address), value});
    reinterpret_cast<std::atomic<std::uint64_t>*>(reinterpret_cast<std::uintptr_t>(address) -
                                                  device_offset)
        ->store(value, std::memory_order_release);
    return 0;
}

int f_hipHostRegister(void* host, std::size_t bytes, unsigned flags) {
    if (int st = fake->failed("hipHostRegister " + std::to_string(bytes) + " flags " +
                              std::to_string(flags) + " on " + std::to_string(fake->current)))
        return st;
    return fake->registered.emplace(host, bytes).second ? 0 : 1;
}
int f_hipHostUnregister(void* host) {
    if (int st = fake->failed("hipHostUnregister on " + std::to_string(fake->current))) return st;
    return fake->registered.erase(host) == 1 ? 0 : 1;
}
int f_hipStreamWaitEvent(hip::stream_t s, hip::event_t e, unsigned flags) {
    return fake->failed("hipStreamWaitEvent stream " + std::to_string(fake->stream_index(s)) +
                        (e == fake->event() ? " event" : " other") + " flags " +
                        std::to_string(flags));
}
int f_hipStreamCreate(hip::stream_t* s) {
    if (int st = fake->failed("hipStreamCreate on " + std::to_string(fake->current))) return st;
    *s = fake->stream(2); // of device 0
    return 0;
}
int f_hipStreamDestroy(hip::stream_t s) {
    return fake->failed("hipStreamDestroy " + std::to_string(fake->stream_index(s)));
}
int f_hipEventDestroy(hip::event_t) {
    return fake->failed("hipEventDestroy");
}

void* f_dlsym(void* context, const char* symbol) {
    static const std::map<std::string, void*> symbols = {
        {"hipInit", reinterpret_cast<void*>(&f_hipInit)},
        {"hipDriverGetVersion", reinterpret_cast<void*>(&f_hipDriverGetVersion)},
        {"hipGetErrorName", reinterpret_cast<void*>(&f_hipGetErrorName)},
        {"hipGetDeviceCount", reinterpret_cast<void*>(&f_hipGetDeviceCount)},
        {"hipGetDevice", reinterpret_cast<void*>(&f_hipGetDevice)},
        {"hipSetDevice", reinterpret_cast<void*>(&f_hipSetDevice)},
        {"hipDevicePrimaryCtxRetain", reinterpret_cast<void*>(&f_hipDevicePrimaryCtxRetain)},
        {"hipDevicePrimaryCtxRelease", reinterpret_cast<void*>(&f_hipDevicePrimaryCtxRelease)},
        {"hipHostMalloc", reinterpret_cast<void*>(&f_hipHostMalloc)},
        {"hipHostGetDevicePointer", reinterpret_cast<void*>(&f_hipHostGetDevicePointer)},
        {"hipHostFree", reinterpret_cast<void*>(&f_hipHostFree)},
        {"hipDeviceSynchronize", reinterpret_cast<void*>(&f_hipDeviceSynchronize)},
        {"hipStreamQuery", reinterpret_cast<void*>(&f_hipStreamQuery)},
        {"hipStreamSynchronize", reinterpret_cast<void*>(&f_hipStreamSynchronize)},
        {"hipStreamGetDevice", reinterpret_cast<void*>(&f_hipStreamGetDevice)},
        {"hipStreamWriteValue64", reinterpret_cast<void*>(&f_hipStreamWriteValue64)},
        {"hipHostRegister", reinterpret_cast<void*>(&f_hipHostRegister)},
        {"hipHostUnregister", reinterpret_cast<void*>(&f_hipHostUnregister)},
        {"hipStreamWaitEvent", reinterpret_cast<void*>(&f_hipStreamWaitEvent)},
        {"hipStreamCreate", reinterpret_cast<void*>(&f_hipStreamCreate)},
        {"hipStreamDestroy", reinterpret_cast<void*>(&f_hipStreamDestroy)},
        {"hipEventDestroy", reinterpret_cast<void*>(&f_hipEventDestroy)},
    };
    BOOST_TEST(context == static_cast<void*>(fake));
    auto it = symbols.find(symbol);
    if (it == symbols.end() || fake->missing.count(symbol) != 0) return nullptr;
    return it->second;
}

struct fixture {
    fake_hip state;
    fixture() { fake = &state; }
    ~fixture() {
        fake = nullptr;
        for (void* p : state.pages)
            std::free(p);
    }
    std::unique_ptr<hip_driver> driver() {
        auto d = hip_driver::from_resolver(&f_dlsym, &state);
        BOOST_TEST_REQUIRE(d.has_value());
        state.calls.clear();
        return std::move(d).value();
    }
};

using calls_t = std::vector<std::string>;

slot_id slot(std::size_t i) {
    return *slot_id::at(i);
}

} // namespace

BOOST_AUTO_TEST_SUITE(hip_suite)

BOOST_AUTO_TEST_CASE(a_missing_library_is_unavailable) {
    auto d = hip_driver::load_library("libgpu_async_no_such_runtime.so");
    BOOST_TEST_REQUIRE(!d.has_value());
    BOOST_TEST(d.error().code() == errc::unavailable);
    BOOST_TEST(d.error().message().find("libgpu_async_no_such_runtime.so") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_library_without_the_entry_points_is_unavailable) {
    auto d = hip_driver::load_library("libm.so.6");
    BOOST_TEST_REQUIRE(!d.has_value());
    BOOST_TEST(d.error().code() == errc::unavailable);
    BOOST_TEST(d.error().message().find("hipInit") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(loading_the_runtime_here_succeeds_or_fails_cleanly) {
    // Without ROCm, or with ROCm but no AMD GPU (CI installs libamdhip64 for the compile check),
    // the load is a coded error; on an AMD machine it loads. Either way the answer is cached.
    auto first = hip_driver::load();
    auto second = hip_driver::load();
    BOOST_TEST(first.has_value() == second.has_value());
    if (first.has_value()) {
        BOOST_TEST(first.value() == second.value());
        BOOST_TEST(first.value()->device_count() > 0);
    } else {
        BOOST_TEST(first.error().code() == errc::unavailable);
        BOOST_TEST((first.error() == second.error()));
        BOOST_TEST(first.error().message().find("HIP") != std::string::npos);
    }
}

BOOST_AUTO_TEST_CASE(no_resolver_is_unavailable) {
    auto d = hip_driver::from_resolver(nullptr, nullptr);
    BOOST_TEST_REQUIRE(!d.has_value());
    BOOST_TEST(d.error().code() == errc::unavailable);
}

BOOST_FIXTURE_TEST_CASE(resolution_initializes_and_counts_devices, fixture) {
    auto d = hip_driver::from_resolver(&f_dlsym, &state);
    BOOST_TEST_REQUIRE(d.has_value());
    BOOST_TEST((state.calls == calls_t{"hipInit", "hipDriverGetVersion", "hipGetDeviceCount"}));
    BOOST_TEST(d.value()->device_count() == 2);
    BOOST_TEST(d.value()->version() == 50221153);
    BOOST_TEST(std::string(d.value()->line_table().backend) == "HIP");
    BOOST_TEST(d.value()->status_name(600) == "hipErrorNotReady");
    BOOST_TEST(d.value()->status_name(4242) == "hipError4242");
}

BOOST_FIXTURE_TEST_CASE(a_missing_entry_point_is_unavailable, fixture) {
    state.missing = {"hipHostMalloc"};
    auto d = hip_driver::from_resolver(&f_dlsym, &state);
    BOOST_TEST_REQUIRE(!d.has_value());
    BOOST_TEST(d.error().code() == errc::unavailable);
    BOOST_TEST(d.error().message().find("hipHostMalloc") != std::string::npos);
    BOOST_TEST(state.calls.empty());
}

BOOST_FIXTURE_TEST_CASE(init_failure_and_no_device_are_unavailable, fixture) {
    state.fail["hipInit"] = 101;
    auto d = hip_driver::from_resolver(&f_dlsym, &state);
    BOOST_TEST_REQUIRE(!d.has_value());
    BOOST_TEST(d.error().code() == errc::unavailable);
    BOOST_TEST(d.error().message().find("hipErrorInvalidDevice (101)") != std::string::npos);

    state.fail.clear();
    state.device_count = 0;
    auto none = hip_driver::from_resolver(&f_dlsym, &state);
    BOOST_TEST_REQUIRE(!none.has_value());
    BOOST_TEST(none.error().code() == errc::unavailable);
    BOOST_TEST(none.error().message().find("found none") != std::string::npos);
}

BOOST_FIXTURE_TEST_CASE(without_write_value64_or_stream_device_only_lines_fail, fixture) {
    for (const char* absent : {"hipStreamWriteValue64", "hipStreamGetDevice"}) {
        state.missing = {absent};
        auto d = driver();
        auto line = hip_line::create(*d);
        BOOST_TEST_REQUIRE(!line.has_value());
        BOOST_TEST(line.error().code() == errc::unavailable);
        BOOST_TEST(line.error().message().find(absent) != std::string::npos);
        BOOST_TEST(state.refs[0] == 0);
        BOOST_TEST(state.calls.empty());
    }
}

BOOST_FIXTURE_TEST_CASE(an_unknown_device_is_unavailable, fixture) {
    auto d = driver();
    auto line = hip_line::create_on(*d, 2);
    BOOST_TEST_REQUIRE(!line.has_value());
    BOOST_TEST(line.error().code() == errc::unavailable);
    BOOST_TEST(line.error().message().find("HIP device 2") != std::string::npos);
    BOOST_TEST(state.calls.empty());
}

BOOST_FIXTURE_TEST_CASE(a_line_runs_the_runtime_calls_in_the_owned_order, fixture) {
    auto d = driver();
    {
        auto line = hip_line::create_on(*d, 1);
        BOOST_TEST_REQUIRE(line.has_value());
        // Retain first; the page is allocated with device 1 current, then device 0 is back.
        BOOST_TEST((state.calls == calls_t{"hipDevicePrimaryCtxRetain 1", "hipGetDevice",
                                           "hipSetDevice 1", "hipHostMalloc 4096 on 1",
                                           "hipSetDevice 0", "hipGetDevice", "hipSetDevice 1",
                                           "hipHostGetDevicePointer", "hipSetDevice 0"}));
        BOOST_TEST(state.alloc_flags == (hip::host_malloc_mapped | hip::host_malloc_coherent));
        BOOST_TEST(line.value().device() == 1);
        BOOST_TEST(state.refs[1] == 1);

        state.calls.clear();
        auto stored = line.value().store(slot(6), state.stream(1));
        BOOST_TEST_REQUIRE(stored.has_value());
        BOOST_TEST(stored.value().is_complete());
        BOOST_TEST(
            (state.calls == calls_t{"hipStreamGetDevice", "hipStreamWriteValue64 1 flags 0"}));

        state.calls.clear();
        auto foreign = line.value().store(slot(6), state.stream(0));
        BOOST_TEST_REQUIRE(!foreign.has_value());
        BOOST_TEST(foreign.error().code() == errc::foreign_stream);
        BOOST_TEST((state.calls == calls_t{"hipStreamGetDevice"}));
        state.calls.clear();
    }
    // Device synchronize (on the line's device) before the free, release after it.
    BOOST_TEST(
        (state.calls == calls_t{"hipGetDevice", "hipSetDevice 1", "hipDeviceSynchronize on 1",
                                "hipSetDevice 0", "hipGetDevice", "hipSetDevice 1", "hipHostFree",
                                "hipSetDevice 0", "hipDevicePrimaryCtxRelease 1"}));
    BOOST_TEST(state.refs[1] == 0);
    BOOST_TEST(state.pages.empty());
}

BOOST_FIXTURE_TEST_CASE(a_failed_synchronize_leaks_the_page_and_the_context, fixture) {
    auto d = driver();
    auto line = hip_line::create(*d);
    BOOST_TEST_REQUIRE(line.has_value());
    state.fail["hipDeviceSynchronize on 0"] = 719;
    state.calls.clear();
    const auto error = line.value().close();
    BOOST_TEST_REQUIRE(error.has_value());
    BOOST_TEST((error->args() ==
                std::vector<std::string>{"hipDeviceSynchronize", "hipErrorLaunchFailure", "719"}));
    BOOST_TEST(state.refs[0] == 1);
    BOOST_TEST(state.pages.size() == 1u);
    BOOST_TEST(line.value().mapped().leaked());
}

BOOST_FIXTURE_TEST_CASE(a_failed_set_device_before_alloc_releases_the_context, fixture) {
    auto d = driver();
    state.fail["hipSetDevice 1"] = 101;
    auto line = hip_line::create_on(*d, 1);
    BOOST_TEST_REQUIRE(!line.has_value());
    BOOST_TEST(line.error().args().at(0) == "hipSetDevice");
    BOOST_TEST(state.calls.back() == "hipDevicePrimaryCtxRelease 1");
    BOOST_TEST(state.refs[1] == 0);
    BOOST_TEST(state.pages.empty());
}

BOOST_FIXTURE_TEST_CASE(a_source_maps_query_block_and_arm, fixture) {
    auto d = driver();
    auto line = hip_line::create(*d);
    BOOST_TEST_REQUIRE(line.has_value());
    auto foreign = hip_source::create(line.value(), slot(0), state.stream(1));
    BOOST_TEST_REQUIRE(!foreign.has_value());
    BOOST_TEST(foreign.error().code() == errc::foreign_stream);
    auto made = hip_source::create(line.value(), slot(0), state.stream(2));
    BOOST_TEST_REQUIRE(made.has_value());
    hip_source& source = made.value();

    state.stream_status = hip::error_not_ready;
    BOOST_TEST((source.query() == query_result::pending()));
    state.stream_status = hip::success;
    BOOST_TEST((source.query() == query_result::done()));
    BOOST_TEST(!source.block());
    BOOST_TEST(!source.arm());
    BOOST_TEST(source.descriptor().target() == 1u);
    BOOST_TEST(source.park(dur_ns{1000}));

    state.stream_status = hip::error_launch_failure;
    BOOST_TEST(source.query().error == errc::device_fault);
    BOOST_TEST(source.last_error()->args().at(1) == "hipErrorLaunchFailure");
    BOOST_TEST(source.block() == errc::device_fault);
    state.fail["hipStreamWriteValue64 2 flags 0"] = 1;
    BOOST_TEST(source.arm() == errc::driver_status);
    BOOST_TEST(source.descriptor().target() == 1u);
}

BOOST_FIXTURE_TEST_CASE(a_doorbell_is_registered_and_signalled_by_a_second_write, fixture) {
    auto d = driver();
    BOOST_TEST(d->line_table().batch_write64 == nullptr); // no hipStreamBatchMemOp, by design
    auto bell = std::make_shared<doorbell>();
    {
        auto line = hip_line::create_on(*d, 1);
        BOOST_TEST_REQUIRE(line.has_value());
        state.calls.clear();
        BOOST_TEST(!line.value().attach_doorbell(bell).has_value());
        // Registered with device 1 current (Mapped | Portable), then its device pointer there.
        BOOST_TEST((state.calls == calls_t{"hipDevicePrimaryCtxRetain 1", "hipGetDevice",
                                           "hipSetDevice 1", "hipHostRegister 64 flags 3 on 1",
                                           "hipSetDevice 0", "hipGetDevice", "hipSetDevice 1",
                                           "hipHostGetDevicePointer", "hipSetDevice 0"}));
        BOOST_TEST(state.registered.count(&bell->line()) == 1u);
        BOOST_TEST(state.refs[1] == 2);

        state.calls.clear();
        BOOST_TEST(line.value().store(slot(4), state.stream(1)).has_value());
        BOOST_TEST((state.calls == calls_t{"hipStreamGetDevice", "hipStreamWriteValue64 1 flags 0",
                                           "hipStreamWriteValue64 1 flags 0"}));
        BOOST_TEST_REQUIRE(state.stores.size() == 2u);
        // The completion word first, then the doorbell's device word, on the same stream.
        BOOST_TEST(state.stores[0].address == line.value().mapped().device_address(slot(4)));
        BOOST_TEST(state.stores[1].address ==
                   reinterpret_cast<std::uintptr_t>(&bell->line().words[doorbell::device_word]) +
                       device_offset);
        BOOST_TEST(state.stores[0].stream == state.stream(1));
        BOOST_TEST(state.stores[1].stream == state.stream(1));
        BOOST_TEST(bell->device_signaled());
        state.calls.clear();
    }
    BOOST_TEST(
        (state.calls == calls_t{"hipGetDevice", "hipSetDevice 1", "hipDeviceSynchronize on 1",
                                "hipSetDevice 0", "hipGetDevice", "hipSetDevice 1",
                                "hipHostUnregister on 1", "hipSetDevice 0",
                                "hipDevicePrimaryCtxRelease 1", "hipGetDevice", "hipSetDevice 1",
                                "hipHostFree", "hipSetDevice 0", "hipDevicePrimaryCtxRelease 1"}));
    BOOST_TEST(state.registered.empty());
    BOOST_TEST(state.refs[1] == 0);
}

BOOST_FIXTURE_TEST_CASE(hip_doorbell_failures_are_coded, fixture) {
    {
        state.missing = {"hipHostRegister"};
        auto d = driver();
        auto line = hip_line::create(*d);
        BOOST_TEST_REQUIRE(line.has_value());
        const auto e = line.value().attach_doorbell(std::make_shared<doorbell>());
        BOOST_TEST_REQUIRE(e.has_value());
        BOOST_TEST(e->code() == errc::unavailable);
        BOOST_TEST(e->message().find("hipHostRegister") != std::string::npos);
        state.missing.clear();
    }
    auto d = driver();
    auto line = hip_line::create(*d);
    BOOST_TEST_REQUIRE(line.has_value());
    auto bell = std::make_shared<doorbell>();
    state.fail["hipHostRegister 64 flags 3 on 0"] = 1;
    const auto reg = line.value().attach_doorbell(bell);
    BOOST_TEST_REQUIRE(reg.has_value());
    BOOST_TEST(reg->args().at(0) == "hipHostRegister");
    BOOST_TEST(state.refs[0] == 1);
    state.fail.clear();
    BOOST_TEST(!line.value().attach_doorbell(bell).has_value());
    state.fail["hipHostUnregister on 0"] = 1;
    const auto closed = line.value().close();
    BOOST_TEST_REQUIRE(closed.has_value());
    BOOST_TEST(closed->args().at(0) == "hipHostUnregister");
    BOOST_TEST(state.pages.empty());
    BOOST_TEST(state.registered.size() == 1u);
}

BOOST_FIXTURE_TEST_CASE(hip_await_event_waits_on_its_own_stream_then_stores, fixture) {
    auto d = driver();
    auto line = hip_line::create(*d);
    BOOST_TEST_REQUIRE(line.has_value());
    auto bell = std::make_shared<doorbell>();
    BOOST_TEST(!line.value().attach_doorbell(bell).has_value());
    state.calls.clear();
    {
        auto made = hip_event_waiter::create(line.value(), slot(1));
        BOOST_TEST_REQUIRE(made.has_value());
        BOOST_TEST((state.calls == calls_t{"hipGetDevice", "hipStreamCreate on 0"}));
        BOOST_TEST(made.value().stream() == state.stream(2));
        state.calls.clear();
        auto done = made.value().await_event(state.event());
        BOOST_TEST_REQUIRE(done.has_value());
        BOOST_TEST(
            (state.calls == calls_t{"hipGetDevice", "hipStreamWaitEvent stream 2 event flags 0",
                                    "hipStreamGetDevice", "hipStreamWriteValue64 1 flags 0",
                                    "hipStreamWriteValue64 1 flags 0"}));
        BOOST_TEST(done.value().target() == 1u);
        BOOST_TEST(done.value().is_complete());
        BOOST_TEST_REQUIRE(state.stores.size() == 2u);
        BOOST_TEST(state.stores[0].stream == state.stream(2));
        BOOST_TEST(state.stores[1].stream == state.stream(2));
        BOOST_TEST(bell->device_signaled());
        state.calls.clear();
    }
    BOOST_TEST((state.calls == calls_t{"hipStreamDestroy 2"}));
    BOOST_TEST(std::count(state.calls.begin(), state.calls.end(), "hipEventDestroy") == 0);
}

BOOST_FIXTURE_TEST_CASE(hip_await_event_refuses_another_device_and_reports_errors, fixture) {
    auto d = driver();
    auto line = hip_line::create_on(*d, 0);
    BOOST_TEST_REQUIRE(line.has_value());
    auto waiter = hip_event_waiter::create(line.value(), slot(0));
    BOOST_TEST_REQUIRE(waiter.has_value());

    state.current = 1;
    state.calls.clear();
    auto foreign = waiter.value().await_event(state.event());
    BOOST_TEST_REQUIRE(!foreign.has_value());
    BOOST_TEST(foreign.error().code() == errc::foreign_stream);
    BOOST_TEST(foreign.error().message().find("HIP event") != std::string::npos);
    BOOST_TEST((state.calls == calls_t{"hipGetDevice"}));

    state.current = 0;
    state.fail["hipStreamWaitEvent stream 2 event flags 0"] = 101;
    auto failed = waiter.value().await_event(state.event());
    BOOST_TEST_REQUIRE(!failed.has_value());
    BOOST_TEST((failed.error().args() ==
                std::vector<std::string>{"hipStreamWaitEvent", "hipErrorInvalidDevice", "101"}));
    BOOST_TEST(state.stores.empty());
    BOOST_TEST(line.value().mapped().sequence(slot(0)) == 0u);
    state.fail.clear();

    state.fail["hipStreamDestroy 2"] = 101;
    const auto closed = waiter.value().close();
    BOOST_TEST_REQUIRE(closed.has_value());
    BOOST_TEST(closed->args().at(0) == "hipStreamDestroy");
    auto after = waiter.value().await_event(state.event());
    BOOST_TEST_REQUIRE(!after.has_value());
    BOOST_TEST(after.error().code() == errc::backend);
}

BOOST_FIXTURE_TEST_CASE(a_hip_event_waiter_needs_its_entry_points, fixture) {
    for (const char* absent : {"hipStreamWaitEvent", "hipStreamCreate", "hipStreamDestroy"}) {
        state.missing = {absent};
        auto d = driver();
        auto line = hip_line::create(*d);
        BOOST_TEST_REQUIRE(line.has_value());
        state.calls.clear();
        auto waiter = hip_event_waiter::create(line.value(), slot(0));
        BOOST_TEST_REQUIRE(!waiter.has_value());
        BOOST_TEST(waiter.error().code() == errc::unavailable);
        BOOST_TEST(state.calls.empty());
    }
    state.missing.clear();
    auto d = driver();
    auto line = hip_line::create(*d);
    BOOST_TEST_REQUIRE(line.has_value());
    state.fail["hipStreamCreate on 0"] = 2;
    auto failed = hip_event_waiter::create(line.value(), slot(0));
    BOOST_TEST_REQUIRE(!failed.has_value());
    BOOST_TEST(failed.error().args().at(0) == "hipStreamCreate");
}

BOOST_AUTO_TEST_SUITE_END()
