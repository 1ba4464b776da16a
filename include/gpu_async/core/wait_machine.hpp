// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The wait driver, written once as a sans-I/O state machine.
///
/// The machine never touches a device, a clock or a timer. It is started with the plan, the
/// point's sleep estimate and the start time, and answers each event with the next action the
/// host must execute. The host reads its own clock and passes the time with every event, so
/// every decision replays on virtual time. Hosts only execute actions: inline on a thread
/// (run_wait below), as an Asio composed operation, as a FILL task, or on an io_uring.
///
///     wait_machine m;
///     wait_action a = m.start(plan, estimate, clock.now());
///     while (!a.is_terminal()) {
///         switch (a.kind) {
///         case wait_action::type::query: a = m.on_event(wait_event::queried(src.query(), now()));
///         ...
///         }
///     }
///
/// Invariants (each tested): a block plan runs the blocking wait and nothing else; every other
/// plan starts with one immediate query; a flag plan arms after that query and before any sleep;
/// no sleep ends later than start + min(estimate, max_sleep); the machine reports success only
/// after a query or the blocking wait said done; a source error ends the wait with that error,
/// unchanged; a flag plan issues a status query at least every backstop while the word does not
/// arrive, and once the word is seen, a final query is the authority; a poll plan queries until
/// done.
///
/// Standard library only: no threads, no blocking, no clock.
#ifndef GPU_ASYNC_CORE_WAIT_MACHINE_HPP
#define GPU_ASYNC_CORE_WAIT_MACHINE_HPP

#include <gpu_async/core/completion_source.hpp>
#include <gpu_async/core/error.hpp>
#include <gpu_async/core/estimator.hpp>
#include <gpu_async/core/time.hpp>
#include <gpu_async/core/wait_plan.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace gpu_async {

/// How a wait ended.
enum class wait_kind : std::uint8_t {
    blocked,   ///< the blocking wait returned (block plans); no outcome for the estimator
    immediate, ///< the first query found the work done; exact outcome (residual about 0)
    late,      ///< the first query after the predicted sleep found it done; late outcome
    parked,    ///< found done while polling or parking, after it was seen pending; exact outcome
};

/// Text of a wait kind: "blocked", "immediate", "late", "parked".
constexpr std::string_view to_string(wait_kind k) noexcept {
    switch (k) {
    case wait_kind::blocked:
        return "blocked";
    case wait_kind::immediate:
        return "immediate";
    case wait_kind::late:
        return "late";
    case wait_kind::parked:
        return "parked";
    }
    return "unknown";
}

/// What one finished wait reports.
struct wait_report {
    wait_kind kind = wait_kind::blocked;
    /// What to feed the estimator: none for blocked waits; exact for immediate and parked; late
    /// for late.
    std::optional<gpu_async::outcome> outcome;
    dur_ns total;                       ///< from the start time to the event that ended the wait
    dur_ns slept;                       ///< time spent in the predicted sleep
    std::uint32_t parks = 0;            ///< parks executed (flag plans; a host whose park
                                        ///< watches the word parks until the backstop is due)
    std::uint32_t backstop_queries = 0; ///< status queries made because a backstop fell due
    /// Set by the host when the plan that ran is not the one asked for (errc::park_fallback:
    /// the requested plan, the capability the host or the source lacks, why, the plan that ran).
    std::optional<coded_error> warning;

    friend bool operator==(const wait_report&, const wait_report&) = default;
};

/// An event: the answer to the action the machine asked for, with the host's time at the answer.
struct wait_event {
    enum class type : std::uint8_t {
        queried, ///< answers `query`: `query` holds done, pending or failed(error)
        blocked, ///< answers `block`: `error` empty on success
        armed,   ///< answers `arm`: `error` empty on success
        slept,   ///< answers `sleep_until`: `word_seen` when a host that watched the word during
                 ///< the sleep saw it reach its target (the sleep then ends early)
        parked,  ///< answers `park`: `word_seen` when the park saw the word reach its target
        /// answers any action: the host ends the wait before the action's answer (its
        /// cancellation, or its source went away); the machine calls the source no more
        cancelled,
    };

    type kind = type::queried;
    mono_ns now;        ///< the host's clock when the action returned
    query_result query; ///< for `queried`
    std::error_code error;
    bool word_seen = false; ///< for `parked` and `slept`

