// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/gpu_completion_port.hpp: the Asio I/O object that awaits GPU memory descriptors.
//
// basic_gpu_completion_port<Executor> is to a completion line what basic_stream_socket is to a
// file descriptor: async_wait(descriptor, token) completes when the descriptor's word reaches
// its target. The watching is done by the execution context's reactor_service
// (<gpu_async/reactor_service.hpp>), shared by every port of that context.
//
#ifndef GPU_ASYNC_GPU_COMPLETION_PORT_HPP
#define GPU_ASYNC_GPU_COMPLETION_PORT_HPP

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/completion_source.hpp>
#include <gpu_async/core/estimator.hpp>
#include <gpu_async/core/wait_machine.hpp>
#include <gpu_async/core/wait_plan.hpp>
#include <gpu_async/reactor_service.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/cancellation_state.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/execution.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace gpu_async {

namespace asio = boost::asio;

namespace detail {

/// The execution context of an executor (standard or legacy).
template <class Executor>
asio::execution_context& context_of(const Executor& ex) {
    if constexpr (asio::execution::is_executor<Executor>::value)
        return asio::query(ex, asio::execution::context);
    else
        return ex.context();
}

/// Installed in a handler's cancellation slot: a cancellation of type terminal, partial or total
/// (all three hold: a cancelled wait has had no effect) unlinks the wait and routes its
/// operation_aborted completion through the executor. Runs on the emitting thread.
class reactor_cancel_handler {
public:
    reactor_cancel_handler(reactor_service& svc, reactor_op* op) noexcept
        : svc_(&svc)
        , op_(op) {}
    void operator()(asio::cancellation_type_t type) const {
        constexpr auto supported = asio::cancellation_type::terminal |
                                   asio::cancellation_type::partial |
                                   asio::cancellation_type::total;
        if ((type & supported) != asio::cancellation_type::none) svc_->cancel(op_);
    }

private:
    reactor_service* svc_;
    reactor_op* op_;
};

/// Outstanding work on an executor for as long as it lives: a standard executor preferred with
/// outstanding_work.tracked (a plain value), or a work guard for a legacy executor. Movable.
template <class Executor>
class work_holder {
public:
    explicit work_holder(const Executor& ex)
        : work_(make(ex)) {}

private:
    static auto make(const Executor& ex) {
        if constexpr (asio::execution::is_executor<Executor>::value)
            return asio::prefer(ex, asio::execution::outstanding_work.tracked);
        else
            return asio::executor_work_guard<Executor>(ex);
    }
    decltype(make(std::declval<const Executor&>())) work_;
};

/// One async_wait: the handler, its cancellation slot (read before the handler was moved), and
/// outstanding work on the I/O executor and on the handler's associated executor. Allocated with
/// the handler's associated allocator; freed before the upcall.
///
/// Completion (`complete`, called by the reactor with no lock held): post a step to the I/O
/// executor, which dispatches the final step to the handler's executor, which clears the slot,
/// frees the op and invokes the handler. A step destroyed without running (its context shut
/// down) destroys the op without invoking the handler.
template <class Handler, class IoExecutor>
class port_wait_op final : public reactor_op {
public:
    using handler_executor = asio::associated_executor_t<Handler, IoExecutor>;
    using slot_type = asio::associated_cancellation_slot_t<Handler>;
    using op_allocator = typename std::allocator_traits<
        asio::associated_allocator_t<Handler>>::template rebind_alloc<port_wait_op>;

    template <class H>
    static port_wait_op* create(H&& handler, const IoExecutor& io_ex, const memory_descriptor& d,
                                slot_type slot) {
        op_allocator alloc(asio::get_associated_allocator(handler));
        port_wait_op* p = std::allocator_traits<op_allocator>::allocate(alloc, 1);
        try {
            return ::new (static_cast<void*>(p))
                port_wait_op(std::forward<H>(handler), io_ex, d, std::move(slot));
        } catch (...) {
            std::allocator_traits<op_allocator>::deallocate(alloc, p, 1);
            throw;
        }
    }

private:
    template <class H>
    port_wait_op(H&& handler, const IoExecutor& io_ex, const memory_descriptor& d, slot_type slot)
        : reactor_op(d, &port_wait_op::do_complete, &port_wait_op::do_destroy)
        , handler_(std::forward<H>(handler))
        , slot_(std::move(slot))
        , io_ex_(io_ex)
        , handler_ex_(asio::get_associated_executor(handler_, io_ex))
        , io_work_(io_ex)
        , handler_work_(handler_ex_) {}

