// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The library's lock hierarchy, and the mutex that checks it.
///
/// Every mutex of the library is a `ranked_mutex` with a rank below. A thread that holds locks
/// takes only a lock of a higher rank than each of them (outermost first, leaves last), so no
/// two threads can wait for each other's locks. Where the order is checked
/// (GPU_ASYNC_CHECK_LOCK_ORDER: on unless NDEBUG, so in the sanitizer trees), a lock taken out
/// of order calls the lock-order handler before it blocks: by default it names both locks on
/// stderr and aborts.
///
/// What no lock is held across (in every rank): a handler or a user callback, a completion
/// token's executor work, a blocking driver call (a stream synchronisation, a semaphore wait).
/// A retirement asks the line watchers with no registry lock held (line/detail/line_watchers.hpp),
/// so a watcher's locks may be taken during a retirement whatever its rank.
///
/// The line registry's lock (line/detail/line_watchers.hpp, line/line_health.hpp) is only held to
/// read or change its lists and to pin what it is about to ask (a reactor, a health query), never
/// while a reactor or a query is asked, so a retirement may start from a reactor's callback while
/// another retirement waits for that callback; removing a reactor, or unwatching a line's health,
/// waits for its pins with no lock held. A reactor's locks are not held while it asks the registry
/// (a retirement, a fault, a health query), nor is a device's. The side table's shard locks
/// (line/line_life.hpp) are leaves, taken alone for an update or a thread's first look at a line
/// (later looks read its state, an atomic, through a per-thread cache).
#ifndef GPU_ASYNC_WAIT_DETAIL_RANKED_MUTEX_HPP
#define GPU_ASYNC_WAIT_DETAIL_RANKED_MUTEX_HPP

#include <gpu_async/core/detail/config.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#ifndef GPU_ASYNC_CHECK_LOCK_ORDER
#ifdef NDEBUG
#define GPU_ASYNC_CHECK_LOCK_ORDER 0
#else
#define GPU_ASYNC_CHECK_LOCK_ORDER 1
#endif
#endif

