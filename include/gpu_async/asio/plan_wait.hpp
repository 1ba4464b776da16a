// SPDX-License-Identifier: BSL-1.0
/// @file
/// Defines the plan-driven members of gpu_async::basic_gpu_completion_port (declared in
/// <gpu_async/asio/basic_gpu_completion_port.hpp>, which this includes): async_wait(source, plan,
/// point, token), async_wait(source, bands, rows, point, token), prediction_ns(), points() and
/// plan_capabilities_for(), with the machinery they run on (bands, the wait machine, park
/// fallback, asio/detail/plan_wait_op.hpp).
///
/// Include it (or <gpu_async/asio/gpu_completion_port.hpp>, which includes it) in a translation
/// unit that calls those members; one that only waits for descriptors includes
/// <gpu_async/asio/basic_gpu_completion_port.hpp> and compiles faster.
//
#ifndef GPU_ASYNC_ASIO_PLAN_WAIT_HPP
#define GPU_ASYNC_ASIO_PLAN_WAIT_HPP

#include <gpu_async/asio/basic_gpu_completion_port.hpp>
#include <gpu_async/asio/detail/flavour.hpp>
#include <gpu_async/asio/detail/plan_wait_op.hpp>
#include <gpu_async/asio/detail/port_state.hpp>
#include <gpu_async/core/completion_source.hpp>
#include <gpu_async/core/estimator.hpp>
#include <gpu_async/core/park_fallback.hpp>
#include <gpu_async/core/wait_machine.hpp>
#include <gpu_async/core/wait_plan.hpp>
#include <gpu_async/fill/wait_bands.hpp>

#if defined(GPU_ASYNC_STANDALONE_ASIO)
#include <asio/async_result.hpp>
#else
#include <boost/asio/async_result.hpp>
#endif

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace gpu_async {
GPU_ASYNC_ASIO_NAMESPACE_BEGIN

template <class Executor>
std::optional<std::uint64_t>
basic_gpu_completion_port<Executor>::prediction_ns(std::string_view point,
                                                   const deadline_plan& plan) const {
    if (!state_) return std::nullopt;
    std::lock_guard lk(state_->points_mutex);
    const point_table<std::string>* table = detail::find_points(*state_);
    if (!table) return std::nullopt; // no plan-driven wait has fed the port yet
    return table->prediction_ns(std::string(point), plan);
}

template <class Executor>
point_table<std::string> basic_gpu_completion_port<Executor>::points() const {
    if (!state_) return {};
    std::lock_guard lk(state_->points_mutex);
    const point_table<std::string>* table = detail::find_points(*state_);
    return table ? *table : point_table<std::string>{};
}

template <class Executor>
template <completion_source Source,
          asio::completion_token_for<void(error_code, wait_report)> CompletionToken>
auto basic_gpu_completion_port<Executor>::async_wait(Source& source, const wait_plan& plan,
                                                     std::string_view point,
                                                     CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(error_code, wait_report)>(
        detail::initiate_plan_wait<Executor>{}, token,
        detail::plan_wait_op<Source, Executor>(source, resolve(plan, plan_capabilities_for(source)),
                                               std::string(point), state_shared(), *service_,
                                               executor_),
        executor_);
}

template <class Executor>
template <completion_source Source,
          asio::completion_token_for<void(error_code, wait_report)> CompletionToken>
auto basic_gpu_completion_port<Executor>::async_wait(Source& source, const wait_bands& bands,
                                                     const step_rows& rows, std::string_view point,
                                                     CompletionToken&& token) {
    return async_wait(source, bands.select(rows), point, std::forward<CompletionToken>(token));
}

template <class Executor>
template <completion_source Source>
plan_capabilities
basic_gpu_completion_port<Executor>::plan_capabilities_for(const Source& source) const {
    return source_plan_capabilities(source);
}

GPU_ASYNC_ASIO_NAMESPACE_END
} // namespace gpu_async

#endif // GPU_ASYNC_ASIO_PLAN_WAIT_HPP
