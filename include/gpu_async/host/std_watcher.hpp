// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief A watcher thread that completes waiters of any runtime (`std_watcher`), and the
/// handle of one of its registrations (`watch_handle`: the future form, wait(), wait_for(),
/// ready(); on_complete's callback form, on_end's, on_stop's).
///
///     std_watcher w;                          // one background thread
///     watch_handle h = w.watch(descriptor);   // future-like: wait(), wait_for(), ready()
///     watch_handle c = w.on_complete(descriptor, [] { ... });   // callback form
///     watch_handle e = w.on_end(descriptor, [](std::error_code ec) { ... });  // told of a stop
///     w.bell().ring();                        // a producer's store is seen at once
///     w.shutdown();                           // stops the thread (the destructor does too)
///
/// Host layer: std threads and the word wait; no Boost, no Asio.
#ifndef GPU_ASYNC_HOST_STD_WATCHER_HPP
#define GPU_ASYNC_HOST_STD_WATCHER_HPP

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/detail/scan_engine.hpp>
#include <gpu_async/core/error.hpp>
#include <gpu_async/core/park_policy.hpp>
#include <gpu_async/core/time.hpp>
#include <gpu_async/core/wait_end.hpp>
#include <gpu_async/core/wait_tuning.hpp>
#include <gpu_async/core/watch_table.hpp>
#include <gpu_async/line/detail/line_watchers.hpp>
#include <gpu_async/line/line_health.hpp>
#include <gpu_async/line/line_life.hpp>
#include <gpu_async/wait/detail/bell_waiter.hpp>
#include <gpu_async/wait/detail/ranked_mutex.hpp>
#include <gpu_async/wait/doorbell.hpp>
#include <gpu_async/wait/wordwait.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace gpu_async {

class std_watcher;

namespace detail {

class fd_notifier_core;

/// The line a stop listener's engine part names (never read: a stop listener is never taken in).
inline const completion_line no_line{};

// One registration of the watcher. Shared by the handle and the watcher's registry; its engine
// part is in the watcher's scan engine between its take-in and its leaving.
struct watch_state : engine_wait, std::enable_shared_from_this<watch_state> {
    enum class phase : std::uint8_t { registered, firing, done, dropped };

    explicit watch_state(const memory_descriptor& d, bool stop_listener = false) noexcept
        : engine_wait(d)
        , line(stop_listener ? nullptr : &d.line()) {}
    ~watch_state() = default;

    const completion_line* line = nullptr; // null for a stop listener (on_stop)
    std::function<void()> callback;        // on_complete's, on_stop's; empty for the future form
    std::function<void(std::error_code)> end_fn; // on_end's: also run when the watcher stops
    phase state = phase::registered;             // guarded by the watcher's mutex

    // The future form's own completion flag (no watcher lock needed to wait on it), and how it
    // ended: empty when the word reached the target.
    ranked_mutex m{lock_rank::watch_flag};
    ranked_condition_variable cv;
    bool done = false;
    std::error_code error;
    // Why it ends without its word reaching the target (retired, faulted, stale), set under
    // the watcher's mutex before it is fired.
    std::error_code ending;

    // An end sink's (std_watcher::on_end_here): ended by a retirement, a slot's fault or its
    // give-back, it is fired on the thread that ended it, before that call returns.
    bool ends_here = false;
    // Guarded by the watcher's mutex while it fires away from the watcher thread: that thread
    // (a drop from its own function returns at once) and the reference that keeps it alive.
    std::thread::id firer;
    std::shared_ptr<watch_state> firing_ref;
};

} // namespace detail

/// The waitable handle of one watcher registration: future-like (`wait`, `wait_for`, `ready`).
/// Move-only. Destroying (or `reset`ting) it before it resolved removes the registration: a
/// callback is then never run after the destructor returned (it waits for one already running
/// on the watcher thread, unless called from that callback).
class watch_handle {
public:
    watch_handle() = default;
    watch_handle(watch_handle&& o) noexcept
        : watcher_(std::exchange(o.watcher_, nullptr))
        , state_(std::move(o.state_)) {}
    watch_handle& operator=(watch_handle&& o) noexcept {
        if (this != &o) {
            reset();
            watcher_ = std::exchange(o.watcher_, nullptr);
            state_ = std::move(o.state_);
        }
        return *this;
    }
    watch_handle(const watch_handle&) = delete;
    watch_handle& operator=(const watch_handle&) = delete;
    ~watch_handle() { reset(); }

