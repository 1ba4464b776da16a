// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The FILL executor's reactor: registrations of memory
/// descriptors (each with an optional deadline) and alarms, `fire()`, and the idle decision
/// `turn()`.
///
/// The reactor never reads a clock, sleeps or parks by itself: `turn()` asks an idle (the host's
/// clock, sleep and park on a line) to do that, so every decision replays on virtual time.
///
///     reactor r(life);                           // the lines' owner's judgement, passed in
///     reactor_waiter w;
///     r.watch(descriptor, deadline, w);          // or r.add_alarm(at, w)
///     auto t = r.turn(idle, park_bound, tasks_left);
///     while (reactor_waiter* fired = r.pop_fired()) { ... fired->completed ... }
///
/// Coroutines await it directly: `co_await r.ready(descriptor, until)` gives true when the
/// descriptor completed, false when `until` passed first; `co_await r.alarm(at)` resumes at `at`.
/// Whoever drains pop_fired() (the FILL executor) resumes the waiting coroutines.
///
/// Lines the library hands out (the simulated device's, the GPU backends') are retired and
/// reused; the reactor judges their descriptors with the line life it is given: at
/// construction, or by an idle that offers one (`idle.line_life()`, as std_idle and the io_uring
/// idle do) at each turn. Without one every descriptor is live, as for lines the caller owns.
///
/// Standard library only: no threads, no blocking, no clock.
#ifndef GPU_ASYNC_FILL_REACTOR_HPP
#define GPU_ASYNC_FILL_REACTOR_HPP

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/detail/scan_engine.hpp>
#include <gpu_async/core/error.hpp>
#include <gpu_async/core/park_policy.hpp>
#include <gpu_async/core/result.hpp>
#include <gpu_async/core/time.hpp>
#include <gpu_async/core/wait_end.hpp>
#include <gpu_async/core/watch_table.hpp>

#include <algorithm>
#include <concepts>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <iterator>
#include <map>
#include <new>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpu_async {

class reactor;

/// The predicate a park on a line re-checks: true when any descriptor registered on that line
/// has completed. Cheap to copy; valid while the reactor lives and is not modified.
class line_predicate {
public:
    bool operator()() const noexcept;

private:
    friend class reactor;
    line_predicate(const reactor& r, const completion_line& line) noexcept
        : reactor_(&r)
        , line_(&line) {}
    const reactor* reactor_;
    const completion_line* line_;
};

/// What the reactor needs from a host to idle: its clock, a sleep, and a bounded park on a line.
///
/// - `now()`: the host's monotonic time.
/// - `sleep_until(at)`: sleep the caller until `at` (returning early is allowed).
/// - `park_line(line, pred, bound)`: arm a wait on the line, re-check `pred()`, then wait until a
///   store to the line, `pred()` holds, or `bound` passes (spurious returns allowed); returns
///   `pred()`. Any store to the line may wake it: one park watches every slot of the line.
template <class I>
concept reactor_idle = requires(I& i, const completion_line& line, line_predicate pred,
                                dur_ns bound, mono_ns at) {
    { i.now() } -> std::same_as<mono_ns>;
    i.sleep_until(at);
    { i.park_line(line, pred, bound) } -> std::convertible_to<bool>;
};

/// What one registration wakes. The waiter owns this record; the reactor holds a pointer to it
/// from watch()/add_alarm() until it fires or is cancelled, so it must stay put until then (its
/// destructor does not unregister: call reactor::cancel first).
struct reactor_waiter {
    /// Resumed by whoever drains the fired list (the FILL executor); may be empty.
    std::coroutine_handle<> handle;
    /// After firing: true when the descriptor completed (or the alarm fell due), false when the
    /// deadline passed first or the wait can never complete (see `end`).
    bool completed = false;
    /// After firing: why. `reached` (completed), `expired` (the deadline passed first), `stale`
    /// (its descriptor's line had been retired when it was registered), `aborted` (its line was
    /// retired while it waited), `faulted` (its slot's stream faulted before storing its target),
    /// `no_memory` (found complete when registered, then its word was set back, and no memory
    /// was left to watch it again).
    wait_end end = wait_end::reached;
    /// After firing: the time the reactor was told when it fired.
    mono_ns fired_at;
};

/// How a turn idled.
enum class idle_kind : std::uint8_t {
    none,   ///< it did not idle: something was already due, or nothing is left to do
    slept,  ///< only alarms and deadlines pending: slept to the earliest
    parked, ///< parked on the line of the earliest-registered descriptor
};

