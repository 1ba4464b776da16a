// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/asio/detail/plan_wait_op.hpp: the plan-driven wait of gpu_completion_port, a composed
// operation that executes the wait machine's actions (core/wait_machine.hpp). Each park is a
// descriptor wait (asio/detail/port_wait_op.hpp) with the park as its deadline.
//
#ifndef GPU_ASYNC_ASIO_DETAIL_PLAN_WAIT_OP_HPP
#define GPU_ASYNC_ASIO_DETAIL_PLAN_WAIT_OP_HPP

#include <gpu_async/asio/detail/flavour.hpp>
#include <gpu_async/asio/detail/port_state.hpp>
#include <gpu_async/asio/detail/port_wait_op.hpp>
#include <gpu_async/asio/detail/reactor_service.hpp>
#include <gpu_async/asio/error.hpp>
#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/completion_source.hpp>
#include <gpu_async/core/estimator.hpp>
#include <gpu_async/core/park_fallback.hpp>
#include <gpu_async/core/wait_machine.hpp>
#include <gpu_async/core/wait_plan.hpp>
#include <gpu_async/line/detail/line_watchers.hpp>
#include <gpu_async/line/line_life.hpp>
#include <gpu_async/wait/detail/mono_clock.hpp>
#include <gpu_async/wait/detail/ranked_mutex.hpp>

#if defined(GPU_ASYNC_STANDALONE_ASIO)
#include <asio/associated_cancellation_slot.hpp>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/compose.hpp>
#include <asio/post.hpp>
#else
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/post.hpp>
#endif

#include <array>
#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

namespace gpu_async {
namespace detail {
GPU_ASYNC_ASIO_NAMESPACE_BEGIN

/// The plan-driven waits' watch of one source line, one per port and line: the one
/// registration with the process's line registry for all of them (they are created often; the
/// registry's lock and list are not taken per wait). A retirement of the line counts in
/// `retirements_` (of its slot: the line's retirements count in every slot's): a wait that
/// started before it ends with operation_aborted at its next step and never calls its source
/// again.
///
/// The retirement also waits for the source calls in progress on its slot (on every slot for the
/// line's), since the owner frees the source once it returns; a call pins its slot and holds no
/// lock while it runs, as block() waits for as long as the work takes. So one slot's retirement
/// never waits for another slot's call, and one of the same slot waits only until the call
/// returns: the owner ends a call that waits for its stream before it retires the slot (a
/// sim_stream given back fails, which wakes its block()).
struct plan_line_watch final : line_watcher {
    plan_line_watch(port_state& st, reactor_service& sv, const completion_line& l) noexcept
        : state(&st)
        , svc(&sv)
        , line(&l) {}
    void retire_line(const completion_line& l) noexcept override {
        if (&l != line) return;
        retire_calls([](std::size_t) { return true; });
        // A park registered after the service retired the line (its wait read the descriptor
        // just before): registrations hold the port's registration lock, so once this holds it
        // none is in progress and none follows. (An adopted line's park is also caught by its
        // generation.)
        std::lock_guard lk(state->registration_mutex);
        svc->retire_line(l);
    }
    /// A fault reaches a plan-driven wait through its source's status query, and its park (a
    /// reactor wait) through the service, a line watcher of its own.
    void fault_slot(const completion_line&, slot_id, std::uint64_t) noexcept override {}
    /// The stream of one slot went: as a retirement, for the waits on that slot only.
    void retire_slot(const completion_line& l, slot_id slot, slot_retirement r) noexcept override {
        if (&l != line) return;
        retire_calls([i = slot.index()](std::size_t j) { return j == i; });
        std::lock_guard lk(state->registration_mutex);
        svc->retire_slot(l, slot, r);
    }

    /// The retirements of `slot` so far: a wait reads it when it begins.
    std::uint64_t retirements(slot_id slot) noexcept {
        std::lock_guard lk(calls_mutex_);
        return retirements_[slot.index()];
    }
    /// Pins `slot` for a source call, unless it was retired since `seen`: false then.
    bool pin(slot_id slot, std::uint64_t seen) noexcept {
        std::lock_guard lk(calls_mutex_);
        if (retirements_[slot.index()] != seen) return false;
        ++calls_[slot.index()];
        return true;
    }
    /// Ends a call that pin() let through.
    void unpin(slot_id slot) noexcept {
        bool wake = false;
        {
            std::lock_guard lk(calls_mutex_);
            wake = --calls_[slot.index()] == 0 && retiring_ != 0;
        }
        if (wake) calls_done_.notify_all();
    }

