// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The selectable executor kinds, their parse, the host's
/// capabilities for them, and resolve() along the declared chain io-uring -> gpu-reactor -> naive.
///
/// - `naive` (executor_kind::naive): waits run inline on the waiting thread (run_wait).
/// - `gpu-reactor` (executor_kind::fill): the FILL executor (fill_executor) idling on the reactor.
/// - `io-uring` (executor_kind::io_uring): as gpu-reactor, but the deadline sleep is an io_uring
///   timeout.
///
/// Capabilities are probed by the host (io_uring setup, the word-wait probe), never by the core:
/// they come in as values carrying a reason text. A kind resolves once, at start: available, it
/// runs as asked; missing and not strict, the next kind of the chain that is available runs, with
/// the coded warning errc::executor_fallback {requested, why, what runs}; missing and strict, the
/// coded refusal errc::executor_refused {requested, why}.
///
/// Standard library only.
#ifndef GPU_ASYNC_FILL_EXECUTOR_KIND_HPP
#define GPU_ASYNC_FILL_EXECUTOR_KIND_HPP

#include <gpu_async/core/error.hpp>
#include <gpu_async/core/result.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace gpu_async {

/// An executor kind. The text of each (to_string, parse_executor_kind) is what users type on
/// command lines; the FILL executor's text is "gpu-reactor".
enum class executor_kind : std::uint8_t {
    naive,    ///< "naive": waits run inline on the waiting thread
    fill,     ///< "gpu-reactor": the FILL executor (fill_executor) idling on the reactor
    io_uring, ///< "io-uring": the FILL executor with io_uring timeouts for deadline sleeps
};

/// Every kind, in declaration order.
inline constexpr std::array<executor_kind, 3> executor_kinds{
    executor_kind::naive, executor_kind::fill, executor_kind::io_uring};

/// The accepted spellings, as errc::invalid_executor names them.
inline constexpr std::string_view executor_kind_names = "naive, gpu-reactor, io-uring";

/// The canonical spelling: "naive", "gpu-reactor", "io-uring".
constexpr std::string_view to_string(executor_kind k) noexcept {
    switch (k) {
    case executor_kind::naive:
        return "naive";
    case executor_kind::fill:
        return "gpu-reactor";
    case executor_kind::io_uring:
        return "io-uring";
    }
    return "unknown";
}

/// Parses the canonical spelling (exactly; no case folding, no spaces). Any other text gives
/// errc::invalid_executor with the arguments {text, accepted names}.
inline result<executor_kind> parse_executor_kind(std::string_view text) {
    for (executor_kind k : executor_kinds)
        if (to_string(k) == text) return k;
    return coded_error(errc::invalid_executor, {text, executor_kind_names});
}

/// What to do when the requested kind is unavailable.
enum class executor_strictness : std::uint8_t {
    fallback, ///< run the next available kind of the chain, with a coded warning
    strict,   ///< refuse with a coded error
};

/// What the host can run, as a value. `naive` needs nothing and is always available; the others
/// are available unless marked missing, and a missing one carries the host's reason text
/// ("io_uring disabled", "no user-mode monitor").
class executor_capabilities {
public:
    /// Everything available.
    executor_capabilities() = default;

    /// Marks `k` missing, for `why` (an empty reason reads "not available"). Marking `naive`
    /// missing has no effect: it is the floor of the chain. Chainable.
    executor_capabilities& set_missing(executor_kind k, std::string_view why) & {
        if (k != executor_kind::naive)
            why_[index(k)] = why.empty() ? std::string("not available") : std::string(why);
        return *this;
    }
    executor_capabilities&& set_missing(executor_kind k, std::string_view why) && {
        set_missing(k, why);
        return std::move(*this);
    }

    /// Marks `k` available again. Chainable.
    executor_capabilities& set_available(executor_kind k) & {
        why_[index(k)].reset();
        return *this;
    }

    bool has(executor_kind k) const noexcept { return !why_[index(k)].has_value(); }

    /// Why `k` is missing; empty when it is available.
    std::string_view why_missing(executor_kind k) const noexcept {
        const auto& w = why_[index(k)];
        return w ? std::string_view(*w) : std::string_view();
    }

    friend bool operator==(const executor_capabilities&, const executor_capabilities&) = default;

private:
    static constexpr std::size_t index(executor_kind k) noexcept {
        return static_cast<std::size_t>(k);
    }
    std::array<std::optional<std::string>, executor_kinds.size()> why_{};
};

/// One link of the declared fallback chain: without `requested`, try `next`.
struct executor_fallback_link {
    executor_kind requested;
    executor_kind next;
};

/// The declared chain io-uring -> gpu-reactor -> naive. naive needs nothing: every chain ends
/// there.
inline constexpr std::array<executor_fallback_link, 2> executor_fallback_chain{{
    {executor_kind::io_uring, executor_kind::fill},
    {executor_kind::fill, executor_kind::naive},
}};

/// The kind that runs, and the warning that says why it differs from the one asked.
struct resolved_executor {
    executor_kind kind = executor_kind::naive;
    std::optional<coded_error> warning; ///< errc::executor_fallback when `kind` differs

    friend bool operator==(const resolved_executor&, const resolved_executor&) = default;
};

namespace detail {
constexpr std::optional<executor_kind> executor_fallback_next(executor_kind k) noexcept {
    for (const auto& link : executor_fallback_chain)
        if (link.requested == k) return link.next;
    return std::nullopt;
}
} // namespace detail

/// Resolves `requested` against `caps`:
/// - available: runs as asked, no warning;
/// - missing, strict: errc::executor_refused {requested, why};
/// - missing, not strict: the first available kind down the chain runs, with the warning
///   errc::executor_fallback {requested, why, what runs}. `why` names the requested kind's
///   reason, followed by the reason of each kind skipped on the way ("io_uring disabled;
///   gpu-reactor: no user-mode monitor").
inline result<resolved_executor>
resolve(executor_kind requested, const executor_capabilities& caps,
        executor_strictness strictness = executor_strictness::fallback) {
    if (caps.has(requested)) return resolved_executor{requested, std::nullopt};
    std::string why(caps.why_missing(requested));
    if (strictness == executor_strictness::strict)
        return coded_error(errc::executor_refused, {to_string(requested), std::string_view(why)});
    executor_kind runs = requested;
    while (!caps.has(runs)) {
        if (runs != requested) {
            why += "; ";
            why += to_string(runs);
            why += ": ";
            why += caps.why_missing(runs);
        }
        // naive is always available, so the chain ends before this runs out.
        runs = detail::executor_fallback_next(runs).value_or(executor_kind::naive);
    }
    return resolved_executor{
        runs, coded_error(errc::executor_fallback,
                          {to_string(requested), std::string_view(why), to_string(runs)})};
}

} // namespace gpu_async

#endif // GPU_ASYNC_FILL_EXECUTOR_KIND_HPP
