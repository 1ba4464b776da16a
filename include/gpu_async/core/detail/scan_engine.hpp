// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The scan engine: the one owner of a host's pending descriptor waits.
///
/// Every host that watches completion lines keeps its waits in one: the Asio reactor service,
/// the `std_watcher` (and the fd notifier on it), the FILL executor's reactor. The engine takes
/// registrations in, in registration order; it scans the lines; it keeps the hand-out order; it
/// ends waits for a cancellation, a line's retirement, a slot's fault and a deadline; and it
/// hands every wait that leaves it to its host on a list (`engine_list`), each marked with why it
/// ended (`wait_end`). What the host does with them is the host's: post them to an executor, run
/// callbacks, mark an fd ready, resume coroutines.
///
/// Sans-I/O: no locks, no threads, no clock (the host passes `now`), no OS call. The host
/// serializes every call (its locked shell) and decides when to scan and how long to wait
/// between scans (<gpu_async/core/park_policy.hpp>).
///
/// What holds, for any history of stores (the wrapping rule of watch_table):
/// - Exactly once: a wait leaves the engine once, on one list, by one of take-in, scan, remove,
///   retire_line, retire_slot, fault_slot and clear.
/// - Order: what leaves in one take-in or scan leaves by line and slot; per slot the reached
///   first, in ascending target order, one target's waits in the order they were taken in.
/// - A wait's status (its line retired since its descriptor was made: `stale`; its slot's stream
///   faulted: `faulted`) is asked of the host's status function when it is taken in, before its
///   line is read.
/// - remove, retire_line, retire_slot, fault_slot and clear allocate nothing.
///
/// Registrations. A host with registrations from other threads queues them in an
/// `engine_batch` of its own (under its own lock) and hands a batch in (`take_in`); the engine
/// takes it in whole. A scan is three steps (begin_scan, take_in_late, end_scan) so that the
/// host can hand in, between them, what came in meanwhile: a wait registered before a store
/// that the scan saw then leaves with that scan, not after the slot's later targets.
///
/// The engine never calls its host: every call returns what ended on the list it is given. A
/// host that ends some waits together (the Asio service's port, for `cancel()` of a whole port)
/// puts them in an `engine_group`, which the engine keeps while they are in its table.
#ifndef GPU_ASYNC_CORE_DETAIL_SCAN_ENGINE_HPP
#define GPU_ASYNC_CORE_DETAIL_SCAN_ENGINE_HPP

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/time.hpp>
#include <gpu_async/core/wait_end.hpp>
#include <gpu_async/core/watch_table.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace gpu_async {

namespace detail {

class scan_engine;
class engine_group;

/// The engine's part of a wait. A host's record of a wait derives from it; the engine links it
/// into its table in place (watch_node) from take-in until the wait leaves on a list, so the
/// record must stay put until then.
class engine_wait : public watch_node {
public:
    explicit engine_wait(const memory_descriptor& d) noexcept
        : descriptor_(d) {}
    engine_wait(const engine_wait&) = delete;
    engine_wait& operator=(const engine_wait&) = delete;

    const memory_descriptor& descriptor() const noexcept { return descriptor_; }
    /// Why it left (valid once it is on a list the engine filled).
    wait_end end() const noexcept { return end_; }
    /// Whether it is in the engine's table (between a take-in that kept it and its leaving).
    bool registered() const noexcept { return registered_; }

    /// Set by the host before it is taken in: a park bound while it is pending (zero: none of
    /// its own).
    dur_ns park_bound;

    /// Set by the host before it is taken in: a deadline (on the host's clock) after which it
    /// leaves `expired` (none by default). Read while it is not registered; it stays set after
    /// the wait leaves the table (a host may take it in again).
    void deadline(std::optional<mono_ns> d) noexcept {
        has_deadline_ = d.has_value();
        keep_deadline(d ? d->ns : 0);
    }
    std::optional<mono_ns> deadline() const noexcept {
        return has_deadline_ ? std::optional<mono_ns>(mono_ns{kept_deadline()}) : std::nullopt;
    }

    /// The link of an engine_list and of an engine_batch's overflow stack: the host's to use
    /// while the wait is not in the engine (in it, the engine links its group through it).
    engine_wait* next = nullptr;

    /// Set by the host before it is taken in: the group it is kept in while it is in the table
    /// (none: no group). The group must outlive the wait's time in the table.
    engine_group* group = nullptr;

