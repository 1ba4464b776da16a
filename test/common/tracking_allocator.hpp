// SPDX-License-Identifier: BSL-1.0
//
// test/common/tracking_allocator.hpp: an allocator that counts what it allocates and frees, so a
// test can prove an operation used the handler's associated allocator and freed its memory
// before the upcall.
//
#ifndef GPU_ASYNC_TEST_COMMON_TRACKING_ALLOCATOR_HPP
#define GPU_ASYNC_TEST_COMMON_TRACKING_ALLOCATOR_HPP

#include <atomic>
#include <cstddef>
#include <memory>
#include <new>

namespace gpu_async::test {

/// Counters shared by every copy and rebinding of one tracking_allocator.
struct allocation_counters {
    std::atomic<std::size_t> allocations{0};
    std::atomic<std::size_t> deallocations{0};
    std::atomic<std::size_t> live_bytes{0};
    /// Allocation attempts so far, over every copy and rebinding (failed ones included).
    std::atomic<std::size_t> attempts{0};
    /// When not zero, the attempt with this 1-based number throws std::bad_alloc.
    std::size_t fail_at = 0;

    std::size_t live() const noexcept { return allocations.load() - deallocations.load(); }
};

template <class T>
class tracking_allocator {
public:
    using value_type = T;

    explicit tracking_allocator(allocation_counters& c) noexcept
        : counters_(&c) {}
    template <class U>
    tracking_allocator(const tracking_allocator<U>& other) noexcept
        : counters_(other.counters()) {}

    T* allocate(std::size_t n) {
        if (counters_->attempts.fetch_add(1) + 1 == counters_->fail_at) throw std::bad_alloc();
        T* p = std::allocator<T>{}.allocate(n);
        counters_->allocations.fetch_add(1);
        counters_->live_bytes.fetch_add(n * sizeof(T));
        return p;
    }
    void deallocate(T* p, std::size_t n) noexcept {
        counters_->deallocations.fetch_add(1);
        counters_->live_bytes.fetch_sub(n * sizeof(T));
        std::allocator<T>{}.deallocate(p, n);
    }

    allocation_counters* counters() const noexcept { return counters_; }

    template <class U>
    friend bool operator==(const tracking_allocator& a, const tracking_allocator<U>& b) noexcept {
        return a.counters() == b.counters();
    }

private:
    allocation_counters* counters_;
};

} // namespace gpu_async::test

#endif // GPU_ASYNC_TEST_COMMON_TRACKING_ALLOCATOR_HPP
