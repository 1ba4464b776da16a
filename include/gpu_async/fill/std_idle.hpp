// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The idle of the FILL executor on the std host (`std_idle`, for
/// fill_executor::run(idle)): the std clock, a thread sleep, and a park on a line with the word
/// wait, which first runs the line owners' health queries when they are due.
///
///     std_idle idle;                          // for fill_executor::run(idle)
///
/// Host layer: std threads and the word wait; no Boost, no Asio.
#ifndef GPU_ASYNC_FILL_STD_IDLE_HPP
#define GPU_ASYNC_FILL_STD_IDLE_HPP

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/time.hpp>
#include <gpu_async/fill/reactor.hpp>
#include <gpu_async/host/std_clock.hpp>
#include <gpu_async/line/line_health.hpp>
#include <gpu_async/line/line_life.hpp>
#include <gpu_async/wait/wordwait.hpp>

#include <cstdint>
#include <string_view>
#include <utility>

namespace gpu_async {

/// The idle of the FILL executor on the std host (satisfies reactor_idle): the std clock, a
/// thread sleep to a deadline, and a park on a line with the word wait the probe found (a
/// user-mode monitor where the CPU has one, else the portable pause-spin-then-yield loop).
class std_idle {
public:
    /// Parks with `ww` (by default what the probe found).
    explicit std_idle(const word_wait& ww = word_wait::probe()) noexcept
        : ww_(&ww) {}

    mono_ns now() const noexcept { return clock_.now(); }

    /// The library's line life: the FILL executor's reactor judges descriptors with it.
    static line_life_functions line_life() noexcept { return library_line_life(); }

    void sleep_until(mono_ns at) const { std_timer{}.sleep_until(at); }

    /// Parks on `line` until `done()`, a store, or `bound`; returns `done()`. First runs the
    /// line owners' health queries when they are due (the reactor parks only while waits are
    /// pending); when a line's life moved meanwhile (a query found a fault) it returns at once,
    /// so that the reactor judges its waits again.
    template <class Pred>
    bool park_line(const completion_line& line, Pred&& done, dur_ns bound) const {
        if (query_health()) return done();
        return ww_->park(line, std::forward<Pred>(done), bound);
    }

    /// Runs the line owners' health queries if they are due (line/line_health.hpp: at most once
    /// per fault backstop in the process), so that a faulted context ends the FILL reactor's
    /// waits (errc::device_fault) within about a backstop and a park bound. True when they ran
    /// and a line's life moved meanwhile (else the park goes on: a zero backstop runs them at
    /// every park, which must not turn the park into a spin).
    static bool query_health() noexcept {
        const std::uint64_t before = detail::line_life_epoch();
        return detail::query_line_health() && detail::line_life_epoch() != before;
    }

    /// The word-wait path parks run.
    word_wait_path path() const noexcept { return ww_->path(); }

    /// Which path the park uses, e.g. "umwait" or "fallback (pause-spin, then yield)".
    std::string_view name() const noexcept { return ww_->name(); }

    /// The executor label of this idle.
    static constexpr std::string_view label() noexcept { return "gpu-reactor"; }

private:
    std_clock clock_;
    const word_wait* ww_;
};

static_assert(reactor_idle<std_idle>);

} // namespace gpu_async

#endif // GPU_ASYNC_FILL_STD_IDLE_HPP