/// What one turn did.
struct turn_report {
    idle_kind idled = idle_kind::none;
    std::size_t woken = 0; ///< registrations that fired in this turn
    dur_ns idle_time;      ///< time spent sleeping or parking (by the idle's clock)
    dur_ns park_bound;     ///< the bound given to park_line (parked turns)

    friend bool operator==(const turn_report&, const turn_report&) = default;
};

/// The reactor: registrations, fire(), and the idle decision. Single-threaded. Not copyable or
/// movable (awaiters hold its address).
///
/// Cost: descriptors and their deadlines live in a scan engine
/// (<gpu_async/core/detail/scan_engine.hpp>, the one every host keeps its waits in: by line, slot
/// and target under the wrapping rule, for any history of stores, with a deadline index), and
/// alarms in a time-ordered set. So fire() loads each watched word once and pays O(log n) per
/// registration it fires; finding the earliest deadline is O(1); a park's predicate looks at the at
/// most eight words of its line. The reactor is the engine's sink: what leaves the engine waits on
/// one intrusive list for the next fire().
class reactor {
public:
    using registration = std::uint64_t;

    /// A reactor judging descriptors with `life` (none: every descriptor is live).
    explicit reactor(line_life_functions life = {})
        : engine_(life) {}
    reactor(const reactor&) = delete;
    reactor& operator=(const reactor&) = delete;

    /// Judges descriptors with `life` from now on.
    void use_line_life(line_life_functions life) noexcept { engine_.use_life(life); }
    /// Judges descriptors with the line life `idle` offers (`idle.line_life()`), if it offers
    /// one; the FILL executor calls it as it starts to run, and turn() at each turn.
    template <class Idle>
    void use_line_life_of(const Idle& idle) noexcept {
        if constexpr (requires {
                          { idle.line_life() } -> std::convertible_to<line_life_functions>;
                      })
            use_line_life(idle.line_life());
    }

    /// A checked read of `d`'s word by the reactor's line life (read_checked): reached only
    /// when its line's life stood still across the read.
    line_read read_checked(const memory_descriptor& d) const noexcept {
        return engine_.read_checked(d);
    }

    /// Watches `d` until it completes or, when given, `deadline` passes. Returns the id for
    /// cancel(). Registration order is kept: parks go to the earliest-registered descriptor's
    /// line.
    registration watch(const memory_descriptor& d, std::optional<mono_ns> deadline,
                       reactor_waiter& w) {
        const registration id = next_++;
        const auto it = descriptors_.try_emplace(id, d, id, &w).first;
        watched& x = it->second;
        x.deadline(deadline);
        // Complete at this read (or completing others, on a far move of the word): it fires at
        // the next fire().
        detail::engine_list out;
        engine_.take_in_one(x, out);
        keep_left(out);
        if (!x.registered() && x.why == wait_end::no_memory) {
            unregister(it);
            throw std::bad_alloc();
        }
        return id;
    }

    /// Wakes `w` at `at`.
    registration add_alarm(mono_ns at, reactor_waiter& w) {
        const registration id = next_++;
        alarms_.emplace(id, alarm_entry{at, &w});
        try {
            alarm_times_.emplace(at, id);
        } catch (...) {
            alarms_.erase(id);
            throw;
        }
        return id;
    }

    /// Removes a registration that has not fired, or takes a fired one off the fired list.
    /// Returns false when `id` is unknown (already drained or cancelled).
    bool cancel(registration id) {
        if (auto it = descriptors_.find(id); it != descriptors_.end()) {
            unregister(it);
            return true;
        }
        if (auto it = alarms_.find(id); it != alarms_.end()) {
            alarm_times_.erase({it->second.at, id});
            alarms_.erase(it);
            return true;
        }
        const auto f = std::find_if(fired_.begin(), fired_.end(),
                                    [id](const fired_entry& e) { return e.id == id; });
        if (f == fired_.end()) return false;
        fired_.erase(f);
        return true;
    }