namespace gpu_async::detail {

/// The locks of the library, outermost first: a thread holding one may take only those below it.
enum class lock_rank : std::uint8_t {
    /// std_watcher::join_m_: one shutdown() joins the watcher thread (taken first: the thread
    /// it joins takes the watcher's other locks).
    watcher_join = 1,
    /// A port's registration lock: plan-driven parks register under it, and a retirement of
    /// their line takes it before the service's (port_state, plan_line_watch).
    port_registration,
    /// A port's point table of plan-driven waits and its line watches (port_state): a park
    /// finds its line's watch under the registration lock.
    port_points,
    /// The fd notifier's list of pending waits, taken over its std_watcher's.
    fd_notifier,
    /// The std_watcher's scan engine and lists.
    std_watcher,
    /// The reactor service's scan engine (reactor_service::mutex_).
    reactor,
    /// The reactor service's registrations not yet taken in (detail::registration_queue).
    reactor_incoming,
    /// A port's completion queue (completion_queue::mutex_), taken under the service's.
    completion_queue,
    /// A port's outstanding-work holders (port_completion_queue): a leaf, never held while the
    /// executor's work is taken or let go.
    queue_work,
    /// The simulated device's handles' view of it (sim_life): whether it lives, and the
    /// give-backs in progress.
    device_life,
    /// A device's own state: the simulated device's streams and lines, the Metal mirror's
    /// watched command buffers, the Vulkan device's lines.
    device,
    /// The mapped lines' doorbell registrations (held across the driver's host-memory
    /// registration calls, which do not wait for the device).
    doorbell_registrations,
    /// A simulated device worker's queue of due items.
    device_worker,
    /// The Vulkan device's queue (every vkQueueSubmit of the backend: the API requires one
    /// submitter at a time; the call does not wait for the device).
    device_queue,
    /// The doorbells kept for the process's life by Vulkan lines that leaked: a leaf.
    doorbell_keep,
    /// The line registry's lists of watchers and health queries: only to read or change them
    /// and pin what it is about to ask.
    line_registry,
    /// A plan-driven line watch's source-call pins (plan_line_watch): a leaf.
    plan_calls,
    /// A plan-driven wait's cancellation link: a leaf.
    cancel_link,
    /// A std_watcher future-form wait's own completion flag: a leaf.
    watch_flag,
    /// The line side table's shards: leaves, taken alone.
    line_shard,
    /// Not a lock: a call out (a handler, a user callback or work item, a source's blocking
    /// call), before which a thread must hold no lock at all (expect_no_lock_held).
    call_out = 0xff,
};

/// The lock's name, for the lock-order handler's message.
constexpr const char* lock_rank_name(lock_rank r) noexcept {
    switch (r) {
    case lock_rank::watcher_join:
        return "watcher_join";
    case lock_rank::port_points:
        return "port_points";
    case lock_rank::port_registration:
        return "port_registration";
    case lock_rank::fd_notifier:
        return "fd_notifier";
    case lock_rank::std_watcher:
        return "std_watcher";
    case lock_rank::reactor:
        return "reactor";
    case lock_rank::reactor_incoming:
        return "reactor_incoming";
    case lock_rank::completion_queue:
        return "completion_queue";
    case lock_rank::queue_work:
        return "queue_work";
    case lock_rank::device_life:
        return "device_life";
    case lock_rank::device:
        return "device";
    case lock_rank::doorbell_registrations:
        return "doorbell_registrations";
    case lock_rank::device_worker:
        return "device_worker";
    case lock_rank::device_queue:
        return "device_queue";
    case lock_rank::doorbell_keep:
        return "doorbell_keep";
    case lock_rank::line_registry:
        return "line_registry";
    case lock_rank::plan_calls:
        return "plan_calls";
    case lock_rank::cancel_link:
        return "cancel_link";
    case lock_rank::watch_flag:
        return "watch_flag";
    case lock_rank::line_shard:
        return "line_shard";
    case lock_rank::call_out:
        return "a call out (handler, callback, blocking call)";
    }
    return "?";
}

/// Called when a thread holding `held` is about to take `wanted` (not of a higher rank).
using lock_order_handler = void (*)(lock_rank held, lock_rank wanted);

[[noreturn]] inline void abort_on_lock_order(lock_rank held, lock_rank wanted) noexcept {
    std::fprintf(stderr, "gpu_async: lock order violated: '%s' while '%s' is held\n",
                 lock_rank_name(wanted), lock_rank_name(held));
    std::abort();
}

inline std::atomic<lock_order_handler>& lock_order_handler_slot() noexcept {
    static std::atomic<lock_order_handler> h{&abort_on_lock_order};
    return h;
}

/// Replaces the handler (tests record violations instead of aborting); returns the previous one.
inline lock_order_handler set_lock_order_handler(lock_order_handler h) noexcept {
    return lock_order_handler_slot().exchange(h != nullptr ? h : &abort_on_lock_order);
}

/// The ranks a thread holds, in the order it took them.
class held_ranks {
public:
    /// The highest rank held, or none (0).
    std::uint8_t highest() const noexcept {
        std::uint8_t top = 0;
        for (std::size_t i = 0; i < n_; ++i)
            if (static_cast<std::uint8_t>(held_[i]) > top)
                top = static_cast<std::uint8_t>(held_[i]);
        return top;
    }
    void push(lock_rank r) noexcept {
        if (n_ < held_.size()) held_[n_] = r;
        ++n_; // beyond the array: counted, not recorded (never seen: the ranks are few)
    }
    void pop(lock_rank r) noexcept {
        const std::size_t kept = n_ < held_.size() ? n_ : held_.size();
        for (std::size_t i = kept; i-- > 0;) {
            if (held_[i] != r) continue;
            for (std::size_t j = i + 1; j < kept; ++j)
                held_[j - 1] = held_[j];
            break;
        }
        --n_;
    }
    std::size_t size() const noexcept { return n_; }

    static held_ranks& of_this_thread() noexcept {
        thread_local held_ranks h;
        return h;
    }

private:
    std::array<lock_rank, 16> held_{};
    std::size_t n_ = 0;
};

/// A std::mutex with a rank in the hierarchy above (Lockable: std::lock_guard, std::unique_lock,
/// std::scoped_lock; ranked_condition_variable waits on it).
class ranked_mutex {
public:
    explicit ranked_mutex(lock_rank r) noexcept
        : rank_(r) {}
    ranked_mutex(const ranked_mutex&) = delete;
    ranked_mutex& operator=(const ranked_mutex&) = delete;