    /// The host judged the descriptor live (its status function) after reading this epoch (the
    /// engine's epoch function); while the epoch has not moved, the take-in that registers it
    /// does not judge it again. 0 (the default): not judged. Meaningful until that take-in
    /// only: it shares its word with the take-in's number, and a take-in of a wait already
    /// registered with its host (judgement::while_pending) judges it whatever this says.
    std::uint64_t judged_at() const noexcept { return judged_at_; }
    void judged_at(std::uint64_t epoch) noexcept { judged_at_ = epoch; }

protected:
    ~engine_wait() = default;

private:
    friend class scan_engine;
    memory_descriptor descriptor_;
    // One word for two values that are never needed at once: the epoch of the host's
    // judgement is read by the take-in, which then writes its own number there.
    union {
        std::uint64_t judged_at_ = 0; // until its take-in (judged_at())
        std::uint64_t taken_in_;      // from its take-in: the take-in that took it (numbered)
    };
    engine_wait* group_prev_ = nullptr; // in its group (while in the table; next the other way)

    // (The small fields together: they share one word.)
    bool has_deadline_ = false; // see deadline()
    wait_end end_ = wait_end::reached;
    bool registered_ = false;
    bool done_at_take_in_ = false; // its word had reached the target when it was taken in
};

/// Waits that a host ends together (a port's, at its cancel() and destruction, one by one from
/// front()): a wait taken in with its `group` set is in it from the take-in that keeps it until it
/// leaves the table. Not copyable: the waits point to it.
class engine_group {
public:
    engine_group() = default;
    engine_group(const engine_group&) = delete;
    engine_group& operator=(const engine_group&) = delete;

    /// How many of its waits are in the table.
    std::size_t size() const noexcept { return count_; }
    bool empty() const noexcept { return head_ == nullptr; }
    /// Its newest wait in the table, or nullptr (a host that removes them one by one, to finish
    /// each while it is at hand).
    engine_wait* front() const noexcept { return head_; }

private:
    friend class scan_engine;
    engine_wait* head_ = nullptr;
    std::size_t count_ = 0;
};

/// A FIFO of waits linked through engine_wait::next: what leaves the engine, in hand-out order.
struct engine_list {
    engine_wait* head = nullptr;
    engine_wait* tail = nullptr;
    std::size_t count = 0;

    bool empty() const noexcept { return head == nullptr; }
    void push(engine_wait* w) noexcept {
        w->next = nullptr;
        if (tail != nullptr)
            tail->next = w;
        else
            head = w;
        tail = w;
        ++count;
    }
    engine_wait* pop() noexcept {
        engine_wait* w = head;
        if (w == nullptr) return nullptr;
        head = w->next;
        if (head == nullptr) tail = nullptr;
        --count;
        w->next = nullptr;
        return w;
    }
    /// Takes `w` off the list if it is on it (a walk: for a host's cancellation of a wait that
    /// left the engine and waits to be delivered). Returns whether it was.
    bool erase(engine_wait* w) noexcept {
        engine_wait* prev = nullptr;
        for (engine_wait* e = head; e != nullptr; prev = e, e = e->next) {
            if (e != w) continue;
            (prev != nullptr ? prev->next : head) = e->next;
            if (tail == e) tail = prev;
            --count;
            e->next = nullptr;
            return true;
        }
        return false;
    }
};

/// Registrations waiting to be taken in, in registration order: an array while it has room
/// (adding one never allocates), then a stack linked through engine_wait::next (newest first).
struct engine_batch {
    std::vector<engine_wait*> waits;
    engine_wait* overflow = nullptr;

    bool empty() const noexcept { return waits.empty() && overflow == nullptr; }
    /// Adds `w` without allocating: into the array while it has room, else onto the stack.
    void push(engine_wait* w) noexcept {
        if (waits.size() < waits.capacity()) {
            waits.push_back(w);
        } else {
            w->next = overflow;
            overflow = w;
        }
    }
    /// Calls f(w) for each registration in it (registration order not kept).
    template <class F>
    void for_each(F&& f) const {
        for (const engine_wait* w : waits)
            f(w);
        for (const engine_wait* w = overflow; w != nullptr; w = w->next)
            f(w);
    }
};

/// The scan engine. See the header comment. Not thread-safe: its host serializes every call.
class scan_engine {
public:
    /// How the host judges a descriptor before its line is read (descriptor_status, from the
    /// hosts' layer); none: every descriptor is live.
    using status_fn = line_status (*)(const memory_descriptor&) noexcept;
    /// A counter that moves whenever a status may have changed (line_life_epoch, from the hosts'
    /// layer); none with a status function: every take-in judges every wait.
    using epoch_fn = std::uint64_t (*)() noexcept;

