// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The FILL executor: a single-threaded executor of C++20
/// coroutine tasks whose waits are filled with live work. It idles (sleeps or parks, through the
/// host's idle) only when no task is ready.
///
///     fill_executor ex(dur_ns::from_us(100));              // the park bound
///     reactor& r = ex.get_reactor();
///     ex.spawn([](reactor& r, memory_descriptor d) -> fill_task<> {
///         const bool ok = co_await r.ready(d, std::nullopt); // true: d completed
///     }(r, d));
///     ex.spawn([]() -> fill_task<> { for (...) { work(); co_await yield_now(); } }());
///     auto stats = ex.run(idle);                              // or errc::stalled
///
/// Rules: a task is resumed only after it was woken (by the reactor, by yield_now) or once at
/// spawn; completions are checked between any two resumptions, so they become ready work
/// promptly; run() returns when every task finished, or with errc::stalled when tasks are left
/// that nothing registered can wake. Tasks must not let exceptions escape (the core does not use
/// exceptions): an escaping exception terminates the program.
///
/// Compiler note: g++ 12 miscompiles a co_await used directly as an if-condition
/// (`if (co_await x)`: the coroutine's body never runs). Bind the result first, as above.
///
/// Standard library only: no threads, no blocking, no clock (the idle reads it).
#ifndef GPU_ASYNC_FILL_FILL_EXECUTOR_HPP
#define GPU_ASYNC_FILL_FILL_EXECUTOR_HPP

#include <gpu_async/core/completion_source.hpp>
#include <gpu_async/core/park_fallback.hpp>
#include <gpu_async/core/result.hpp>
#include <gpu_async/core/time.hpp>
#include <gpu_async/core/wait_machine.hpp>
#include <gpu_async/core/wait_plan.hpp>
#include <gpu_async/core/wait_tuning.hpp>
#include <gpu_async/fill/reactor.hpp>

#include <concepts>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

namespace gpu_async {

class fill_executor;

namespace detail {

struct fill_promise_base {
    fill_executor* executor = nullptr;
    std::coroutine_handle<> continuation;
    std::size_t root_index = 0; ///< a spawned task's place in its executor's root list

    struct final_awaiter {
        bool await_ready() const noexcept { return false; }
        template <class P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept;
        void await_resume() const noexcept {}
    };

    std::suspend_always initial_suspend() const noexcept { return {}; }
    final_awaiter final_suspend() const noexcept { return {}; }
    [[noreturn]] void unhandled_exception() const noexcept { std::terminate(); }
};

template <class T>
struct fill_value {
    std::optional<T> value;
    template <class U = T>
    requires std::constructible_from<T, U&&>
    void return_value(U&& v) { value.emplace(std::forward<U>(v)); }
};

template <>
struct fill_value<void> {
    void return_void() const noexcept {}
};

template <class P>
concept fill_promise = std::derived_from<P, fill_promise_base>;

} // namespace detail

/// A lazily started coroutine task of the FILL executor. Spawn a `fill_task<>` on an executor,
/// or co_await any `fill_task<T>` from inside another task (it runs on the awaiting task's
/// executor and resumes the awaiter when it returns). Move-only; destroying an unstarted or
/// suspended task destroys its frame.
template <class T = void>
class [[nodiscard]] fill_task {
public:
    struct promise_type : detail::fill_promise_base, detail::fill_value<T> {
        fill_task get_return_object() noexcept {
            return fill_task(std::coroutine_handle<promise_type>::from_promise(*this));
        }
    };
    using handle_type = std::coroutine_handle<promise_type>;

    fill_task(fill_task&& o) noexcept
        : h_(std::exchange(o.h_, {})) {}
    fill_task& operator=(fill_task&& o) noexcept {
        if (this != &o) {
            if (h_) h_.destroy();
            h_ = std::exchange(o.h_, {});
        }
        return *this;
    }
    fill_task(const fill_task&) = delete;
    fill_task& operator=(const fill_task&) = delete;
    ~fill_task() {
        if (h_) h_.destroy();
    }

    /// True when the task has returned.
    bool done() const noexcept { return !h_ || h_.done(); }

    // Awaiting a task from another task: starts it on the awaiter's executor.
    bool await_ready() const noexcept { return done(); }
    template <detail::fill_promise P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> parent) noexcept {
        h_.promise().continuation = parent;
        h_.promise().executor = parent.promise().executor;
        return h_;
    }
    T await_resume() {
        if constexpr (!std::is_void_v<T>) return std::move(*h_.promise().value);
    }

    /// Gives up ownership of the frame.
    handle_type release() noexcept { return std::exchange(h_, {}); }

private:
    explicit fill_task(handle_type h) noexcept
        : h_(h) {}
    handle_type h_;
};

