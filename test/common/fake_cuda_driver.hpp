// SPDX-License-Identifier: BSL-1.0
//
// test/common/fake_cuda_driver.hpp: a fake CUDA driver behind a fake cuGetProcAddress_v2, for
// testing the CUDA backend with no GPU and no libcuda.
//
// Every entry point records its call ("cuCtxPushCurrent 0"), so a test checks the CUDA table's
// wiring (which call, with which arguments, in which order). The call log, the failures (`fail`,
// keyed by the entry point's name, and `fail_at`) and the counters are fake_mapped_vendor.hpp's;
// this fake adds the context stack (`current`, `pushed`).
//
// One fake at a time (the entry points are plain functions, which reach the fake through the
// `fake` pointer; `fixture` sets it); use it from one thread at a time.
//
#ifndef GPU_ASYNC_TEST_COMMON_FAKE_CUDA_DRIVER_HPP
#define GPU_ASYNC_TEST_COMMON_FAKE_CUDA_DRIVER_HPP

#include <gpu_async/device/cuda.hpp>

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

namespace gpu_async::test::cuda_fake {

using namespace gpu_async;

inline constexpr std::uint64_t device_offset = fake_device_offset;

struct fake_cuda : fake_vendor_state<cuda::stream_t> {
    std::vector<int> versions;             // cudaVersion of each resolution
    std::map<std::string, int> version_of; // the cudaVersion asked for each symbol
    std::vector<std::uint64_t> flags;      // flags of each resolution
    int init_flags = -1;
    int can_map = 1;
    int can_memops = 1;
    int current = -1; // index of the current context, -1: none
    std::vector<int> pushed;
    bool land_stores = true;
    int pending_queries = 0; // cuStreamQuery answers NOT_READY this many times first
    std::array<char, 2> ctx_storage{};
    std::array<char, 2> event_storage{};
    struct store {
        cuda::stream_t stream;
        std::uint64_t address;
        std::uint64_t value;
        int batch; // 0: a cuStreamWriteValue64; n: the n-th cuStreamBatchMemOp
    };
    std::vector<store> stores; // every store enqueued, in order
    int batches = 0;           // cuStreamBatchMemOp calls that enqueued
    unsigned register_flags = 0;
    std::vector<int> pointer_contexts; // the current context of each device pointer call