    /// Fires every registration that is due at `now`: descriptors that completed (completed =
    /// true; completion wins over a deadline that passed too), descriptors whose deadline passed
    /// or that can never complete (completed = false: a retired line, a faulted slot, when the
    /// reactor judges with a line life; `end` says which), alarms that fell due
    /// (completed = true). Fired waiters go on the fired list, descriptors first, each group in
    /// registration order. Returns how many fired.
    std::size_t fire(mono_ns now) {
        // (registration, why) of each descriptor that fires; alarms that fire. Room for every
        // registration first: nothing below allocates until the fired list, whose growth may
        // throw; the descriptors not yet on it then wait on left_ for the next fire().
        fired_descriptors_.clear();
        fired_alarms_.clear();
        room(fired_descriptors_, descriptors_.size());
        room(fired_alarms_, alarms_.size());
        detail::engine_list found;
        // No retirement or fault reaches this reactor: it judges its waits again when a line's
        // life moved, before the scan reads their lines; and what its reads found counts only
        // if the life did not move across them (the epoch is read before the first).
        const std::uint64_t before = engine_.life_epoch();
        engine_.judge_pending(found);
        take_left(found);
        engine_.scan(now, found);
        while (detail::engine_wait* e = found.pop())
            fired_descriptors_.emplace_back(static_cast<watched*>(e)->id, e->end());
        if (engine_.life_epoch() != before) abort_retired_reads();
        for (const auto& [at, id] : alarm_times_) {
            if (at > now) break;
            fired_alarms_.push_back(id);
        }
        // Registration order (the map's), each once: a descriptor leaves the engine once.
        std::sort(fired_descriptors_.begin(), fired_descriptors_.end(),
                  [](const auto& x, const auto& y) { return x.first < y.first; });
        std::sort(fired_alarms_.begin(), fired_alarms_.end());
        push_fired_descriptors(now);
        push_fired_alarms(now);
        return fired_descriptors_.size() + fired_alarms_.size();
    }

    /// Takes the next fired waiter off the fired list, or nullptr when it is empty.
    reactor_waiter* pop_fired() noexcept {
        if (fired_.empty()) return nullptr;
        reactor_waiter* w = fired_.front().waiter;
        fired_.pop_front();
        return w;
    }

    /// The idle decision, taken when no task is ready:
    /// 1. fire everything due at idle.now(); if anything fired, return without idling;
    /// 2. nothing registered: done when `tasks_left` is zero, else errc::stalled (the count);
    /// 3. no descriptor watched, only alarms: sleep to the earliest alarm;
    /// 4. otherwise park on the line of the earliest-registered descriptor, bounded by
    ///    min(park_bound, earliest deadline or alarm - now): never past a deadline.
    /// After idling, fires what is due at the idle's new time.
    template <reactor_idle Idle>
    result<turn_report> turn(Idle& idle, dur_ns park_bound, std::size_t tasks_left) {
        use_line_life_of(idle);
        const mono_ns now = idle.now();
        turn_report r;
        r.woken = fire(now);
        park_policy::view fired;
        fired.scanned = true;
        fired.found = r.woken > 0;
        fired.pending = !descriptors_.empty();
        fired.deadlines = !alarms_.empty();
        const std::optional<mono_ns> earliest = earliest_deadline();
        switch (park_policy::next(fired)) {
        case park_policy::step::deliver: // the executor resumes them
            return r;
        case park_policy::step::sleep:
            r.idled = idle_kind::slept;
            idle.sleep_until(*earliest);
            break;
        case park_policy::step::park: {
            const completion_line& line = descriptors_.begin()->second.descriptor().line();
            const dur_ns bound = park_policy::park_for(now, park_bound, earliest);
            r.idled = idle_kind::parked;
            r.park_bound = bound;
            idle.park_line(line, line_predicate(*this, line), bound);
            break;
        }
        default: // idle: nothing registered can wake a task
            if (tasks_left == 0) return r;
            return coded_error(errc::stalled, {std::to_string(tasks_left)});
        }
        const mono_ns after = idle.now();
        r.idle_time = after.since(now);
        r.woken = fire(after);
        return r;
    }

    /// The earliest alarm or descriptor deadline, if any.
    std::optional<mono_ns> earliest_deadline() const noexcept {
        std::optional<mono_ns> at = engine_.earliest_deadline();
        if (!alarm_times_.empty() && (!at || alarm_times_.begin()->first < *at))
            at = alarm_times_.begin()->first;
        return at;
    }

    /// True when any watched descriptor on `line` has completed: one the engine would hand out
    /// at a scan now, or one that left it complete and still is by a checked read (the engine's,
    /// as fire() reads it: a word set back since waits on).
    bool any_complete_on(const completion_line& line) const noexcept {
        for (const detail::engine_wait* e = left_.head; e != nullptr; e = e->next) {
            const memory_descriptor& d = e->descriptor();
            if (static_cast<const watched*>(e)->why == wait_end::reached && &d.line() == &line &&
                engine_.read_checked(d) == line_read::reached)
                return true;
        }
        return engine_.any_reached(line);
    }

