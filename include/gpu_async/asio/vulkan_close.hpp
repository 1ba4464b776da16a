// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief gpu_async::async_close: closes a vulkan_line without blocking the calling thread and
/// completes once the line's stores have landed and its memory is freed, kept or leaked.
///
/// vulkan_line::close() blocks its thread until the stores recorded or submitted for the line
/// land (up to the line's settle_timeout): on an io_context thread that stalls every other
/// handler. async_close retires the line at once (its pending waits end: success
/// where the word reached the target, else operation_aborted), hands it to its device and polls the
/// device's settle on a steady_timer of the given executor, so the thread goes on running handlers
/// meanwhile:
///
///     co_await gpu_async::async_close(line, co_await asio::this_coro::executor,
///                                     asio::use_awaitable);
///
/// Dropping a line (its destructor) does not block either; async_close is for code that wants
/// to know when the line is gone, and why it leaked if it did.
#ifndef GPU_ASYNC_ASIO_VULKAN_CLOSE_HPP
#define GPU_ASYNC_ASIO_VULKAN_CLOSE_HPP

#include <gpu_async/asio/detail/flavour.hpp>
#include <gpu_async/asio/detail/port_wait_op.hpp>
#include <gpu_async/asio/error.hpp>
#include <gpu_async/core/wait_tuning.hpp>
#include <gpu_async/device/vulkan.hpp>

#if defined(GPU_ASYNC_STANDALONE_ASIO)
#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/basic_waitable_timer.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/error.hpp>
#include <asio/execution_context.hpp>
#include <asio/post.hpp>
#else
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/post.hpp>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <type_traits>
#include <utility>

namespace gpu_async {
namespace detail {
GPU_ASYNC_ASIO_NAMESPACE_BEGIN

/// Where a cancellation of an async_close goes: a flag, so a signal from any thread (also one
/// racing the completion) only sets it; the operation reads it at its next poll.
struct vulkan_close_cancel {
    std::atomic<bool> cancelled{false};
};

/// Installed in the handler's cancellation slot. Terminal and partial only: the line is
/// retired and handed to its device already (a side effect no cancellation undoes), so total
/// does not hold.
class vulkan_close_cancel_handler {
public:
    explicit vulkan_close_cancel_handler(std::shared_ptr<vulkan_close_cancel> flag) noexcept
        : flag_(std::move(flag)) {}
    void operator()(asio::cancellation_type_t type) const noexcept {
        constexpr auto supported =
            asio::cancellation_type::terminal | asio::cancellation_type::partial;
        if ((type & supported) != asio::cancellation_type::none)
            flag_->cancelled.store(true, std::memory_order_release);
    }

private:
    std::shared_ptr<vulkan_close_cancel> flag_;
};

/// The operation of an async_close: polls the device's settle (vulkan_device::
/// settle_closed_lines(), which never blocks) on a timer of the I/O executor, at intervals that
/// double from first_interval to last_interval, until the line is done or the wait cancelled;
/// then posts the handler to its associated executor. Outstanding work on that executor is held
/// until the post; the I/O executor has the timer's or a posted step's meanwhile.
template <class Handler, class Executor>
class vulkan_close_op {
public:
    using timer_type =
        asio::basic_waitable_timer<std::chrono::steady_clock,
                                   asio::wait_traits<std::chrono::steady_clock>, Executor>;
    static constexpr std::chrono::nanoseconds first_interval =
        default_wait_tuning.close_poll_first.chrono();
    static constexpr std::chrono::nanoseconds last_interval =
        default_wait_tuning.settle_poll_last.chrono();

    struct state {
        state(const Executor& ex, vulkan_device* d, std::shared_ptr<const vulkan_closing> c,
              std::shared_ptr<vulkan_close_cancel> f)
            : timer(ex)
            , device(d)
            , closing(std::move(c))
            , cancel(std::move(f)) {}
        timer_type timer;
        vulkan_device* device;
        std::shared_ptr<const vulkan_closing> closing; ///< null: the line was closed already
        std::shared_ptr<vulkan_close_cancel> cancel;
        std::chrono::nanoseconds interval = first_interval;
    };

    template <class H>
    vulkan_close_op(H&& handler, std::unique_ptr<state> st)
        : handler_(std::forward<H>(handler))
        , work_(asio::get_associated_executor(handler_, st->timer.get_executor()))
        , state_(std::move(st)) {}

    /// One poll: the first is posted by the initiation, each later one is the timer's handler.
    void operator()(error_code = {}) {
        state& s = *state_;
        if (s.cancel->cancelled.load(std::memory_order_acquire))
            return complete(asio::error::operation_aborted);
        if (s.closing == nullptr) return complete({});
        if (!s.closing->done() && s.device != nullptr)
            static_cast<void>(s.device->settle_closed_lines());
        if (s.closing->done()) {
            const auto& failure = s.closing->error();
            return complete(failure ? to_asio_error_code(failure->code()) : error_code());
        }
        s.timer.expires_after(s.interval);
        s.interval = std::min(s.interval * 2, last_interval);
        s.timer.async_wait(std::move(*this));
    }

private:
    void complete(error_code ec) {
        auto ex = asio::get_associated_executor(handler_, state_->timer.get_executor());
        state_.reset(); // the timer goes before the upcall
        asio::post(ex, [h = std::move(handler_), ec]() mutable { std::move(h)(ec); });
    }