    cuda::context_t ctx(int i) { return reinterpret_cast<cuda::context_t>(&ctx_storage.at(i)); }
    cuda::event_t event(int i) { return reinterpret_cast<cuda::event_t>(&event_storage.at(i)); }
    void land(cuda::stream_t s, std::uint64_t address, std::uint64_t value, int batch) {
        stores.push_back({s, address, value, batch});
        if (land_stores) write_word(address, value);
    }
    int ctx_index(cuda::context_t c) {
        for (int i = 0; i < 2; ++i)
            if (c == ctx(i)) return i;
        return -1;
    }
};

inline fake_cuda* fake = nullptr;

inline int f_cuInit(unsigned flags) {
    fake->init_flags = static_cast<int>(flags);
    return fake->failed("cuInit");
}
inline int f_cuDriverGetVersion(int* v) {
    *v = 13000;
    return fake->failed("cuDriverGetVersion");
}
inline int f_cuGetErrorName(int e, const char** name) {
    switch (e) {
    case 100:
        *name = "CUDA_ERROR_NO_DEVICE";
        return 0;
    case 600:
        *name = "CUDA_ERROR_NOT_READY";
        return 0;
    case 719:
        *name = "CUDA_ERROR_LAUNCH_FAILED";
        return 0;
    case 201:
        *name = "CUDA_ERROR_INVALID_CONTEXT";
        return 0;
    default:
        return 1;
    }
}
inline int f_cuDeviceGetCount(int* n) {
    *n = 2;
    return fake->failed("cuDeviceGetCount");
}
inline int f_cuDeviceGet(int* d, int ordinal) {
    *d = ordinal;
    return fake->failed("cuDeviceGet");
}
inline int f_cuDeviceGetAttribute(int* v, int attribute, int device) {
    if (int st = fake->failed("cuDeviceGetAttribute")) return st;
    fake->calls.back() += " " + std::to_string(attribute) + " " + std::to_string(device);
    *v = attribute == 19 ? fake->can_map : attribute == 122 ? fake->can_memops : -1;
    return *v < 0 ? 1 : 0;
}
inline int f_cuCtxGetCurrent(cuda::context_t* c) {
    *c = fake->current < 0 ? nullptr : fake->ctx(fake->current);
    return fake->failed("cuCtxGetCurrent");
}
inline int f_cuCtxSetCurrent(cuda::context_t c) {
    if (int st = fake->failed("cuCtxSetCurrent")) return st;
    fake->current = fake->ctx_index(c);
    return 0;
}
inline int f_cuCtxGetDevice(int* d) {
    *d = fake->current;
    return fake->failed("cuCtxGetDevice");
}
inline int f_cuCtxPushCurrent(cuda::context_t c) {
    if (int st = fake->failed("cuCtxPushCurrent")) return st;
    fake->calls.back() += " " + std::to_string(fake->ctx_index(c));
    fake->pushed.push_back(fake->current);
    fake->current = fake->ctx_index(c);
    return 0;
}
inline int f_cuCtxPopCurrent(cuda::context_t* c) {
    if (int st = fake->failed("cuCtxPopCurrent")) return st;
    *c = fake->ctx(fake->current);
    fake->current = fake->pushed.back();
    fake->pushed.pop_back();
    return 0;
}
inline int f_cuCtxSynchronize() {
    return fake->failed("cuCtxSynchronize");
}
inline int f_cuDevicePrimaryCtxRetain(cuda::context_t* c, int d) {
    if (int st = fake->failed("cuDevicePrimaryCtxRetain")) return st;
    fake->calls.back() += " " + std::to_string(d);
    ++fake->refs.at(d);
    *c = fake->ctx(d);
    return 0;
}
inline int f_cuDevicePrimaryCtxRelease(int d) {
    if (int st = fake->failed("cuDevicePrimaryCtxRelease")) return st;
    fake->calls.back() += " " + std::to_string(d);
    --fake->refs.at(d);
    return 0;
}
inline int f_cuMemHostAlloc(void** p, std::size_t bytes, unsigned flags) {
    if (int st = fake->failed("cuMemHostAlloc")) return st;
    fake->calls.back() += " " + std::to_string(bytes);
    fake->alloc_flags = flags;
    *p = fake->alloc_page(bytes);
    return 0;
}
inline int f_cuMemHostGetDevicePointer(cuda::deviceptr_t* d, void* host, unsigned) {
    *d = reinterpret_cast<std::uintptr_t>(host) + device_offset;
    fake->pointer_contexts.push_back(fake->current);
    return fake->failed("cuMemHostGetDevicePointer");
}
inline int f_cuMemHostRegister(void* host, std::size_t bytes, unsigned flags) {
    if (int st = fake->failed("cuMemHostRegister")) return st;
    fake->calls.back() += " " + std::to_string(bytes) + " flags " + std::to_string(flags) + " in " +
                          std::to_string(fake->current);
    fake->register_flags = flags;
    if (!fake->registered.emplace(host, bytes).second) return 712; // ALREADY_REGISTERED
    return 0;
}
inline int f_cuMemHostUnregister(void* host) {
    if (int st = fake->failed("cuMemHostUnregister")) return st;
    fake->calls.back() += " in " + std::to_string(fake->current);
    return fake->registered.erase(host) == 1 ? 0 : 713; // NOT_REGISTERED
}
inline int f_cuStreamBatchMemOp(cuda::stream_t s, unsigned count,
                                cuda::stream_batch_mem_op_params* p, unsigned flags) {
    if (int st = fake->failed("cuStreamBatchMemOp")) return st;
    std::string& call = fake->calls.back();
    call += " " + std::to_string(count) + " flags " + std::to_string(flags) + ":";
    ++fake->batches;
    for (unsigned i = 0; i < count; ++i) {
        const auto& w = p[i].write_value;
        call += " op " + std::to_string(w.operation) + " value " + std::to_string(w.value64) +
                " flags " + std::to_string(w.flags) + ";";
        fake->land(s, w.address, w.value64, fake->batches);
    }
    return 0;
}
inline int f_cuStreamWaitEvent(cuda::stream_t s, cuda::event_t e, unsigned flags) {
    if (int st = fake->failed("cuStreamWaitEvent")) return st;
    fake->calls.back() += " stream " + std::to_string(fake->stream_index(s)) + " event " +
                          std::to_string(e == fake->event(0)   ? 0
                                         : e == fake->event(1) ? 1
                                                               : -1) +
                          " flags " + std::to_string(flags);
    return 0;
}
inline int f_cuStreamCreate(cuda::stream_t* s, unsigned flags) {
    if (int st = fake->failed("cuStreamCreate")) return st;
    fake->calls.back() +=
        " flags " + std::to_string(flags) + " in " + std::to_string(fake->current);
    *s = fake->stream(2); // of context 0
    ++fake->live_streams;
    return 0;
}
inline int f_cuStreamDestroy(cuda::stream_t s) {
    if (int st = fake->failed("cuStreamDestroy")) return st;
    fake->calls.back() += " " + std::to_string(fake->stream_index(s));
    --fake->live_streams;
    return 0;
}
inline int f_cuEventDestroy(cuda::event_t) {
    return fake->failed("cuEventDestroy");
}
inline int f_cuMemFreeHost(void* p) {
    if (int st = fake->failed("cuMemFreeHost")) return st;
    fake->free_page(p);
    return 0;
}
inline int f_cuStreamGetCtx(cuda::stream_t s, cuda::context_t* c) {
    // Streams 0 and 2 belong to context 0, stream 1 to context 1.
    *c = fake->ctx(s == fake->stream(1) ? 1 : 0);
    return fake->failed("cuStreamGetCtx");
}
inline int f_cuStreamQuery(cuda::stream_t s) {
    if (int st = fake->nth("cuStreamQuery")) return st;
    fake->calls.back() += " " + std::to_string(fake->stream_index(s));
    if (fake->sticky != 0) return fake->sticky;
    if (fake->pending_queries > 0) {
        --fake->pending_queries;
        return cuda::error_not_ready;
    }
    return fake->stream_status;
}
inline int f_cuStreamSynchronize(cuda::stream_t) {
    if (int st = fake->nth("cuStreamSynchronize")) return st;
    return fake->stream_status;
}
inline int f_cuStreamWriteValue64(cuda::stream_t s, cuda::deviceptr_t address, std::uint64_t value,
                                  unsigned flags) {
    if (int st = fake->failed("cuStreamWriteValue64")) return st;
    fake->calls.back() += " " + std::to_string(value) + " flags " + std::to_string(flags);
    fake->land(s, address, value, 0);
    return 0;
}

inline int f_get_proc_address(const char* symbol, void** pfn, int version, std::uint64_t flags,
                              int* status) {
    static const std::map<std::string, void*> symbols = {
        {"cuInit", reinterpret_cast<void*>(&f_cuInit)},
        {"cuDriverGetVersion", reinterpret_cast<void*>(&f_cuDriverGetVersion)},
        {"cuGetErrorName", reinterpret_cast<void*>(&f_cuGetErrorName)},
        {"cuDeviceGetCount", reinterpret_cast<void*>(&f_cuDeviceGetCount)},
        {"cuDeviceGet", reinterpret_cast<void*>(&f_cuDeviceGet)},
        {"cuDeviceGetAttribute", reinterpret_cast<void*>(&f_cuDeviceGetAttribute)},
        {"cuCtxGetCurrent", reinterpret_cast<void*>(&f_cuCtxGetCurrent)},
        {"cuCtxSetCurrent", reinterpret_cast<void*>(&f_cuCtxSetCurrent)},
        {"cuCtxGetDevice", reinterpret_cast<void*>(&f_cuCtxGetDevice)},
        {"cuCtxPushCurrent", reinterpret_cast<void*>(&f_cuCtxPushCurrent)},
        {"cuCtxPopCurrent", reinterpret_cast<void*>(&f_cuCtxPopCurrent)},
        {"cuCtxSynchronize", reinterpret_cast<void*>(&f_cuCtxSynchronize)},
        {"cuDevicePrimaryCtxRetain", reinterpret_cast<void*>(&f_cuDevicePrimaryCtxRetain)},
        {"cuDevicePrimaryCtxRelease", reinterpret_cast<void*>(&f_cuDevicePrimaryCtxRelease)},
        {"cuMemHostAlloc", reinterpret_cast<void*>(&f_cuMemHostAlloc)},
        {"cuMemHostGetDevicePointer", reinterpret_cast<void*>(&f_cuMemHostGetDevicePointer)},
        {"cuMemFreeHost", reinterpret_cast<void*>(&f_cuMemFreeHost)},
        {"cuStreamGetCtx", reinterpret_cast<void*>(&f_cuStreamGetCtx)},
        {"cuStreamQuery", reinterpret_cast<void*>(&f_cuStreamQuery)},
        {"cuStreamSynchronize", reinterpret_cast<void*>(&f_cuStreamSynchronize)},
        {"cuStreamWriteValue64", reinterpret_cast<void*>(&f_cuStreamWriteValue64)},
        {"cuStreamBatchMemOp", reinterpret_cast<void*>(&f_cuStreamBatchMemOp)},
        {"cuMemHostRegister", reinterpret_cast<void*>(&f_cuMemHostRegister)},
        {"cuMemHostUnregister", reinterpret_cast<void*>(&f_cuMemHostUnregister)},
        {"cuStreamWaitEvent", reinterpret_cast<void*>(&f_cuStreamWaitEvent)},
        {"cuStreamCreate", reinterpret_cast<void*>(&f_cuStreamCreate)},
        {"cuStreamDestroy", reinterpret_cast<void*>(&f_cuStreamDestroy)},
        {"cuEventDestroy", reinterpret_cast<void*>(&f_cuEventDestroy)},
    };
    fake->versions.push_back(version);
    fake->version_of[symbol] = version;
    fake->flags.push_back(flags);
    *pfn = fake_symbol(symbols, fake->missing, symbol);
    if (*pfn == nullptr) {
        *status = cuda::proc_address_symbol_not_found;
        return cuda::error_not_found;
    }
    *status = cuda::proc_address_success;
    return 0;
}

inline result<std::unique_ptr<cuda_driver>> load_driver(fake_cuda&) {
    return cuda_driver::from_resolver(&f_get_proc_address);
}

using fixture = fake_vendor_fixture<fake_cuda, fake, &load_driver>;

} // namespace gpu_async::test::cuda_fake

#endif // GPU_ASYNC_TEST_COMMON_FAKE_CUDA_DRIVER_HPP
