// SPDX-License-Identifier: BSL-1.0
//
// test/common/fake_hip_driver.hpp: a fake HIP runtime behind a fake dlsym, for testing the HIP
// backend with no GPU and no ROCm.
//
// Every entry point records its call ("hipSetDevice 1"), so a test checks the HIP table's wiring.
// The call log, the failures (`fail`, keyed by the call with its arguments, as recorded, and
// `fail_at`) and the counters are fake_mapped_vendor.hpp's; this fake adds the current device
// (`current`).
//
// One fake at a time (the entry points are plain functions, which reach the fake through the
// `fake` pointer; `fixture` sets it); use it from one thread at a time.
//
#ifndef GPU_ASYNC_TEST_COMMON_FAKE_HIP_DRIVER_HPP
#define GPU_ASYNC_TEST_COMMON_FAKE_HIP_DRIVER_HPP

#include <gpu_async/device/hip.hpp>

#include "common/fake_mapped_vendor.hpp"

#include <boost/test/unit_test.hpp>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace gpu_async::test::hip_fake {

using namespace gpu_async;

inline constexpr std::uint64_t device_offset = fake_device_offset;

struct fake_hip : fake_vendor_state<hip::stream_t> {
    int device_count = 2;
    int current = 0;
    std::array<char, 1> event_storage{};
    struct store {
        hip::stream_t stream;
        std::uintptr_t address;
        std::uint64_t value;
    };
    std::vector<store> stores; // every store enqueued, in order
    int stream2_device = 0;    // the device current when hipStreamCreate made stream 2

    hip::event_t event() { return reinterpret_cast<hip::event_t>(&event_storage.at(0)); }
};

inline fake_hip* fake = nullptr;

inline int f_hipInit(unsigned) {
    return fake->failed("hipInit");
}
inline int f_hipDriverGetVersion(int* v) {
    *v = 50221153;
    return fake->failed("hipDriverGetVersion");
}
inline const char* f_hipGetErrorName(int e) {
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
inline int f_hipGetDeviceCount(int* n) {
    *n = fake->device_count;
    return fake->failed("hipGetDeviceCount");
}
inline int f_hipGetDevice(int* d) {
    *d = fake->current;
    return fake->failed("hipGetDevice");
}
inline int f_hipSetDevice(int d) {
    if (int st = fake->failed("hipSetDevice " + std::to_string(d))) return st;
    fake->current = d;
    return 0;
}
inline int f_hipDevicePrimaryCtxRetain(hip::context_t* c, int d) {
    if (int st = fake->failed("hipDevicePrimaryCtxRetain " + std::to_string(d))) return st;
    ++fake->refs.at(d);
    *c = nullptr;
    return 0;
}
inline int f_hipDevicePrimaryCtxRelease(int d) {
    if (int st = fake->failed("hipDevicePrimaryCtxRelease " + std::to_string(d))) return st;
    --fake->refs.at(d);
    return 0;
}
inline int f_hipHostMalloc(void** p, std::size_t bytes, unsigned flags) {
    if (int st = fake->failed("hipHostMalloc " + std::to_string(bytes) + " on " +
                              std::to_string(fake->current)))
        return st;
    fake->alloc_flags = flags;
    *p = fake->alloc_page(bytes);
    return 0;
}
inline int f_hipHostGetDevicePointer(void** d, void* host, unsigned) {
    *d = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(host) + device_offset);
    return fake->failed("hipHostGetDevicePointer");
}
inline int f_hipHostFree(void* p) {
    if (int st = fake->failed("hipHostFree")) return st;
    fake->free_page(p);
    return 0;
}
inline int f_hipDeviceSynchronize() {
    return fake->failed("hipDeviceSynchronize on " + std::to_string(fake->current));
}
inline int f_hipStreamQuery(hip::stream_t s) {
    if (int st = fake->nth("hipStreamQuery " + std::to_string(fake->stream_index(s)) + " on " +
                           std::to_string(fake->current)))
        return st;
    if (fake->sticky != 0) return fake->sticky;
    return fake->stream_status;
}
inline int f_hipStreamSynchronize(hip::stream_t) {
    if (int st = fake->nth("hipStreamSynchronize")) return st;
    return fake->stream_status;
}
inline int f_hipStreamGetDevice(hip::stream_t s, int* d) {
    // Stream 1 is on device 1, stream 2 (hipStreamCreate's) on the device current at its
    // creation, stream 0 on device 0.
    *d = s == fake->stream(1) ? 1 : s == fake->stream(2) ? fake->stream2_device : 0;
    return fake->failed("hipStreamGetDevice");
}
inline int f_hipStreamWriteValue64(hip::stream_t s, void* address, std::uint64_t value,
                                   unsigned flags) {
    if (int st = fake->failed("hipStreamWriteValue64 " + std::to_string(value) + " flags " +
                              std::to_string(flags)))
        return st;
    fake->stores.push_back({s, reinterpret_cast<std::uintptr_t>(address), value});
    fake->write_word(reinterpret_cast<std::uintptr_t>(address), value);
    return 0;
}

inline int f_hipHostRegister(void* host, std::size_t bytes, unsigned flags) {
    if (int st = fake->failed("hipHostRegister " + std::to_string(bytes) + " flags " +
                              std::to_string(flags) + " on " + std::to_string(fake->current)))
        return st;
    return fake->registered.emplace(host, bytes).second ? 0 : 1;
}
inline int f_hipHostUnregister(void* host) {
    if (int st = fake->failed("hipHostUnregister on " + std::to_string(fake->current))) return st;
    return fake->registered.erase(host) == 1 ? 0 : 1;
}
inline int f_hipStreamWaitEvent(hip::stream_t s, hip::event_t e, unsigned flags) {
    return fake->failed("hipStreamWaitEvent stream " + std::to_string(fake->stream_index(s)) +
                        (e == fake->event() ? " event" : " other") + " flags " +
                        std::to_string(flags));
}
inline int f_hipStreamCreate(hip::stream_t* s) {
    if (int st = fake->failed("hipStreamCreate on " + std::to_string(fake->current))) return st;
    *s = fake->stream(2); // of the current device
    fake->stream2_device = fake->current;
    ++fake->live_streams;
    return 0;
}
inline int f_hipStreamDestroy(hip::stream_t s) {
    if (int st = fake->failed("hipStreamDestroy " + std::to_string(fake->stream_index(s))))
        return st;
    --fake->live_streams;
    return 0;
}
inline int f_hipEventDestroy(hip::event_t) {
    return fake->failed("hipEventDestroy");
}

inline void* f_dlsym(void* context, const char* symbol) {
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
    return fake_symbol(symbols, fake->missing, symbol);
}

inline result<std::unique_ptr<hip_driver>> load_driver(fake_hip& state) {
    return hip_driver::from_resolver(&f_dlsym, &state);
}

using fixture = fake_vendor_fixture<fake_hip, fake, &load_driver>;

} // namespace gpu_async::test::hip_fake

#endif // GPU_ASYNC_TEST_COMMON_FAKE_HIP_DRIVER_HPP