    void lock() {
        check();
        m_.lock();
        note_taken();
    }
    bool try_lock() {
        // A try never waits, so it cannot deadlock: taken in any order, then counted as held.
        if (!m_.try_lock()) return false;
        note_taken();
        return true;
    }
    void unlock() {
        note_released();
        m_.unlock();
    }

    lock_rank rank() const noexcept { return rank_; }
    /// The mutex itself (ranked_condition_variable waits on it, the rank counted as held).
    std::mutex& native() noexcept { return m_; }

private:
    void check() const noexcept {
#if GPU_ASYNC_CHECK_LOCK_ORDER
        const std::uint8_t top = held_ranks::of_this_thread().highest();
        if (top >= static_cast<std::uint8_t>(rank_))
            lock_order_handler_slot().load()(static_cast<lock_rank>(top), rank_);
#endif
    }
    void note_taken() const noexcept {
#if GPU_ASYNC_CHECK_LOCK_ORDER
        held_ranks::of_this_thread().push(rank_);
#endif
    }
    void note_released() const noexcept {
#if GPU_ASYNC_CHECK_LOCK_ORDER
        held_ranks::of_this_thread().pop(rank_);
#endif
    }

    std::mutex m_;
    lock_rank rank_;
};

/// Where the order is checked: calls the lock-order handler (with lock_rank::call_out) when the
/// thread holds any ranked lock, before it calls out of the library (a handler, a user callback,
/// a blocking driver call).
inline void expect_no_lock_held() noexcept {
#if GPU_ASYNC_CHECK_LOCK_ORDER
    const std::uint8_t top = held_ranks::of_this_thread().highest();
    if (top != 0)
        lock_order_handler_slot().load()(static_cast<lock_rank>(top), lock_rank::call_out);
#endif
}

/// std::condition_variable over a ranked_mutex: while it waits the thread blocks, so its ranks
/// stay counted as held.
class ranked_condition_variable {
public:
    void notify_one() noexcept { cv_.notify_one(); }
    void notify_all() noexcept { cv_.notify_all(); }

    void wait(std::unique_lock<ranked_mutex>& lk) {
        native_lock n(lk);
        cv_.wait(n.lock);
    }
    template <class Pred>
    void wait(std::unique_lock<ranked_mutex>& lk, Pred pred) {
        native_lock n(lk);
        cv_.wait(n.lock, std::move(pred));
    }
    template <class Rep, class Period>
    std::cv_status wait_for(std::unique_lock<ranked_mutex>& lk,
                            const std::chrono::duration<Rep, Period>& d) {
        native_lock n(lk);
        return cv_.wait_for(n.lock, d);
    }
    template <class Rep, class Period, class Pred>
    bool wait_for(std::unique_lock<ranked_mutex>& lk, const std::chrono::duration<Rep, Period>& d,
                  Pred pred) {
        native_lock n(lk);
        return cv_.wait_for(n.lock, d, std::move(pred));
    }
    template <class Clock, class Duration>
    std::cv_status wait_until(std::unique_lock<ranked_mutex>& lk,
                              const std::chrono::time_point<Clock, Duration>& t) {
        native_lock n(lk);
        return cv_.wait_until(n.lock, t);
    }
    template <class Clock, class Duration, class Pred>
    bool wait_until(std::unique_lock<ranked_mutex>& lk,
                    const std::chrono::time_point<Clock, Duration>& t, Pred pred) {
        native_lock n(lk);
        return cv_.wait_until(n.lock, t, std::move(pred));
    }

private:
    /// The ranked lock's mutex, adopted for the wait and given back (still locked) after it,
    /// whatever the wait throws.
    struct native_lock {
        explicit native_lock(std::unique_lock<ranked_mutex>& lk)
            : lock(lk.mutex()->native(), std::adopt_lock) {}
        native_lock(const native_lock&) = delete;
        native_lock& operator=(const native_lock&) = delete;
        ~native_lock() { (void)lock.release(); }
        std::unique_lock<std::mutex> lock;
    };

    std::condition_variable cv_;
};

} // namespace gpu_async::detail

#endif // GPU_ASYNC_WAIT_DETAIL_RANKED_MUTEX_HPP