    /// Room for this many registrations between two take-ins at first; the batch grows to twice
    /// the most one take-in took.
    static constexpr std::size_t initial_batch = 64;

    explicit scan_engine(status_fn status = nullptr, epoch_fn epoch = nullptr)
        : status_(status)
        , epoch_(epoch) {}
    /// An engine judging with `life` (the host's line life, passed in).
    explicit scan_engine(line_life_functions life)
        : scan_engine(life.status, life.epoch) {}
    /// Judges with `life` from now on (a host that learns its line life after it was made:
    /// the FILL reactor, from its idle). Waits already registered are judged again at the next
    /// take-in or judge_pending.
    void use_life(line_life_functions life) noexcept {
        if (life.status == status_ && life.epoch == epoch_) return;
        status_ = life.status;
        epoch_ = life.epoch;
        judged_pending_at_ = 0;
    }
    scan_engine(const scan_engine&) = delete;
    scan_engine& operator=(const scan_engine&) = delete;

    /// A batch with the engine's room. A host queueing registrations under its own lock keeps
    /// two: one it fills, one it hands in (swapped at each take, so the two alternate; a take-in
    /// grows the room of the batch it took to twice what it held).
    engine_batch make_batch() const {
        engine_batch b;
        b.waits.reserve(initial_batch);
        return b;
    }

    /// Takes in `batch` (left empty): each wait is judged (status), its word read once, and it
    /// is either kept in the table (and in its group) or put on `out` ended (reached, faulted,
    /// no_memory; stale when its line or slot was retired: every retirement takes its hosts'
    /// batches in as it passes, so the wait was queued after that, and never watched; a slot
    /// being given back is read: reached, or aborted). With it leave the table's waits that a
    /// registration's read completed (the word moved far since the last scan), all in hand-out
    /// order. Returns whether the batch held any.
    bool take_in(engine_batch& batch, engine_list& out) noexcept {
        if (batch.empty()) return false;
        take_batch(batch, out);
        return true;
    }

    /// Takes in one wait at once (a host whose registrations come under its own lock). `when`:
    /// whether this is the wait's registration (a descriptor found stale then ends `stale`) or
    /// a wait already registered with its host (found stale, it ends `aborted`).
    void take_in_one(engine_wait& w, engine_list& out,
                     judgement when = judgement::at_registration) noexcept {
        begin_take();
        engine_list scanned;
        taking_ = when;
        take_one(w, scanned, out);
        taking_ = judgement::at_registration;
        end_take(scanned, out);
    }

    /// take_in() outside a scan (before a cancellation, a retirement, a fault): the table's
    /// waits of the slots where it found waits complete, that the same store reached, leave with
    /// them, ordered as a scan orders.
    void take_in_settled(engine_batch& batch, engine_list& out) noexcept;

    /// take_in_settled() by the host's retirement of `slot` of `line` (a slot_retirement whose
    /// descriptors carried `retired`), under the host's lock, before it ends the slot's waits:
    /// a registration on that slot whose descriptor carries `retired` was pending when the slot
    /// was retired (its status is stale now only because of this retirement), so its word is
    /// read rather than its status believed: the slot's owner retires before a next stream
    /// stores, and the host's lock keeps any later retirement (and so any next stream) out
    /// until the host is done. What the stream stored before it went completes; the rest is
    /// then the slot's to end.
    void take_in_retiring(engine_batch& batch, engine_list& out, const completion_line& line,
                          slot_id slot, std::uint64_t retired) noexcept {
        retiring_line_ = &line;
        retiring_slot_ = slot.index();
        retiring_generation_ = retired;
        take_in_settled(batch, out);
        retiring_line_ = nullptr;
    }

    /// The line-life epoch now (the engine's epoch function); 0 when there
    /// is none. A host with no lock that retirements take (the FILL executor's reactor) reads it
    /// before and after reading lines: when it moved, what the reads found counts only after the
    /// waits are judged again (status_of).
    std::uint64_t life_epoch() const noexcept {
        const epoch_fn f = life().epoch;
        return f != nullptr ? f() : 0;
    }

    /// One scan, for a host whose registrations come under its own lock (none can come in
    /// during the scan): begin_scan() then end_scan().
    void scan(mono_ns now, engine_list& out) noexcept {
        begin_scan(out);
        end_scan(now, out);
    }