    /// True when the handle refers to a registration.
    bool valid() const noexcept { return state_ != nullptr; }

    /// True once the registration ended: the descriptor was seen complete (and, in the callback
    /// form, the callback has returned), or it ended without completing (see error()).
    bool ready() const {
        if (!state_) return false;
        std::lock_guard lk(state_->m);
        return state_->done;
    }

    /// How the registration ended, once ready(): empty when the descriptor completed;
    /// std::errc::operation_canceled when its line was retired, errc::device_fault when its
    /// slot's stream faulted, errc::stale_descriptor when its descriptor's line had been retired
    /// before it was registered. A callback registered with on_complete is not run then.
    std::error_code error() const {
        if (!state_) return {};
        std::lock_guard lk(state_->m);
        return state_->error;
    }

    /// Blocks until ready(). Precondition: valid().
    void wait() const {
        std::unique_lock lk(state_->m);
        state_->cv.wait(lk, [&] { return state_->done; });
    }

    /// Blocks until ready() or `d` has passed; returns ready(). Precondition: valid().
    template <class Rep, class Period>
    bool wait_for(std::chrono::duration<Rep, Period> d) const {
        std::unique_lock lk(state_->m);
        return state_->cv.wait_for(lk, d, [&] { return state_->done; });
    }

    /// Drops the registration (see the class comment); the handle becomes empty.
    inline void reset();

private:
    friend class std_watcher;
    watch_handle(std_watcher& w, std::shared_ptr<detail::watch_state> s) noexcept
        : watcher_(&w)
        , state_(std::move(s)) {}

    std_watcher* watcher_ = nullptr;
    std::shared_ptr<detail::watch_state> state_;
};

/// A background thread that watches completion lines for waiters on any runtime (threads, a
/// foreign event loop, a coroutine library): each registration names (line, slot, target) and
/// resolves once the word reaches the target.
///
/// - Registrations live in a watch_table (<gpu_async/core/watch_table.hpp>, the registry every
///   host shares): one scan costs a load per watched slot and O(log n) per completion, under the
///   wrapping rule for any history of stores.
/// - The thread waits between scans as the Asio reactor service's does (one implementation,
///   <gpu_async/wait/detail/bell_waiter.hpp>): it parks on the watcher's doorbell (`bell()`), which
///   producers ring after their store and devices with the doorbell attached store into, with a
///   user-mode monitor on its line where the CPU has one, otherwise on its futex (and in
///   device-poll steps while device producers are counted). While something is watched a park
///   lasts at most `park_bound`, so producers that do not ring are seen within it; while nothing
///   is, the thread sleeps until a registration or a stop rings. Every line is scanned after
///   each park.
/// - The registrations live in a scan engine (<gpu_async/core/detail/scan_engine.hpp>) under the
///   watcher's one lock (ranked in the hierarchy of <gpu_async/wait/detail/ranked_mutex.hpp>).
/// - Waiters are woken and callbacks run on the watcher thread with no lock held: a callback
///   may register again, drop handles or do anything that does not wait for the watcher itself.
/// - A line must outlive its registrations (drop the handles before freeing the line), or be
///   retired first (gpu_async::retire_line, which the library's line owners call): the
///   watcher honours retirement, ending the line's registrations (on_end's function gets
///   std::errc::operation_canceled; the other forms resolve with that error() and run no
///   callback). A descriptor of a line retired before it is registered ends so with
///   errc::stale_descriptor, one of a faulted slot (gpu_async::fault_slot) with
///   errc::device_fault, without the line being read. The watcher must outlive every handle.
///   Callbacks must not throw.
/// - Stopping (`shutdown()`, or the destructor): the thread ends every pending `on_end`
///   registration with errc::shut_down and runs every `on_stop` callback (on the watcher
///   thread, no lock held) before it exits; registrations of the other forms never resolve. After
///   the stop, `on_end` and `on_stop` return an empty handle and never run their function, so a
///   client that registers only those holds no handle once the thread has exited (the std-host
///   fd notifier, <gpu_async/host/wait_fd.hpp>, relies on it).
class std_watcher final : private detail::line_watcher {
public:
    /// Starts the thread. `park_bound`: the longest park or sleep between two scans.
    /// `ww`: the word wait of the park on the doorbell's line (fallback: its futex).
    explicit std_watcher(dur_ns park_bound = default_wait_tuning.park_bound,
                         const word_wait& ww = word_wait::probe())
        : park_bound_(park_bound)
        , waiter_(ww) {
        thread_ = detail::start_watcher_thread([this] { run(); });
        try {
            detail::add_line_watcher(*this);
        } catch (...) {
            shutdown();
            throw;
        }
    }
    std_watcher(const std_watcher&) = delete;
    std_watcher& operator=(const std_watcher&) = delete;

