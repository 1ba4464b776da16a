// SPDX-License-Identifier: BSL-1.0
/// @file
/// Defines gpu_async::basic_gpu_completion_port and gpu_completion_port with everything a
/// descriptor wait needs: construction, moves, destruction, bell(), shared_bell(), the park
/// knobs, async_wait(memory_descriptor, token), cancel() and pending().
///
/// Include this header when a translation unit only waits for descriptors: it leaves out the
/// plan-driven wait (the wait machine, bands, park fallback, the composed operation and
/// steady_timer), which is what <gpu_async/asio/gpu_completion_port.hpp> costs on top of it. The
/// estimator and wait plans stay: the reactor's per-slot rhythm is built on them. The plan-driven
/// members (async_wait(source, plan, point, token), the bands overload, prediction_ns(), points(),
/// plan_capabilities_for()) are declared here and defined in <gpu_async/asio/plan_wait.hpp>; a
/// translation unit that calls them includes that header (or gpu_completion_port.hpp, which
/// includes both); calling one without it fails to compile or to link.
/// Ports built in either kind of translation unit are the same type and mix freely.
///
/// The thread-safety and handler notes of <gpu_async/asio/gpu_completion_port.hpp> apply.
//
#ifndef GPU_ASYNC_ASIO_BASIC_GPU_COMPLETION_PORT_HPP
#define GPU_ASYNC_ASIO_BASIC_GPU_COMPLETION_PORT_HPP

#include <gpu_async/asio/detail/flavour.hpp>
#include <gpu_async/asio/detail/port_state.hpp>
#include <gpu_async/asio/detail/port_wait_op.hpp>
#include <gpu_async/asio/detail/reactor_service.hpp>
#include <gpu_async/asio/error.hpp>
#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/completion_source.hpp>
#include <gpu_async/core/estimator.hpp>
#include <gpu_async/core/time.hpp>
#include <gpu_async/core/wait_plan.hpp>
#include <gpu_async/wait/doorbell.hpp>

