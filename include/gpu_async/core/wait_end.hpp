// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief How a wait ended (`wait_end`), the one enum of the library, with its one mapping to
/// error codes (`to_error_code`) and the ending a checked read of a line decides (`ending_of`).
///
///     wait_end e = ...;                                   // what the scan engine reports
///     std::error_code ec = to_error_code(e, std_codes()); // the code the std host hands over
///
/// The scan engine, its watch table, the FILL reactor, the reactor service and the std host all
/// report a wait's end as a `wait_end`; each host turns it into its code type here, giving only
/// the three codes that are not the library's own (Asio's operation_aborted, timed_out and
/// no_memory for the port; std::errc's for the std host).
///
/// Core: the standard library only.
#ifndef GPU_ASYNC_CORE_WAIT_END_HPP
#define GPU_ASYNC_CORE_WAIT_END_HPP

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/error.hpp>

#include <cstdint>
#include <optional>
#include <system_error>

namespace gpu_async {

/// How a wait ended.
enum class wait_end : std::uint8_t {
    reached, ///< its word reached its target: success
    expired, ///< its deadline passed first: timed_out
    /// Cancelled, or its line (or slot) was retired after the wait was registered and before
    /// its word reached the target, or its owner cleared it: operation_aborted
    /// (std::errc::operation_canceled for the std host).
    aborted,
    faulted,   ///< its slot's stream faulted before storing its target: errc::device_fault
    stale,     ///< its descriptor's line was retired before (or while) it was registered:
               ///< errc::stale_descriptor
    no_memory, ///< no memory for its place in the table: no_memory
};

/// When a descriptor was judged: as the wait was registered (its first judgement, by the port's
/// start or a host's take-in of one wait), or later, while it was pending.
enum class judgement : std::uint8_t { at_registration, while_pending };

/// The ending a checked read (read_checked) decides for a wait, or none when it waits on.
/// A descriptor found stale is `stale` only at its registration: judged later, its line was
/// retired while it was pending, and it ends `aborted` like every other wait a retirement ends.
/// A read its line's retirement overtook (`retired`) counts for nothing: at registration the
/// wait began no earlier than the retirement, so it is `stale` (never `aborted`, which would say
/// that the word was read below the target); later, `aborted`. A slot given back before its
/// stream stored the target (`given_back`) ends `aborted`.
inline std::optional<wait_end> ending_of(line_read r, judgement when) noexcept {
    switch (r) {
    case line_read::pending:
        return std::nullopt;
    case line_read::reached:
        return wait_end::reached;
    case line_read::faulted:
        return wait_end::faulted;
    case line_read::stale:
    case line_read::retired:
        return when == judgement::at_registration ? wait_end::stale : wait_end::aborted;
    case line_read::given_back:
        break;
    }
    return wait_end::aborted;
}

/// The codes a host gives the endings that are not the library's own.
template <class Code>
struct generic_codes {
    Code aborted;   ///< wait_end::aborted
    Code timed_out; ///< wait_end::expired
    Code no_memory; ///< wait_end::no_memory
};

/// The error code of a wait that ended `e`, in the host's code type: empty for `reached`,
/// errc::device_fault and errc::stale_descriptor for `faulted` and `stale`, the host's own
/// codes (`g`) for the rest.
template <class Code>
Code to_error_code(wait_end e, const generic_codes<Code>& g) noexcept {
    switch (e) {
    case wait_end::reached:
        break;
    case wait_end::expired:
        return g.timed_out;
    case wait_end::aborted:
        return g.aborted;
    case wait_end::faulted:
        return make_error_code(errc::device_fault);
    case wait_end::stale:
        return make_error_code(errc::stale_descriptor);
    case wait_end::no_memory:
        return g.no_memory;
    }
    return Code();
}

/// The standard library's codes for them (the std host's: std_watcher, fd_notifier).
inline const generic_codes<std::error_code>& std_codes() noexcept {
    static const generic_codes<std::error_code> codes{
        std::make_error_code(std::errc::operation_canceled),
        std::make_error_code(std::errc::timed_out),
        std::make_error_code(std::errc::not_enough_memory)};
    return codes;
}

} // namespace gpu_async

#endif // GPU_ASYNC_CORE_WAIT_END_HPP