    /// Stops the thread as shutdown() does. Handles of the future and on_complete forms still
    /// registered never resolve and must be destroyed before the watcher.
    ~std_watcher() {
        // First: no retirement asks a watcher being destroyed (this waits for one asking now).
        detail::remove_line_watcher(*this);
        shutdown();
    }

    /// Stops and joins the thread (idempotent, thread-safe; not from a callback of this
    /// watcher). Before it exits, the thread ends each pending `on_end` registration with
    /// errc::shut_down and runs each `on_stop` callback; the future and on_complete forms never
    /// resolve. The watcher stays usable as an object: handles may still be dropped, and new
    /// `on_end` and `on_stop` registrations return an empty handle.
    void shutdown() {
        {
            std::lock_guard lk(m_);
            stop_ = true;
        }
        bell_->ring(); // ends a park at once
        std::lock_guard jl(join_m_);
        if (thread_.joinable()) thread_.join();
    }

    /// True once shutdown() (or the destructor) has begun.
    bool stopped() const {
        std::lock_guard lk(m_);
        return stop_;
    }

    /// Watches `d`; the handle resolves once `d` is complete.
    watch_handle watch(const memory_descriptor& d) { return add(d, {}); }

    /// Watches (line, slot, target).
    watch_handle watch(const completion_line& line, slot_id slot, std::uint64_t target) {
        return add(memory_descriptor(line, slot, target), {});
    }

    /// Runs `fn` on the watcher thread, with no lock held, once `d` is complete; the handle
    /// becomes ready after `fn` returned. Never invoked from within this function.
    watch_handle on_complete(const memory_descriptor& d, std::function<void()> fn) {
        return add(d, std::move(fn));
    }

    /// Runs `fn(ec)` once, on the watcher thread with no lock held: `ec` empty once `d` is
    /// complete, errc::shut_down when the watcher stops first. The handle becomes ready after
    /// `fn` returned. Never invoked from within this function. Returns an empty handle, and
    /// never runs `fn`, when the watcher has stopped. Dropping the handle first: `fn` never runs
    /// (as on_complete).
    watch_handle on_end(const memory_descriptor& d, std::function<void(std::error_code)> fn) {
        return add(d, {}, std::move(fn));
    }

    /// Runs `fn` once, on the watcher thread with no lock held, when the watcher stops (after
    /// the on_end registrations were ended). Returns an empty handle, and never runs `fn`, when
    /// the watcher has stopped. Dropping the handle first: `fn` never runs.
    watch_handle on_stop(std::function<void()> fn) {
        auto s = std::make_shared<detail::watch_state>(
            memory_descriptor(detail::no_line, *slot_id::at(0), 0), /*stop_listener=*/true);
        s->callback = std::move(fn);
        {
            std::lock_guard lk(m_);
            if (stop_) return watch_handle();
            stop_listeners_.push_back(s);
        }
        return watch_handle(*this, std::move(s));
    }