#if defined(GPU_ASYNC_STANDALONE_ASIO)
#include <asio/any_io_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/execution_context.hpp>
#else
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/execution_context.hpp>
#endif

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace gpu_async {

// The plan-driven wait's types, only named here: <gpu_async/asio/plan_wait.hpp> defines them
// (through fill/wait_bands.hpp, core/park_fallback.hpp, core/wait_machine.hpp) along with the
// port's members that use them. wait_plan, deadline_plan and point_table are complete here: the
// reactor's rhythm (core/completion_rhythm.hpp) needs the estimator anyway.
class wait_bands;
class step_rows;
class plan_capabilities;
struct wait_report;

GPU_ASYNC_ASIO_NAMESPACE_BEGIN

/// An I/O object that waits for GPU memory descriptors to complete.
///
/// @tparam Executor the I/O executor (asio::any_io_executor for gpu_completion_port).
///
/// Thread safety: distinct objects: safe. Shared objects: unsafe, except that cancel() and
/// cancellation signals may be used from any thread while waits are pending.
///
/// A descriptor's line must stay valid while a wait on it is pending, or be retired first
/// (gpu_async::retire_line; the library's line owners do this when they go away, ending the waits
/// with operation_aborted). Producers on the host should ring the reactor's doorbell (bell(),
/// shared_bell()) after their store; others (GPU streams) are seen within the park bound.
template <class Executor = asio::any_io_executor>
class basic_gpu_completion_port {
public:
    using executor_type = Executor;

    /// The port type when rebound to another executor.
    template <class Executor1>
    struct rebind_executor {
        using other = basic_gpu_completion_port<Executor1>;
    };

    /// A port whose waits complete through `ex` (and its execution context's reactor).
    explicit basic_gpu_completion_port(const executor_type& ex)
        : executor_(ex)
        , service_(&asio::use_service<detail::reactor_service>(detail::context_of(executor_)))
        , state_(make_state()) {}

    /// A port on `ctx`'s executor.
    template <class ExecutionContext>
    requires std::is_convertible_v<ExecutionContext&, asio::execution_context&> &&
        std::is_constructible_v<executor_type, typename ExecutionContext::executor_type>
    explicit basic_gpu_completion_port(ExecutionContext& ctx)
        : basic_gpu_completion_port(executor_type(ctx.get_executor())) {}

    /// Takes over `other`'s pending waits; `other` may be used again (it has none).
    basic_gpu_completion_port(basic_gpu_completion_port&& other) noexcept
        : executor_(other.executor_)
        , service_(other.service_)
        , state_(std::move(other.state_)) {}

    /// Takes over `other`'s pending waits (from a port of a convertible executor type).
    template <class Executor1>
    requires std::is_convertible_v<Executor1, Executor>
    basic_gpu_completion_port(basic_gpu_completion_port<Executor1>&& other)
    noexcept
        : executor_(other.executor_)
        , service_(other.service_)
        , state_(std::move(other.state_)) {}

    /// Cancels this port's waits, then takes over `other`'s.
    basic_gpu_completion_port& operator=(basic_gpu_completion_port&& other) noexcept {
        if (this != &other) {
            release();
            executor_ = other.executor_;
            service_ = other.service_;
            state_ = std::move(other.state_);
        }
        return *this;
    }

    basic_gpu_completion_port(const basic_gpu_completion_port&) = delete;
    basic_gpu_completion_port& operator=(const basic_gpu_completion_port&) = delete;

    /// Cancels every pending wait (their handlers get asio::error::operation_aborted).
    ~basic_gpu_completion_port() { release(); }

    executor_type get_executor() const noexcept { return executor_; }

    /// The doorbell of the port's reactor: host producers ring it after their store.
    doorbell& bell() const noexcept { return service_->bell(); }

    /// The doorbell, shared: give it to producers that may outlive the execution context
    /// (sim_stream::set_doorbell); a producer that outlives the reactor rings nobody, safely.
    std::shared_ptr<doorbell> shared_bell() const noexcept { return service_->shared_bell(); }

    /// The longest park of the reactor's waiter between two scans when no wait asks for less
    /// (default_park_bound): producers that do not ring (GPU streams) are seen within about one
    /// bound. It is the execution context's, shared by every port on it.
    dur_ns park_bound() const noexcept { return service_->park_bound(); }
    /// Sets the execution context's park bound (zero is taken as 1 ns); from the next park on.
    void park_bound(dur_ns bound) noexcept { service_->park_bound(bound); }
    /// Sets the park bound from a std::chrono duration (`port.park_bound(50us)`; zero or less is
    /// taken as 1 ns). The getter's dur_ns reads as std::chrono::nanoseconds.
    template <class Rep, class Period>
    void park_bound(std::chrono::duration<Rep, Period> bound) noexcept {
        park_bound(dur_ns::from(bound));
    }

    /// The knob between latency and CPU for GPU lines that store the doorbell's device word
    /// (mapped_line::attach_doorbell) on a CPU without a user-mode monitor: the waiter sleeps in
    /// steps of this interval and reads the device word after each, so such a store is seen
    /// within about one interval, for one wake-up of the waiter per interval while waits are
    /// pending (default_device_poll, 20 us). A step never outlasts the park bound (100 us by
    /// default): for a longer interval, raise park_bound() with it (`port.device_poll(1ms);
    /// port.park_bound(1ms);`, or fill_options::park_bound under run_fill). With a monitor the
    /// store wakes the waiter at once and this does not apply. The execution context's, shared
    /// by every port on it.
    dur_ns device_poll() const noexcept { return service_->device_poll(); }
    /// Sets the device poll interval (zero is taken as 1 ns); from the next park on.
    void device_poll(dur_ns interval) noexcept { service_->device_poll(interval); }
    template <class Rep, class Period>
    void device_poll(std::chrono::duration<Rep, Period> interval) noexcept {
        device_poll(dur_ns::from(interval));
    }

    /// Whether the waiter predicts, where device_poll applies: it learns each slot's rhythm (the
    /// time from a wait's start to its completion, the least of the last 8), and while every
    /// pending wait has one it sleeps to the earliest expected completion less one device poll
    /// interval (within the park bound) instead of stepping, then polls in a pause loop for up
    /// to two intervals, then steps. Fewer wake-ups for streams with a steady rhythm; a
    /// completion earlier than any seen before waits up to the end of that sleep. It applies
    /// only while the device poll interval is shorter than the waiter's park bound (under
    /// run_fill, fill_options::park_bound, the longest of the drivers'): with a poll no
    /// shorter, every park sleeps the whole bound anyway, so nothing is learnt and no wait pays
    /// for it (`device_poll(1ms)` with `park_bound(1ms)`). Default on; the execution context's.
    /// Whether a wait teaches the rhythm is decided when it starts: turned on (or the bound
    /// raised), it learns from waits started after the change; turned off, the waiter steps
    /// from its next park.
    bool predicts() const noexcept { return service_->predicts(); }
    void predicts(bool on) noexcept { service_->predicts(on); }

    /// Cancels every pending wait of this port. Their handlers are invoked (never from within
    /// this function) with asio::error::operation_aborted. Waits that completed before this
    /// call are not affected. May be called from any thread.
    ///
    /// @returns the number of waits cancelled.
    std::size_t cancel() {
        if (!state_) return 0;
        state_->generation.fetch_add(1, std::memory_order_acq_rel);
        return service_->cancel(state_->reactor);
    }

    /// Number of this port's waits still pending (a snapshot; for tests and diagnostics).
    std::size_t pending() const { return state_ ? service_->pending(state_->reactor) : 0; }

    /// The point table's prediction at `point` under `plan` (nanoseconds), or none for a point
    /// that has not been fed yet. Thread-safe. Defined in <gpu_async/asio/plan_wait.hpp>.
    std::optional<std::uint64_t> prediction_ns(std::string_view point,
                                               const deadline_plan& plan) const;

    /// A copy of the port's point table (the estimator every plan-driven wait feeds). Keys are
    /// the `point` strings given to async_wait. Thread-safe. Defined in
    /// <gpu_async/asio/plan_wait.hpp>.
    point_table<std::string> points() const;

    /// Starts an asynchronous wait for a memory descriptor to complete.
    ///
    /// The wait completes when the descriptor's word has reached its target (wrapping order,
    /// acquire load: what the producer wrote before its store is visible to the handler).
    ///
    /// @param desc the descriptor. Its line must outlive the wait. It is an argument of the
    ///   initiation, so lazy tokens (asio::deferred) keep it until they are launched.
    /// @param token the completion token (callback, asio::use_future, asio::use_awaitable,
    ///   asio::deferred, asio::as_tuple(...), asio::yield_context, ...). Without one, the
    ///   executor's default completion token is used (asio::default_completion_token_t): with
    ///   a plain executor on Boost 1.81 to 1.85 there is none and a token must be given; from
    ///   Asio 1.31 (Boost 1.86) the default is asio::deferred, so `port.async_wait(desc)` returns
    ///   a deferred operation that starts nothing until it is invoked with a token or
    ///   co_awaited: discarding the result starts no wait.
    ///
    /// @par Completion signature
    /// @code void(gpu_async::error_code ec) @endcode
    /// Every code the handler can receive:
    /// - empty: the descriptor's word reached its target, also when its stream was given back,
    ///   its line retired or its slot faulted after storing it;
    /// - asio::error::operation_aborted: the wait was cancelled (per-operation, cancel(), the
    ///   port's destruction or the context's shutdown, whose handlers are destroyed rather than
    ///   run), or its stream was given back (its slot or line retired) before storing the target;
    /// - gpu_async::errc::device_fault: the slot's stream faulted before storing the target;
    /// - gpu_async::errc::stale_descriptor: the descriptor's line (or slot) had been retired
    ///   when the wait started, so its word is no longer the stream's;
    /// - asio::error::no_memory: no memory for the wait's place in the reactor's table.
    /// asio::error::timed_out is never given here: this wait has no deadline (bound it with a
    /// timer, as the README's timeout example does). Compare with the enums (`ec ==
    /// errc::device_fault`); their values are listed in <gpu_async/core/error.hpp>.
    ///
    /// @par Per-operation cancellation
    /// cancellation_type::terminal, partial and total (a cancelled wait had no side effect). The
    /// signal may be emitted from any thread, also racing the completion on another thread (as
    /// make_parallel_group does on a multi-threaded io_context): the cancellation handler holds
    /// the wait's key and the reactor looks the wait up under its lock, as Asio's timers do, so
    /// exactly one of (completion, cancellation) wins and a signal after the completion was
    /// decided has no effect. The handler is not removed from the slot when the wait completes
    /// (that would race such a signal); it is replaced when the slot is used again. What Asio
    /// itself does not synchronize stays the caller's: emitting a signal while another thread
    /// installs a handler into the same slot, or destroys the signal.
    ///
    /// @par Thread safety
    /// May be called from any thread; waits on the same port may be started concurrently.
    ///
    /// Regardless of whether the wait completes at once, the handler is never invoked from
    /// within this function: a descriptor already complete at initiation completes through
    /// asio::post. The one exception is asked for by the handler: where the Asio in use has
    /// immediate executors (Asio 1.28, Boost 1.82 and later: GPU_ASYNC_HAS_IMMEDIATE_EXECUTOR),
    /// a handler with an associated immediate executor of its own
    /// (asio::bind_immediate_executor) is dispatched to it when its descriptor is complete at
    /// initiation, as Asio's own operations do (never counted as the context's outstanding
    /// work, so the context is not stopped by its end); with asio::system_executor that is
    /// inline. A wait that is pending at initiation completes as every other. The handler runs
    /// through its associated executor (default: the port's), the op is allocated with its
    /// associated allocator and freed before the upcall, and work is outstanding on both executors
    /// while the wait is pending.
    ///
    /// @throws std::system_error when the reactor's watcher thread cannot be started (nothing
    ///   is registered and the handler is destroyed); std::bad_alloc from the allocator.
    template <asio::completion_token_for<void(error_code)> CompletionToken =
                  asio::default_completion_token_t<executor_type>>
    auto async_wait(const memory_descriptor& desc,
                    CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return asio::async_initiate<CompletionToken, void(error_code)>(initiate_async_wait(this),
                                                                       token, desc);
    }

    /// Starts an asynchronous plan-driven wait for a completion source's pending work.
    ///
    /// Runs the wait driver (gpu_async::wait_machine) as a composed
    /// operation: one immediate query; for flag plans an arm; for predicting plans the sleep the
    /// port's point table predicts for `point` (a flag plan's as a reactor wait on its armed
    /// `source.descriptor()` whose deadline is the sleep's end: the word reaching its target
    /// ends the sleep early, and the late query follows; a poll plan's on an
    /// asio::steady_timer); then polls (poll plans: one query per turn of the executor, other
    /// handlers run in between) or parks (flag plans: a reactor wait on `source.descriptor()`,
    /// the reactor looking at the word at least every park_us, until the next status query is
    /// due, at least every backstop, and a final query as the authority). A block
    /// plan calls `source.block()` on the thread running the operation. The outcome feeds the
    /// port's point table at `point`. The plan is first resolved against what the port and the
    /// source can run (plan_capabilities_for()); when it falls back, the report's `warning`
    /// holds the coded errc::park_fallback.
    ///
    /// @param source any gpu_async::completion_source; must outlive the wait. Its query(),
    ///   arm(), block() and descriptor() are called from the operation's executor.
    /// @param plan the wait plan (copied).
    /// @param point the readback point: the key (a std::string) of the port's point table.
    /// @param token the completion token.
    ///
    /// @par Completion signature
    /// @code void(gpu_async::error_code ec, gpu_async::wait_report report) @endcode
    /// On success `ec` is empty and `report` says how the wait ended (kind blocked, immediate,
    /// late or parked), its outcome, time, parks and backstop queries. A source error arrives
    /// unchanged as `ec` (compare it with the source's codes, e.g. `ec == errc::device_fault`);
    /// asio::error::operation_aborted when the wait was cancelled (per-operation, cancel(), the
    /// port's destruction) or its source's line was given back while it waited. Nothing else:
    /// a park on the source's word that ends errc::device_fault or errc::stale_descriptor asks
    /// the source's query, whose answer decides, and one that found no memory parks again, so
    /// the library adds no code of its own. On error `report` is empty.
    ///
    /// @par Per-operation cancellation
    /// cancellation_type::terminal and partial (not total: the wait may have armed the source,
    /// i.e. enqueued a word store): the wait stops at its current step (a sleep or a park ends
    /// at once; a query or a block in progress finishes first). Port-wide cancel() and the
    /// destructor end a parked plan-driven wait, or a flag plan's sleeping one, at once, and one in
    /// any other step at its next step; cancel() counts only those.
    ///
    /// @par Thread safety
    /// As for the descriptor overload. The point table is locked for each read and each feed.
    ///
    /// Defined in <gpu_async/asio/plan_wait.hpp> (or <gpu_async/asio/gpu_completion_port.hpp>):
    /// include it to call this overload.
    ///
    /// The handler is never invoked from within this function: the first step is posted. The
    /// operation's state (its machine and timer) is allocated with std::allocator, each reactor
    /// wait with the handler's associated allocator; all of it is freed before the upcall.
    template <completion_source Source,
              asio::completion_token_for<void(error_code, wait_report)> CompletionToken =
                  asio::default_completion_token_t<executor_type>>
    auto async_wait(Source& source, const wait_plan& plan, std::string_view point,
                    CompletionToken&& token = asio::default_completion_token_t<executor_type>());

    /// Starts a plan-driven wait with the plan of the band `rows` selects (the rows of the
    /// step last published, read once at initiation): as async_wait(source, bands.select(rows),
    /// point, token). Bands let one call site wait differently for small and large steps.
    /// Defined in <gpu_async/asio/plan_wait.hpp>.
    template <completion_source Source,
              asio::completion_token_for<void(error_code, wait_report)> CompletionToken =
                  asio::default_completion_token_t<executor_type>>
    auto async_wait(Source& source, const wait_bands& bands, const step_rows& rows,
                    std::string_view point,
                    CompletionToken&& token = asio::default_completion_token_t<executor_type>());

    /// The plan capabilities this port offers `source`: a park is a registration with the
    /// reactor's waiter (the watcher thread or run_fill), which sees the word within one park
    /// bound with or without a user-mode monitor, so word_park is always available; word_store
    /// and blocking_wait are the source's (source_plan_capabilities()). A plan-driven wait runs
    /// resolve(plan, plan_capabilities_for(source)) and reports a fallback in its report's
    /// `warning`. Defined in <gpu_async/asio/plan_wait.hpp>.
    template <completion_source Source>
    plan_capabilities plan_capabilities_for(const Source& source) const;

private:
    template <class>
    friend class basic_gpu_completion_port;

    class initiate_async_wait {
    public:
        using executor_type = Executor;

        explicit initiate_async_wait(basic_gpu_completion_port* self) noexcept
            : self_(self) {}

        executor_type get_executor() const noexcept { return self_->get_executor(); }

        template <class WaitHandler>
        void operator()(WaitHandler&& handler, const memory_descriptor& desc) const {
            using handler_type = std::decay_t<WaitHandler>;
            static_assert(std::is_invocable_v<handler_type&&, error_code>,
                          "a wait handler must be callable as void(gpu_async::error_code)");
            detail::start_reactor_wait(*self_->service_, self_->state().reactor, self_->executor_,
                                       std::forward<WaitHandler>(handler), desc);
        }

    private:
        basic_gpu_completion_port* self_;
    };

    std::shared_ptr<detail::port_state> state_shared() {
        state();
        return state_;
    }

    detail::port_state& state() {
        if (!state_) state_ = make_state(); // a moved-from port
        return *state_;
    }

    std::shared_ptr<detail::port_state> make_state() const {
        auto st = std::make_shared<detail::port_state>();
        st->reactor.queue = detail::port_completion_queue<Executor>::make(*service_, executor_);
        return st;
    }

    void release() noexcept {
        if (state_) {
            state_->generation.fetch_add(1, std::memory_order_acq_rel);
            try {
                service_->cancel(state_->reactor);
            } catch (...) {
                // posting the completions failed (out of memory): nothing better to do here
            }
            state_.reset();
        }
    }

    executor_type executor_;
    detail::reactor_service* service_;
    std::shared_ptr<detail::port_state> state_;
};

/// The port on the polymorphic I/O executor.
using gpu_completion_port = basic_gpu_completion_port<asio::any_io_executor>;

GPU_ASYNC_ASIO_NAMESPACE_END
} // namespace gpu_async

#endif // GPU_ASYNC_ASIO_BASIC_GPU_COMPLETION_PORT_HPP
