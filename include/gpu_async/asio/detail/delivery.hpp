// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The reactor service's delivery part: what left the scan engine on its way to the
/// ports' completion queues, the queues whose drain awaits a retry, and the drains out.
///
/// What leaves the engine is finished while it is at hand (the service's left_locked), and its
/// queue is noted here then, so that handing the list over (finish) takes it whole when it all
/// goes to one queue, the common case, walking nothing. A queue whose drain cannot be posted
/// waits in the retry list, under the service's lock, for the waiter to post it again. The drains
/// posted, running or awaiting a retry are counted at the stand-back gate, where the waiter
/// stands back while they scan; the drains' signs of life (a scan after a batch, every 64 ops
/// delivered) tell it whether they still run.
#ifndef GPU_ASYNC_ASIO_DETAIL_DELIVERY_HPP
#define GPU_ASYNC_ASIO_DETAIL_DELIVERY_HPP

#include <gpu_async/asio/detail/completion_queue.hpp>
#include <gpu_async/asio/detail/flavour.hpp>
#include <gpu_async/asio/detail/stand_back.hpp>
#include <gpu_async/core/detail/scan_engine.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace gpu_async::detail {
GPU_ASYNC_ASIO_NAMESPACE_BEGIN

class delivery {
public:
    // --- under the service's lock ------------------------------------------------------------

    /// `q`'s op left the engine (finished): its queue is noted.
    void leaving(completion_queue* q) noexcept {
        if (leaving_.count++ == 0)
            leaving_.queue = q;
        else if (q != leaving_.queue)
            leaving_.mixed = true;
    }
    /// What left since the last call, `out`, onto `list` in order: taken whole when `list` is
    /// empty and `out` is all that left (each op was noted by leaving()).
    void finish(engine_list& out, ready_list& list) noexcept {
        if (list.waits.empty() && out.count == leaving_.count) {
            list.waits = std::exchange(out, engine_list{});
            list.queue = leaving_.queue;
            list.mixed = leaving_.mixed;
        } else {
            while (engine_wait* w = out.pop())
                list.push(static_cast<reactor_op*>(w));
        }
        leaving_ = {};
    }
    /// Keeps `q` (with its drain reference) for the waiter to post again.
    void keep_for_retry(completion_queue* q) noexcept {
        q->next_in_list() = retry_;
        retry_ = q;
    }
    /// Whether a queue awaits a retry.
    bool retries() const noexcept { return retry_ != nullptr; }
    /// The queues awaiting a retry, linked through next_in_list(); the list is emptied.
    completion_queue* take_retries() noexcept { return std::exchange(retry_, nullptr); }

    // --- any thread, no lock -------------------------------------------------------------------

    /// The drains out, and the eventcount a standing-back waiter sleeps on.
    stand_back_gate& gate() noexcept { return gate_; }
    const stand_back_gate& gate() const noexcept { return gate_; }
    /// A drain's sign of life: it scanned after its batch (`scan`, which publishes that scan),
    /// or delivered 64 more ops.
    void progressed(bool scan) noexcept {
        progress_.fetch_add(1, scan ? std::memory_order_release : std::memory_order_relaxed);
    }
    /// Signs of life so far (a standing-back waiter compares two reads).
    std::uint64_t progress() const noexcept { return progress_.load(std::memory_order_acquire); }
    /// Whether the doorbell's count `rings` is new since the last drain's scan (scanned()).
    bool rang_since_scan(std::uint64_t rings) const noexcept {
        return rings != scanned_at_.load(std::memory_order_relaxed);
    }
    /// A drain scans (under the service's lock) having read the count `rings` before.
    void scanned(std::uint64_t rings) noexcept {
        scanned_at_.store(rings, std::memory_order_relaxed);
        progressed(true);
    }

private:
    // What left the engine since the last finish(): how many, the first one's queue, and
    // whether another queue's op followed (the service's lock).
    struct {
        std::size_t count = 0;
        completion_queue* queue = nullptr;
        bool mixed = false;
    } leaving_;
    completion_queue* retry_ = nullptr; // queues whose drain could not be posted (the lock)
    stand_back_gate gate_;
    std::atomic<std::uint64_t> progress_{0};   // drains' scans, and every 64 ops they ran
    std::atomic<std::uint64_t> scanned_at_{0}; // the ring count before a drain's last scan
};

GPU_ASYNC_ASIO_NAMESPACE_END
} // namespace gpu_async::detail

#endif // GPU_ASYNC_ASIO_DETAIL_DELIVERY_HPP