    /// Registrations not yet resolved (stop listeners are not counted).
    std::size_t pending() const {
        std::lock_guard lk(m_);
        return engine_.size() + left_.count + stranded_.count;
    }

    /// Lines with at least one registration.
    std::size_t lines() const {
        std::lock_guard lk(m_);
        return engine_.lines();
    }

    /// How the thread waits between scans: "park: <word wait>" (a user-mode monitor on the
    /// doorbell's line) or "futex" (the doorbell's futex).
    std::string waiting() const {
        return waiter_.has_monitor()
                   ? std::string("park: ") + std::string(waiter_.word_wait_used().name())
                   : std::string("futex");
    }

    /// The watcher's doorbell: a producer that rings it after its store (or a device that
    /// stores doorbell::device_signal into its device word, counted with add_device_producer())
    /// is seen at once rather than within the park bound.
    doorbell& bell() const noexcept { return *bell_; }
    /// The doorbell, shared: a producer that outlives the watcher keeps it alive.
    std::shared_ptr<doorbell> shared_bell() const noexcept { return bell_; }

    /// The device poll interval: with device producers counted on the doorbell and no
    /// user-mode monitor, the longest sleep between two looks at the doorbell's device word
    /// while something is watched (default_device_poll, 20 us).
    dur_ns device_poll() const noexcept { return waiter_.device_poll(); }
    void device_poll(dur_ns interval) noexcept { waiter_.device_poll(interval); }

    /// Number of scans of the watched lines so far.
    std::uint64_t scans() const noexcept { return scans_.load(std::memory_order_relaxed); }

private:
    friend class watch_handle;
    friend class detail::fd_notifier_core;
    using state_ptr = std::shared_ptr<detail::watch_state>;

    /// on_end() for an end sink (the fd notifier): as on_end, except that a wait ended by a
    /// retirement, a slot's fault or its give-back, or found ended before and not yet fired by
    /// the watcher thread, has `fn` run on the thread of that retirement or fault (with none of
    /// the watcher's locks held), before that call returns, so the sink holds the ending as soon
    /// as the line's owner goes on. One the watcher thread is firing already is told there. So
    /// is the stop; a retirement racing it may tell its sinks after the stop listeners ran.
    /// `fn` must not wait for the watcher.
    watch_handle on_end_here(const memory_descriptor& d, std::function<void(std::error_code)> fn) {
        return add(d, {}, std::move(fn), /*ends_here=*/true);
    }

    // The std_watcher is an adapter over a scan engine (<gpu_async/core/detail/scan_engine.hpp>):
    // registrations are taken in under m_ as they come, and what leaves the engine becomes a
    // callback to run on the watcher thread. Its sink is one intrusive list (left_): what left
    // the engine outside a pass, to fire at the next; a handle owns each registration.

    // Puts what left the engine on left_ to fire at the thread's next pass, each with its code
    // (`ending`: empty when reached; retired, faulted, stale). With `here` (a retirement, a
    // fault, a give-back), the end sinks' waits go there instead, to be fired by the caller
    // (fire_here). Lock held; never allocates.
    void settle_locked(detail::engine_list& out, detail::engine_list* here = nullptr) noexcept {
        while (detail::engine_wait* w = out.pop()) {
            auto* p = static_cast<detail::watch_state*>(w);
            if (w->end() != wait_end::reached) p->ending = to_error_code(w->end(), std_codes());
            if (here != nullptr && p->ends_here)
                fire_here_locked(*p, *here);
            else
                left_.push(w);
        }
    }
    // Marks `p` as fired by this thread and puts it on `here` (fire_here). Lock held.
    static void fire_here_locked(detail::watch_state& p, detail::engine_list& here) noexcept {
        p.state = detail::watch_state::phase::firing;
        p.firer = std::this_thread::get_id();
        p.firing_ref = p.shared_from_this();
        here.push(&p);
    }

