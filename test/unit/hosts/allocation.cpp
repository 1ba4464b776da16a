// SPDX-License-Identifier: BSL-1.0
// Retiring a line or a slot and faulting a slot allocate nothing on the calling thread, with
// reactors registered and waits pending: the registry asks its watchers one by one, pinning each,
// with no list of them made. (Counted by a replaced global operator new, so not under the
// sanitizers, which bring their own.)
#include <gpu_async/host/std_host.hpp>
#include <gpu_async/line/detail/line_watchers.hpp>
#include <gpu_async/line/line_health.hpp>
#include <gpu_async/line/line_life.hpp>

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/error.hpp>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                         \
    __has_feature(memory_sanitizer)
#define GPU_ASYNC_TEST_COUNT_ALLOCATIONS 0
#endif
#endif
#if !defined(GPU_ASYNC_TEST_COUNT_ALLOCATIONS)
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GPU_ASYNC_TEST_COUNT_ALLOCATIONS 0
#else
#define GPU_ASYNC_TEST_COUNT_ALLOCATIONS 1
#endif
#endif

#if GPU_ASYNC_TEST_COUNT_ALLOCATIONS

// The replacements below pair malloc with free; g++ sees free() inlined where a new-expression
// allocated and cannot tell the operators were replaced.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace {
thread_local bool counting = false;
thread_local std::size_t allocations = 0;
} // namespace

void* operator new(std::size_t n) {
    if (counting) ++allocations;
    if (void* p = std::malloc(n != 0 ? n : 1)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    std::free(p);
}

namespace {

// How many allocations `f` makes on this thread.
template <class F>
std::size_t allocations_of(F&& f) {
    allocations = 0;
    counting = true;
    f();
    counting = false;
    return allocations;
}

} // namespace

#endif

using namespace gpu_async;

BOOST_AUTO_TEST_SUITE(allocation_suite)

BOOST_AUTO_TEST_CASE(retirement_and_faults_allocate_nothing) {
#if GPU_ASYNC_TEST_COUNT_ALLOCATIONS
    BOOST_TEST_REQUIRE(allocations_of([] { ::operator delete(::operator new(16)); }) == 1u);
    std_watcher first; // reactors with threads of their own, asked like every other
    std_watcher second;
    completion_line line;
    const std::uint64_t g = adopt_line(line);
    const auto at = [&](std::uint64_t t) {
        return memory_descriptor(line, *slot_id::at(t % 3), t, g);
    };
    std::vector<watch_handle> handles;
    for (std::uint64_t t = 1; t <= 9; ++t)
        handles.push_back((t % 2 == 0 ? first : second).watch(at(t)));
    BOOST_TEST(allocations_of([&] { fault_slot(line, *slot_id::at(0)); }) == 0u);
    BOOST_TEST(allocations_of([&] { retire_slot(line, *slot_id::at(1)); }) == 0u);
    BOOST_TEST(allocations_of([&] { retire_line(line); }) == 0u);
    for (std::uint64_t t = 1; t <= 9; ++t) {
        const watch_handle& h = handles[t - 1];
        BOOST_TEST_REQUIRE(h.wait_for(std::chrono::seconds(10))); // every registration ended
        if (t % 3 == 0)
            BOOST_TEST((h.error() == errc::device_fault));
        else
            BOOST_TEST((h.error() == std::errc::operation_canceled));
    }
#else
    BOOST_TEST_MESSAGE("allocations are not counted under a sanitizer");
#endif
}

BOOST_AUTO_TEST_SUITE_END()