    port_state* state;
    reactor_service* svc;
    const completion_line* line;

private:
    /// Counts a retirement of the slots `in` selects, then waits (no lock held) until none of
    /// them has a source call in progress.
    template <class In>
    void retire_calls(In in) noexcept {
        std::unique_lock lk(calls_mutex_);
        for (std::size_t i = 0; i < line_words; ++i)
            if (in(i)) ++retirements_[i];
        ++retiring_;
        calls_done_.wait(lk, [&] {
            for (std::size_t i = 0; i < line_words; ++i)
                if (in(i) && calls_[i] != 0) return false;
            return true;
        });
        --retiring_;
    }

    ranked_mutex calls_mutex_{lock_rank::plan_calls}; // never held across a source call
    ranked_condition_variable calls_done_;
    std::array<std::uint64_t, line_words> retirements_{}; // per slot
    std::array<std::uint32_t, line_words> calls_{};       // source calls in progress, per slot
    std::uint32_t retiring_ = 0;                          // retirements waiting for calls
};

/// The point table of a port's plan-driven waits and their line watches (asio/detail/port_state.hpp
/// holds it); guarded by the port's points_mutex.
struct port_points {
    point_table<std::string> table;
    std::map<const completion_line*, std::unique_ptr<plan_line_watch>> lines;

    port_points() = default;
    port_points(const port_points&) = delete;
    port_points& operator=(const port_points&) = delete;
    ~port_points() {
        for (auto& [line, watch] : lines)
            remove_line_watcher(*watch);
    }
};

/// The port's point table, created by its first feed; call with `st.points_mutex` held.
inline point_table<std::string>& points_of(port_state& st) {
    if (!st.points) st.points = std::make_shared<port_points>();
    return st.points->table;
}

/// The port's point table, or none before its first feed (reads do not allocate); call with
/// `st.points_mutex` held.
inline const point_table<std::string>* find_points(const port_state& st) noexcept {
    return st.points ? &st.points->table : nullptr;
}

/// The deadline plan a point is fed with: the plan's own, or (plans without a prediction) the
/// widest window, so the point learns either way.
inline deadline_plan feeding_plan(const wait_plan& plan) noexcept {
    if (plan.predict()) return *plan.predict();
    deadline_plan d;
    d.window = window_max;
    return d;
}

/// A line nothing stores into: word 0 never reaches 1. The predicted sleep of a plan that armed
/// nothing is a reactor wait on it with the sleep's end as its deadline, so that a cancellation
/// from any thread ends it at once by its key, as it ends a park (an Asio timer is not safe to
/// cancel from another thread while it is in use).
inline memory_descriptor never_stored() noexcept {
    static const completion_line line{};
    return memory_descriptor(line, *slot_id::at(0), 1);
}

/// Where a cancellation of a plan-driven wait goes, from any thread (signals may come from any
/// thread, as for descriptor waits). A composed operation's own cancellation state is not safe
/// for that: each step clears its child slot and each reactor wait or timer installs a handler
/// there, while an emit on another thread calls that handler, and its cancelled state is read on
/// the wait's thread while the emit writes it. So the wait installs one plan_cancel_handler in
/// its handler's slot when it starts and never touches that slot again; the handler reaches the
/// wait through this link, which it shares with the wait and may outlive it (then it touches
/// nothing else: the wait clears its reactor wait's key when it goes).
class plan_cancel_link {
public:
    explicit plan_cancel_link(reactor_service& svc) noexcept
        : svc_(&svc) {}

    /// Terminal or partial cancellation, from any thread: the wait ends at its next step, and
    /// the reactor wait it is waiting on (a park or a sleep), if any, ends now.
    void cancel() {
        std::optional<reactor_key> waiting;
        {
            std::lock_guard lk(mutex_);
            cancelled_.store(true, std::memory_order_release);
            waiting = waiting_;
        }
        // With no lock of ours held (the service takes its own); the key of a wait that has
        // ended finds nothing.
        if (waiting) svc_->cancel(*waiting);
    }