    // Fires the end sinks' waits that a retirement, a fault or a give-back on this thread
    // ended (settle_locked's `here`), with no lock held, then marks them done.
    void fire_here(detail::engine_list& here) noexcept {
        if (here.empty()) return;
        for (detail::engine_wait* w = here.head; w != nullptr; w = w->next)
            fire(*static_cast<detail::watch_state*>(w), std::error_code());
        {
            std::lock_guard lk(m_);
            for (detail::engine_wait* w = here.head; w != nullptr; w = w->next)
                static_cast<detail::watch_state*>(w)->state = detail::watch_state::phase::done;
        }
        idle_cv_.notify_all();
        // Released with no lock held: the last reference may go here, and with it the sink's
        // function and what it holds.
        while (detail::engine_wait* w = here.pop()) {
            state_ptr ref = std::move(static_cast<detail::watch_state*>(w)->firing_ref);
        }
    }

    watch_handle add(const memory_descriptor& d, std::function<void()> fn,
                     std::function<void(std::error_code)> end = {}, bool ends_here = false) {
        auto s = std::make_shared<detail::watch_state>(d);
        s->callback = std::move(fn);
        s->end_fn = std::move(end);
        s->ends_here = ends_here;
        {
            std::lock_guard lk(m_);
            if (stop_ && s->end_fn) return watch_handle(); // nothing would ever end it
            // One read of the word (complete now: fired at the next pass), after the status
            // check (a retired line's descriptor, a faulted slot's, ends unread). Under m_: a
            // retirement advances the generation before it takes m_.
            detail::engine_list out;
            engine_.take_in_one(*s, out);
            if (s->engine_wait::end() == wait_end::no_memory && !s->registered())
                throw std::bad_alloc();
            settle_locked(out);
        }
        bell_->ring(); // the thread takes it in now (it may be idle, or the wait complete)
        return watch_handle(*this, std::move(s));
    }

    // Called by a handle that is dropped.
    void drop(const state_ptr& s) {
        std::unique_lock lk(m_);
        if (s->state == detail::watch_state::phase::registered) {
            // The thread reads the lines only while it scans, under the lock (it parks on the
            // doorbell's line alone): once unlinked here, the caller may free the line.
            unlink(*s);
            s->state = detail::watch_state::phase::dropped;
            return;
        }
        // A callback of this registration is running: wait for it, unless we are inside it (on
        // the thread firing it: the one that ended an end sink here, else the watcher thread).
        // The id is the thread's own record under m_: thread_ itself is written by a join.
        const std::thread::id me = std::this_thread::get_id();
        const std::thread::id firing = s->firer != std::thread::id() ? s->firer : thread_id_;
        if (me != firing)
            idle_cv_.wait(lk, [&] { return s->state != detail::watch_state::phase::firing; });
    }

    void unlink(detail::watch_state& s) {
        if (s.registered()) {
            detail::engine_list dropped; // it leaves uninvoked: its handle is going
            engine_.remove(s, dropped);
            return;
        }
        if (left_.erase(&s) || stranded_.erase(&s)) return;
        const auto it = std::find_if(stop_listeners_.begin(), stop_listeners_.end(),
                                     [&](const state_ptr& p) { return p.get() == &s; });
        if (it != stop_listeners_.end()) stop_listeners_.erase(it);
    }

    // Moves every registration whose word reached its target, or that ended without (retired,
    // faulted, stale), into `out`: what left the engine before this pass, then what this scan
    // finds. Lock held. Room is made first, so that only that reserve can throw.
    void collect(std::vector<state_ptr>& out) {
        out.reserve(out.size() + left_.count + engine_.size());
        while (detail::engine_wait* w = left_.pop())
            out.push_back(static_cast<detail::watch_state*>(w)->shared_from_this());
        detail::engine_list found;
        engine_.scan(mono_ns{}, found); // no deadlines: the time is unused
        while (detail::engine_wait* w = found.pop())
            out.push_back(static_cast<detail::watch_state*>(w)->shared_from_this());
        for (const state_ptr& p : out)
            p->state = detail::watch_state::phase::firing;
    }