    std::size_t watched_count() const noexcept { return descriptors_.size(); }
    std::size_t alarm_count() const noexcept { return alarms_.size(); }
    std::size_t fired_count() const noexcept { return fired_.size(); }
    /// True when nothing is registered and nothing waits on the fired list.
    bool empty() const noexcept {
        return descriptors_.empty() && alarms_.empty() && fired_.empty();
    }

    class ready_awaiter;
    class alarm_awaiter;

    /// Awaitable: true when `d` completes, false when `until` passes first (never, when empty)
    /// or when it can never complete: its line was retired or its slot's stream faulted (the
    /// awaiter's `end()` says which). Completes at once, with true, when `d` is already complete
    /// (its line's status is judged first).
    ready_awaiter ready(const memory_descriptor& d,
                        std::optional<mono_ns> until = std::nullopt) noexcept;

    /// Awaitable: resumes once the reactor's time reaches `at`.
    alarm_awaiter alarm(mono_ns at) noexcept;

private:
    // A descriptor's registration; its deadline is the engine's (engine_wait::deadline()).
    struct watched : detail::engine_wait {
        watched(const memory_descriptor& d, registration i, reactor_waiter* w) noexcept
            : detail::engine_wait(d)
            , id(i)
            , waiter(w) {}
        registration id;
        reactor_waiter* waiter;
        wait_end why = wait_end::reached; // why it left the engine (while on left_)
        bool on_left = false;             // on left_, to fire at the next fire()
    };
    struct alarm_entry {
        mono_ns at;
        reactor_waiter* waiter;
    };
    struct fired_entry {
        registration id;
        reactor_waiter* waiter;
    };

    // What left the engine outside a fire() (a registration's read, and what it completed
    // besides) waits on left_ with why it left, to fire at the next fire(). Never allocates.
    void keep_left(detail::engine_list& out) noexcept {
        while (detail::engine_wait* e = out.pop())
            put_left(*static_cast<watched*>(e), e->end());
    }
    // What left the engine since the last fire (found complete when registered, or by a rebase
    // then) is judged and read again, as every other registration is: a word set back since
    // waits on, watched again before the scan (which then reads it, and checks its deadline).
    // What ended for good (a stale or retired line, a faulted slot) fires.
    void take_left(detail::engine_list& found) {
        while (detail::engine_wait* e = left_.pop()) {
            watched& w = *static_cast<watched*>(e);
            w.on_left = false;
            std::optional<wait_end> why = w.why;
            if (w.why == wait_end::reached)
                // Judged before the word is read (a retired line's memory may be gone or
                // reused), and again after it.
                why = ending_of(engine_.read_checked(w.descriptor()), judgement::while_pending);
            if (why) {
                fired_descriptors_.emplace_back(w.id, *why);
                continue;
            }
            detail::engine_list out;
            engine_.take_in_one(w, out, judgement::while_pending);
            while (detail::engine_wait* o = out.pop())
                found.push(o);
        }
    }

    // A line's life moved while a fire read lines: a wait whose line was retired meanwhile ends
    // aborted, whatever its read found (the word may be a later stream's).
    void abort_retired_reads() {
        for (auto& [id, why] : fired_descriptors_)
            if (why == wait_end::reached &&
                engine_.status_of(descriptors_.at(id).descriptor()) == line_status::stale)
                why = wait_end::aborted;
    }

    void push_fired_descriptors(mono_ns now) {
        for (std::size_t i = 0; i < fired_descriptors_.size(); ++i) {
            const auto [id, why] = fired_descriptors_[i];
            const auto it = descriptors_.find(id);
            try {
                push_fired(id, it->second.waiter, why, now);
            } catch (...) {
                // Not lost: this one and the rest fire at the next fire(), with why they left.
                for (std::size_t j = i; j < fired_descriptors_.size(); ++j)
                    put_left(descriptors_.find(fired_descriptors_[j].first)->second,
                             fired_descriptors_[j].second);
                throw;
            }
            descriptors_.erase(it); // out of the engine and off the list already
        }
    }

    void push_fired_alarms(mono_ns now) {
        for (const registration id : fired_alarms_) {
            const auto it = alarms_.find(id);
            push_fired(id, it->second.waiter, wait_end::reached, now);
            alarm_times_.erase({it->second.at, id});
            alarms_.erase(it);
        }
    }