    bool cancelled() const noexcept { return cancelled_.load(std::memory_order_acquire); }

    /// The wait is about to register the reactor wait `key`: from now on a cancellation ends
    /// it. Published before the registration, so a cancellation either finds it here or is seen
    /// by cancelled() once the wait is registered.
    void waiting_on(const reactor_key& key) {
        std::lock_guard lk(mutex_);
        waiting_ = key;
    }

    /// That reactor wait ended (its step runs).
    void woken() {
        std::lock_guard lk(mutex_);
        waiting_.reset();
    }

private:
    ranked_mutex mutex_{lock_rank::cancel_link}; // never held across a call out
    std::optional<reactor_key> waiting_;
    std::atomic<bool> cancelled_{false};
    reactor_service* svc_;
};

/// Installed once in a plan-driven wait's cancellation slot when the wait starts; stays until
/// the slot is reused or its signal destroyed. Terminal and partial only: a cancelled plan wait
/// may have armed its source (enqueued a word store), so it does not claim total cancellation.
class plan_cancel_handler {
public:
    explicit plan_cancel_handler(std::shared_ptr<plan_cancel_link> link) noexcept
        : link_(std::move(link)) {}
    void operator()(asio::cancellation_type_t type) const {
        constexpr auto supported =
            asio::cancellation_type::terminal | asio::cancellation_type::partial;
        if ((type & supported) != asio::cancellation_type::none) link_->cancel();
    }

private:
    std::shared_ptr<plan_cancel_link> link_;
};

/// The plan-driven wait as an Asio composed operation: executes the wait machine's actions
/// (query, block and arm inline; a predicted sleep and each park as a reactor wait, with the
/// sleep's end or the next backstop as its deadline: a flag plan's on the source's descriptor,
/// a poll plan's sleep on never_stored()). Started by initiate_plan_wait, which routes its
/// cancellation slot.
template <class Source, class Executor>
class plan_wait_op {
public:
    /// `resolved`: the plan to run (resolved against the port's capabilities) and the warning
    /// that says why it differs from the one asked, reported in the wait's report.
    plan_wait_op(Source& source, resolved_plan resolved, std::string point,
                 std::shared_ptr<port_state> state, reactor_service& svc, const Executor& ex)
        : impl_(std::make_unique<impl>(source, std::move(resolved), std::move(point),
                                       std::move(state), svc, ex)) {}

    /// The link a cancellation slot's handler reaches this wait through (before it starts).
    std::shared_ptr<plan_cancel_link> link_cancellation() {
        impl_->link = std::make_shared<plan_cancel_link>(*impl_->svc);
        return impl_->link;
    }

    template <class Self>
    void operator()(Self& self, error_code ec = {}) {
        impl& m = *impl_;
        switch (m.next) {
        case step::initial: {
            m.generation = m.state->generation.load(std::memory_order_acquire);
            m.watch_source_line();
            std::optional<std::uint64_t> sleep;
            if (m.plan.predict()) {
                std::lock_guard lk(m.state->points_mutex);
                if (const auto* points = find_points(*m.state))
                    sleep = points->sleep_ns(m.point, *m.plan.predict());
            }
            m.action = m.machine.start(m.plan, sleep, mono_now());
            m.next = step::running;
            // Everything runs from the executor: never a completion inside the initiation.
            const Executor ex = m.ex;
            asio::post(ex, std::move(self));
            return;
        }
        case step::running:
            break;
        case step::sleeping:
            if (m.link) m.link->woken();
            if (ec == asio::error::operation_aborted) return abort(self);
            // A flag plan's sleep watches its armed word: reached (no error), the word ended the
            // sleep; timed_out, the sleep's end. Any other sleep watches never_stored().
            m.action = m.machine.on_event(m.plan.kind() == plan_kind::flag && !ec
                                              ? wait_event::slept_word_seen(mono_now())
                                              : wait_event::slept(mono_now()));
            break;
        case step::parking: {
            if (m.link) m.link->woken();
            if (ec == asio::error::operation_aborted) return abort(self);
            // A fault or a stale line ends the park at once and the word will not come: as when
            // it came, the final query asks the source, which says why (parking again would end
            // at once again, a spin until the backstop).
            const bool word_or_end =
                !ec || ec == errc::device_fault || ec == errc::stale_descriptor;
            m.action = m.machine.on_event(wait_event::parked(word_or_end, mono_now()));
            break;
        }
        }
        m.next = step::running;
        run(self);
    }

private:
    enum class step : std::uint8_t { initial, running, sleeping, parking };

