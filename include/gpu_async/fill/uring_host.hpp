// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The io_uring host: `uring_idle`, the idle of the `io-uring`
/// executor kind: the FILL executor whose deadline sleeps are io_uring timeouts, whose parks for
/// ringing producers are io_uring futex waits, and whose ring also carries the program's own I/O
/// (sockets), so one thread waits for all of it in one place.
///
///     auto idle = uring_idle::create();            // a ring of 8 entries, or errc::ring_setup
///     fill_executor ex;
///     ex.run(idle.value());                        // sleeps are IORING_OP_TIMEOUTs
///
/// - Sleep: one IORING_OP_TIMEOUT with a nanosecond __kernel_timespec, relative to the
///   monotonic clock; -ETIME is the normal result.
/// - Park: where a doorbell is set (every producer of the lines parked on rings it) and the
///   kernel supports IORING_OP_FUTEX_WAIT (probed with io_uring_get_probe), a park is a futex
///   wait on the doorbell's low 32 bits with shared futex flags, linked (IOSQE_IO_LINK) to an
///   IORING_OP_LINK_TIMEOUT of the bound, in the same ring. Otherwise, it parks with the word
///   wait, ending early when a completion of the program's own operations arrives.
/// - Refusal: if the ring refuses an operation (no entry, a failed submit, an error result other
///   than the normal ones), that sleep falls back to a thread sleep and that park to the word-wait
///   park, and failed_ops() counts it (exported beside the label: describe()).
/// - Own operations: `prepare(op)` gives an entry whose completion runs `op`'s callback on the
///   thread that waits on the ring (inside sleep_until or park_line, which then return early so
///   the executor can run what became ready), or in `poll()`.
/// - Setup: a ring that cannot be made (no kernel support: ENOSYS; seccomp: EPERM; the sysctl
///   kernel.io_uring_disabled: EPERM) gives errc::ring_setup with the errno text;
///   uring_capabilities() turns that into executor capabilities, so resolve() falls back to
///   gpu-reactor with the coded warning (strict: refused).
/// - Kernel calls: the idle makes, tears down and submits to its ring through a Calls object
///   (`basic_uring_idle<Calls>`; `uring_idle` uses liburing's, `liburing_calls`). Another Calls
///   type stands between the idle and the kernel, e.g. to refuse the setup with an errno, or to
///   reject entries as a kernel without the operation would.
///
/// Not thread-safe: one ring, one thread (the executor's). Host layer: liburing (link -luring,
/// CMake target gpu_async::uring).
#ifndef GPU_ASYNC_FILL_URING_HOST_HPP
#define GPU_ASYNC_FILL_URING_HOST_HPP

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/error.hpp>
#include <gpu_async/core/result.hpp>
#include <gpu_async/core/time.hpp>
#include <gpu_async/fill/executor_kind.hpp>
#include <gpu_async/fill/reactor.hpp>
#include <gpu_async/fill/std_idle.hpp>
#include <gpu_async/host/std_clock.hpp>
#include <gpu_async/line/line_life.hpp>
#include <gpu_async/wait/doorbell.hpp>
#include <gpu_async/wait/wordwait.hpp>

#include <liburing.h>

#include <cerrno>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace gpu_async {

namespace detail::uring {

// Neither liburing 2.3 nor Debian 12's kernel headers know the io_uring futex operations
// (Linux 6.7), so the ABI values are defined here. The entry of IORING_OP_FUTEX_WAIT: fd = the
// futex2 flags, addr = the futex address, addr2 = the expected value, addr3 = the wake mask;
// len, the op flags (futex_flags), buf_index and file_index must be zero.
inline constexpr std::uint8_t op_futex_wait = 51;
inline constexpr std::uint32_t futex2_size_u32 = 0x02;
inline constexpr std::uint32_t futex2_private = 0x80; // not used: doorbells are shared futexes
inline constexpr std::uint64_t futex_bitset_match_any = 0xffffffffu;

// user_data of the idle's own operations: (sequence << 3) | kind, kind in 1..7. A program's
// operation is a uring_op, aligned to 8 bytes, so its address has the low 3 bits clear: the
// two never collide. The sequence tells the operation in flight from a stale one.
inline constexpr std::uint64_t kind_mask = 7;
inline constexpr std::uint64_t kind_timeout = 1;
inline constexpr std::uint64_t kind_futex = 2;
inline constexpr std::uint64_t kind_link_timeout = 3;
inline constexpr std::uint64_t kind_nop = 4;
constexpr std::uint64_t tag(std::uint64_t seq, std::uint64_t kind) noexcept {
    return (seq << 3) | kind;
}

inline std::string errno_text(int err) {
    std::string s = std::strerror(err);
    s += " (errno ";
    s += std::to_string(err);
    s += ")";
    return s;
}

} // namespace detail::uring