    /// Owns the op until it runs; a step destroyed unrun destroys the op (no upcall).
    class final_step {
    public:
        explicit final_step(port_wait_op* op) noexcept
            : op_(op) {}
        final_step(final_step&& o) noexcept
            : op_(std::exchange(o.op_, nullptr)) {}
        final_step& operator=(final_step&&) = delete;
        ~final_step() {
            if (op_ != nullptr) do_destroy(op_);
        }
        void operator()() { std::exchange(op_, nullptr)->finish(); }

    private:
        port_wait_op* op_;
    };

    class io_step {
    public:
        explicit io_step(port_wait_op* op) noexcept
            : op_(op) {}
        io_step(io_step&& o) noexcept
            : op_(std::exchange(o.op_, nullptr)) {}
        io_step& operator=(io_step&&) = delete;
        ~io_step() {
            if (op_ != nullptr) do_destroy(op_);
        }
        void operator()() {
            port_wait_op* op = std::exchange(op_, nullptr);
            auto alloc = asio::get_associated_allocator(op->handler_);
            const handler_executor ex = op->handler_ex_;
            asio::dispatch(ex, asio::bind_allocator(alloc, final_step(op)));
        }

    private:
        port_wait_op* op_;
    };

    static void do_complete(reactor_op* base) {
        auto* op = static_cast<port_wait_op*>(base);
        auto alloc = asio::get_associated_allocator(op->handler_);
        asio::post(op->io_ex_, asio::bind_allocator(alloc, io_step(op)));
    }

    // Destroys without invoking (context shutdown). The slot is left alone, as Asio's own
    // operations leave it: its signal may already be gone.
    static void do_destroy(reactor_op* base) {
        auto* op = static_cast<port_wait_op*>(base);
        op_allocator alloc(asio::get_associated_allocator(op->handler_));
        op->~port_wait_op();
        std::allocator_traits<op_allocator>::deallocate(alloc, op, 1);
    }

    void finish() {
        // On the handler's executor: clear the slot, take what the upcall needs, free the op,
        // then invoke. The work guards live until after the upcall.
        if (slot_.is_connected()) slot_.clear();
        Handler handler(std::move(handler_));
        const boost::system::error_code result = ec;
        auto io_work = std::move(io_work_);
        auto handler_work = std::move(handler_work_);
        op_allocator alloc(asio::get_associated_allocator(handler));
        this->~port_wait_op();
        std::allocator_traits<op_allocator>::deallocate(alloc, this, 1);
        std::move(handler)(result);
    }

    Handler handler_;
    slot_type slot_;
    IoExecutor io_ex_;
    handler_executor handler_ex_;
    work_holder<IoExecutor> io_work_;
    work_holder<handler_executor> handler_work_;
};

/// Starts one reactor wait for `handler`: allocates the op, installs the cancellation handler
/// (the slot is read before the handler moves), registers it. Never invokes the handler inline.
/// When this throws, the op (and the handler moved into it) has been destroyed exactly once and
/// the slot cleared.
template <class IoExecutor, class Handler>
void start_reactor_wait(reactor_service& svc, reactor_port* port, const IoExecutor& io_ex,
                        Handler&& handler, const memory_descriptor& desc, dur_ns bound = {},
                        std::optional<std::chrono::steady_clock::time_point> deadline = {}) {
    using handler_type = std::decay_t<Handler>;
    using op_type = port_wait_op<handler_type, IoExecutor>;
    auto slot = asio::get_associated_cancellation_slot(handler);
    op_type* op = op_type::create(std::forward<Handler>(handler), io_ex, desc, slot);
    reactor_service::start_result started{};
    try {
        // Installed before the op is registered: once registered it may complete at once on
        // another thread, whose final step clears the slot. (emplace allocates: it may throw.)
        if (slot.is_connected()) slot.template emplace<reactor_cancel_handler>(svc, op);
        started = svc.start(port, op, bound, deadline);
    } catch (...) {
        if (slot.is_connected()) slot.clear(); // a handler installed above points to op
        op->destroy();
        throw;
    }
    if (started == reactor_service::start_result::registered) return;
    // Not registered: the completion is decided (or, after shutdown, there is none), so a
    // cancellation has nothing left to do. The slot is cleared now, while the handler (which may
    // own the signal) is alive: a failed post below destroys the op and the handler with it.
    if (slot.is_connected()) slot.clear();
    if (started == reactor_service::start_result::dropped)
        op->destroy(); // the context has shut down: destroyed, never invoked
    else
        op->complete(); // posts, never inline; when posting throws, the op is destroyed first
}

/// What a port shares with its pending waits: the reactor's per-port list, a generation that
/// cancel() and the destructor advance (plan-driven waits started before give up at their next
/// step), and the point table with its lock.
struct port_state {
    reactor_port reactor;
    std::atomic<std::uint64_t> generation{0};
    mutable std::mutex points_mutex;
    point_table<std::string> points;
};

/// The deadline plan a point is fed with: the plan's own, or (plans without a prediction) the
/// widest window, so the point learns either way.
inline deadline_plan feeding_plan(const wait_plan& plan) noexcept {
    if (plan.predict()) return *plan.predict();
    deadline_plan d;
    d.window = window_max;
    return d;
}

/// The process monotonic clock as the core's time points.
inline mono_ns steady_now() noexcept {
    const auto t = std::chrono::steady_clock::now().time_since_epoch();
    return mono_ns{static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(t).count())};
}

