// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief A completion line in one pinned, device-mapped host page, with
/// the ownership rules of a GPU driver, over a driver table.
///
/// A backend (CUDA, HIP, or a fake in tests) fills a `line_driver`: a table of plain function
/// pointers with a context pointer. `mapped_line` owns:
///
///   - a reference on a domain (the device's primary context), taken before the page is
///     allocated and dropped only after the page is freed;
///   - one whole 4 KiB page of pinned, device-mapped host memory that holds the line and nothing
///     else (no other allocation shares the page with a device writer).
///
/// It enqueues 64-bit stores of increasing sequence numbers only from streams of its own domain
/// (a foreign stream is refused and nothing is enqueued). On destruction it settles the domain
/// (waits for every pending store), frees the page, then releases the domain; if settling fails it
/// leaks the page and the reference rather than free memory a device may still write.
///
/// A line may also carry a doorbell (`attach_doorbell`, normally the port's `shared_bell()`): every
/// completion store is then followed, in the same stream, by a store of doorbell::device_signal
/// into word doorbell::device_word of the doorbell's line, in one batch of stream memory
/// operations where the backend has one (else as two stores, in order). The doorbell's line is
/// ordinary write-back heap memory (a user-mode monitor is not armed on write-combined pages): it
/// is registered with the driver (pinned, device-mapped, portable) once per driver table and
/// doorbell, by the first line that attaches it, and unregistered when the last such line closes.
/// The registration holds its own reference on the registering device's domain and keeps the
/// doorbell alive; each line asks the device address of the doorbell in its own domain. A line
/// settles its domain before it drops its use (no store of it is pending when the last use goes);
/// a line whose settle fails leaks its use with its page, and a failed unregistration leaks the
/// registration (the doorbell stays alive and pinned) rather than free registered memory.
///
/// Health: where the table has the probe hooks (make_probe, query_probe, drop_probe), a line makes
/// a probe of its own in its domain when it is made (a stream of its own, on CUDA and HIP) and
/// registers a health query for itself (gpu_async::watch_line_health): it queries the probe with
/// the domain current, without blocking, and an answer other than done or not-ready (the sticky
/// error of a faulted context) faults every slot of the line (gpu_async::fault_slot), once. So a
/// device fault reaches the plain descriptor waits on the line within one fault backstop plus the
/// reactor's park bound, while a reactor with pending waits runs, even when the faulted stream is
/// gone. The probe is the line's: the caller's streams are never queried. Closing unregisters
/// the query before it retires the line, and destroys the probe after the settle.
///
/// Uses the core, the doorbell and the standard library only; the vendor APIs live behind the
/// table.
#ifndef GPU_ASYNC_DEVICE_MAPPED_LINE_HPP
#define GPU_ASYNC_DEVICE_MAPPED_LINE_HPP

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/detail/config.hpp>
#include <gpu_async/core/error.hpp>
#include <gpu_async/core/result.hpp>
#include <gpu_async/line/line_health.hpp>
#include <gpu_async/line/line_life.hpp>
#include <gpu_async/wait/doorbell.hpp>

#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace gpu_async {

namespace detail {

/// "0x..." for a handle, for messages.
inline std::string hex(const void* p) {
    char buf[2 + 2 * sizeof(std::uintptr_t)] = {'0', 'x'};
    const auto r =
        std::to_chars(buf + 2, buf + sizeof(buf), reinterpret_cast<std::uintptr_t>(p), 16);
    return std::string(buf, r.ptr);
}

} // namespace detail

/// What one driver hook returned: the vendor's status (0 is success) and, when the hook made a
/// call other than the one its table names (e.g. a context push before an allocation), the name
/// of the call that failed. `done`: the hook's own call succeeded and only the restore of the
/// calling thread's state after it (a context pop, a switch back to the previous device) failed,
/// named by `call`: what the call made or freed is made or freed, and the caller must account
/// for it (free the page it allocated, count as freed the page it freed).
struct driver_status {
    int status = 0;
    const char* call = nullptr;
    bool done = false;

    constexpr bool ok() const noexcept { return status == 0; }
    friend constexpr bool operator==(const driver_status&, const driver_status&) = default;
};

/// The hooks of a `line_driver`, in the order the table names their calls.
enum class driver_op : std::uint8_t {
    current_device,  ///< the device of the calling thread's current context
    retain_domain,   ///< take a reference on a device's domain (its primary context)
    release_domain,  ///< drop that reference
    alloc_page,      ///< allocate pinned, device-mapped host memory in the domain
    device_pointer,  ///< the device address of that memory
    free_page,       ///< free it
    settle,          ///< wait for every pending store in the domain
    stream_domain,   ///< the domain a stream belongs to
    write_value64,   ///< enqueue a 64-bit store on a stream
    register_host,   ///< register (pin and map for devices) host memory the driver did not allocate
    unregister_host, ///< undo that registration
    batch_write64,   ///< enqueue several 64-bit stores on a stream as one batch, in order
    make_probe,      ///< make the line's own status probe in the domain (a stream)
    query_probe,     ///< query that probe without blocking
    drop_probe,      ///< destroy it
};