/// Options of a ring.
struct uring_options {
    /// Submission queue entries.
    unsigned entries = 8;
    /// Use IORING_OP_FUTEX_WAIT for parks on a doorbell where the kernel supports it.
    bool futex_park = true;
};

/// The calls through which basic_uring_idle hands its ring to the kernel: making it
/// (`queue_init`, 0 or -errno, as io_uring_queue_init), tearing it down (`queue_exit`) and
/// submitting its prepared entries (`submit`, the number submitted or -errno, as
/// io_uring_submit). Every submission of the idle, its own operations' and the program's, goes
/// through `submit`. queue_init runs on the thread that creates the idle, the others on the
/// thread that uses it.
template <class C>
concept uring_calls = std::move_constructible<C> &&
    requires(C& c, io_uring& ring, unsigned entries, unsigned flags) {
    { c.queue_init(entries, ring, flags) } -> std::same_as<int>;
    { c.queue_exit(ring) } -> std::same_as<void>;
    { c.submit(ring) } -> std::same_as<int>;
};

/// liburing's calls: the kernel's io_uring.
struct liburing_calls {
    int queue_init(unsigned entries, io_uring& ring, unsigned flags) noexcept {
        return io_uring_queue_init(entries, &ring, flags);
    }
    void queue_exit(io_uring& ring) noexcept { io_uring_queue_exit(&ring); }
    int submit(io_uring& ring) noexcept { return io_uring_submit(&ring); }
};

static_assert(uring_calls<liburing_calls>);

/// One of the program's own operations on the idle's ring: give it to uring_idle::prepare,
/// fill the entry, and `complete(op, res)` runs when its completion is reaped. Must stay put
/// until then.
struct uring_op {
    using complete_fn = void (*)(uring_op& op, int res) noexcept;
    explicit uring_op(complete_fn fn) noexcept
        : complete(fn) {}
    complete_fn complete;
};

/// The idle of the `io-uring` executor kind (satisfies reactor_idle), making its kernel calls
/// through `Calls` (see uring_calls). Move-only. Use `uring_idle`.
template <uring_calls Calls>
class basic_uring_idle {
public:
    /// Makes a ring of `opts.entries` entries through `calls`, or errc::ring_setup with the
    /// errno text.
    static result<basic_uring_idle> create(const uring_options& opts = {}, Calls calls = Calls{}) {
        auto ring = std::make_unique<io_uring>();
        const int rc = calls.queue_init(opts.entries, *ring, 0);
        if (rc < 0) return coded_error(errc::ring_setup, {setup_reason(-rc)});
        basic_uring_idle idle(std::move(ring), opts, std::move(calls));
        return idle;
    }

    /// Moves the ring (the moved-from idle has none and may only be destroyed).
    basic_uring_idle(basic_uring_idle&&) noexcept = default;
    basic_uring_idle& operator=(basic_uring_idle&&) = delete;
    basic_uring_idle(const basic_uring_idle&) = delete;
    basic_uring_idle& operator=(const basic_uring_idle&) = delete;

    /// Tears the ring down; the kernel cancels operations still in flight.
    ~basic_uring_idle() {
        if (ring_) calls_.queue_exit(*ring_);
    }

    // reactor_idle

    mono_ns now() const noexcept { return std_clock{}.now(); }

    /// The library's line life: the FILL executor's reactor judges descriptors with it.
    static line_life_functions line_life() noexcept { return library_line_life(); }

