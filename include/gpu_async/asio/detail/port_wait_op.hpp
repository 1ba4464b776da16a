// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/asio/detail/port_wait_op.hpp: the descriptor wait of gpu_completion_port, one reactor
// op.
//
// One async_wait(descriptor) is one allocation (from Asio's per-thread recycling cache when the
// handler has no allocator of its own): the op holds the handler and the reactor's bookkeeping
// (reactor_op, with the intrusive links of the table, the port and the completion queue). The
// outstanding work of a handler that runs on the I/O executor is counted by the port's
// completion queue, not held by the op; a handler with an executor of its own has an op type of
// its own, which holds that executor and its work guards too. Its completion is delivered by the
// port's completion queue: one drain handler per batch, posted to the I/O executor, which invokes
// each handler there (directly when the handler's executor is the I/O executor, else dispatched to
// it). The plan-driven wait (asio/detail/plan_wait_op.hpp) is a composed operation instead, because
// it is a multi-step state machine (query, arm, sleep, park); each of its parks is one of these
// ops. The descriptor wait is the hot path and stays a single op.
//
#ifndef GPU_ASYNC_ASIO_DETAIL_PORT_WAIT_OP_HPP
#define GPU_ASYNC_ASIO_DETAIL_PORT_WAIT_OP_HPP

#include <gpu_async/asio/detail/flavour.hpp>
#include <gpu_async/asio/detail/reactor_service.hpp>
#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/wait/detail/ranked_mutex.hpp>

#if defined(GPU_ASYNC_STANDALONE_ASIO)
#if GPU_ASYNC_HAS_IMMEDIATE_EXECUTOR
#include <asio/append.hpp>
#include <asio/associated_immediate_executor.hpp>
#endif
#include <asio/associated_allocator.hpp>
#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/bind_allocator.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/dispatch.hpp>
#include <asio/execution.hpp>
#include <asio/execution_context.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/recycling_allocator.hpp>
#else
#if GPU_ASYNC_HAS_IMMEDIATE_EXECUTOR
#include <boost/asio/append.hpp>
#include <boost/asio/associated_immediate_executor.hpp>
#endif
#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/execution.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/recycling_allocator.hpp>
#endif

#include <chrono>
#include <cstddef>
#include <memory>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

namespace gpu_async {
namespace detail {
GPU_ASYNC_ASIO_NAMESPACE_BEGIN

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
///
/// It holds the wait's key, never a pointer it dereferences: the service looks the wait up under
/// its lock (as Asio's timers do), so a signal that races the completion on another thread, or
/// comes after the operation is gone, finds nothing and does nothing. It stays in the slot after
/// the completion (clearing it there would race such a signal) until the slot is reused or its
/// signal destroyed; it needs only the service, which lives as long as the execution context.
class reactor_cancel_handler {
public:
    reactor_cancel_handler(reactor_service& svc, const reactor_key& key) noexcept
        : svc_(&svc)
        , key_(key) {}
    void operator()(asio::cancellation_type_t type) const {
        constexpr auto supported = asio::cancellation_type::terminal |
                                   asio::cancellation_type::partial |
                                   asio::cancellation_type::total;
        if ((type & supported) != asio::cancellation_type::none) svc_->cancel(key_);
    }

private:
    reactor_service* svc_;
    reactor_key key_;
};

/// Outstanding work on an executor for as long as it lives: a standard executor preferred with
/// outstanding_work.tracked (for a polymorphic one, a tracked copy), or a work guard for a legacy
/// executor. Movable.
template <class Executor, class = void>
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

/// The allocator an op is made with: the handler's associated allocator, or Asio's recycling
/// allocator (a per-thread cache, as Asio's own operations use) when that is std::allocator.
template <class Alloc>
struct op_allocator_of {
    static const Alloc& get(const Alloc& a) noexcept { return a; }
};
template <class T>
struct op_allocator_of<std::allocator<T>> {
    static asio::recycling_allocator<void> get(const std::allocator<T>&) noexcept { return {}; }
};
template <class Handler>
auto op_allocator_for(const Handler& h) noexcept {
    using alloc = asio::associated_allocator_t<Handler>;
    return op_allocator_of<alloc>::get(asio::get_associated_allocator(h));
}

/// The completion queue of a port whose I/O executor is `Executor`: its drain is posted to that
/// executor with the queue's own memory (one drain is outstanding at a time, and Asio frees a
/// handler's memory before invoking it, so the block is free again when the drain posts itself).
template <class Executor>
class port_completion_queue final : public completion_queue {
public:
    static queue_ref make(reactor_service& svc, const Executor& ex) {
        return queue_ref(new port_completion_queue(svc, ex));
    }

private:
    port_completion_queue(reactor_service& svc, const Executor& ex)
        : completion_queue(svc, &do_schedule, &do_free, &do_work)
        , ex_(ex) {}

