// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The reactor service's registrations not yet taken in, and the handshake by which a
/// registration knows whether to ring an idle waiter.
///
/// Registrations from any thread are pushed here without the service's lock (which a scan may be
/// holding), in registration order, into an engine batch (an array while it has room, so a
/// registration never allocates, then a stack); the waiter takes them all at once into its scan
/// engine. The queue also keeps the engine's size as the waiter last published it: a take that
/// finds nothing publishes it under the queue's lock, so the first registration after that take
/// reads it in the same section as its push, and rings the waiter when it was 0 (idle).
#ifndef GPU_ASYNC_ASIO_DETAIL_REGISTRATION_QUEUE_HPP
#define GPU_ASYNC_ASIO_DETAIL_REGISTRATION_QUEUE_HPP

#include <gpu_async/core/detail/scan_engine.hpp>
#include <gpu_async/wait/detail/ranked_mutex.hpp>

#include <atomic>
#include <cstddef>
#include <mutex>
#include <utility>

namespace gpu_async::detail {

class registration_queue {
public:
    /// An empty queue whose batch has `b`'s room (the engine's: make_batch()).
    explicit registration_queue(engine_batch b) noexcept
        : batch_(std::move(b)) {}

    /// Queues `w`; true when the waiter may be idle (nothing queued, and the table was empty
    /// when it last took from here), so the caller rings it. Never allocates while the batch has
    /// room; any thread.
    bool push(engine_wait& w) noexcept {
        std::lock_guard in(mutex_);
        const bool idle = batch_.empty() && table_size_.load(std::memory_order_seq_cst) == 0;
        batch_.push(&w);
        return idle;
    }

    /// The waiter's take, before each take-in: swaps what is queued into `b` (an empty batch
    /// with room); when nothing is queued, publishes `table_size` instead, under the lock, for
    /// the next push's idle check.
    void take(engine_batch& b, std::size_t table_size) noexcept {
        std::lock_guard in(mutex_);
        if (batch_.empty()) {
            publish(table_size);
            return;
        }
        std::swap(batch_, b);
    }

    /// The table's size, published by the waiter where a change to its table ends.
    void publish(std::size_t table_size) noexcept {
        table_size_.store(table_size, std::memory_order_seq_cst);
    }
    /// The table's size as last published (a hint: any thread, no lock).
    std::size_t published_size() const noexcept {
        return table_size_.load(std::memory_order_relaxed);
    }

    /// Whether anything is queued.
    bool empty() const {
        std::lock_guard in(mutex_);
        return batch_.empty();
    }
    /// Calls `f(const engine_wait*)` for each queued registration, under the queue's lock.
    template <class F>
    void for_each(F&& f) const {
        std::lock_guard in(mutex_);
        batch_.for_each(f);
    }

private:
    // Held to add one, to take them all or to look at them, never during a scan; taken after the
    // service's lock when both are held.
    mutable ranked_mutex mutex_{lock_rank::reactor_incoming};
    engine_batch batch_;
    std::atomic<std::size_t> table_size_{0}; // the engine's size as last published
};

} // namespace gpu_async::detail

#endif // GPU_ASYNC_ASIO_DETAIL_REGISTRATION_QUEUE_HPP
