// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/host/impl/wait_fd.ipp: the fd notifier's state, shared with its watcher callbacks.
//
#ifndef GPU_ASYNC_IMPL_WAIT_FD_IPP
#define GPU_ASYNC_IMPL_WAIT_FD_IPP

#include <gpu_async/core/wait_end.hpp>
#include <gpu_async/host/wait_fd.hpp>
#include <gpu_async/wait/detail/ranked_mutex.hpp>

#if GPU_ASYNC_HAS_WAIT_FD

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <iterator>
#include <list>
#include <mutex>
#include <unordered_map>

namespace gpu_async {

namespace detail {

// The notifier's state. Owned by the notifier and by every callback it gave the watcher, so a
// callback that runs after (or while) the notifier closes finds it alive, and closed. It is the
// sink of its waits, which live in the watcher's engine: the watcher ends each (completed, its
// line or slot retired, its slot faulted, the stop) and the callback queues the entry.
class fd_notifier_core final : public std::enable_shared_from_this<fd_notifier_core> {
public:
    using entry = fd_notifier::entry;

    // One pending wait. `handle` is the watcher registration; dropping it (outside `m_`) ends it.
    struct rec {
        std::uint64_t cookie;
        std::uint64_t id; // unique in this notifier: a callback finds its own wait by it
        watch_handle handle;
    };
    using rec_list = std::list<rec>; // splice moves records out without allocating

    fd_notifier_core(std_watcher& w, int fd) noexcept
        : watcher_(&w)
        , fd_(fd) {}

    // After make_shared: the stop listener. On a throw the caller runs close().
    void start() {
        watch_handle stop = watcher_->on_stop([self = shared_from_this()] { self->stopped(); });
        {
            std::lock_guard lk(m_);
            if (stop.valid())
                stop_ = std::move(stop);
            else
                shut_locked(); // the watcher stopped before we came
        }
    }

    int fd() const {
        std::lock_guard lk(m_);
        return fd_;
    }

    void watch(const memory_descriptor& d, std::uint64_t cookie) {
        std::lock_guard lk(m_);
        if (fd_ < 0)
            throw std::system_error(std::make_error_code(std::errc::bad_file_descriptor),
                                    "fd_notifier::watch on a closed notifier");
        // Room in the ready list for every wait that may end, this one included: ending a wait
        // never allocates.
        const std::size_t need = ready_.size() + pending_.size() + 1;
        if (ready_.capacity() < need) ready_.reserve(std::max(need, 2 * ready_.capacity()));
        if (shut_) {
            push_locked({cookie, make_error_code(errc::shut_down)});
            return;
        }
        const std::uint64_t id = next_id_++;
        pending_.push_back(rec{cookie, id, watch_handle()});
        const auto it = std::prev(pending_.end());
        try {
            by_cookie_.emplace(cookie, it);
        } catch (...) {
            pending_.erase(it);
            throw;
        }
        watch_handle h;
        try {
            // Under m_: the callback cannot find the record before it is complete. An end sink:
            // a retirement, a fault or a give-back queues the entry before it returns.
            auto sink = [self = shared_from_this(), cookie, id](std::error_code ec) {
                self->ended(cookie, id, ec);
            };
            h = watcher_->on_end_here(d, std::move(sink));
        } catch (...) {
            unindex_locked(it);
            pending_.erase(it);
            throw;
        }
        if (!h.valid()) { // the watcher stopped: its stop listener runs (or ran) on its thread
            unindex_locked(it);
            pending_.erase(it);
            push_locked({cookie, make_error_code(errc::shut_down)});
            return;
        }
        it->handle = std::move(h);
    }

    std::size_t cancel(std::uint64_t cookie) {
        rec_list gone;
        {
            std::lock_guard lk(m_);
            auto [first, last] = by_cookie_.equal_range(cookie);
            while (first != last) {
                const rec_list::iterator r = first->second;
                first = by_cookie_.erase(first);
                gone.splice(gone.end(), pending_, r);
                push_locked({cookie, to_error_code(wait_end::aborted, std_codes())});
            }
        }
        // Dropped outside the lock: a drop waits for a callback that is running, and that
        // callback may be waiting for the lock.
        return gone.size();
    }

    std::size_t drain(std::vector<entry>& out, std::size_t max) {
        std::lock_guard lk(m_);
        const std::size_t n = std::min(max, ready_.size());
        if (n == 0) return 0;
        const auto end = ready_.begin() + static_cast<std::ptrdiff_t>(n);
        out.insert(out.end(), std::make_move_iterator(ready_.begin()),
                   std::make_move_iterator(end));
        ready_.erase(ready_.begin(), end);
        if (ready_.empty() && !shut_) unsignal_locked();
        return n;
    }

    std::size_t pending() const {
        std::lock_guard lk(m_);
        return pending_.size();
    }

    std::size_t ready() const {
        std::lock_guard lk(m_);
        return ready_.size();
    }

    std::error_code error() const {
        std::lock_guard lk(m_);
        if (fd_ < 0) return std::make_error_code(std::errc::bad_file_descriptor);
        if (shut_) return make_error_code(errc::shut_down);
        return {};
    }