    /// Hands out the queue's block when it is free and large enough, else the heap.
    template <class T>
    class drain_allocator {
    public:
        using value_type = T;
        explicit drain_allocator(port_completion_queue* q) noexcept
            : q_(q) {}
        template <class U>
        drain_allocator(const drain_allocator<U>& o) noexcept
            : q_(o.q_) {}
        T* allocate(std::size_t n) {
            if (!q_->block_used_ && n * sizeof(T) <= sizeof(q_->block_) &&
                alignof(T) <= alignof(std::max_align_t)) {
                q_->block_used_ = true;
                return reinterpret_cast<T*>(q_->block_);
            }
            return std::allocator<T>().allocate(n);
        }
        void deallocate(T* p, std::size_t n) noexcept {
            if (static_cast<void*>(p) == static_cast<void*>(q_->block_)) {
                q_->block_used_ = false;
                return;
            }
            std::allocator<T>().deallocate(p, n);
        }
        template <class U>
        bool operator==(const drain_allocator<U>& o) const noexcept {
            return q_ == o.q_;
        }

    private:
        template <class>
        friend class drain_allocator;
        port_completion_queue* q_;
    };

    /// Owns the reference the queue's drain holds; destroyed unrun, it reports that. Its
    /// allocator is a nested allocator_type, not an allocator_binder: a binder counts as an
    /// associated executor of its own to asio::post, which then wraps the drain in a work
    /// dispatcher (one more tracked executor and one more call per batch).
    class drain {
    public:
        using allocator_type = drain_allocator<void>;
        explicit drain(port_completion_queue* q) noexcept
            : q_(q)
            , block_(q) {}
        drain(drain&& o) noexcept
            : q_(std::exchange(o.q_, nullptr))
            , block_(o.block_) {}
        drain& operator=(drain&&) = delete;
        ~drain() {
            if (q_ != nullptr) q_->dropped();
        }
        void operator()() { std::exchange(q_, nullptr)->run(); }
        completion_queue* disown() noexcept { return std::exchange(q_, nullptr); }
        allocator_type get_allocator() const noexcept { return allocator_type(block_); }

    private:
        completion_queue* q_;
        port_completion_queue* block_; // whose block the drain's memory comes from
    };

    static bool do_schedule(completion_queue* base) noexcept {
        auto* self = static_cast<port_completion_queue*>(base);
        drain d(self);
        try {
            asio::post(self->ex_, std::move(d));
            return true;
        } catch (...) {
            // Not taken by the executor: the reference is the caller's again. (Taken and then
            // destroyed, the drain has reported itself dropped.)
            return d.disown() == nullptr;
        }
    }

    static void do_free(completion_queue* base) noexcept {
        delete static_cast<port_completion_queue*>(base);
    }

    /// The executor's work is taken and let go with no lock held; the lock only guards the list.
    static void do_work(completion_queue* base, bool hold) {
        auto* self = static_cast<port_completion_queue*>(base);
        if (hold) {
            work_holder<Executor> w(self->ex_);
            std::lock_guard lk(self->work_mutex_);
            self->work_.push_back(std::move(w)); // may throw: `w` lets its work go
            return;
        }
        std::optional<work_holder<Executor>> gone;
        {
            std::lock_guard lk(self->work_mutex_);
            gone.emplace(std::move(self->work_.back()));
            self->work_.pop_back();
        }
    }