inline constexpr std::size_t driver_op_count = 15;

/// One store of a batch (line_driver::batch_write64).
struct batch_store {
    std::uint64_t device_address = 0;
    std::uint64_t value = 0;
};

namespace detail {
struct doorbell_registration;
class mapped_line_health;
} // namespace detail

/// A backend's table of hooks. Every hook receives `self` first. Domains are opaque handles the
/// backend defines (a CUDA context, a tagged HIP device); the line only compares them for
/// equality. A table must outlive every line made with it.
struct line_driver {
    void* self = nullptr;

    /// Sets `*device` to the device of the current context, or to -1 when there is none.
    driver_status (*current_device)(void* self, int* device) = nullptr;
    driver_status (*retain_domain)(void* self, int device, void** domain) = nullptr;
    driver_status (*release_domain)(void* self, int device, void* domain) = nullptr;
    /// Allocates `bytes` of pinned host memory mapped into the domain's address space.
    driver_status (*alloc_page)(void* self, void* domain, std::size_t bytes, void** host) = nullptr;
    driver_status (*device_pointer)(void* self, void* domain, void* host,
                                    std::uint64_t* device_address) = nullptr;
    driver_status (*free_page)(void* self, void* domain, void* host) = nullptr;
    driver_status (*settle)(void* self, void* domain) = nullptr;
    driver_status (*stream_domain)(void* self, void* stream, void** domain) = nullptr;
    /// Enqueues, on `stream`, a store of `value` to `device_address` behind the stream's earlier
    /// work (whose writes become visible first).
    driver_status (*write_value64)(void* self, void* stream, std::uint64_t device_address,
                                   std::uint64_t value) = nullptr;
    /// Registers `bytes` of host memory at `host`, which the driver did not allocate, with the
    /// domain current: pinned, mapped for devices, visible to the backend's other domains, its
    /// caching unchanged. Optional (with unregister_host): without them a line takes no doorbell.
    driver_status (*register_host)(void* self, void* domain, void* host,
                                   std::size_t bytes) = nullptr;
    /// Unregisters what register_host registered at `host`, with the domain current.
    driver_status (*unregister_host)(void* self, void* domain, void* host) = nullptr;
    /// Enqueues on `stream`, as one batch of stream memory operations, `count` stores in array
    /// order, each behind the stream's earlier work and the batch's earlier stores (whose writes
    /// become visible first). Optional: without it a line enqueues them with write_value64, one
    /// call each.
    driver_status (*batch_write64)(void* self, void* stream, const batch_store* stores,
                                   std::size_t count) = nullptr;
    /// Makes, with the domain current, a probe of the line's own whose status query reports the
    /// domain's sticky faults (CUDA and HIP: a stream created for it, on which nothing is ever
    /// enqueued). Optional (with query_probe and drop_probe): without them a line has no health
    /// query, and hears of a fault only through a source's query.
    driver_status (*make_probe)(void* self, void* domain, void** probe) = nullptr;
    /// Queries the probe with the domain current, without blocking; may run on any thread.
    /// Returns ok when the query answered done or not-ready; the query's own failure (`call`
    /// null, `status` its answer) when it answered anything else: the domain faulted; a failure
    /// naming another call (`call` set: switching the domain in or out) when nothing is known.
    driver_status (*query_probe)(void* self, void* domain, void* probe) = nullptr;
    /// Destroys the probe, with the domain current where the backend needs it. The line forgets
    /// its probe at close whatever this returns, so it destroys the probe even when making the
    /// domain current fails (reported as that call's failure, `done` when the probe is gone).
    driver_status (*drop_probe)(void* self, void* domain, void* probe) = nullptr;
    /// The vendor's name of a status (never null; "unknown" when the vendor has none).
    const char* (*status_name)(void* self, int status) = nullptr;

    /// The vendor's name of the call behind each hook (indexed by driver_op), for messages.
    std::array<const char*, driver_op_count> call_names{};
    /// The backend's name ("CUDA", "HIP", "fake"), for messages.
    const char* backend = "driver";

    /// The name of the call behind `op`.
    const char* call_name(driver_op op) const noexcept {
        const char* n = call_names[static_cast<std::size_t>(op)];
        return n != nullptr ? n : "driver call";
    }
};

