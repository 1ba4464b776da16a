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
#include <gpu_async/reactor_service.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/execution.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/error_code.hpp>

#include <memory>
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
        , io_work_(io_ex)
        , handler_work_(asio::get_associated_executor(handler_, io_ex)) {}

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
            auto ex = op->handler_work_.get_executor();
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

    static void do_destroy(reactor_op* base) {
        auto* op = static_cast<port_wait_op*>(base);
        if (op->slot_.is_connected()) op->slot_.clear();
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
    asio::executor_work_guard<IoExecutor> io_work_;
    asio::executor_work_guard<handler_executor> handler_work_;
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
        , impl_(std::make_unique<detail::reactor_port>()) {}

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
        , impl_(std::move(other.impl_)) {}

    /// Takes over `other`'s pending waits (from a port of a convertible executor type).
    template <class Executor1>
    requires std::is_convertible_v<Executor1, Executor>
    basic_gpu_completion_port(basic_gpu_completion_port<Executor1>&& other)
    noexcept
        : executor_(other.executor_)
        , service_(other.service_)
        , impl_(std::move(other.impl_)) {}

    /// Cancels this port's waits, then takes over `other`'s.
    basic_gpu_completion_port& operator=(basic_gpu_completion_port&& other) noexcept {
        if (this != &other) {
            release();
            executor_ = other.executor_;
            service_ = other.service_;
            impl_ = std::move(other.impl_);
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
    std::size_t cancel() { return impl_ ? service_->cancel(*impl_) : 0; }

    /// Number of this port's waits still pending (a snapshot; for tests and diagnostics).
    std::size_t pending() const { return impl_ ? service_->pending(*impl_) : 0; }

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
    /// effect. The slot is cleared before the handler runs.
    ///
    /// @par Thread safety
    /// May be called from any thread; waits on the same port may be started concurrently.
    ///
    /// Regardless of whether the wait completes at once, the handler is never invoked from
    /// within this function: a descriptor already complete at initiation completes through
    /// asio::post. The handler runs through its associated executor (default: the port's),
    /// the op is allocated with its associated allocator and freed before the upcall, and work is
    /// outstanding on both executors while the wait is pending.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_wait(const memory_descriptor& desc,
                    CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
            initiate_async_wait(this), token, desc);
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
            using op_type = detail::port_wait_op<handler_type, Executor>;
            // Read the slot before the handler is moved into the op.
            auto slot = asio::get_associated_cancellation_slot(handler);
            op_type* op =
                op_type::create(std::forward<WaitHandler>(handler), self_->executor_, desc, slot);
            reactor_service& svc = *self_->service_;
            if (slot.is_connected()) slot.template emplace<detail::reactor_cancel_handler>(svc, op);
            if (!self_->impl_) self_->impl_ = std::make_unique<detail::reactor_port>();
            try {
                svc.start(self_->impl_.get(), op);
            } catch (...) {
                op->destroy();
                throw;
            }
        }

    private:
        basic_gpu_completion_port* self_;
    };

    void release() noexcept {
        if (impl_) {
            try {
                service_->cancel(*impl_);
            } catch (...) {
                // posting the completions failed (out of memory): nothing better to do here
            }
            impl_.reset();
        }
    }

    executor_type executor_;
    reactor_service* service_;
    std::unique_ptr<detail::reactor_port> impl_;
};

/// The port on the polymorphic I/O executor.
using gpu_completion_port = basic_gpu_completion_port<asio::any_io_executor>;

} // namespace gpu_async

#endif // GPU_ASYNC_GPU_COMPLETION_PORT_HPP