    Handler handler_;
    work_holder<asio::associated_executor_t<Handler, Executor>> work_;
    std::unique_ptr<state> state_;
};

/// The initiation of async_close (the line travels as its argument, so a lazy token holds it
/// until it is launched, and closes it on its own if never launched).
template <class Executor>
class initiate_vulkan_close {
public:
    using executor_type = Executor;

    explicit initiate_vulkan_close(const Executor& ex)
        : ex_(ex) {}

    executor_type get_executor() const noexcept { return ex_; }

    template <class Handler>
    void operator()(Handler&& handler, vulkan_line line) const {
        using handler_type = std::decay_t<Handler>;
        static_assert(std::is_invocable_v<handler_type&&, error_code>,
                      "a close handler must be callable as void(gpu_async::error_code)");
        using op = vulkan_close_op<handler_type, Executor>;
        auto flag = std::make_shared<vulkan_close_cancel>();
        auto slot = asio::get_associated_cancellation_slot(handler);
        if (slot.is_connected()) slot.template emplace<vulkan_close_cancel_handler>(flag);
        vulkan_device* const device = line.device();
        auto st =
            std::make_unique<typename op::state>(ex_, device, line.start_close(), std::move(flag));
        // Never inline: the first poll is posted.
        asio::post(ex_, op(std::forward<Handler>(handler), std::move(st)));
    }

private:
    Executor ex_;
};

GPU_ASYNC_ASIO_NAMESPACE_END
} // namespace detail

GPU_ASYNC_ASIO_NAMESPACE_BEGIN

/// Starts an asynchronous close of a Vulkan line.
///
/// Takes the line over at once (`line` is then as moved from: not open, no device); when the
/// operation is initiated (for a lazy token, when it is launched) it retires the line (every
/// pending wait on it ends as vulkan_line::close() ends it) and hands it to its device, as
/// vulkan_line::start_close() does. The operation completes once the device has settled the
/// line: its stores landed and its memory freed (or kept by the device, for a line that stores
/// were recorded for), or its settle failed and the memory leaked (see vulkan_line::close()).
/// Meanwhile it polls vulkan_device::settle_closed_lines(), which never blocks, on a timer of
/// `ex`: the thread that runs `ex` runs other handlers in between. A lazy operation destroyed
/// without being launched closes the line as the line's destructor does.
///
/// @param line the line; it needs not stay alive after the call. Its device must outlive the
///   operation.
/// @param ex the I/O executor: the timer's, and the handler's unless it has an associated
///   executor of its own.
/// @param token the completion token (callback, asio::use_future, asio::use_awaitable,
///   asio::deferred, ...). Without one, the executor's default completion token is used.
///
/// @par Completion signature
/// @code void(gpu_async::error_code ec) @endcode
/// `ec` is empty when the line was settled and freed or kept (or was closed already), the
/// settle's failure when it leaked (errc::backend: a store did not land within the line's
/// settle_timeout; errc::driver_status: the driver failed, e.g. VK_ERROR_DEVICE_LOST), and
/// asio::error::operation_aborted when the wait was cancelled.
///
/// @par Per-operation cancellation
/// cancellation_type::terminal and partial (not total: the line is retired and with its device
/// already, which no cancellation undoes). The wait ends at its next poll with
/// operation_aborted; the device goes on settling the line and frees it (or leaks it) as for a
/// line dropped without a close. The signal may be emitted from any thread, also racing the
/// completion: it only sets a flag the operation reads.
///
/// @par Thread safety
/// Distinct lines: safe. The line itself: as for every use of it, one thread at a time. The
/// device's settle may run on several threads at once.
///
/// Regardless of whether the line is settled at once, the handler is never invoked from within
/// this function: the first poll is posted to `ex`. The handler is posted to its associated
/// executor (default: `ex`), on which work is outstanding while the operation is pending. The
/// operation's state is allocated with std::allocator.
///
/// @throws std::bad_alloc (the line is then closed as its destructor closes it).
template <class Executor, asio::completion_token_for<void(error_code)> CompletionToken =
                              asio::default_completion_token_t<Executor>>
requires(asio::execution::is_executor<Executor>::value ||
         asio::is_executor<Executor>::value) auto async_close(vulkan_line& line, const Executor& ex,
                                                              CompletionToken&& token =
                                                                  asio::default_completion_token_t<
                                                                      Executor>()) {
    return asio::async_initiate<CompletionToken, void(error_code)>(
        detail::initiate_vulkan_close<Executor>(ex), token, vulkan_line(std::move(line)));
}

/// As async_close(line, ctx.get_executor(), token).
template <class ExecutionContext,
          asio::completion_token_for<void(error_code)> CompletionToken =
              asio::default_completion_token_t<typename ExecutionContext::executor_type>>
requires std::is_convertible_v<ExecutionContext&, asio::execution_context&>
auto async_close(vulkan_line& line, ExecutionContext& ctx,
                 CompletionToken&& token =
                     asio::default_completion_token_t<typename ExecutionContext::executor_type>()) {
    return gpu_async::async_close(line, ctx.get_executor(), std::forward<CompletionToken>(token));
}

GPU_ASYNC_ASIO_NAMESPACE_END
} // namespace gpu_async

#endif // GPU_ASYNC_ASIO_VULKAN_CLOSE_HPP