    /// The operation's state. It watches the source's line through the port's watch of that
    /// line (plan_line_watch): when the line's owner retires it (a device or stream going away),
    /// the wait ends with operation_aborted at its next step and never calls the source again.
    struct impl {
        impl(Source& s, resolved_plan r, std::string pt, std::shared_ptr<port_state> st,
             reactor_service& sv, const Executor& e)
            : source(&s)
            , plan(std::move(r.plan))
            , warning(std::move(r.warning))
            , point(std::move(pt))
            , state(std::move(st))
            , svc(&sv)
            , ex(e) {}
        impl(const impl&) = delete;
        impl& operator=(const impl&) = delete;
        ~impl() {
            if (link) link->woken(); // a later signal reaches nothing of the wait's
        }
        /// Finds (or makes and registers) the port's watch of the source's line.
        void watch_source_line() {
            const memory_descriptor d = source->descriptor();
            const completion_line& line = d.line();
            slot = d.slot();
            if (find_watch(line)) return;
            // Registered with no lock of ours held (the registry's is taken on its own), then
            // published, unless another wait of the port published one first: ours goes then.
            auto made = std::make_unique<plan_line_watch>(*state, *svc, line);
            add_line_watcher(*made);
            try {
                std::lock_guard lk(state->points_mutex);
                points_of(*state); // made with the first plan-driven wait
                auto [it, first] = state->points->lines.try_emplace(&line);
                if (first) it->second = std::move(made);
                watch = it->second.get();
                retirements_seen = watch->retirements(slot);
            } catch (...) {
                if (made) remove_line_watcher(*made);
                throw;
            }
            if (made) remove_line_watcher(*made);
        }
        /// The port's watch of `line`, if one is published: the wait uses it.
        bool find_watch(const completion_line& line) {
            std::lock_guard lk(state->points_mutex);
            if (!state->points) return false;
            const auto it = state->points->lines.find(&line);
            if (it == state->points->lines.end()) return false;
            watch = it->second.get();
            retirements_seen = watch->retirements(slot);
            return true;
        }
        /// Runs `f(source)` unless the source's line or slot was retired since the wait began;
        /// false when it was. No lock is held across the call (a block() lasts as long as the
        /// work): its slot is pinned, and a retirement of that slot waits for it, so a call in
        /// progress at a retirement still answers (the owner ends one that would wait for good).
        template <class F>
        bool with_source(F&& f) {
            if (!watch->pin(slot, retirements_seen)) return false;
            try {
                f(*source);
            } catch (...) {
                watch->unpin(slot);
                throw;
            }
            watch->unpin(slot);
            return true;
        }
        Source* source;
        wait_plan plan;
        std::optional<coded_error> warning; // the plan's park fallback, if any
        std::string point;
        std::shared_ptr<port_state> state;
        reactor_service* svc;
        Executor ex;
        std::shared_ptr<plan_cancel_link> link; // when its handler has a cancellation slot
        wait_machine machine;
        wait_action action = wait_action::query();
        std::uint64_t generation = 0;
        step next = step::initial;
        plan_line_watch* watch = nullptr; // the port's, of the source's line
        slot_id slot = *slot_id::at(0);   // the source's slot
        std::uint64_t retirements_seen = 0;
    };

    // The wait ends without the source's answer: cancelled, or its source went away. The
    // machine takes that as its event and ends the wait (cancelled: operation_aborted), unless
    // it had ended already (a result it reached stands).
    template <class Self>
    void abort(Self& self) {
        impl& m = *impl_;
        m.action = m.machine.on_event(wait_event::cancelled(mono_now()));
        finish(self);
    }