    static wait_event queried(query_result r, mono_ns now) noexcept {
        return {type::queried, now, r, {}, false};
    }
    static wait_event blocked(std::error_code ec, mono_ns now) noexcept {
        return {type::blocked, now, {}, ec, false};
    }
    static wait_event armed(std::error_code ec, mono_ns now) noexcept {
        return {type::armed, now, {}, ec, false};
    }
    static wait_event slept(mono_ns now) noexcept { return {type::slept, now, {}, {}, false}; }
    /// A sleep that a host ended when it saw the word reach its target (it watched the word
    /// while the sleep lasted, as a reactor does): the late query follows at once.
    static wait_event slept_word_seen(mono_ns now) noexcept {
        return {type::slept, now, {}, {}, true};
    }
    static wait_event parked(bool word_seen, mono_ns now) noexcept {
        return {type::parked, now, {}, {}, word_seen};
    }
    static wait_event cancelled(mono_ns now) noexcept {
        return {type::cancelled, now, {}, {}, false};
    }
};

/// The next thing the host must do.
struct wait_action {
    enum class type : std::uint8_t {
        query,       ///< call the source's query() once, answer with wait_event::queried
        block,       ///< call the source's block(), answer with wait_event::blocked
        arm,         ///< call the source's arm(), answer with wait_event::armed
        sleep_until, ///< sleep until `at`, answer with wait_event::slept
        /// park on the descriptor's word for at most `bound`, or, a host whose park watches
        /// the word continuously (a reactor that scans it), until `at` in one piece: the
        /// backstop query's due time. Answer with parked.
        park,
        done,      ///< the wait succeeded: `report` says how
        failed,    ///< the wait failed: `error` says why
        cancelled, ///< the host cancelled the wait (wait_event::cancelled): it reports its own
                   ///< cancellation (the Asio host: operation_aborted)
    };

    type kind = type::query;
    mono_ns at;            ///< for sleep_until; for park, the backstop query's due time
    dur_ns bound;          ///< for park
    wait_report report;    ///< for done
    std::error_code error; ///< for failed

    static wait_action query() noexcept { return {type::query, {}, {}, {}, {}}; }
    static wait_action block() noexcept { return {type::block, {}, {}, {}, {}}; }
    static wait_action arm() noexcept { return {type::arm, {}, {}, {}, {}}; }
    static wait_action sleep_until(mono_ns t) noexcept {
        return {type::sleep_until, t, {}, {}, {}};
    }
    static wait_action park(dur_ns d, mono_ns until = {}) noexcept {
        return {type::park, until, d, {}, {}};
    }
    static wait_action done(const wait_report& r) noexcept { return {type::done, {}, {}, r, {}}; }
    static wait_action failed(std::error_code ec) noexcept {
        return {type::failed, {}, {}, {}, ec};
    }
    static wait_action cancelled() noexcept { return {type::cancelled, {}, {}, {}, {}}; }

    /// True for done, failed and cancelled: the machine takes no further events.
    bool is_terminal() const noexcept {
        return kind == type::done || kind == type::failed || kind == type::cancelled;
    }
};

/// Text of an action type: "query", "block", "arm", "sleep_until", "park", "done", "failed".
constexpr std::string_view to_string(wait_action::type t) noexcept {
    switch (t) {
    case wait_action::type::query:
        return "query";
    case wait_action::type::block:
        return "block";
    case wait_action::type::arm:
        return "arm";
    case wait_action::type::sleep_until:
        return "sleep_until";
    case wait_action::type::park:
        return "park";
    case wait_action::type::done:
        return "done";
    case wait_action::type::failed:
        return "failed";
    case wait_action::type::cancelled:
        return "cancelled";
    }
    return "unknown";
}

/// The wait driver as a sans-I/O state machine. One machine runs one wait;
/// start() may be called again to run another. A plain value: copyable, no allocation.
///
/// Time: every event carries the host's clock reading when the action returned. A reading
/// earlier than the previous one is taken as the previous one (time never goes backwards here).
///
/// Protocol: each event must answer the action last returned. An event of another type (a host
/// bug) ends the wait with `std::errc::protocol_error`; it never produces success. Once the
/// machine returned done, failed or cancelled, it answers every further event with that same
/// action. `wait_event::cancelled` answers any action: the host ends the wait (its
/// cancellation, or its source went away), and the machine ends it with `cancelled`.
///
/// A query that says failed with an empty error code ends the wait with errc::backend (an
/// empty code cannot say "failed"); any other source error is passed on unchanged.
class wait_machine {
public:
    wait_machine() = default;