/// Options of a new line.
struct mapped_line_options {
    /// The value every word starts at, and every slot's last sequence number: the first store of
    /// a slot enqueues `initial_sequence + 1` (wrapping). Zero, as a new line is, by default.
    std::uint64_t initial_sequence = 0;
};

/// A completion line in its own pinned, device-mapped 4 KiB page, owned under the driver's rules.
///
/// Move-only. Not thread-safe: use one line from one thread at a time (as an Asio I/O object),
/// or give each thread lines of its own.
class mapped_line {
public:
    /// The bytes of the page that holds one line.
    static constexpr std::size_t page_bytes = 4096;

    /// A line on the device of the calling thread's current context. Errors: errc::no_domain when
    /// there is no current context; errc::driver_status (call, status name, status number) when a
    /// driver call fails. Whatever was taken before a failure is given back, in reverse order.
    GPU_ASYNC_DECL static result<mapped_line> create(const line_driver& driver,
                                                     mapped_line_options options = {});

    /// A line on `device` (the device's primary context). Errors as `create`.
    GPU_ASYNC_DECL static result<mapped_line> create_on(const line_driver& driver, int device,
                                                        mapped_line_options options = {});

    mapped_line(mapped_line&& other) noexcept;
    mapped_line& operator=(mapped_line&& other) noexcept;
    mapped_line(const mapped_line&) = delete;
    mapped_line& operator=(const mapped_line&) = delete;

    /// Retires the line (every reactor ends its waits on it), settles the domain, frees the page,
    /// releases the domain (see close()).
    ~mapped_line() { static_cast<void>(close_quietly()); }

    /// The line the host watches. Valid until the line is closed or destroyed.
    const completion_line& line() const noexcept { return *line_; }
    /// The line's generation (see <gpu_async/line/line_life.hpp>): stamped into its descriptors.
    std::uint64_t generation() const noexcept { return generation_; }

    /// The device the line belongs to.
    int device() const noexcept { return device_; }

    /// The domain handle the backend returned when the line retained it.
    void* domain() const noexcept { return domain_; }

    /// The device address of `slot`'s word.
    std::uint64_t device_address(slot_id slot) const noexcept {
        return device_address_ + slot.index() * sizeof(std::uint64_t);
    }

    /// The last sequence number enqueued on `slot` (the initial sequence before any store).
    std::uint64_t sequence(slot_id slot) const noexcept { return sequence_[slot.index()]; }

    /// The descriptor of the last store enqueued on `slot`.
    memory_descriptor last(slot_id slot) const noexcept {
        return memory_descriptor(*line_, slot, sequence_[slot.index()], generation_);
    }

    /// Enqueues on `stream`, behind its work, a store of the slot's next sequence number
    /// (the last one plus one, wrapping) and returns the descriptor that completes with it.
    /// With a doorbell attached, the store is followed in the same stream by the doorbell's
    /// device signal: both in one batch_write64 where the table has it, else two write_value64.
    /// Errors: errc::foreign_stream when the stream is not of the line's domain (nothing is
    /// enqueued, the sequence does not move); errc::driver_status when a call fails (nothing
    /// was enqueued, except when the doorbell's write_value64 fails after the completion's: the
    /// completion store is then enqueued, the sequence has moved and last(slot) names it);
    /// errc::backend when the line is closed, or when another stream's store on this slot has
    /// not landed yet.
    ///
    /// One stream per slot at a time: stores of two streams run in no set order, so a later
    /// number could land first and complete an earlier descriptor before its work is done (and
    /// the word would then move back). A store from a stream other than the slot's last is
    /// therefore accepted only once the word has reached the slot's last number (nothing of the
    /// other stream is pending on it); otherwise it is refused and nothing is enqueued.
    GPU_ASYNC_DECL result<memory_descriptor> store(slot_id slot, void* stream);

    /// Attaches `bell` (normally a port's shared_bell()): maps the doorbell's line for this
    /// line's domain (registering it with the driver when no other line of the same table has)
    /// and keeps the doorbell alive until the line closes. From then on every store is followed
    /// by the doorbell's device signal (see store()). Attaching the doorbell already attached
    /// does nothing. Errors: errc::backend (the line is closed, `bell` is null, or another
    /// doorbell is attached); errc::unavailable (the table cannot register host memory);
    /// errc::driver_status (retain, register, device pointer; whatever was taken is given back).
    GPU_ASYNC_DECL std::optional<coded_error> attach_doorbell(std::shared_ptr<doorbell> bell);

    /// The attached doorbell, or null.
    GPU_ASYNC_DECL std::shared_ptr<doorbell> attached_doorbell() const noexcept;

    /// The device address, in this line's domain, of the attached doorbell's device word (0
    /// without a doorbell).
    std::uint64_t doorbell_address() const noexcept { return bell_address_; }