/// The plan-driven wait as an Asio composed operation: executes the wait machine's actions
/// (query, block and arm inline; the predicted sleep on a steady_timer; each park as a reactor
/// wait on the source's descriptor with the park as its deadline).
template <class Source, class Executor>
class plan_wait_op {
public:
    plan_wait_op(Source& source, const wait_plan& plan, std::string point,
                 std::shared_ptr<port_state> state, reactor_service& svc, const Executor& ex)
        : impl_(std::make_unique<impl>(source, plan, std::move(point), std::move(state), svc, ex)) {
    }

    template <class Self>
    void operator()(Self& self, boost::system::error_code ec = {}) {
        impl& m = *impl_;
        switch (m.next) {
        case step::initial: {
            // Terminal and partial: a cancelled plan wait may have armed its source (enqueued a
            // word store), so it does not claim total cancellation.
            self.reset_cancellation_state(asio::enable_partial_cancellation());
            m.generation = m.state->generation.load(std::memory_order_acquire);
            std::optional<std::uint64_t> sleep;
            if (m.plan.predict()) {
                std::lock_guard lk(m.state->points_mutex);
                sleep = m.state->points.sleep_ns(m.point, *m.plan.predict());
            }
            m.action = m.machine.start(m.plan, sleep, steady_now());
            m.next = step::running;
            // Everything runs from the executor: never a completion inside the initiation.
            const Executor ex = m.ex;
            asio::post(ex, std::move(self));
            return;
        }
        case step::running:
            break;
        case step::sleeping:
            if (ec == asio::error::operation_aborted) return abort(self);
            m.action = m.machine.on_event(wait_event::slept(steady_now()));
            break;
        case step::parking:
            if (ec == asio::error::operation_aborted) return abort(self);
            m.action = m.machine.on_event(wait_event::parked(!ec, steady_now()));
            break;
        }
        m.next = step::running;
        run(self);
    }

private:
    enum class step : std::uint8_t { initial, running, sleeping, parking };

    struct impl {
        impl(Source& s, const wait_plan& p, std::string pt, std::shared_ptr<port_state> st,
             reactor_service& sv, const Executor& e)
            : source(&s)
            , plan(p)
            , point(std::move(pt))
            , state(std::move(st))
            , svc(&sv)
            , ex(e)
            , timer(e) {}
        Source* source;
        wait_plan plan;
        std::string point;
        std::shared_ptr<port_state> state;
        reactor_service* svc;
        Executor ex;
        asio::steady_timer timer;
        wait_machine machine;
        wait_action action = wait_action::query();
        std::uint64_t generation = 0;
        step next = step::initial;
    };

    template <class Self>
    void abort(Self& self) {
        impl_.reset(); // the state (timer included) is freed before the upcall
        self.complete(asio::error::operation_aborted, wait_report{});
    }