    template <class Self>
    void run(Self& self) {
        impl& m = *impl_;
        for (;;) {
            if ((m.link && m.link->cancelled()) ||
                m.state->generation.load(std::memory_order_acquire) != m.generation)
                return abort(self);
            switch (m.action.kind) {
            case wait_action::type::query:
                if (!query_once(self)) return;
                break;
            case wait_action::type::block:
            case wait_action::type::arm:
                if (!call_source(m)) return abort(self);
                break;
            case wait_action::type::sleep_until:
                return start_sleep(self);
            case wait_action::type::park:
                return start_park(self);
            case wait_action::type::done:
            case wait_action::type::failed:
            case wait_action::type::cancelled:
                return finish(self);
            }
        }
    }

    /// One query and the machine's answer. False when the op gave its thread back: aborted, or
    /// posted to query again (polling lets other handlers run between queries).
    template <class Self>
    bool query_once(Self& self) {
        impl& m = *impl_;
        // The call first, then the clock: argument order is unspecified.
        query_result q = query_result::pending();
        if (!m.with_source([&](Source& src) { q = src.query(); })) {
            abort(self);
            return false;
        }
        m.action = m.machine.on_event(wait_event::queried(q, mono_now()));
        if (m.action.kind != wait_action::type::query) return true;
        const Executor ex = m.ex;
        asio::post(ex, std::move(self));
        return false;
    }

    /// The source's block() or arm(), as the action says, and the machine's answer. False when
    /// the source is gone.
    static bool call_source(impl& m) {
        std::error_code r; // the call before the clock is read
        if (m.action.kind == wait_action::type::block) {
            expect_no_lock_held(); // block() waits for the work
            if (!m.with_source([&](Source& src) { r = src.block(); })) return false;
            m.action = m.machine.on_event(wait_event::blocked(r, mono_now()));
            return true;
        }
        if (!m.with_source([&](Source& src) { r = src.arm(); })) return false;
        m.action = m.machine.on_event(wait_event::armed(r, mono_now()));
        return true;
    }

    template <class Self>
    void start_sleep(Self& self) {
        impl& m = *impl_;
        m.next = step::sleeping;
        // A flag plan has armed its source (the word will be stored behind the work): its sleep
        // is a reactor wait on that word whose deadline is the sleep's end, so work that
        // finishes early ends the sleep at once (a late ending, found by the query that
        // follows). Other plans arm nothing (their descriptor may name a store long reached):
        // theirs waits on a word that never comes.
        if (m.plan.kind() == plan_kind::flag) return on_word(self, dur_ns{}, m.action.at);
        start_reactor_step(self, never_stored(), dur_ns{}, m.action.at);
    }

    template <class Self>
    void start_park(Self& self) {
        impl& m = *impl_;
        m.next = step::parking;
        // The reactor scans the word at every ring, device signal and park bound: one
        // registration lasts until the backstop query is due (the action's `at`), its bound the
        // machine's piece. A registration renewed at every piece while the word is unchanged
        // would cost a timeout and a post each time and see nothing the scans do not.
        on_word(self, m.action.bound, m.action.at);
    }

    /// The machine's end: done (its report, fed to the point's estimator), failed or cancelled.
    /// The state (timer included) is freed before the upcall.
    template <class Self>
    void finish(Self& self) {
        impl& m = *impl_;
        if (m.action.kind == wait_action::type::cancelled) {
            impl_.reset();
            self.complete(asio::error::operation_aborted, wait_report{});
            return;
        }
        if (m.action.kind == wait_action::type::failed) {
            const error_code ec = detail::to_asio_error_code(m.action.error);
            impl_.reset();
            self.complete(ec, wait_report{});
            return;
        }
        wait_report report = m.action.report;
        report.warning = std::move(m.warning);
        if (report.outcome) {
            std::lock_guard lk(m.state->points_mutex);
            points_of(*m.state).observe(m.point, feeding_plan(m.plan), *report.outcome);
        }
        impl_.reset();
        self.complete(error_code{}, report);
    }

    /// Registers the next step as a reactor wait on the source's word, ending when the word
    /// reaches its target or at `end`; `bound`: the reactor's longest park while it waits
    /// (none: the reactor's own).
    template <class Self>
    void on_word(Self& self, dur_ns bound, mono_ns end) {
        impl& m = *impl_;
        // Held until the wait is registered (and past the op's end: `keep`), so a retirement of
        // the source's line cannot slip in between (see impl).
        const std::shared_ptr<port_state> keep = m.state;
        std::unique_lock reg(keep->registration_mutex);
        std::optional<memory_descriptor> desc;
        if (!m.with_source([&](Source& src) { desc = src.descriptor(); })) {
            reg.unlock();
            return abort(self);
        }
        start_reactor_step(self, *desc, bound, end);
    }