/// Awaitable: puts the task at the back of the ready queue, behind the other ready work and the
/// completions found right after it yielded. Cooperative slices of CPU work use it.
struct yield_awaiter {
    bool await_ready() const noexcept { return false; }
    template <detail::fill_promise P>
    void await_suspend(std::coroutine_handle<P> h) const;
    void await_resume() const noexcept {}
};

/// Yields to the executor: `co_await yield_now();`.
inline yield_awaiter yield_now() noexcept {
    return {};
}

/// Run statistics of a FILL executor.
struct fill_stats {
    std::uint64_t resumptions = 0; ///< task resumptions
    std::uint64_t woke = 0;        ///< checks that found completions without idling
    std::uint64_t sleeps = 0;      ///< idles that slept (only alarms pending)
    std::uint64_t parks = 0;       ///< idles that parked on a line
    dur_ns idle_time;              ///< time spent sleeping and parking, by the idle's clock

    friend bool operator==(const fill_stats&, const fill_stats&) = default;
};

/// The single-threaded FILL executor. Not copyable or movable (tasks hold its address).
class fill_executor {
public:
    /// `park_bound`: the longest single park on a line (the reactor's park bound).
    explicit fill_executor(dur_ns park_bound = default_wait_tuning.park_bound) noexcept
        : park_bound_(park_bound) {}
    fill_executor(const fill_executor&) = delete;
    fill_executor& operator=(const fill_executor&) = delete;

    /// Destroys every unfinished task; their pending waits unregister themselves.
    ~fill_executor() {
        ready_.clear();
        yielded_.clear();
        for (const root& r : roots_)
            r.handle.destroy();
    }

    /// The reactor the tasks await: `co_await ex.get_reactor().ready(d, until)`.
    gpu_async::reactor& get_reactor() noexcept { return reactor_; }

    /// Adds a task; it first runs, once, at the next run(). An empty task is ignored.
    void spawn(fill_task<> t) {
        auto h = t.release();
        if (!h) return;
        h.promise().executor = this;
        h.promise().root_index = roots_.size();
        roots_.push_back({h, &h.promise()});
        ready_.push_back(h);
    }

    /// Runs until every task has finished (returns the run's statistics) or a stall: tasks left
    /// that nothing registered can wake (errc::stalled with the count; the tasks stay, and a
    /// later run() may continue them). Statistics accumulate over runs.
    template <reactor_idle Idle>
    result<fill_stats> run(Idle& idle) {
        reactor_.use_line_life_of(idle); // before a task registers anything
        for (;;) {
            // Completions found now run before the tasks that just yielded.
            collect(idle.now());
            for (auto h : yielded_)
                ready_.push_back(h);
            yielded_.clear();
            if (!ready_.empty()) {
                const std::coroutine_handle<> h = ready_.front();
                ready_.pop_front();
                ++stats_.resumptions;
                h.resume();
                reap();
                continue;
            }
            if (roots_.empty()) return stats_;
            auto t = reactor_.turn(idle, park_bound_, roots_.size());
            if (!t.has_value()) return std::move(t).error();
            switch (t.value().idled) {
            case idle_kind::slept:
                ++stats_.sleeps;
                break;
            case idle_kind::parked:
                ++stats_.parks;
                break;
            case idle_kind::none:
                if (t.value().woken > 0) ++stats_.woke;
                break;
            }
            stats_.idle_time = stats_.idle_time + t.value().idle_time;
            drain();
        }
    }

    /// The statistics so far.
    const fill_stats& stats() const noexcept { return stats_; }

    /// Tasks spawned and not finished.
    std::size_t tasks_left() const noexcept { return roots_.size(); }

    /// Tasks ready to run.
    std::size_t ready_count() const noexcept { return ready_.size() + yielded_.size(); }

    /// The park bound given at construction.
    dur_ns park_bound() const noexcept { return park_bound_; }

    /// Makes `h` ready behind the completions found next (yield_now uses it). `h` must be a
    /// suspended task of this executor.
    void post(std::coroutine_handle<> h) { yielded_.push_back(h); }

private:
    friend struct detail::fill_promise_base;

    // Fires what is due and moves the fired waiters' tasks to the ready queue.
    void collect(mono_ns now) {
        if (reactor_.fire(now) > 0) ++stats_.woke;
        drain();
    }

    void drain() {
        while (reactor_waiter* w = reactor_.pop_fired())
            if (w->handle) ready_.push_back(w->handle);
    }

    void note_finished(std::coroutine_handle<> h, detail::fill_promise_base& p) {
        finished_.push_back({h, &p});
    }