    /// One scan in steps, for a host whose registrations come from other threads meanwhile:
    ///
    ///     engine.begin_scan(out);               // the waits whose word reached their target
    ///     while (engine.wants_late_batch())     // at most twice
    ///         engine.take_in_late(host's queued registrations, out);
    ///     engine.end_scan(now, out);            // the waits whose deadline passed; the order
    ///
    /// A late take-in may read a store the table's loads did not see: the table's waits of the
    /// slots it reached leave with it, and one more take-in is wanted for waits registered
    /// before that store (this narrows the window, it cannot close it). `out` holds, at
    /// begin_scan(), only what the caller's take_in() of this pass put there: end_scan() puts
    /// the whole list in hand-out order. No step throws: a wait that finds no memory for its
    /// place in the table leaves `no_memory`, and without room to order a list its runs leave as
    /// they came. Between the steps the host makes no other call to the engine.
    void begin_scan(engine_list& out) noexcept {
        pass_ = scan_pass{};
        pass_.taken = out.count;
        table_.collect(sink(out));
        pass_.collected = out.count - pass_.taken;
        pass_.late_wanted = 1;
    }
    /// Whether the scan under way wants the host's queued registrations (take_in_late).
    bool wants_late_batch() const noexcept { return pass_.late_wanted != 0; }
    /// Takes in `batch` (left empty) during the scan under way; see begin_scan().
    void take_in_late(engine_batch& batch, engine_list& out) noexcept;
    /// Ends the scan under way: the waits whose deadline is at or before `now` leave, and `out`
    /// is put in hand-out order.
    void end_scan(mono_ns now, engine_list& out) noexcept {
        table_.collect_expired(now, sink(out));
        // Up to four runs, each in hand-out order: one slot may have waits in several.
        if (int{pass_.taken != 0} + int{pass_.collected != 0} + int{pass_.late != 0} +
                int{pass_.again != 0} >=
            2)
            order(out);
        pass_ = scan_pass{};
    }

    /// Removes `w` (registered) from the table; it leaves on `out` with `why`.
    void remove(engine_wait& w, engine_list& out, wait_end why = wait_end::aborted) noexcept {
        table_.erase(w);
        left(w, why);
        out.push(&w);
    }

    /// The registered wait on `d` whose host record satisfies `match`, or nullptr. No word is
    /// read and no record is touched before it is found registered.
    template <class Match>
    engine_wait* find(const memory_descriptor& d, Match&& match) {
        return table_.find(d, match);
    }

    /// Ends every wait on `line`: the line goes (its memory is still valid during the call).
    /// Per slot, those whose word reached their target (what the stream stored before it went)
    /// leave `reached`, in target order, then the rest `aborted`. The engine reads the line no
    /// more.
    void retire_line(const completion_line& line, engine_list& out) noexcept {
        for (std::size_t s = 0; s < line_words; ++s)
            retire_slot(line, *slot_id::at(s), out);
        table_.remove_line(line, sink(out)); // nothing is left: drops the line's record
    }

    /// Ends the waits on `slot` of `line`: those the stream stored before its fault reached
    /// leave `reached`, the rest `faulted`, in target order.
    void fault_slot(const completion_line& line, slot_id slot, engine_list& out) noexcept {
        table_.collect(line, slot, sink(out));
        table_.remove_slot(line, slot, sink(out));
    }

    /// Ends the waits on `slot` of `line`: its stream went; the line stays. Those the stream
    /// stored before it went leave `reached`, the rest `aborted`, in target order.
    void retire_slot(const completion_line& line, slot_id slot, engine_list& out) noexcept {
        table_.collect(line, slot, sink(out));
        table_.remove_slot(line, slot, sink(out), wait_end::aborted);
    }

    /// Ends every wait (`aborted`).
    void clear(engine_list& out) noexcept { table_.clear(sink(out)); }

    /// For a host that no retirement or fault reaches (the FILL executor's reactor, on its
    /// caller's thread with no lock to take): once the line-life epoch has moved since its last
    /// look, judges every registered wait again and ends those the status ends: a retired line's
    /// `aborted` (as a retirement would), a faulted slot's whose word has not reached the target
    /// `faulted`. O(size()) when the epoch moved, one call otherwise. Allocates the list of the
    /// waits it ends; without memory it looks again at the next call.
    void judge_pending(engine_list& out) noexcept;

