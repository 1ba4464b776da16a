// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief Ending the waits on a completion line before its memory goes.
///
/// A reactor reads the words of every line it has waits on. The owner of a line (the simulated
/// device, a mapped CUDA or HIP line, your own code) must therefore not free the line while a
/// reactor may still read it. `retire_line(line)` tells every reactor of the process to end its
/// waits on `line` (their handlers get asio::error::operation_aborted, exactly once) and returns
/// only once none of them will read the line again. The library's line owners call it from their
/// destructors (and from mapped_line::close()); call it yourself before freeing a line you own
/// while waits on it may be pending.
///
/// Reactors register themselves (an Asio reactor service from its construction to its
/// destruction). `retire_line` holds the registry's lock while it asks each of them, so a reactor
/// being destroyed waits for a retirement in progress; a reactor never takes that lock while it
/// holds its own.
#ifndef GPU_ASYNC_LINE_RETIREMENT_HPP
#define GPU_ASYNC_LINE_RETIREMENT_HPP

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/detail/config.hpp>

namespace gpu_async {

namespace detail {

/// Something that reads completion lines (a reactor): told when a line is retired.
class line_watcher {
public:
    /// Ends every wait on `line`; after it returns the watcher does not read `line` again.
    virtual void retire_line(const completion_line& line) noexcept = 0;

protected:
    line_watcher() = default;
    line_watcher(const line_watcher&) = default;
    line_watcher& operator=(const line_watcher&) = default;
    ~line_watcher() = default;
};

/// Registers `w` until remove_line_watcher(w). Thread-safe.
GPU_ASYNC_DECL void add_line_watcher(line_watcher& w);
/// Unregisters `w`; waits for a retirement that is asking `w`. Thread-safe.
GPU_ASYNC_DECL void remove_line_watcher(line_watcher& w) noexcept;

} // namespace detail

/// Ends every pending wait on `line` in every reactor of the process (operation_aborted) and
/// returns once no reactor reads `line` any more. Call it before freeing a line while waits on it
/// may be pending. Thread-safe; must not be called from inside a reactor's own lock (from a
/// handler is fine).
GPU_ASYNC_DECL void retire_line(const completion_line& line) noexcept;

} // namespace gpu_async

#if GPU_ASYNC_HEADER_ONLY
#include <gpu_async/impl/line_retirement.ipp>
#endif

#endif // GPU_ASYNC_LINE_RETIREMENT_HPP