    void reap() {
        // O(1) each: the last root takes the finished one's place.
        for (const root& f : finished_) {
            const std::size_t i = f.promise->root_index;
            roots_[i] = roots_.back();
            roots_[i].promise->root_index = i;
            roots_.pop_back();
            f.handle.destroy();
        }
        finished_.clear();
    }

    dur_ns park_bound_;
    gpu_async::reactor reactor_;
    std::deque<std::coroutine_handle<>> ready_;
    std::vector<std::coroutine_handle<>> yielded_;
    struct root {
        std::coroutine_handle<> handle;
        detail::fill_promise_base* promise;
    };
    std::vector<root> roots_;
    std::vector<root> finished_;
    fill_stats stats_;
};

template <class P>
std::coroutine_handle<>
detail::fill_promise_base::final_awaiter::await_suspend(std::coroutine_handle<P> h) noexcept {
    fill_promise_base& p = h.promise();
    if (p.continuation) return p.continuation;
    // A spawned task: the executor destroys it once resume() has returned.
    if (p.executor) p.executor->note_finished(h, p);
    return std::noop_coroutine();
}

template <detail::fill_promise P>
void yield_awaiter::await_suspend(std::coroutine_handle<P> h) const {
    h.promise().executor->post(h);
}

/// The plan capabilities of the FILL executor: a park is a registration with its reactor, a
/// word store is the source's; the blocking wait is missing, because it would stop the one
/// thread that runs every task.
inline plan_capabilities fill_plan_capabilities() {
    plan_capabilities caps;
    caps.set_missing(plan_capability::blocking_wait,
                     "it would block the FILL executor's only thread");
    return caps;
}

/// The wait driver as a FILL task: runs the wait machine over `source` with the reactor doing
/// the waiting, so other tasks run meanwhile. A predicted sleep becomes an alarm; a park becomes
/// `ready(source.descriptor(), now + bound)`; query and arm run inline (they complete at once).
/// The plan is first resolved (resolve(), <gpu_async/core/park_fallback.hpp>) against
/// fill_plan_capabilities() and the source's own: a block plan runs as poll, and the report's
/// `warning` says so. `clk` must be the clock the executor's idle reads. A query that follows a
/// pending answer without the task having suspended since (a poll, or a flag wait whose word
/// arrived while the status query still says pending) first yields to ready work.
template <completion_source Source, clock Clock>
fill_task<wait_result> fill_wait(reactor& r, Source& source, wait_plan requested,
                                 std::optional<std::uint64_t> sleep_ns, const Clock& clk) {
    resolved_plan resolved =
        resolve(requested, combine(fill_plan_capabilities(), source_plan_capabilities(source)));
    const wait_plan plan = std::move(resolved.plan);
    wait_machine m;
    wait_action a = m.start(plan, sleep_ns, clk.now());
    // Set when a query says pending, cleared when the task next suspends: a query asked while it
    // is set yields first, so a wait that never suspends (a poll, or parks on a word that has
    // already arrived while the status query still says pending) lets ready work run in between.
    bool owe_yield = false;
    while (!a.is_terminal()) {
        wait_event ev;
        switch (a.kind) {
        case wait_action::type::query: {
            if (owe_yield) co_await yield_now();
            const query_result q = source.query();
            owe_yield = q.is_pending();
            ev = wait_event::queried(q, clk.now());
            break;
        }
        case wait_action::type::block: {
            const std::error_code ec = source.block();
            ev = wait_event::blocked(ec, clk.now());
            break;
        }
        case wait_action::type::arm: {
            const std::error_code ec = source.arm();
            ev = wait_event::armed(ec, clk.now());
            break;
        }
        case wait_action::type::sleep_until:
            co_await r.alarm(a.at);
            owe_yield = false;
            ev = wait_event::slept(clk.now());
            break;
        case wait_action::type::park: {
            const memory_descriptor d = source.descriptor();
            auto ready = r.ready(d, clk.now().after(a.bound));
            const bool seen = co_await ready;
            // ready() completes at once, without suspending, when the word is already there.
            if (ready.suspended()) owe_yield = false;
            // Ended other than by its bound (a fault, a retired line): the word will not come,
            // and the final query asks the source why (parking again would end at once again).
            ev = wait_event::parked(seen || ready.end() != wait_end::expired, clk.now());
            break;
        }
        case wait_action::type::done:
        case wait_action::type::failed:
        case wait_action::type::cancelled:
            break;
        }
        a = m.on_event(ev);
    }
    wait_result out = detail::wait_action_result(a);
    if (out.has_value()) out.value().warning = std::move(resolved.warning);
    co_return out;
}

} // namespace gpu_async

#endif // GPU_ASYNC_FILL_FILL_EXECUTOR_HPP