    void put_left(watched& w, wait_end why) noexcept {
        w.why = why;
        w.on_left = true;
        left_.push(&w);
    }

    // Out of the engine or off left_, then forgotten (cancelled before it fired).
    void unregister(std::map<registration, watched>::iterator it) noexcept {
        watched& w = it->second;
        if (w.registered()) {
            detail::engine_list removed; // leaves uninvoked: it is being cancelled
            engine_.remove(w, removed);
        } else if (w.on_left) {
            left_.erase(&w);
            w.on_left = false;
        }
        descriptors_.erase(it);
    }

    // Room for `n` in `v`, growing geometrically (reserving exactly `n` each time would copy the
    // vector at every registration).
    template <class T>
    static void room(std::vector<T>& v, std::size_t n) {
        if (v.capacity() < n) v.reserve(std::max(n, 2 * v.capacity()));
    }

    void push_fired(registration id, reactor_waiter* w, wait_end why, mono_ns now) {
        w->completed = why == wait_end::reached;
        w->end = why;
        w->fired_at = now;
        fired_.push_back({id, w});
    }

    registration next_ = 1;
    std::map<registration, watched> descriptors_;
    std::map<registration, alarm_entry> alarms_;
    std::set<std::pair<mono_ns, registration>> alarm_times_;
    detail::scan_engine engine_; // the descriptors and their deadlines
    detail::engine_list left_;   // out of the engine, to fire at the next fire() (its sink)
    std::deque<fired_entry> fired_;
    // fire()'s scratch, kept for its capacity.
    std::vector<std::pair<registration, wait_end>> fired_descriptors_;
    std::vector<registration> fired_alarms_;
};

inline bool line_predicate::operator()() const noexcept {
    return reactor_->any_complete_on(*line_);
}

/// The awaiter of reactor::ready. Unregisters itself when destroyed while still registered
/// (a task destroyed mid-wait).
class reactor::ready_awaiter {
public:
    ready_awaiter(reactor& r, const memory_descriptor& d, std::optional<mono_ns> until) noexcept
        : reactor_(&r)
        , desc_(d)
        , until_(until) {}
    ready_awaiter(const ready_awaiter&) = delete;
    ready_awaiter& operator=(const ready_awaiter&) = delete;
    ~ready_awaiter() {
        if (id_) reactor_->cancel(*id_);
    }

    bool await_ready() const noexcept {
        return reactor_->read_checked(desc_) == line_read::reached;
    }
    void await_suspend(std::coroutine_handle<> h) {
        waiter_.handle = h;
        id_ = reactor_->watch(desc_, until_, waiter_);
        suspended_ = true;
    }
    bool await_resume() noexcept {
        if (!id_) return true; // was complete at once
        id_.reset();
        return waiter_.completed;
    }
    /// After it resumed: why (reactor_waiter::end).
    wait_end end() const noexcept { return waiter_.end; }
    /// After it resumed: whether the awaiting coroutine was suspended (false when the
    /// descriptor was complete at once).
    bool suspended() const noexcept { return suspended_; }

private:
    reactor* reactor_;
    memory_descriptor desc_;
    std::optional<mono_ns> until_;
    reactor_waiter waiter_;
    std::optional<registration> id_;
    bool suspended_ = false;
};

/// The awaiter of reactor::alarm.
class reactor::alarm_awaiter {
public:
    alarm_awaiter(reactor& r, mono_ns at) noexcept
        : reactor_(&r)
        , at_(at) {}
    alarm_awaiter(const alarm_awaiter&) = delete;
    alarm_awaiter& operator=(const alarm_awaiter&) = delete;
    ~alarm_awaiter() {
        if (id_) reactor_->cancel(*id_);
    }

    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> h) {
        waiter_.handle = h;
        id_ = reactor_->add_alarm(at_, waiter_);
    }
    /// The time the reactor fired it (at or after `at`).
    mono_ns await_resume() noexcept {
        id_.reset();
        return waiter_.fired_at;
    }

private:
    reactor* reactor_;
    mono_ns at_;
    reactor_waiter waiter_;
    std::optional<registration> id_;
};

inline reactor::ready_awaiter reactor::ready(const memory_descriptor& d,
                                             std::optional<mono_ns> until) noexcept {
    return ready_awaiter(*this, d, until);
}

inline reactor::alarm_awaiter reactor::alarm(mono_ns at) noexcept {
    return alarm_awaiter(*this, at);
}

} // namespace gpu_async

#endif // GPU_ASYNC_FILL_REACTOR_HPP