    /// The status of `d` by the engine's status function: live when
    /// there is none. Reads no line.
    line_status status_of(const memory_descriptor& d) const noexcept {
        const status_fn f = life().status;
        return f != nullptr ? f(d) : line_status::live;
    }

    /// A checked read of `d`'s word by the engine's status function:
    /// judged, read, judged again (read_checked).
    line_read read_checked(const memory_descriptor& d) const noexcept {
        return gpu_async::read_checked(d, life().status);
    }

    /// How `w` ends before it is registered, by one checked read of its word (read_checked;
    /// the ending by ending_of, judged at registration): reached when complete while its line's
    /// life stood still; stale for a retired line's descriptor (its line is not read) and when
    /// a retirement overtook the read; aborted when its slot was given back before storing the
    /// target; faulted for a faulted slot whose word has not reached the target; none when it
    /// may wait. Records the epoch it was judged at (judged_at(), read first), so a take-in
    /// judges it again only if a line's life moved since. Reads nothing of the engine but its
    /// line life, so a host may call it without its lock, from any thread, while it does not
    /// change that life (use_life).
    std::optional<wait_end> end_before_registration(engine_wait& w) const noexcept {
        w.judged_at(life_epoch());
        return ending_of(read_checked(w.descriptor()), judgement::at_registration);
    }

    /// `base`, shortened to the tightest bound of a registered wait and to the earliest deadline.
    dur_ns bound(mono_ns now, dur_ns base) const noexcept {
        if (!bounds_.empty()) base = min(base, dur_ns{bounds_.begin()->first});
        if (const std::optional<mono_ns> d = table_.earliest_deadline())
            base = min(base, d->since(now));
        return base;
    }
    std::optional<mono_ns> earliest_deadline() const noexcept { return table_.earliest_deadline(); }

    /// Calls f(const engine_wait&) for every registered wait, in no order, reading no word.
    template <class F>
    void for_each(F&& f) const {
        table_.for_each([&](const engine_wait* w) { f(*w); });
    }
    /// True when a scan of `line` now would hand out a wait (a park's predicate).
    bool any_reached(const completion_line& line) const { return table_.any_reached(line); }

    std::size_t size() const noexcept { return table_.size(); }
    bool empty() const noexcept { return table_.empty(); }
    std::size_t lines() const noexcept { return table_.lines(); }

private:
    using table_type = watch_table<engine_wait>;

    struct leave_sink {
        scan_engine* self;
        engine_list* out;
        void operator()(engine_wait* w, wait_end why) const noexcept {
            self->left(*w, why);
            out->push(w);
        }
    };
    leave_sink sink(engine_list& out) noexcept { return leave_sink{this, &out}; }

    // The wait has left the table: drop the engine's bookkeeping of it.
    void left(engine_wait& w, wait_end why) noexcept;

    /// A wait to hand out in order, with its sort key copied out (a sort then reads no record:
    /// with thousands of waits those reads are cache misses).
    struct key {
        engine_wait* w;
        const completion_line* line;
        // The slot's word less the target (0 for an error); until measure(), the target.
        std::uint64_t below;
        // When it was taken in (times 2), plus 1 when its word had reached the target then.
        std::uint64_t started;
        std::uint8_t slot;
        bool failed; // ends with an error (not reached)

        static key taken(engine_wait* w) noexcept {
            const memory_descriptor& d = w->descriptor();
            return {w,
                    &d.line(),
                    d.target(),
                    w->taken_in_ * 2 + (w->done_at_take_in_ ? 1 : 0),
                    static_cast<std::uint8_t>(d.slot().index()),
                    w->end_ != wait_end::reached};
        }
        void measure() noexcept {
            below = failed ? 0 : line->words[slot].load(std::memory_order_acquire) - below;
        }
        static key of(engine_wait* w) noexcept {
            key k = taken(w);
            k.measure();
            return k;
        }
        /// By line and slot, the reached first in ascending target order (descending `below`),
        /// one target's waits in the order they were taken in (an earlier take-in first; in one,
        /// those it left pending before those it found complete).
        static bool before(const key& a, const key& b) noexcept {
            if (a.line != b.line) return std::less<>()(a.line, b.line);
            if (a.slot != b.slot) return a.slot < b.slot;
            if (a.failed != b.failed) return !a.failed;
            if (a.below != b.below) return a.below > b.below;
            return a.started < b.started;
        }
    };

