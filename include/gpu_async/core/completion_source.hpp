// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The concept a backend implements so the wait machine can
/// drive it (the Asio I/O object is the "port"; the per-backend thing is the "source").
///
/// Standard library only.
#ifndef GPU_ASYNC_CORE_COMPLETION_SOURCE_HPP
#define GPU_ASYNC_CORE_COMPLETION_SOURCE_HPP

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/time.hpp>

#include <concepts>
#include <cstdint>
#include <system_error>

namespace gpu_async {

/// What an immediate status query answered.
enum class query_state : std::uint8_t {
    done,    ///< every piece of work the source waits for has finished
    pending, ///< work is still running
    failed,  ///< the device reported an error; `error` says which
};

/// The answer of `completion_source::query()`.
struct query_result {
    query_state state = query_state::pending;
    std::error_code error{};

    static query_result done() noexcept { return {query_state::done, {}}; }
    static query_result pending() noexcept { return {query_state::pending, {}}; }
    static query_result failed(std::error_code ec) noexcept { return {query_state::failed, ec}; }

    bool is_done() const noexcept { return state == query_state::done; }
    bool is_pending() const noexcept { return state == query_state::pending; }
    bool is_failed() const noexcept { return state == query_state::failed; }

    friend bool operator==(const query_result&, const query_result&) = default;
};

/// A completion source: one unit of pending device work (a stream's tail) and the word its
/// device stores behind it.
///
/// - `query()`: at once, never blocking: done, pending, or failed with an error. The query is the
///   authority: the word only says "probably done"; only the query can report a device error.
/// - `block()`: the vendor's blocking wait (e.g. cuStreamSynchronize); an empty code on success.
/// - `arm()`: enqueue the word store behind the pending work; an empty code on success. After a
///   successful arm, `descriptor()` names the store that arm enqueued.
/// - `descriptor()`: the memory descriptor that completes when the pending work has finished.
/// - `park(bound)`: park the calling thread on the descriptor's word for at most `bound`; true
///   when the word was seen to reach its target. Spurious returns are allowed; sleeping past the
///   bound (beyond a small documented slack) is not.
template <class S>
concept completion_source = requires(S& s, const S& cs, dur_ns bound) {
    { s.query() } -> std::same_as<query_result>;
    { s.block() } -> std::same_as<std::error_code>;
    { s.arm() } -> std::same_as<std::error_code>;
    { cs.descriptor() } -> std::same_as<memory_descriptor>;
    { s.park(bound) } -> std::same_as<bool>;
};

} // namespace gpu_async

#endif // GPU_ASYNC_CORE_COMPLETION_SOURCE_HPP