    template <class Self>
    void run(Self& self) {
        impl& m = *impl_;
        for (;;) {
            if (self.cancelled() != asio::cancellation_type::none ||
                m.state->generation.load(std::memory_order_acquire) != m.generation)
                return abort(self);
            switch (m.action.kind) {
            case wait_action::type::query: {
                const wait_action::type before = m.action.kind;
                m.action = m.machine.on_event(wait_event::queried(m.source->query(), steady_now()));
                if (m.action.kind == before) {
                    // Polling: let other handlers run between queries.
                    const Executor ex = m.ex;
                    asio::post(ex, std::move(self));
                    return;
                }
                break;
            }
            case wait_action::type::block:
                m.action = m.machine.on_event(wait_event::blocked(m.source->block(), steady_now()));
                break;
            case wait_action::type::arm:
                m.action = m.machine.on_event(wait_event::armed(m.source->arm(), steady_now()));
                break;
            case wait_action::type::sleep_until: {
                m.next = step::sleeping;
                m.timer.expires_at(std::chrono::steady_clock::time_point(
                    std::chrono::nanoseconds(static_cast<std::int64_t>(m.action.at.ns))));
                m.timer.async_wait(std::move(self));
                return;
            }
            case wait_action::type::park: {
                m.next = step::parking;
                const dur_ns bound = m.action.bound;
                const auto deadline = std::chrono::steady_clock::now() +
                                      std::chrono::nanoseconds(static_cast<std::int64_t>(bound.ns));
                const memory_descriptor desc = m.source->descriptor();
                const Executor ex = m.ex;
                reactor_service& svc = *m.svc;
                reactor_port* port = &m.state->reactor;
                start_reactor_wait(svc, port, ex, std::move(self), desc, bound, deadline);
                return;
            }
            case wait_action::type::done: {
                const wait_report report = m.action.report;
                if (report.outcome) {
                    std::lock_guard lk(m.state->points_mutex);
                    m.state->points.observe(m.point, feeding_plan(m.plan), *report.outcome);
                }
                impl_.reset();
                self.complete(boost::system::error_code{}, report);
                return;
            }
            case wait_action::type::failed: {
                const boost::system::error_code ec(m.action.error);
                impl_.reset();
                self.complete(ec, wait_report{});
                return;
            }
            }
        }
    }

    std::unique_ptr<impl> impl_;
};

} // namespace detail