    /// Registers the next step (`self`) as a reactor wait on `desc` until `end`. Its handler
    /// has no cancellation slot: a cancellation reaches it through the link, by its key. Never
    /// runs the step inline (one that ends at once is delivered through the port's queue).
    template <class Self>
    void start_reactor_step(Self& self, const memory_descriptor& desc, dur_ns bound, mono_ns end) {
        with_port_wait_op(self, impl_->ex, [&](auto op) {
            start_reactor_step_as<typename decltype(op)::type>(self, desc, bound, end);
        });
    }

    /// start_reactor_step with its op type chosen (with_port_wait_op).
    template <class OpType, class Self>
    void start_reactor_step_as(Self& self, const memory_descriptor& desc, dur_ns bound,
                               mono_ns end) {
        using op_type = OpType;
        impl& m = *impl_;
        // Taken before the op owns `self`, and this state with it: once registered, the wait may
        // end and its step run on another thread at once.
        const std::shared_ptr<port_state> keep = m.state;
        const std::shared_ptr<plan_cancel_link> link = m.link;
        reactor_service& svc = *m.svc;
        const Executor ex = m.ex;
        op_type* op = op_type::create(std::move(self), desc, *keep->reactor.queue.get());
        const reactor_key key = svc.make_key(*op);
        reactor_service::start_result started{};
        try {
            op->hold_work(ex);
            if (link) link->waiting_on(key);
            started = svc.start(op, bound, end);
        } catch (...) {
            op->destroy();
            throw;
        }
        switch (started) {
        case reactor_service::start_result::registered:
            // A cancellation between the key's publication and the registration found nothing.
            if (link && link->cancelled()) svc.cancel(key);
            return;
        case reactor_service::start_result::finished:
            svc.deliver(op);
            return;
        case reactor_service::start_result::dropped:
            op->destroy(); // the context has shut down: destroyed, never invoked
            return;
        }
    }

    std::unique_ptr<impl> impl_;
};

template <class T>
struct is_slot_binder : std::false_type {};
template <class T, class Slot>
struct is_slot_binder<asio::cancellation_slot_binder<T, Slot>> : std::true_type {};

/// `handler` with no cancellation slot, its other associations kept. A slot binder is unwrapped
/// first: Asio's binder, given another slot binder, does not wrap it but takes its target.
template <class Handler>
auto without_cancellation_slot(Handler handler) {
    if constexpr (is_slot_binder<Handler>::value)
        return without_cancellation_slot(std::move(handler.get()));
    else
        return asio::cancellation_slot_binder<Handler, asio::cancellation_slot>(
            asio::cancellation_slot(), std::move(handler));
}

/// Starts a plan-driven wait for `handler`, the async_initiate initiation of a port's
/// plan-driven async_wait. A handler with a cancellation slot gets a plan_cancel_handler there,
/// installed once, now, and the composed operation runs with no slot (so it never installs a
/// handler there again while another thread may emit the signal).
template <class Executor>
struct initiate_plan_wait {
    template <class Handler, class Source>
    void operator()(Handler&& handler, plan_wait_op<Source, Executor> op,
                    const Executor& ex) const {
        using signature = void(error_code, wait_report);
        auto slot = asio::get_associated_cancellation_slot(handler);
        if (!slot.is_connected()) {
            std::decay_t<Handler> h(std::forward<Handler>(handler));
            asio::async_compose<std::decay_t<Handler>, signature>(std::move(op), h, ex);
            return;
        }
        slot.template emplace<plan_cancel_handler>(op.link_cancellation());
        auto h = without_cancellation_slot(std::decay_t<Handler>(std::forward<Handler>(handler)));
        asio::async_compose<decltype(h), signature>(std::move(op), h, ex);
    }
};

GPU_ASYNC_ASIO_NAMESPACE_END
} // namespace detail
} // namespace gpu_async

#endif // GPU_ASYNC_ASIO_DETAIL_PLAN_WAIT_OP_HPP