    Executor ex_;
    ranked_mutex work_mutex_{lock_rank::queue_work};
    // The holds of the executor's work: one while ops count on it (work_started), and for a
    // moment one more per start that races another from 0.
    std::vector<work_holder<Executor>> work_;
    bool block_used_ = false;
    alignas(std::max_align_t) unsigned char block_[256];
};

/// One async_wait: the handler, and what its completion needs besides. A handler whose
/// associated executor is the port's I/O executor (the common case) runs in the port's
/// completion queue's drain, and its outstanding work is counted by that queue
/// (completion_queue::work_started): its op (`Foreign` false) holds no executor and no work
/// guard of its own. Any other handler's op (`Foreign` true) also holds its executor and work on
/// both executors (made by hold_work); which op a handler gets is decided at initiation
/// (with_port_wait_op). Allocated with op_allocator_for(handler); freed before the upcall.
///
/// Completion (`complete`, called by the port's completion queue's drain on the I/O executor):
/// the final step runs at once when the handler's executor is the I/O executor, else it is
/// dispatched to the handler's executor; it frees the op and invokes the handler. A step
/// destroyed without running (its context shut down) destroys the op without invoking the
/// handler. The cancellation slot is not the op's: its handler holds a key, not the op (see
/// reactor_cancel_handler).
template <class Handler, class IoExecutor, bool Foreign>
class port_wait_op final : public reactor_op {
public:
    using handler_executor = asio::associated_executor_t<Handler, IoExecutor>;
    using op_allocator = typename std::allocator_traits<decltype(op_allocator_for(
        std::declval<const Handler&>()))>::template rebind_alloc<port_wait_op>;

    /// The op, holding no work yet (hold_work).
    template <class H>
    static port_wait_op* create(H&& handler, const memory_descriptor& d, completion_queue& queue) {
        op_allocator alloc(op_allocator_for(handler));
        port_wait_op* p = std::allocator_traits<op_allocator>::allocate(alloc, 1);
        try {
            return ::new (static_cast<void*>(p)) port_wait_op(std::forward<H>(handler), d, queue);
        } catch (...) {
            std::allocator_traits<op_allocator>::deallocate(alloc, p, 1);
            throw;
        }
    }

    /// Makes the op outstanding work until it goes: counted by its queue when its handler runs
    /// in the drain (the handler's executor is the I/O executor), else held, on both executors,
    /// by the op's foreign part. Called once, before the op goes to the service or its queue;
    /// never for a wait that completes at initiation on its immediate executor, which, as Asio's
    /// own operations, leaves the context's work alone. When it throws nothing is held.
    void hold_work(const IoExecutor& io_ex) {
        if constexpr (!Foreign) {
            queue()->work_started();
            set_counted();
        } else {
            // Completed by a dispatch to the handler's executor, not inline in the drain: the
            // drain then stops after it (see completion_queue::run).
            part_.emplace(asio::get_associated_executor(handler_, io_ex), io_ex);
            set_foreign_executor(true);
        }
    }

private:
    /// What a handler with an executor of its own needs: that executor, and outstanding work on
    /// it and on the I/O executor (the drain that hands it over may be gone when it runs).
    struct foreign_part {
        foreign_part(const handler_executor& h, const IoExecutor& io)
            : ex(h)
            , io_work(io)
            , handler_work(h) {}
        handler_executor ex;
        work_holder<IoExecutor> io_work;
        work_holder<handler_executor> handler_work;
    };
    struct no_part {};
    // The foreign part, made by hold_work; nothing in an op whose handler runs in the drain.
    using part_type = std::conditional_t<Foreign, std::optional<foreign_part>, no_part>;

    template <class H>
    port_wait_op(H&& handler, const memory_descriptor& d, completion_queue& queue)
        : reactor_op(d, &queue, &port_wait_op::do_func)
        , handler_(std::forward<H>(handler)) {}

    /// Owns the op until it runs; a step destroyed unrun destroys the op (no upcall).
    class final_step {
    public:
        explicit final_step(port_wait_op* op) noexcept
            : op_(op) {}
        final_step(final_step&& o) noexcept
            : op_(std::exchange(o.op_, nullptr)) {}
        final_step& operator=(final_step&&) = delete;
        ~final_step() {
            if (op_ != nullptr) free(op_);
        }
        void operator()() { std::exchange(op_, nullptr)->finish(); }

