// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief Run an io_context in FILL mode on the calling thread.
///
/// FILL: the wait is filled with live work; the thread idles only when nothing is ready.
#ifndef GPU_ASYNC_ASIO_RUN_FILL_HPP
#define GPU_ASYNC_ASIO_RUN_FILL_HPP

#include <gpu_async/asio/detail/flavour.hpp>
#include <gpu_async/asio/detail/reactor_service.hpp>
#include <gpu_async/asio/error.hpp>
#include <gpu_async/core/detail/config.hpp>
#include <gpu_async/core/time.hpp>
#include <gpu_async/core/wait_tuning.hpp>

#if defined(GPU_ASYNC_STANDALONE_ASIO)
#include <asio/io_context.hpp>
#else
#include <boost/asio/io_context.hpp>
#endif

#include <cstddef>

namespace gpu_async {
GPU_ASYNC_ASIO_NAMESPACE_BEGIN

/// Options of run_fill().
struct fill_options {
    /// The longest park on the reactor's doorbell while GPU waits are pending. It bounds how late
    /// the thread notices what does not ring the doorbell: a GPU store, a socket or timer event,
    /// a handler posted from another thread. Zero (or less) is taken as 1 ns. A std::chrono
    /// duration (`opts.park_bound = 50us;`) or a dur_ns.
    std::chrono::nanoseconds park_bound = default_park_bound;
    /// The longest block inside the io_context's own wait (io_context::run_one_for) while no GPU
    /// wait is pending. Sockets, timers and posts wake that block at once; it bounds only how late
    /// the thread notices a GPU wait started by another thread. Zero (or less) is taken as 1 ns.
    std::chrono::nanoseconds idle_bound = default_wait_tuning.fill_idle_bound;
};

/// Runs `ctx` on the calling thread in FILL mode until it runs out of work or is stopped, as
/// io_context::run() does, and returns the number of handlers run.
///
/// Each turn: (1) run every ready handler, one at a time (io_context::poll_one(), which also
/// reaps ready sockets and expired timers without blocking), scanning the reactor's lines
/// whenever a park bound has passed since the last scan, so a busy handler queue (a handler that
/// keeps re-posting itself) cannot hold a GPU completion back; (2) only when none was ready, scan
/// the lines and post what completed (those handlers run on this thread at the next turn, unless
/// other threads also run `ctx`); (3) only when nothing completed: with GPU waits pending, park
/// on the reactor's doorbell (word-wait or futex), bounded by `options.park_bound` and the
/// earliest reactor deadline; with none pending, block in io_context::run_one_for(
/// options.idle_bound). A turn that follows a park looks at the lines first (what ended the park
/// is most likely a completion; asking the io_context first would cost it a system call), then
/// runs the ready handlers as above. The calling thread's timer slack is set to 1 ns while run_fill
/// runs (Linux; restored on return), so a short park is not stretched by the default 50 us slack.
///
/// Guarantees: no extra thread is used while run_fill runs: the reactor's watcher thread of
/// `ctx` stands down (it resumes when the last run_fill on `ctx` returns), and GPU completions
/// are observed by the calling thread. A ringing producer wakes the park at once; a GPU store,
/// a socket or timer event and a handler posted from another thread are served at most about
/// one park bound (plus the run time of the handler then running) late while GPU waits are
/// pending, and at once otherwise; this holds however busy the handler queue is.
/// Asio exposes no "next timer" to bound the park with, so a timer may fire up to one park bound
/// late. Exceptions thrown by handlers propagate, as from run(); the watcher resumes.
///
/// Thread safety: other threads may run `ctx` (run(), run_fill()) at the same time; GPU
/// completions are then observed by the run_fill threads only.
GPU_ASYNC_DECL std::size_t run_fill(asio::io_context& ctx, fill_options options = {});

GPU_ASYNC_ASIO_NAMESPACE_END
} // namespace gpu_async

#if GPU_ASYNC_HEADER_ONLY
#include <gpu_async/asio/impl/run_fill.ipp>
#endif

#endif // GPU_ASYNC_ASIO_RUN_FILL_HPP