    /// Starts a wait at time `start` with `plan` and the point's sleep estimate (nanoseconds
    /// from the start, as point_table::sleep_ns gives it; ignored unless the plan predicts).
    /// Returns the first action: block for block plans, else the immediate query.
    wait_action start(const wait_plan& plan, std::optional<std::uint64_t> sleep_ns,
                      mono_ns start) noexcept {
        *this = wait_machine{};
        kind_ = plan.kind();
        park_ns_ = dur_ns{plan.park_ns()};
        backstop_ns_ = dur_ns{plan.backstop_ns()};
        if (plan.predict() && sleep_ns && *sleep_ns > 0) {
            // No sleep longer than the estimate allows, nor longer than the plan's maximum.
            const std::uint64_t s =
                *sleep_ns < plan.predict()->max_sleep_ns ? *sleep_ns : plan.predict()->max_sleep_ns;
            if (s > 0) sleep_to_ = start.after(dur_ns{s});
        }
        start_ = start;
        now_ = start;
        if (kind_ == plan_kind::block) return emit(state::blocking, wait_action::block());
        return emit(state::immediate_query, wait_action::query());
    }

    /// Answers the last action; returns the next one.
    wait_action on_event(const wait_event& ev) noexcept {
        if (state_ == state::finished) return last_;
        if (state_ == state::idle) return finish_failed(make_error_code(std::errc::protocol_error));
        if (ev.now > now_) now_ = ev.now;
        // Whatever it was asked, the host may end the wait instead of answering.
        if (ev.kind == wait_event::type::cancelled)
            return emit(state::finished, wait_action::cancelled());
        // The backstop counts from the last status query the source answered.
        if (ev.kind == wait_event::type::queried) last_query_ = now_;
        switch (state_) {
        case state::blocking:
            if (ev.kind != wait_event::type::blocked) return protocol_error();
            if (ev.error) return finish_failed(ev.error);
            return finish(wait_kind::blocked, std::nullopt);
        case state::immediate_query:
            if (ev.kind != wait_event::type::queried) return protocol_error();
            if (ev.query.is_failed()) return finish_failed(source_error(ev.query));
            if (ev.query.is_done())
                return finish(wait_kind::immediate, outcome::exact(now_.since(start_).count()));
            if (kind_ == plan_kind::flag) return emit(state::arming, wait_action::arm());
            return after_arm();
        case state::arming:
            if (ev.kind != wait_event::type::armed) return protocol_error();
            if (ev.error) return finish_failed(ev.error);
            return after_arm();
        case state::sleeping:
            if (ev.kind != wait_event::type::slept) return protocol_error();
            return on_slept(ev.word_seen);
        case state::late_query:
            if (ev.kind != wait_event::type::queried) return protocol_error();
            if (ev.query.is_failed()) return finish_failed(source_error(ev.query));
            if (ev.query.is_done())
                return finish(wait_kind::late, outcome::late(now_.since(start_).count()));
            return begin_waiting();
        case state::polling:
        case state::backstop_query:
        case state::final_query:
            if (ev.kind != wait_event::type::queried) return protocol_error();
            return on_waiting_query(ev.query);
        case state::parking:
            if (ev.kind != wait_event::type::parked) return protocol_error();
            ++parks_;
            if (ev.word_seen) {
                word_seen_at_ = now_;
                return emit(state::final_query, wait_action::query());
            }
            return park_or_backstop();
        case state::idle:
        case state::finished:
            break;
        }
        return protocol_error();
    }

    /// True once the machine returned done, failed or cancelled.
    bool finished() const noexcept { return state_ == state::finished; }

    /// The end of the predicted sleep, when this wait sleeps at all.
    std::optional<mono_ns> sleep_deadline() const noexcept { return sleep_to_; }

private:
    // The sleep's timer fired (or the word was seen during it).
    wait_action on_slept(bool word_seen) noexcept {
        slept_ = slept_ + now_.since(sleep_began_);
        sleep_began_ = now_;
        // A timer that woke early sleeps again: never query before the sleep is over, unless the
        // word said the work is done (the query is then the authority, as after a park).
        if (now_ < *sleep_to_ && !word_seen)
            return emit(state::sleeping, wait_action::sleep_until(*sleep_to_));
        return emit(state::late_query, wait_action::query());
    }