/// An I/O object that waits for GPU memory descriptors to complete.
///
/// @tparam Executor the I/O executor (asio::any_io_executor for gpu_completion_port).
///
/// Thread safety: distinct objects: safe. Shared objects: unsafe, except that cancel() and
/// cancellation signals may be used from any thread while waits are pending.
///
/// The descriptor's line must outlive every wait on it. Producers on the host should ring the
/// reactor's doorbell (bell()) after their store; others (GPU streams) are seen within the
/// service's park bound.
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
        , service_(&asio::use_service<reactor_service>(detail::context_of(executor_)))
        , state_(std::make_shared<detail::port_state>()) {}

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

    /// The reactor service of the port's execution context.
    reactor_service& service() const noexcept { return *service_; }

    /// The doorbell of the port's reactor: host producers ring it after their store.
    doorbell& bell() const noexcept { return service_->bell(); }

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
    /// that has not been fed yet. Thread-safe.
    std::optional<std::uint64_t> prediction_ns(std::string_view point,
                                               const deadline_plan& plan) const {
        if (!state_) return std::nullopt;
        std::lock_guard lk(state_->points_mutex);
        return state_->points.prediction_ns(std::string(point), plan);
    }

    /// A copy of the port's point table (the estimator every plan-driven wait feeds). Keys are
    /// the `point` strings given to async_wait. Thread-safe.
    point_table<std::string> points() const {
        if (!state_) return {};
        std::lock_guard lk(state_->points_mutex);
        return state_->points;
    }

    /// Starts an asynchronous wait for a memory descriptor to complete.
    ///
    /// The wait completes when the descriptor's word has reached its target (wrapping order,
    /// acquire load: what the producer wrote before its store is visible to the handler).
    ///
    /// @param desc the descriptor. Its line must outlive the wait. It is an argument of the
    ///   initiation, so lazy tokens (asio::deferred) keep it until they are launched.
    /// @param token the completion token (callback, asio::use_future, asio::use_awaitable,
    ///   asio::deferred, asio::as_tuple(...), asio::yield_context, ...).
    ///
    /// @par Completion signature
    /// @code void(boost::system::error_code ec) @endcode
    /// `ec` is empty when the descriptor completed, asio::error::operation_aborted when the
    /// wait was cancelled.
    ///
    /// @par Per-operation cancellation
    /// cancellation_type::terminal, partial and total (a cancelled wait had no side effect). The
    /// signal may be emitted from any thread while the wait is pending: it only unlinks the wait
    /// and routes the operation_aborted completion through the executor; it never races the
    /// completion (exactly one of them wins). A signal after the completion was decided has no
    /// effect. The slot is cleared before the handler runs, by the final step on the handler's
    /// executor; the slot and its asio::cancellation_signal are Asio's and not synchronized, so,
    /// as for Asio's own operations, a signal emitted from another thread must not overlap that
    /// step (emit it on the handler's executor or strand, or otherwise synchronize with it).
    ///
    /// @par Thread safety
    /// May be called from any thread; waits on the same port may be started concurrently.
    ///
    /// Regardless of whether the wait completes at once, the handler is never invoked from
    /// within this function: a descriptor already complete at initiation completes through
    /// asio::post. The handler runs through its associated executor (default: the port's),
    /// the op is allocated with its associated allocator and freed before the upcall, and work is
    /// outstanding on both executors while the wait is pending.
    ///
    /// @throws std::system_error when the reactor's watcher thread cannot be started (nothing
    ///   is registered and the handler is destroyed); std::bad_alloc from the allocator.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_wait(const memory_descriptor& desc,
                    CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
            initiate_async_wait(this), token, desc);
    }

    /// Starts an asynchronous plan-driven wait for a completion source's pending work.
    ///
    /// Runs the wait driver of SPEC.md section 6 (gpu_async::wait_machine) as a composed
    /// operation: one immediate query; for flag plans an arm; for predicting plans the sleep the
    /// port's point table predicts for `point`, on an asio::steady_timer; then polls (poll
    /// plans: one query per turn of the executor, other handlers run in between) or parks (flag
    /// plans: each park is a reactor wait on `source.descriptor()` bounded by the plan's park,
    /// with a status query at least every backstop, and a final query as the authority). A block
    /// plan calls `source.block()` on the thread running the operation. The outcome feeds the
    /// port's point table at `point`.
    ///
    /// @param source any gpu_async::completion_source; must outlive the wait. Its query(),
    ///   arm(), block() and descriptor() are called from the operation's executor.
    /// @param plan the wait plan (copied).
    /// @param point the readback point: the key (a std::string) of the port's point table.
    /// @param token the completion token.
    ///
    /// @par Completion signature
    /// @code void(boost::system::error_code ec, gpu_async::wait_report report) @endcode
    /// On success `ec` is empty and `report` says how the wait ended (kind blocked, immediate,
    /// late or parked), its outcome, time, parks and backstop queries. A source error arrives
    /// unchanged as `ec` (compare it with the source's codes, e.g. `ec == errc::device_fault`);
    /// a cancelled wait gets asio::error::operation_aborted. On error `report` is empty.
    ///
    /// @par Per-operation cancellation
    /// cancellation_type::terminal and partial (not total: the wait may have armed the source,
    /// i.e. enqueued a word store): the wait stops at its current step (a sleep or a park ends
    /// at once; a query or a block in progress finishes first). Port-wide cancel() and the
    /// destructor end a parked plan-driven wait at once, and one in any other step at its next
    /// step; cancel() counts only the parked ones.
    ///
    /// @par Thread safety
    /// As for the descriptor overload. The point table is locked for each read and each feed.
    ///
    /// The handler is never invoked from within this function: the first step is posted. The
    /// operation's state (its timer and machine) is allocated with std::allocator, each park
    /// with the handler's associated allocator; all of it is freed before the upcall.
    template <completion_source Source,
              class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_wait(Source& source, const wait_plan& plan, std::string_view point,
                    CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return asio::async_compose<CompletionToken, void(boost::system::error_code, wait_report)>(
            detail::plan_wait_op<Source, Executor>(source, plan, std::string(point), state_shared(),
                                                   *service_, executor_),
            token, executor_);
    }

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
            static_assert(std::is_invocable_v<handler_type&&, boost::system::error_code>,
                          "a wait handler must be callable as void(boost::system::error_code)");
            detail::start_reactor_wait(*self_->service_, &self_->state().reactor, self_->executor_,
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
        if (!state_) state_ = std::make_shared<detail::port_state>(); // a moved-from port
        return *state_;
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
    reactor_service* service_;
    std::shared_ptr<detail::port_state> state_;
};

/// The port on the polymorphic I/O executor.
using gpu_completion_port = basic_gpu_completion_port<asio::any_io_executor>;

} // namespace gpu_async

#endif // GPU_ASYNC_GPU_COMPLETION_PORT_HPP