    private:
        port_wait_op* op_;
    };

    static void do_func(reactor_op* base, bool invoke) {
        auto* op = static_cast<port_wait_op*>(base);
        if (!invoke) return free(op);
        // Running in the drain on the I/O executor: when that is the handler's own executor
        // (decided at initiation), the handler runs here.
        if constexpr (Foreign) {
            if (op->part_) {
                auto alloc = asio::get_associated_allocator(op->handler_);
                const handler_executor ex = op->part_->ex;
                asio::dispatch(ex, asio::bind_allocator(alloc, final_step(op)));
                return;
            }
        }
        return final_step(op)();
    }

    /// Ends the op's count on its queue when it goes (its handler returned, or never runs).
    class queue_work {
    public:
        explicit queue_work(completion_queue* q) noexcept
            : q_(q) {}
        queue_work(const queue_work&) = delete;
        queue_work& operator=(const queue_work&) = delete;
        ~queue_work() {
            if (q_ != nullptr) q_->work_finished();
        }

    private:
        completion_queue* q_;
    };

    // Destroys without invoking (context shutdown). The slot is left alone, as Asio's own
    // operations leave it: its signal may already be gone.
    static void free(port_wait_op* op) noexcept {
        const queue_work work(op->counted() ? op->queue() : nullptr);
        op_allocator alloc(op_allocator_for(op->handler_));
        op->~port_wait_op();
        std::allocator_traits<op_allocator>::deallocate(alloc, op, 1);
    }

    void finish() {
        // On the handler's executor: take what the upcall needs, free the op, then invoke. The
        // work lives until after the upcall (its count on the queue, which the running drain
        // keeps alive, or the foreign part's guards). The slot is left alone: a signal emitted
        // now from another thread runs our cancellation handler, which finds nothing to cancel.
        // (The work is declared first: as in Asio's operations, it ends after the handler is
        // destroyed.)
        const queue_work work(counted() ? queue() : nullptr);
        part_type guards;
        if constexpr (Foreign) {
            if (part_) guards.emplace(std::move(*part_));
        }
        Handler handler(std::move(handler_));
        const error_code result = ec();
        op_allocator alloc(op_allocator_for(handler));
        this->~port_wait_op();
        std::allocator_traits<op_allocator>::deallocate(alloc, this, 1);
        std::move(handler)(result);
    }

#if GPU_ASYNC_HAS_IMMEDIATE_EXECUTOR
public:
    /// Completes a wait that finished at initiation (its result set, never registered, holding
    /// no work: hold_work was not called) through the handler's associated immediate executor,
    /// as Asio's own operations do: the op is freed, then the handler is dispatched there with
    /// its code (inline when that executor allows).
    static void complete_immediately(port_wait_op* op, const IoExecutor& io_ex) {
        Handler handler(std::move(op->handler_));
        const error_code result = op->ec();
        free(op);
        auto immediate_ex = asio::get_associated_immediate_executor(handler, io_ex);
        asio::dispatch(immediate_ex, asio::append(std::move(handler), result));
    }

private:
#endif

