// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The Asio I/O object that awaits GPU memory descriptors.
///
/// basic_gpu_completion_port<Executor> is to a completion line what basic_stream_socket is to a
/// file descriptor: async_wait(descriptor, token) completes when the descriptor's word reaches
/// its target. The watching is done by the execution context's reactor service (an
/// implementation detail, shared by every port of that context); the operations live in
/// asio/detail/port_wait_op.hpp (the descriptor wait) and asio/detail/plan_wait_op.hpp (the
/// plan-driven wait).
///
/// This header is the whole port: the class and its descriptor wait
/// (<gpu_async/asio/basic_gpu_completion_port.hpp>) and its plan-driven wait
/// (<gpu_async/asio/plan_wait.hpp>). A translation unit that only waits for descriptors may include
/// the first alone, which leaves the plan machinery (about a fifth of this header's compile
/// time) out.
///
/// Handlers that throw: completions are delivered in batches on the I/O executor. A handler run
/// inline that throws (directly, or through an executor it is bound to, e.g. a strand, that runs
/// it inline) ends its batch: the exception leaves run() or poll() as itself, and the rest of the
/// batch runs at the next run(), as with Asio's own operations. A handler bound to an executor
/// other than the port's (whose execute() may keep what it throws until the batch returns) is
/// always the last of its batch, thrown or not: such handlers cost up to one post each, as Asio's
/// own operations do; handlers on the port's executor share one post per batch.
#ifndef GPU_ASYNC_ASIO_GPU_COMPLETION_PORT_HPP
#define GPU_ASYNC_ASIO_GPU_COMPLETION_PORT_HPP

#include <gpu_async/asio/basic_gpu_completion_port.hpp>
#include <gpu_async/asio/detail/flavour.hpp>
#include <gpu_async/asio/plan_wait.hpp>

// What this header has always provided, kept for users that rely on it through this header.
#include <gpu_async/asio/detail/plan_wait_op.hpp>
#include <gpu_async/asio/detail/port_wait_op.hpp>
#include <gpu_async/asio/detail/reactor_service.hpp>
#include <gpu_async/asio/error.hpp>
#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/completion_source.hpp>
#include <gpu_async/core/estimator.hpp>
#include <gpu_async/core/park_fallback.hpp>
#include <gpu_async/core/time.hpp>
#include <gpu_async/core/wait_machine.hpp>
#include <gpu_async/core/wait_plan.hpp>
#include <gpu_async/fill/wait_bands.hpp>
#include <gpu_async/wait/doorbell.hpp>

#if defined(GPU_ASYNC_STANDALONE_ASIO)
#include <asio/any_io_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/compose.hpp>
#include <asio/execution_context.hpp>
#else
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/execution_context.hpp>
#endif

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#endif // GPU_ASYNC_ASIO_GPU_COMPLETION_PORT_HPP