    /// Ends one registration (no lock held): its on_end callback gets `ec`, an on_complete
    /// callback runs, then the future form's waiters are released.
    // Runs the registration's function and resolves its handle. `ec`: the watcher's reason
    // (shut_down at the stop), unless the registration ended for its own (`ending`).
    static void fire(detail::watch_state& s, std::error_code ec) {
        detail::expect_no_lock_held(); // the callbacks are the user's
        if (s.ending) ec = s.ending;
        if (s.end_fn) {
            auto fn = std::move(s.end_fn);
            fn(ec);
        } else if (s.callback && (!ec || s.line == nullptr)) { // a stop listener runs at the stop
            auto fn = std::move(s.callback);
            fn();
        }
        {
            std::lock_guard sl(s.m);
            s.done = true;
            if (s.line != nullptr) s.error = ec;
        }
        s.cv.notify_all();
    }

    // line_watcher: after this returns the thread never reads `line` (it reads lines only while
    // it scans, under m_). The registrations end on the watcher thread (nothing waits for a
    // callback here), the end sinks' here, before it returns.
    void retire_line(const completion_line& line) noexcept override {
        end_waits(line, std::nullopt,
                  [&](detail::engine_list& out) { engine_.retire_line(line, out); });
    }

    // What the stream stored before its fault completes as usual; the rest fault. Only while
    // the slot is at the faulted generation (under m_, where every registration is taken in: no
    // later stream's waits are in the table then); a slot retired since had its waits ended.
    void fault_slot(const completion_line& line, slot_id slot,
                    std::uint64_t generation) noexcept override {
        end_waits(line, slot, [&](detail::engine_list& out) {
            if (slot_generation(line, slot) == generation) engine_.fault_slot(line, slot, out);
        });
    }

    // The slot's stream went: what it stored completes, the rest end as a retired line's do.
    // Only while the slot is at the retirement's generation: a later one visits too.
    void retire_slot(const completion_line& line, slot_id slot,
                     detail::slot_retirement r) noexcept override {
        end_waits(line, slot, [&](detail::engine_list& out) {
            if (slot_generation(line, slot) == r.next) engine_.retire_slot(line, slot, out);
        });
    }

    // Under the lock, `end(out)` takes waits out of the engine; they are settled there and the
    // thread is rung to fire them; the end sinks' are fired here, after the lock, after those of
    // `line` (and `slot`, when given) that left the engine before and wait on left_ for the
    // thread (they keep their own code). Only an end sink the thread is firing already is
    // told by the thread.
    template <class End>
    void end_waits(const completion_line& line, std::optional<slot_id> slot, End&& end) noexcept;

    // The thread's loop: scan, fire, park, as park_policy says; the stop pass at its end.
    void run();

    // The thread's last act (lock held, stop_ set): ends the on_end registrations with
    // errc::shut_down and runs the stop listeners, with the lock released; the other forms stay
    // registered (stranded_: never resolved, still dropped by their handles).
    void stop_pass(std::unique_lock<detail::ranked_mutex>& lk);

    dur_ns park_bound_;
    std::shared_ptr<doorbell> bell_ = std::make_shared<doorbell>();
    detail::bell_waiter waiter_; // the wait between scans, as the reactor service's
    mutable detail::ranked_mutex m_{detail::lock_rank::std_watcher};
    detail::ranked_condition_variable idle_cv_;      // the thread finished firing
    detail::scan_engine engine_{&descriptor_status}; // registrations not yet reached
    // Out of the engine (reached, or ended unreached with `ending`), fired at the next pass.
    detail::engine_list left_;
    std::vector<state_ptr> stop_listeners_; // on_stop's, run by the stop pass
    detail::engine_list stranded_;          // future/on_complete forms pending at the stop
    bool stop_ = false;
    std::atomic<std::uint64_t> scans_{0};
    std::thread::id thread_id_; // the watcher thread's, set by it (m_): drop() reads this
    detail::ranked_mutex join_m_{detail::lock_rank::watcher_join}; // one shutdown() joins
    std::thread thread_;
};

inline void watch_handle::reset() {
    if (!state_) return;
    watcher_->drop(state_);
    state_.reset();
    watcher_ = nullptr;
}

} // namespace gpu_async

#include <gpu_async/host/impl/std_watcher.ipp>

#endif // GPU_ASYNC_HOST_STD_WATCHER_HPP