    void sort_keys() noexcept {
        // stable_sort may allocate a buffer; without one it still sorts (in place, more slowly).
        if (!std::is_sorted(keys_.begin(), keys_.end(), key::before))
            std::stable_sort(keys_.begin(), keys_.end(), key::before);
    }

    /// Puts `list` in hand-out order (when it holds several runs).
    void order(engine_list& list) noexcept;

    /// Collects onto `out` the slots of the `n` waits of `out` after `before` (none: its head).
    void recollect(engine_list& out, engine_wait* before, std::size_t n) noexcept;

    void begin_take() noexcept;

    /// The status and epoch functions in force.
    line_life_functions life() const noexcept { return {status_, epoch_}; }

    void take_one(engine_wait& w, engine_list& scanned, engine_list& out) noexcept;

    // A registration on a slot whose give-back is still on its way to the hosts: its word holds
    // what the given-back stream stored, so a checked read decides now (the retirement's own
    // take-in, or a later scan, would find it stale and could no longer read). A retirement
    // that finished across the read makes the read count for nothing: judged at registration,
    // the wait never began (stale), as the status alone would have said a moment later.
    void take_given_back(engine_wait& w, engine_list& out) noexcept;

    // A wait that ends as it is taken in: ordered with the take-in's other endings (by line and
    // slot, the reached first in target order), so the outcome does not depend on whether the
    // host had taken the slot's other waits in before.
    void end_at_take_in(engine_wait& w, wait_end why, engine_list& out) noexcept;

    // A stale registration on the slot whose retirement is taking it in, of the generation
    // that retirement ended: pending when retired, so read, not judged (take_in_retiring).
    bool retired_here(const memory_descriptor& d, line_status st) const noexcept {
        return st == line_status::stale && retiring_line_ == &d.line() &&
               retiring_slot_ == d.slot().index() && retiring_generation_ == d.generation();
    }

    void left_unregistered(engine_wait& w, wait_end why) noexcept {
        w.registered_ = false;
        w.end_ = why;
    }

    /// The waits complete when taken in leave in hand-out order; with them, the table's waits
    /// an insert completed (registered earlier, they may have lower targets of the same slot:
    /// the two runs leave as one).
    void end_take(engine_list& scanned, engine_list& out) noexcept;

    void take_batch(engine_batch& batch, engine_list& out) noexcept;

    static void prefetch(const engine_wait* w) noexcept {
#if defined(__GNUC__) || defined(__clang__)
        __builtin_prefetch(w, 1);
        __builtin_prefetch(reinterpret_cast<const char*>(w) + 64, 1);
#else
        (void)w;
#endif
    }

    status_fn status_;
    epoch_fn epoch_;
    status_fn status_now_ = nullptr;      // the status function of the take-in under way
    std::uint64_t epoch_now_ = 0;         // the epoch read at the take-in under way (0: none)
    std::uint64_t judged_pending_at_ = 0; // the epoch judge_pending() last looked at
    // Whether the take-in under way judges its waits as registrations: a batch's are (judged
    // live by their host as they registered, they are not watched yet: every retirement takes
    // its hosts' batches in before it ends their waits, so one found stale here was queued
    // after its retirement had passed this host); a FILL reactor's early waits are not.
    judgement taking_ = judgement::at_registration;
    // The slot whose retirement is taking registrations in (take_in_retiring), if any.
    const completion_line* retiring_line_ = nullptr;
    std::size_t retiring_slot_ = 0;
    std::uint64_t retiring_generation_ = 0;
    std::vector<std::pair<engine_wait*, line_status>> ending_; // judge_pending()'s scratch
    table_type table_;
    std::map<std::uint64_t, std::size_t> bounds_; // registered waits' own bounds, counted
    std::vector<key> keys_;                       // the hand-out order's scratch
    std::uint64_t take_ins_ = 0;
    // The scan under way (begin_scan to end_scan): the runs `out` holds, each in hand-out
    // order (what the caller's take-in handed out, the table's loads, the first late take-in
    // and what it completed, the second), and the late take-ins still wanted.
    struct scan_pass {
        std::size_t taken = 0;
        std::size_t collected = 0;
        std::size_t late = 0;
        std::size_t again = 0;
        int late_wanted = 0;
    } pass_;
};

} // namespace detail

} // namespace gpu_async

#include <gpu_async/core/impl/scan_engine.ipp>

#endif // GPU_ASYNC_CORE_DETAIL_SCAN_ENGINE_HPP