    /// Sleeps until `at` with one IORING_OP_TIMEOUT (again, if the timeout ended early), or
    /// returns early when a completion of the program's own operations was dispatched. A
    /// refused timeout sleeps the thread instead and counts a failed operation.
    ///
    /// A timeout left in flight by an early return is reused by the next sleep whose deadline
    /// is not earlier than its own; otherwise it is left to expire (its completion is ignored).
    void sleep_until(mono_ns at) {
        foreign_ = 0;
        while (foreign_ == 0) {
            const mono_ns t = now();
            if (t >= at) return;
            if (!timeout_pending_ || timeout_at_ > at) {
                const std::uint64_t left = at.since(t).count();
                timeout_ts_.tv_sec = static_cast<long long>(left / 1000000000u);
                timeout_ts_.tv_nsec = static_cast<long long>(left % 1000000000u);
                io_uring_sqe* sqe = entry();
                if (sqe == nullptr) return refused_sleep(at);
                io_uring_prep_timeout(sqe, &timeout_ts_, 0, 0);
                timeout_seq_ = ++seq_;
                io_uring_sqe_set_data64(
                    sqe, detail::uring::tag(timeout_seq_, detail::uring::kind_timeout));
                if (calls_.submit(*ring_) < 0) {
                    timeout_seq_ = 0;
                    return refused_sleep(at);
                }
                ++ring_sleeps_;
                timeout_pending_ = true;
                timeout_at_ = at;
                timeout_error_ = 0;
            }
            // Wait for the timeout, dispatching the program's completions meanwhile.
            while (timeout_pending_ && foreign_ == 0)
                if (!wait_one()) return refused_sleep(at);
            if (!timeout_pending_ && timeout_error_ != 0) {
                timeout_error_ = 0;
                return refused_sleep(at);
            }
        }
    }

    /// Parks on `line` until `done()`, a wake, `bound`, or a completion of the program's own
    /// operations; returns `done()`. With a doorbell set and kernel support: a futex wait on the
    /// doorbell linked to a timeout; otherwise the word wait. Runs the line owners' health
    /// queries first when they are due, and returns at once when a line's life moved (as
    /// std_idle).
    template <class Pred>
    bool park_line(const completion_line& line, Pred&& done, dur_ns bound) {
        foreign_ = 0;
        if (done()) return true;
        if (std_idle::query_health()) return done(); // the reactor judges its waits again
        reap_ready();
        if (foreign_ != 0) return done();
        if (bell_ != nullptr && futex_supported_) {
            const std::optional<bool> r = futex_park(done, bound);
            if (r) return *r;
            ++failed_ops_;
        }
        return ww_->park(
                   line, [&] { return done() || io_uring_cq_ready(ring_.get()) > 0; }, bound) &&
               done();
    }

    // Configuration.

    /// Declares that every producer of the lines this idle parks on rings `bell` after its
    /// store, so parks sleep on the doorbell's futex (in the ring). nullptr: park with the word
    /// wait. `bell` must outlive the idle (a futex wait may still be in flight on it).
    void set_doorbell(const doorbell* bell) noexcept { bell_ = bell; }

    // The program's own operations.

    /// A submission entry for `op` (its user_data set), or nullptr when the ring stays full
    /// after submitting what it holds. Fill the entry, then submit() (or let the next sleep or
    /// park submit it).
    io_uring_sqe* prepare(uring_op& op) noexcept {
        io_uring_sqe* sqe = entry();
        if (sqe != nullptr) io_uring_sqe_set_data(sqe, &op);
        return sqe;
    }

    /// Submits the prepared entries; the number submitted, or -errno.
    int submit() noexcept { return calls_.submit(*ring_); }

    /// Dispatches every completion already there without waiting; returns how many of the
    /// program's operations completed.
    std::size_t poll() {
        foreign_ = 0;
        reap_ready();
        return foreign_;
    }

    /// The ring itself (registered files, buffers...). Do not reap its completions directly.
    io_uring& ring() noexcept { return *ring_; }

    // What runs, and how it went.

    /// The executor label: "io-uring".
    static constexpr std::string_view label() noexcept { return "io-uring"; }
    /// Operations the ring refused (each fell back to a thread sleep or a word-wait park).
    std::uint64_t failed_ops() const noexcept { return failed_ops_; }
    /// "io-uring (failed ops: N)".
    std::string describe() const {
        return std::string(label()) + " (failed ops: " + std::to_string(failed_ops_) + ")";
    }
    /// True when the kernel supports IORING_OP_FUTEX_WAIT (and the options allow it).
    bool futex_supported() const noexcept { return futex_supported_; }
    /// Timeouts submitted to the ring.
    std::uint64_t ring_sleeps() const noexcept { return ring_sleeps_; }
    /// Futex waits submitted to the ring.
    std::uint64_t futex_parks() const noexcept { return futex_parks_; }
    /// How parks run: "io_uring futex wait" or the word wait's name.
    std::string park_path() const {
        if (bell_ != nullptr && futex_supported_) return "io_uring futex wait";
        return std::string(ww_->name());
    }