    /// True while the line owns its page (not closed, not moved from).
    bool is_open() const noexcept { return line_ != nullptr; }

    /// True while the line has a probe and its health query is registered (the table has the
    /// probe hooks; see the file comment).
    bool has_health_query() const noexcept { return health_ != nullptr; }

    /// True when closing found the domain could not be settled, so the page and the domain
    /// reference were leaked on purpose.
    bool leaked() const noexcept { return leaked_; }

    /// Unregisters the line's health query, retires the line (gpu_async::retire_line: every
    /// reactor ends its waits on it, with success where the word reached the target, else with
    /// operation_aborted, and stops reading it), settles the
    /// domain, destroys the line's probe (a failure to is reported, the probe forgotten), drops
    /// the line's use of its
    /// doorbell (the last use unregisters the doorbell's line and releases the registration's
    /// domain reference), frees the page, then releases the domain. When settling fails, leaks
    /// the page, the reference and the doorbell use (never frees or unregisters under a pending
    /// store); when unregistering fails, leaks the registration (the doorbell stays alive);
    /// when freeing fails, leaks the reference. Returns the first failure, or nothing. Closing a
    /// closed line does nothing.
    GPU_ASYNC_DECL std::optional<coded_error> close();

private:
    struct close_failure {
        driver_op op;
        driver_status status;
    };

    mapped_line() = default;

    // create_on()'s last steps, from a retained domain and its page at `address`: the probe,
    // the line and its health query (each failure gives back the page, then the domain).
    GPU_ASYNC_DECL static result<mapped_line> start_line(const line_driver& driver, int device,
                                                         void* domain, void* page,
                                                         std::uint64_t address,
                                                         const mapped_line_options& options);
    GPU_ASYNC_DECL std::optional<close_failure> close_quietly() noexcept;
    GPU_ASYNC_DECL result<memory_descriptor> enqueue(slot_id slot, void* stream,
                                                     std::uint64_t next);

    const line_driver* driver_ = nullptr;
    detail::doorbell_registration* bell_ = nullptr; ///< the doorbell's registration, one use
    detail::mapped_line_health* health_ = nullptr;  ///< owned: the probe and the health query
    std::uint64_t bell_address_ = 0;
    completion_line* line_ = nullptr;
    std::uint64_t generation_ = 0; ///< the line's, stamped into its descriptors
    void* page_ = nullptr;
    void* domain_ = nullptr;
    std::uint64_t device_address_ = 0;
    std::array<std::uint64_t, line_words> sequence_{};
    std::array<void*, line_words> stream_{}; ///< the stream of each slot's last store
    int device_ = -1;
    bool leaked_ = false;
};

inline mapped_line::mapped_line(mapped_line&& other) noexcept
    : driver_(other.driver_)
    , bell_(other.bell_)
    , health_(other.health_)
    , bell_address_(other.bell_address_)
    , line_(other.line_)
    , generation_(other.generation_)
    , page_(other.page_)
    , domain_(other.domain_)
    , device_address_(other.device_address_)
    , sequence_(other.sequence_)
    , stream_(other.stream_)
    , device_(other.device_)
    , leaked_(other.leaked_) {
    other.line_ = nullptr;
    other.page_ = nullptr;
    other.domain_ = nullptr;
    other.bell_ = nullptr;
    other.health_ = nullptr;
    other.bell_address_ = 0;
}

inline mapped_line& mapped_line::operator=(mapped_line&& other) noexcept {
    if (this != &other) {
        static_cast<void>(close_quietly());
        driver_ = other.driver_;
        bell_ = other.bell_;
        health_ = other.health_;
        bell_address_ = other.bell_address_;
        line_ = other.line_;
        generation_ = other.generation_;
        page_ = other.page_;
        domain_ = other.domain_;
        device_address_ = other.device_address_;
        sequence_ = other.sequence_;
        stream_ = other.stream_;
        device_ = other.device_;
        leaked_ = other.leaked_;
        other.line_ = nullptr;
        other.page_ = nullptr;
        other.domain_ = nullptr;
        other.bell_ = nullptr;
        other.health_ = nullptr;
        other.bell_address_ = 0;
    }
    return *this;
}

/// The coded error of a failed driver call: errc::driver_status with the call's name, the
/// status name and the status number.
GPU_ASYNC_DECL coded_error driver_error(const line_driver& driver, driver_op op,
                                        driver_status status);

} // namespace gpu_async

#if GPU_ASYNC_HEADER_ONLY
#include <gpu_async/device/impl/mapped_line.ipp>
#endif

#endif // GPU_ASYNC_DEVICE_MAPPED_LINE_HPP