    // A query while waiting: polling, the backstop's, or the one after the word was seen.
    wait_action on_waiting_query(const query_result& query) noexcept {
        if (query.is_failed()) return finish_failed(source_error(query));
        if (query.is_done()) {
            // The word may have been seen before this authority answered: that is when the work
            // was seen to finish.
            const mono_ns seen = state_ == state::final_query ? word_seen_at_ : now_;
            return finish(wait_kind::parked, outcome::exact(seen.since(start_).count()));
        }
        if (kind_ == plan_kind::poll) return emit(state::polling, wait_action::query());
        return park_or_backstop();
    }

    enum class state : std::uint8_t {
        idle,
        blocking,
        immediate_query,
        arming,
        sleeping,
        late_query,
        polling,
        parking,
        backstop_query,
        final_query,
        finished,
    };

    wait_action emit(state s, wait_action a) noexcept {
        state_ = s;
        last_ = a;
        return a;
    }

    wait_action after_arm() noexcept {
        if (sleep_to_ && now_ < *sleep_to_) {
            sleep_began_ = now_;
            return emit(state::sleeping, wait_action::sleep_until(*sleep_to_));
        }
        // No sleep (none predicted, or its end has already passed): the work was seen pending,
        // so what follows measures an exact residual.
        return begin_waiting();
    }

    wait_action begin_waiting() noexcept {
        if (kind_ == plan_kind::poll) return emit(state::polling, wait_action::query());
        return park_or_backstop();
    }

    // Flag plans: park at most park_ns, never past the next backstop; query once it is due. The
    // park's `at` is that due time: a host whose park watches the word continuously parks until
    // then in one piece, and a park that ended later than its bound counts as one park.
    wait_action park_or_backstop() noexcept {
        const mono_ns due = last_query_.after(backstop_ns_);
        if (now_ >= due) {
            ++backstop_queries_;
            return emit(state::backstop_query, wait_action::query());
        }
        return emit(state::parking, wait_action::park(min(park_ns_, due.since(now_)), due));
    }

    static std::error_code source_error(const query_result& r) noexcept {
        return r.error ? r.error : make_error_code(errc::backend);
    }

    wait_action protocol_error() noexcept {
        return finish_failed(std::make_error_code(std::errc::protocol_error));
    }

    wait_action finish_failed(std::error_code ec) noexcept {
        return emit(state::finished, wait_action::failed(ec));
    }

    wait_action finish(wait_kind k, std::optional<outcome> o) noexcept {
        wait_report r;
        r.kind = k;
        r.outcome = o;
        r.total = now_.since(start_);
        r.slept = slept_;
        r.parks = parks_;
        r.backstop_queries = backstop_queries_;
        return emit(state::finished, wait_action::done(r));
    }

    state state_ = state::idle;
    plan_kind kind_ = plan_kind::block;
    dur_ns park_ns_;
    dur_ns backstop_ns_;
    mono_ns start_;
    mono_ns now_;
    std::optional<mono_ns> sleep_to_;
    mono_ns sleep_began_;
    mono_ns last_query_;
    mono_ns word_seen_at_;
    dur_ns slept_;
    std::uint32_t parks_ = 0;
    std::uint32_t backstop_queries_ = 0;
    wait_action last_ = wait_action::query();
};

/// The end of one wait run by a driver: a report, or an error code (a source's error unchanged,
/// or a registry code) with, for registry codes, the coded error that says more.
class wait_result {
public:
    wait_result(wait_report r) noexcept
        : report_(std::move(r)) {}
    wait_result(std::error_code ec) noexcept
        : error_(ec) {}
    wait_result(coded_error e)
        : error_(e.code())
        , detail_(std::move(e)) {}

    bool has_value() const noexcept { return !error_; }
    explicit operator bool() const noexcept { return has_value(); }

    /// The report; meaningful only when has_value().
    const wait_report& value() const noexcept { return report_; }
    /// The report, for the host to complete (its `warning`); meaningful only when has_value().
    wait_report& value() noexcept { return report_; }
    /// The error; empty on success.
    std::error_code error() const noexcept { return error_; }
    /// The coded error with its arguments, when the driver itself made the error.
    const std::optional<coded_error>& detail() const noexcept { return detail_; }
    /// A human text: the coded message when there is one, else the error code's message.
    std::string message() const {
        if (detail_) return detail_->message();
        return error_ ? error_.message() : std::string("ok");
    }

private:
    wait_report report_;
    std::error_code error_;
    std::optional<coded_error> detail_;
};

