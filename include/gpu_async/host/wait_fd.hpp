// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief A GPU wait as a file descriptor, for programs that wait on
/// descriptors (a plain epoll loop, libuv's uv_poll, Python's asyncio add_reader, their own
/// io_uring) and have no io_context.
///
///     std_watcher watcher;                      // the reactor: one thread for every wait
///     fd_notifier n(watcher);                   // one eventfd for many waits
///     n.watch(stream.descriptor_for(seq), 42);  // cookie 42
///     // ... epoll_wait() says n.fd() is readable ...
///     for (const fd_notifier::entry& e : n.drain())
///         e.cookie, e.error;                    // 42, empty: the work completed
///
///     wait_fd w(watcher, descriptor);           // one fd for one wait
///     // ... w.fd() is readable ...
///     std::optional<std::error_code> r = w.result();
///
/// Design. `fd_notifier` is one eventfd (EFD_NONBLOCK | EFD_CLOEXEC) that multiplexes any number
/// of waits through a ready list, as an io_uring completion queue does: the fd says "something
/// ended", `drain()` says what, as (cookie, error code) entries in the order the waits ended (an
/// entry the watcher thread is queuing while another thread retires the line may come after the
/// retirement's).
/// One fd rather than one per wait, because a program with thousands of waits in flight would
/// otherwise make, register (epoll_ctl) and close thousands of descriptors against a limit of
/// typically 1024, and be woken once per wait: the notifier writes the eventfd only when its ready
/// list goes from empty to non-empty, so a burst of completions costs one wakeup. An eventfd
/// rather than a pipe: one descriptor, a counter that never fills, and every loop can watch it.
/// `wait_fd` is one wait with an fd of its own (built on a notifier), for code that maps one fd to
/// one future (asyncio) and has few waits.
///
/// The feeder is `std_watcher` (<gpu_async/host/std_watcher.hpp>): its one thread is the reactor
/// and watches every line of every notifier; a wait costs a registration in its watch table (the
/// registry every host shares: the wrapping rule for any history of stores, targets near 2^64
/// included), never a thread. The notifier keeps no line of its own: it is plainly the sink of
/// its waits, which live in the watcher's engine. The watcher ends a wait by running the
/// notifier's callback with no lock held, which appends the entry and, on the empty-to-non-empty
/// edge, writes the eventfd: on its thread for a completion and its stop; on the thread that
/// retires a line or slot or faults a slot, before that call returns, for every wait of that line
/// or slot the watcher thread is not queuing at that moment (so the entry is queued by the time
/// the line's owner goes on; one found complete before keeps its success). The program's loop
/// never blocks on the notifier: `drain()` is non-blocking.
///
/// How a wait ends (the entry's error code):
/// - empty: the descriptor completed (its word reached the target, wrapping order);
/// - std::errc::operation_canceled: `cancel(cookie)`, or the line was retired
///   (gpu_async::retire_line, which a sim_device or mapped_line calls before their line goes: the
///   watcher is a line watcher, so it stops reading the line before it is freed or reused), or
///   the slot was before its word reached the target (gpu_async::retire_slot: its stream
///   went);
/// - errc::stale_descriptor: the descriptor's line or slot was retired before the wait began;
/// - errc::device_fault: the slot's stream faulted before storing the target
///   (gpu_async::fault_slot);
/// - errc::shut_down: the watcher stopped first (`std_watcher::shutdown()` or its destructor).
///   The fd then stays readable for good, like a socket at end of file, and `error()` says
///   errc::shut_down; a later `watch()` ends at once with errc::shut_down, without touching the
///   watcher, so the notifier may outlive it.
/// Each wait ends exactly once: one entry, whichever of completion, cancel, retirement or stop
/// comes first (they race safely from any thread). `close()` (and the destructor) ends every wait
/// with no entry and closes the fd: close it through the notifier, never by calling
/// `close()` on `fd()` yourself.
///
/// Safety. The notifier's state is shared with its callbacks, so a callback already running on
/// the watcher thread while the notifier closes touches only live memory, and it writes the fd
/// under the notifier's lock only while the fd is open (never a reused descriptor number).
/// `close()` drops every registration before it returns (waiting for one whose callback is
/// running on another thread). Ending a wait never allocates (the ready list keeps room for every
/// pending wait), so cancel, close, retirement and stop cannot fail.
///
/// Threads: every member of fd_notifier may be called from any thread, concurrently; not the
/// destructor or a move while another thread uses the object. `wait_fd::result()` from one thread.
/// The watcher must be alive for `fd_notifier`'s construction and for every `watch()` made before
/// it stopped: destroy it when no thread is calling into a notifier it feeds (`shutdown()` first,
/// where threads may still be), or after the notifiers are closed.
///
/// Linux only (eventfd): GPU_ASYNC_HAS_WAIT_FD is 1 there and the header is empty elsewhere.
/// Host layer: std threads and the eventfd; no Boost, no Asio.
#ifndef GPU_ASYNC_HOST_WAIT_FD_HPP
#define GPU_ASYNC_HOST_WAIT_FD_HPP

#include <gpu_async/core/detail/config.hpp>

#if defined(__linux__)
#define GPU_ASYNC_HAS_WAIT_FD 1
#else
#define GPU_ASYNC_HAS_WAIT_FD 0
#endif