    Handler handler_;
    [[no_unique_address]] part_type part_;
};

/// Calls `f` with std::type_identity of the op type for `handler` on `io_ex`: the op of a
/// handler whose associated executor is the I/O executor holds no executor of its own; any
/// other's does (port_wait_op's `Foreign`).
template <class Handler, class IoExecutor, class F>
void with_port_wait_op(const Handler& handler, const IoExecutor& io_ex, F&& f) {
    if constexpr (std::is_same_v<asio::associated_executor_t<Handler, IoExecutor>, IoExecutor>) {
        if (asio::get_associated_executor(handler, io_ex) == io_ex)
            return f(std::type_identity<port_wait_op<Handler, IoExecutor, false>>{});
    }
    f(std::type_identity<port_wait_op<Handler, IoExecutor, true>>{});
}

#if GPU_ASYNC_HAS_IMMEDIATE_EXECUTOR
/// A handler with no associations: what Asio gives a handler that has no immediate executor.
struct plain_handler {
    void operator()(error_code) {}
};

/// Whether `Handler` has an associated immediate executor of its own (bind_immediate_executor,
/// a nested immediate_executor_type, or a wrapper that forwards one) rather than Asio's default
/// for `IoExecutor` (the I/O executor, never blocking: a post).
template <class Handler, class IoExecutor>
inline constexpr bool has_own_immediate_executor =
    !std::is_same_v<asio::associated_immediate_executor_t<Handler, IoExecutor>,
                    asio::associated_immediate_executor_t<plain_handler, IoExecutor>>;
#endif

/// start_reactor_wait with its op type chosen (with_port_wait_op).
template <class OpType, class IoExecutor, class Handler>
void start_reactor_wait_as(reactor_service& svc, reactor_port& port, const IoExecutor& io_ex,
                           Handler&& handler, const memory_descriptor& desc, dur_ns bound,
                           std::optional<mono_ns> deadline) {
    using op_type = OpType;
    auto slot = asio::get_associated_cancellation_slot(handler);
    op_type* op = op_type::create(std::forward<Handler>(handler), desc, *port.queue.get());
#if GPU_ASYNC_HAS_IMMEDIATE_EXECUTOR
    // A handler with an immediate executor of its own asks for an immediate completion there
    // when the wait finishes at once. Looked at before the op takes any work: taken and let go
    // here, outside run(), the context's count of outstanding work could drop to zero, which
    // stops an io_context. No cancellation handler is installed for it.
    if constexpr (has_own_immediate_executor<std::decay_t<Handler>, IoExecutor>) {
        if (const std::optional<reactor_service::start_result> ended =
                svc.ends_before_start(*op, deadline)) {
            if (*ended == reactor_service::start_result::dropped) {
                op->destroy(); // the context has shut down: destroyed, never invoked
                return;
            }
            return op_type::complete_immediately(op, io_ex);
        }
    }
#endif
    reactor_service::start_result started{};
    try {
        op->hold_work(io_ex);
        // Installed before the op is registered: once registered it may complete at once on
        // another thread and its handler may release the slot's signal. (emplace allocates: it
        // may throw.)
        if (slot.is_connected())
            slot.template emplace<reactor_cancel_handler>(svc, svc.make_key(*op));
        started = svc.start(op, bound, deadline);
    } catch (...) {
        if (slot.is_connected()) slot.clear(); // a handler installed above points to op
        op->destroy();
        throw;
    }
    if (started == reactor_service::start_result::registered) return;
    // Not registered: the completion is decided (or, after shutdown, there is none), so a
    // cancellation has nothing left to do. The slot is cleared now, while the handler (which may
    // own the signal) is certainly alive: once queued, the op may complete at any moment.
    if (slot.is_connected()) slot.clear();
    if (started == reactor_service::start_result::dropped) {
        op->destroy(); // the context has shut down: destroyed, never invoked
        return;
    }
    // Through the port's queue, never inline: also a wait with an immediate executor that
    // finished between the look above and start() (it holds work now).
    svc.deliver(op);
}

/// Starts one reactor wait for `handler`: allocates the op, makes it outstanding work, installs
/// the cancellation handler (the slot is read before the handler moves), registers it. Never
/// invokes the handler inline, unless it finished at once and the handler's own immediate
/// executor runs it inline; such a wait never counts as outstanding work. When this throws, the
/// op (and the handler moved into it) has been destroyed exactly once and the slot cleared.
template <class IoExecutor, class Handler>
void start_reactor_wait(reactor_service& svc, reactor_port& port, const IoExecutor& io_ex,
                        Handler&& handler, const memory_descriptor& desc, dur_ns bound = {},
                        std::optional<mono_ns> deadline = {}) {
    with_port_wait_op(handler, io_ex, [&](auto op) {
        start_reactor_wait_as<typename decltype(op)::type>(
            svc, port, io_ex, std::forward<Handler>(handler), desc, bound, deadline);
    });
}

GPU_ASYNC_ASIO_NAMESPACE_END
} // namespace detail
} // namespace gpu_async

#endif // GPU_ASYNC_ASIO_DETAIL_PORT_WAIT_OP_HPP