namespace detail {

// Executes one non-terminal action; returns the event answering it, stamped with the clock.
template <completion_source Source, clock Clock, timer Timer>
wait_event execute_wait_action(const wait_action& a, Source& source, const Clock& clk, Timer& tmr) {
    switch (a.kind) {
    case wait_action::type::query: {
        const query_result r = source.query();
        return wait_event::queried(r, clk.now());
    }
    case wait_action::type::block: {
        const std::error_code ec = source.block();
        return wait_event::blocked(ec, clk.now());
    }
    case wait_action::type::arm: {
        const std::error_code ec = source.arm();
        return wait_event::armed(ec, clk.now());
    }
    case wait_action::type::sleep_until:
        tmr.sleep_until(a.at);
        return wait_event::slept(clk.now());
    case wait_action::type::park: {
        const bool seen = source.park(a.bound);
        return wait_event::parked(seen, clk.now());
    }
    case wait_action::type::done:
    case wait_action::type::failed:
    case wait_action::type::cancelled:
        break;
    }
    return wait_event::slept(clk.now()); // not reached for non-terminal actions
}

inline wait_result wait_action_result(const wait_action& a) {
    if (a.kind == wait_action::type::done) return wait_result(a.report);
    if (a.kind == wait_action::type::cancelled)
        return wait_result(make_error_code(std::errc::operation_canceled));
    return wait_result(a.error);
}

} // namespace detail

/// The inline driver: runs one wait to its end on the calling thread, over `source`, reading
/// `clk` and sleeping through `tmr`. It blocks exactly as much as the source's block() and park()
/// and the timer's sleep_until() block; the machine itself never does. On a manual clock the
/// source and the timer must move time (manual_timer does; a fake source's park should), or a
/// pending wait spins: use run_inline there, which reports that instead.
///
/// Returns the report, or the error that ended the wait (a source's error unchanged).
template <completion_source Source, clock Clock, timer Timer>
wait_result run_wait(Source& source, const wait_plan& plan, std::optional<std::uint64_t> sleep_ns,
                     const Clock& clk, Timer& tmr) {
    wait_machine m;
    wait_action a = m.start(plan, sleep_ns, clk.now());
    while (!a.is_terminal())
        a = m.on_event(detail::execute_wait_action(a, source, clk, tmr));
    return detail::wait_action_result(a);
}

/// The checked inline driver, for contexts where every operation must complete at once (virtual
/// time, replays, tests, the naive executor over a blocking timer). It runs the wait as run_wait
/// does and fails with errc::pended_inline, naming the site, when an action returns without the
/// progress it must make:
///
/// - "timer sleep_until": the timer returned before the deadline it was given (a timer that only
///   schedules, such as a manual clock's timer nobody advances, or an asynchronous timer);
/// - "source park": a park returned without seeing the word while the clock did not move;
/// - "source query": a query said pending at the same clock reading as the previous query that
///   said pending (a poll whose query costs no time on virtual time, or a flag wait whose park
///   keeps seeing the word at once while the status query still says pending).
///
/// In each case repeating the action could never end the wait on a clock nobody advances. On a
/// real clock, time moves between two readings, so none of these trigger for a live source.
template <completion_source Source, clock Clock, timer Timer>
wait_result run_inline(Source& source, const wait_plan& plan, std::optional<std::uint64_t> sleep_ns,
                       const Clock& clk, Timer& tmr) {
    wait_machine m;
    mono_ns before = clk.now();
    wait_action a = m.start(plan, sleep_ns, before);
    // When the last query that said pending was answered: another pending answer at that same
    // time means nothing moved since, so repeating could never end the wait.
    std::optional<mono_ns> pending_at;
    while (!a.is_terminal()) {
        const wait_event ev = detail::execute_wait_action(a, source, clk, tmr);
        const bool moved = ev.now > before;
        switch (a.kind) {
        case wait_action::type::sleep_until:
            if (ev.now < a.at) return coded_error(errc::pended_inline, {"timer sleep_until"});
            break;
        case wait_action::type::park:
            if (!ev.word_seen && !moved) return coded_error(errc::pended_inline, {"source park"});
            break;
        case wait_action::type::query:
            if (ev.query.is_pending()) {
                if (pending_at == ev.now) return coded_error(errc::pended_inline, {"source query"});
                pending_at = ev.now;
            }
            break;
        default:
            break;
        }
        before = ev.now;
        a = m.on_event(ev);
    }
    return detail::wait_action_result(a);
}

} // namespace gpu_async

#endif // GPU_ASYNC_CORE_WAIT_MACHINE_HPP