#if GPU_ASYNC_HAS_WAIT_FD

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/error.hpp>
#include <gpu_async/host/std_watcher.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

namespace gpu_async {

namespace detail {
class fd_notifier_core;
} // namespace detail

/// One eventfd that becomes readable when one of its waits ends; `drain()` gives the ended waits
/// as (cookie, error code) entries. See the header comment. Move-only; a moved-from or closed
/// notifier has no fd.
class fd_notifier {
public:
    /// One ended wait.
    struct entry {
        std::uint64_t cookie = 0; ///< the caller's, from watch()
        /// Empty: the descriptor completed; std::errc::operation_canceled: cancel() or its line
        /// (or slot) was retired; errc::stale_descriptor, errc::device_fault: its line was
        /// retired before, its stream faulted; errc::shut_down: the watcher stopped first.
        std::error_code error;
        friend bool operator==(const entry&, const entry&) = default;
    };

    /// Makes the eventfd and registers with `watcher` (which stays the feeder). Throws
    /// std::system_error when the eventfd cannot be made (errno's code). A watcher that has
    /// stopped gives a notifier shut down from the start.
    GPU_ASYNC_DECL explicit fd_notifier(std_watcher& watcher);
    fd_notifier(fd_notifier&& o) noexcept = default;
    /// Closes this notifier, then takes `o`'s.
    GPU_ASYNC_DECL fd_notifier& operator=(fd_notifier&& o) noexcept;
    fd_notifier(const fd_notifier&) = delete;
    fd_notifier& operator=(const fd_notifier&) = delete;
    /// close().
    ~fd_notifier() { close(); }

    /// The eventfd to watch for readability (EPOLLIN, POLLIN); -1 once closed.
    GPU_ASYNC_DECL int fd() const noexcept;

    /// Starts a wait for `d`; when it ends, an entry with `cookie` is queued and the fd becomes
    /// readable. A descriptor already complete ends at the watcher's next scan (never inline).
    /// After the watcher stopped, queues (cookie, errc::shut_down) at once. Cookies need not be
    /// unique. Throws std::system_error (std::errc::bad_file_descriptor) once closed, or what an
    /// allocation throws (nothing is then registered).
    GPU_ASYNC_DECL void watch(const memory_descriptor& d, std::uint64_t cookie);

    /// Ends every pending wait with `cookie`: each queues (cookie, operation_canceled). Returns
    /// how many. A wait that has ended already (its entry queued) is not touched. After it
    /// returns no callback of those waits runs.
    GPU_ASYNC_DECL std::size_t cancel(std::uint64_t cookie);

    /// Moves up to `max` queued entries, oldest first, to the end of `out`; never blocks. Once the
    /// queue is empty the fd stops being readable (unless the watcher stopped). Returns how many.
    GPU_ASYNC_DECL std::size_t drain(std::vector<entry>& out,
                                     std::size_t max = std::numeric_limits<std::size_t>::max());
    /// Every queued entry.
    std::vector<entry> drain() {
        std::vector<entry> out;
        drain(out);
        return out;
    }

    /// Waits started and not yet ended.
    GPU_ASYNC_DECL std::size_t pending() const;
    /// Entries queued and not yet drained.
    GPU_ASYNC_DECL std::size_t ready() const;
    /// errc::shut_down once the watcher stopped (the fd then stays readable);
    /// std::errc::bad_file_descriptor once closed; else empty.
    GPU_ASYNC_DECL std::error_code error() const;

    /// Ends every pending wait without an entry, drops the queued entries and closes the fd.
    /// Idempotent. After it returns no watcher callback of this notifier queues an entry or
    /// touches the fd, and the watcher holds none of its registrations.
    GPU_ASYNC_DECL void close() noexcept;

private:
    std::shared_ptr<detail::fd_notifier_core> core_;
};

/// One wait with an eventfd of its own: readable once the wait ends (completed, cancelled, line
/// retired, or the watcher stopped). Built on an fd_notifier; see the header comment.
class wait_fd {
public:
    /// Starts waiting for `d` (as fd_notifier's constructor and watch() throw).
    wait_fd(std_watcher& watcher, const memory_descriptor& d)
        : n_(watcher) {
        n_.watch(d, 0);
    }

    /// The fd to watch for readability; -1 once closed.
    int fd() const noexcept { return n_.fd(); }

    /// Empty while the wait is pending, then how it ended (as fd_notifier::entry::error: empty
    /// when the descriptor completed); never blocks. The first call that sees the end consumes
    /// the fd's readiness (not after a stop: the fd stays readable); later calls give the same.
    std::optional<std::error_code> result() {
        if (!result_) {
            std::vector<fd_notifier::entry> one;
            if (n_.drain(one, 1) == 1) result_ = one.front().error;
        }
        return result_;
    }

    /// Ends the wait with std::errc::operation_canceled if it is pending; true if it was.
    bool cancel() { return n_.cancel(0) == 1; }

    /// Ends the wait (no result) and closes the fd.
    void close() noexcept { n_.close(); }

private:
    fd_notifier n_;
    std::optional<std::error_code> result_;
};

} // namespace gpu_async

#if GPU_ASYNC_HEADER_ONLY
#include <gpu_async/host/impl/wait_fd.ipp>
#endif

#endif // GPU_ASYNC_HAS_WAIT_FD

#endif // GPU_ASYNC_HOST_WAIT_FD_HPP
