// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The blocking wait (`wait_blocking`, the `naive` executor kind) and the plan
/// capabilities of the std host it resolves plans against (`std_plan_capabilities`).
///
///     auto r = wait_blocking(stream, plan, table, point);   // blocks; feeds the point table
///
/// Host layer: the std clock and timer; no Boost, no Asio.
#ifndef GPU_ASYNC_HOST_WAIT_BLOCKING_HPP
#define GPU_ASYNC_HOST_WAIT_BLOCKING_HPP

#include <gpu_async/core/completion_source.hpp>
#include <gpu_async/core/estimator.hpp>
#include <gpu_async/core/park_fallback.hpp>
#include <gpu_async/core/wait_machine.hpp>
#include <gpu_async/core/wait_plan.hpp>
#include <gpu_async/host/std_clock.hpp>
#include <gpu_async/wait/wordwait.hpp>

#include <cstdint>
#include <optional>
#include <utility>

namespace gpu_async {

/// The plan capabilities of the std host: a word park needs a user-mode monitor (the word
/// wait's portable fallback only spins and yields, which is a poll, so a flag plan resolves to
/// poll there with the probe's reason). Word stores and blocking waits are the source's own.
inline plan_capabilities std_plan_capabilities(const word_wait& ww = word_wait::probe()) {
    plan_capabilities caps;
    if (ww.path() == word_wait_path::fallback)
        caps.set_missing(plan_capability::word_park, "no user-mode monitor");
    return caps;
}

/// Blocks the calling thread until the wait ends (the `naive` executor kind): runs the wait
/// machine over `source` with the inline driver (run_wait: real time always moves, so no
/// pended-inline check), on the std clock and timer, with the sleep estimate of `point` in
/// `table` (plans with a prediction); then feeds `table` the outcome (plans with a prediction,
/// waits that end with one). The plan is first resolved against std_plan_capabilities() and the
/// source's own (resolve(), <gpu_async/core/park_fallback.hpp>): without a user-mode monitor a
/// flag plan runs as poll, and the report's `warning` says so. Returns the report, or the error
/// that ended the wait (a source's error unchanged). The table is not synchronised: one per
/// thread, or lock it.
template <completion_source Source, class Key>
wait_result wait_blocking(Source& source, const wait_plan& requested, point_table<Key>& table,
                          const Key& point) {
    resolved_plan resolved =
        resolve(requested, combine(std_plan_capabilities(), source_plan_capabilities(source)));
    const wait_plan& plan = resolved.plan;
    std::optional<std::uint64_t> sleep;
    if (plan.predict()) sleep = table.sleep_ns(point, *plan.predict());
    const std_clock clk;
    std_timer tmr;
    wait_result r = run_wait(source, plan, sleep, clk, tmr);
    if (r.has_value() && plan.predict() && r.value().outcome)
        table.observe(point, *plan.predict(), *r.value().outcome);
    if (r.has_value()) r.value().warning = std::move(resolved.warning);
    return r;
}

} // namespace gpu_async

#endif // GPU_ASYNC_HOST_WAIT_BLOCKING_HPP