    /// The text of a setup errno, with the usual reason named.
    static std::string setup_reason(int err) {
        std::string s = detail::uring::errno_text(err);
        if (err == ENOSYS) s += ": no kernel support for io_uring";
        if (err == EPERM || err == EACCES) {
            s += ": not permitted (seccomp, or the sysctl kernel.io_uring_disabled";
            std::ifstream f("/proc/sys/kernel/io_uring_disabled");
            int v = 0;
            if (f >> v) s += " = " + std::to_string(v);
            s += ")";
        }
        return s;
    }

private:
    basic_uring_idle(std::unique_ptr<io_uring> ring, const uring_options& opts, Calls calls)
        : calls_(std::move(calls))
        , ring_(std::move(ring))
        , ww_(&word_wait::probe()) {
        if (opts.futex_park) {
            if (io_uring_probe* p = io_uring_get_probe_ring(ring_.get())) {
                futex_supported_ = p->last_op >= detail::uring::op_futex_wait &&
                                   io_uring_opcode_supported(p, detail::uring::op_futex_wait);
                io_uring_free_probe(p);
            }
        }
    }

    void refused_sleep(mono_ns at) {
        ++failed_ops_;
        std_timer{}.sleep_until(at);
    }

    // A free entry, submitting what is queued once when the ring is full.
    io_uring_sqe* entry() noexcept {
        io_uring_sqe* sqe = io_uring_get_sqe(ring_.get());
        if (sqe == nullptr) {
            calls_.submit(*ring_);
            sqe = io_uring_get_sqe(ring_.get());
        }
        return sqe;
    }

    // Handles one completion: ours update the wait state, the program's run their callback.
    void dispatch(const io_uring_cqe& cqe) {
        const std::uint64_t data = io_uring_cqe_get_data64(&cqe);
        const std::uint64_t seq = data >> 3;
        switch (data & detail::uring::kind_mask) {
        case 0:
            break; // a program operation
        case detail::uring::kind_timeout:
            if (seq != timeout_seq_) return; // stale
            // -ETIME: expired (the normal result); 0: ended by a count (none is used).
            timeout_pending_ = false;
            timeout_error_ = (cqe.res == -ETIME || cqe.res == 0) ? 0 : -cqe.res;
            return;
        case detail::uring::kind_futex:
            if (seq != futex_seq_) return;
            // 0: woken; -EAGAIN: the word had moved; -ECANCELED: the link timeout fired;
            // -EINTR: a signal. Anything else: refused.
            futex_done_ = true;
            futex_error_ =
                (cqe.res == 0 || cqe.res == -EAGAIN || cqe.res == -ECANCELED || cqe.res == -EINTR)
                    ? 0
                    : -cqe.res;
            return;
        case detail::uring::kind_link_timeout:
            // -ETIME: fired; -ECANCELED / -ENOENT / -EALREADY: the futex wait ended first.
            if (seq == futex_seq_) link_done_ = true;
            return;
        default:
            return; // a harmless no-op of ours
        }
        auto* op = reinterpret_cast<uring_op*>(static_cast<std::uintptr_t>(data));
        ++foreign_;
        op->complete(*op, cqe.res);
    }

    void reap_ready() {
        io_uring_cqe* cqe = nullptr;
        while (io_uring_peek_cqe(ring_.get(), &cqe) == 0 && cqe != nullptr) {
            const io_uring_cqe copy = *cqe;
            io_uring_cqe_seen(ring_.get(), cqe);
            dispatch(copy);
        }
    }

    // Waits for at least one completion and dispatches every ready one; false on a wait error
    // other than a signal.
    bool wait_one() {
        io_uring_cqe* cqe = nullptr;
        const int rc = io_uring_wait_cqe(ring_.get(), &cqe);
        if (rc == -EINTR) return true;
        if (rc < 0) return false;
        reap_ready();
        return true;
    }