    void close() noexcept {
        rec_list gone;
        watch_handle stop;
        {
            std::lock_guard lk(m_);
            gone.splice(gone.end(), pending_);
            by_cookie_.clear();
            ready_.clear();
            stop = std::move(stop_);
            if (fd_ >= 0) {
                ::close(fd_);
                fd_ = -1;
            }
        }
        // `gone` and `stop` are dropped here, outside the lock.
    }

private:
    // The wait ended: reached, or errc::shut_down (on the watcher thread); its line or slot
    // retired, or its slot faulted (on the thread that did it, before that call returns).
    void ended(std::uint64_t cookie, std::uint64_t id, std::error_code ec) noexcept {
        rec_list gone; // dropping our own registration from its callback returns at once
        std::lock_guard lk(m_);
        auto [first, last] = by_cookie_.equal_range(cookie);
        for (; first != last; ++first) {
            if (first->second->id != id) continue;
            const rec_list::iterator r = first->second;
            by_cookie_.erase(first);
            gone.splice(gone.end(), pending_, r);
            push_locked({cookie, ec});
            break;
        }
        // Not found: cancelled, retired or closed first; that path queued what was due.
    }

    // The watcher thread, as it stops (after every on_end registration was ended).
    void stopped() noexcept {
        watch_handle stop;
        std::lock_guard lk(m_);
        stop = std::move(stop_); // our registration, from its own callback: returns at once
        if (fd_ >= 0) shut_locked();
    }

    void shut_locked() noexcept {
        if (shut_) return;
        if (ready_.empty()) signal_locked();
        shut_ = true; // the fd stays readable from now on
    }

    void unindex_locked(rec_list::iterator r) noexcept {
        auto [first, last] = by_cookie_.equal_range(r->cookie);
        for (; first != last; ++first) {
            if (first->second == r) {
                by_cookie_.erase(first);
                return;
            }
        }
    }

    // Queues `e` (room was reserved by watch()); the fd becomes readable on the first entry.
    void push_locked(entry e) noexcept {
        if (fd_ < 0) return;
        if (ready_.empty() && !shut_) signal_locked();
        ready_.push_back(std::move(e));
    }

    void signal_locked() noexcept {
        // Adds 1 to the counter: never blocks or fails (the counter stays far below its limit).
        const std::uint64_t one = 1;
        while (::write(fd_, &one, sizeof one) < 0 && errno == EINTR) {
        }
    }

    void unsignal_locked() noexcept {
        std::uint64_t value = 0;
        while (::read(fd_, &value, sizeof value) < 0 && errno == EINTR) {
        }
    }

    std_watcher* watcher_; // used by watch() only before shut_
    mutable ranked_mutex m_{lock_rank::fd_notifier};
    int fd_;
    rec_list pending_;
    std::unordered_multimap<std::uint64_t, rec_list::iterator> by_cookie_;
    std::vector<entry> ready_; // capacity >= ready_.size() + pending_.size()
    watch_handle stop_;
    std::uint64_t next_id_ = 0;
    bool shut_ = false;
};

} // namespace detail

GPU_ASYNC_DECL fd_notifier::fd_notifier(std_watcher& watcher) {
    const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
    try {
        core_ = std::make_shared<detail::fd_notifier_core>(watcher, fd);
    } catch (...) {
        ::close(fd);
        throw;
    }
    try {
        core_->start();
    } catch (...) {
        core_->close();
        throw;
    }
}

GPU_ASYNC_DECL fd_notifier& fd_notifier::operator=(fd_notifier&& o) noexcept {
    if (this != &o) {
        close();
        core_ = std::move(o.core_);
    }
    return *this;
}

GPU_ASYNC_DECL int fd_notifier::fd() const noexcept {
    return core_ ? core_->fd() : -1;
}

GPU_ASYNC_DECL void fd_notifier::watch(const memory_descriptor& d, std::uint64_t cookie) {
    if (!core_)
        throw std::system_error(std::make_error_code(std::errc::bad_file_descriptor),
                                "fd_notifier::watch on a closed notifier");
    core_->watch(d, cookie);
}

GPU_ASYNC_DECL std::size_t fd_notifier::cancel(std::uint64_t cookie) {
    return core_ ? core_->cancel(cookie) : 0;
}

GPU_ASYNC_DECL std::size_t fd_notifier::drain(std::vector<entry>& out, std::size_t max) {
    return core_ ? core_->drain(out, max) : 0;
}

GPU_ASYNC_DECL std::size_t fd_notifier::pending() const {
    return core_ ? core_->pending() : 0;
}

GPU_ASYNC_DECL std::size_t fd_notifier::ready() const {
    return core_ ? core_->ready() : 0;
}

GPU_ASYNC_DECL std::error_code fd_notifier::error() const {
    return core_ ? core_->error() : std::make_error_code(std::errc::bad_file_descriptor);
}

GPU_ASYNC_DECL void fd_notifier::close() noexcept {
    if (core_) core_->close(); // the core stays (closed), so other members stay safe meanwhile
}

} // namespace gpu_async

#endif // GPU_ASYNC_HAS_WAIT_FD

#endif // GPU_ASYNC_IMPL_WAIT_FD_IPP