    // One futex park in the ring (repeated until done, the bound, or a program completion).
    // Empty when the ring refused it (the caller falls back).
    template <class Pred>
    std::optional<bool> futex_park(Pred& done, dur_ns bound) {
        const mono_ns deadline = now().after(bound);
        for (;;) {
            const auto seen = static_cast<std::uint32_t>(bell_->count());
            const doorbell_sleeper guard(*bell_);
            if (done()) return true;
            const mono_ns t = now();
            if (t >= deadline) return static_cast<bool>(done());
            const std::uint64_t left = deadline.since(t).count();
            io_uring_sqe* wait = entry();
            if (wait == nullptr) return std::nullopt;
            io_uring_sqe* tmo = io_uring_get_sqe(ring_.get());
            if (tmo == nullptr) {
                // Make the lone entry harmless, then refuse.
                io_uring_prep_nop(wait);
                io_uring_sqe_set_data64(wait, detail::uring::tag(0, detail::uring::kind_nop));
                return std::nullopt;
            }
            io_uring_prep_rw(detail::uring::op_futex_wait, wait,
                             static_cast<int>(detail::uring::futex2_size_u32), bell_->futex_word(),
                             0, seen);
            wait->addr3 = detail::uring::futex_bitset_match_any;
            wait->flags |= IOSQE_IO_LINK;
            futex_seq_ = ++seq_;
            io_uring_sqe_set_data64(wait,
                                    detail::uring::tag(futex_seq_, detail::uring::kind_futex));
            __kernel_timespec ts{};
            ts.tv_sec = static_cast<long long>(left / 1000000000u);
            ts.tv_nsec = static_cast<long long>(left % 1000000000u);
            io_uring_prep_link_timeout(tmo, &ts, 0);
            io_uring_sqe_set_data64(
                tmo, detail::uring::tag(futex_seq_, detail::uring::kind_link_timeout));
            futex_done_ = link_done_ = false;
            futex_error_ = 0;
            if (calls_.submit(*ring_) < 0) return std::nullopt;
            ++futex_parks_;
            // Both completions come (the timeout's says whether it fired); a program completion
            // ends the park early.
            while (!(futex_done_ && link_done_) && foreign_ == 0)
                if (!wait_one()) return std::nullopt;
            if (futex_done_ && futex_error_ != 0) return std::nullopt;
            if (foreign_ != 0) return static_cast<bool>(done());
        }
    }

    // Registers the caller as a futex sleeper of the doorbell (doorbell::add_sleeper), so its
    // ring() issues the wake while the ring's futex wait may sleep.
    class doorbell_sleeper {
    public:
        explicit doorbell_sleeper(const doorbell& b) noexcept
            : bell_(&b) {
            bell_->add_sleeper();
        }
        ~doorbell_sleeper() { bell_->remove_sleeper(); }
        doorbell_sleeper(const doorbell_sleeper&) = delete;
        doorbell_sleeper& operator=(const doorbell_sleeper&) = delete;

    private:
        const doorbell* bell_;
    };

    [[no_unique_address]] Calls calls_;
    std::unique_ptr<io_uring> ring_;
    bool futex_supported_ = false;
    const doorbell* bell_ = nullptr;
    const word_wait* ww_;
    std::uint64_t failed_ops_ = 0;
    std::uint64_t ring_sleeps_ = 0;
    std::uint64_t futex_parks_ = 0;
    std::size_t foreign_ = 0;
    // The state of the idle's own operation in flight.
    std::uint64_t seq_ = 0;
    // The timeout in flight (timeout_pending_), its deadline and sequence; its timespec, which
    // the kernel reads at submission.
    bool timeout_pending_ = false;
    mono_ns timeout_at_;
    std::uint64_t timeout_seq_ = 0;
    int timeout_error_ = 0;
    __kernel_timespec timeout_ts_{};
    // The futex wait in flight and its linked timeout.
    std::uint64_t futex_seq_ = 0;
    bool futex_done_ = false;
    bool link_done_ = false;
    int futex_error_ = 0;
};

/// The idle of the `io-uring` executor kind over the kernel's io_uring.
using uring_idle = basic_uring_idle<liburing_calls>;

static_assert(reactor_idle<uring_idle>);

/// The executor capabilities of a host that can make rings with `opts` (through `calls`):
/// io-uring is missing, with the setup error's text, when a ring cannot be made; gpu-reactor and
/// naive are available (the std idle runs everywhere). resolve() then falls back along
/// io-uring -> gpu-reactor.
template <uring_calls Calls = liburing_calls>
executor_capabilities uring_capabilities(const uring_options& opts = {}, Calls calls = Calls{}) {
    executor_capabilities caps;
    auto probe = basic_uring_idle<Calls>::create(opts, std::move(calls));
    if (!probe.has_value()) caps.set_missing(executor_kind::io_uring, probe.error().message());
    return caps;
}

} // namespace gpu_async

#endif // GPU_ASYNC_FILL_URING_HOST_HPP
