// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief What a host can do for a wait plan (plan capabilities), the
/// declared constant fallback table, and resolve(): the plan that runs on that host.
///
/// Capabilities are probed by hosts (CPUID, auxv, the backend's entry points), never by the core:
/// the core only takes them as a value. A plan resolves once, at start; when the plan that runs
/// differs from the one asked for, resolve() also gives a coded warning errc::park_fallback whose
/// arguments are {requested plan label, missing capability, why, label of the plan that runs}.
///
/// Standard library only.
#ifndef GPU_ASYNC_CORE_PARK_FALLBACK_HPP
#define GPU_ASYNC_CORE_PARK_FALLBACK_HPP

#include <gpu_async/core/error.hpp>
#include <gpu_async/core/wait_plan.hpp>

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace gpu_async {

/// Something a wait plan may need from the host and its completion source. A status query is
/// not listed: every completion source has one, so "poll" runs everywhere (the floor).
enum class plan_capability : std::uint8_t {
    word_park,     ///< park the thread on a completion word (user-mode monitor, futex, event wait)
    word_store,    ///< arm: enqueue the word store behind the pending work
    blocking_wait, ///< the vendor's blocking wait (e.g. a stream synchronize)
};

/// How many capabilities plan_capability has.
inline constexpr std::size_t plan_capability_count = 3;

/// The stable name of a capability: "word_park", "word_store", "blocking_wait".
constexpr std::string_view to_string(plan_capability c) noexcept {
    switch (c) {
    case plan_capability::word_park:
        return "word_park";
    case plan_capability::word_store:
        return "word_store";
    case plan_capability::blocking_wait:
        return "blocking_wait";
    }
    return "unknown";
}

/// What a host can do, as a value: every capability is available unless marked missing, and a
/// missing one carries the reason text the host's probe gave ("no user-mode monitor").
class plan_capabilities {
public:
    /// Everything available.
    plan_capabilities() = default;

    /// Marks `c` missing, for `why` (an empty reason reads "not available"). Chainable.
    plan_capabilities& set_missing(plan_capability c, std::string_view why) & {
        why_[index(c)] = why.empty() ? std::string("not available") : std::string(why);
        return *this;
    }
    plan_capabilities&& set_missing(plan_capability c, std::string_view why) && {
        set_missing(c, why);
        return std::move(*this);
    }

    /// Marks `c` available again. Chainable.
    plan_capabilities& set_available(plan_capability c) & {
        why_[index(c)].reset();
        return *this;
    }

    bool has(plan_capability c) const noexcept { return !why_[index(c)].has_value(); }

    /// Why `c` is missing; empty when it is available.
    std::string_view why_missing(plan_capability c) const noexcept {
        const auto& w = why_[index(c)];
        return w ? std::string_view(*w) : std::string_view();
    }

    friend bool operator==(const plan_capabilities&, const plan_capabilities&) = default;

private:
    static constexpr std::size_t index(plan_capability c) noexcept {
        return static_cast<std::size_t>(c);
    }
    std::array<std::optional<std::string>, plan_capability_count> why_{};
};

/// What both `a` and `b` can run: a capability missing from either is missing (with `a`'s
/// reason when both lack it).
inline plan_capabilities combine(const plan_capabilities& a, const plan_capabilities& b) {
    plan_capabilities out = a;
    for (plan_capability c :
         {plan_capability::word_park, plan_capability::word_store, plan_capability::blocking_wait})
        if (a.has(c) && !b.has(c)) out.set_missing(c, b.why_missing(c));
    return out;
}

/// The plan capabilities a completion source declares: `source.plan_capabilities()` when it has
/// that member (a source that cannot enqueue a word store, say), else everything.
template <class Source>
plan_capabilities source_plan_capabilities(const Source& source) {
    if constexpr (requires {
                      { source.plan_capabilities() } -> std::convertible_to<plan_capabilities>;
                  })
        return source.plan_capabilities();
    else
        return plan_capabilities{};
}

/// One row of the fallback table: a plan of kind `requested` needs `needs`; without it, the
/// plan runs as kind `runs` (its prediction, if any, kept).
struct park_fallback_rule {
    plan_kind requested;
    plan_capability needs;
    plan_kind runs;
};

/// The declared constant fallback table, read top to bottom. "poll" needs nothing, so every
/// chain ends there.
inline constexpr std::array<park_fallback_rule, 3> park_fallback_table{{
    {plan_kind::flag, plan_capability::word_store, plan_kind::poll},
    {plan_kind::flag, plan_capability::word_park, plan_kind::poll},
    {plan_kind::block, plan_capability::blocking_wait, plan_kind::poll},
}};

/// The plan that runs on a host, and the warning that says why it differs from the one asked.
struct resolved_plan {
    wait_plan plan;                     ///< the plan that runs
    std::optional<coded_error> warning; ///< errc::park_fallback when `plan` differs; else none
};

namespace detail {
/// The table's own rules: every chain ends at poll (which needs nothing) and never returns to a
/// kind it left, so resolution takes at most one step per kind.
constexpr bool park_fallback_table_is_well_formed() noexcept {
    for (const auto& rule : park_fallback_table)
        if (rule.requested == plan_kind::poll || rule.runs != plan_kind::poll) return false;
    return true;
}
static_assert(park_fallback_table_is_well_formed());
} // namespace detail

/// Resolves `requested` against `caps` through park_fallback_table: the first row for the
/// plan's kind whose capability is missing decides the kind that runs (the prediction kept).
/// The warning names the requested plan, that capability, the host's reason, and the plan
/// that runs.
inline resolved_plan resolve(const wait_plan& requested, const plan_capabilities& caps) {
    for (const auto& rule : park_fallback_table) {
        if (rule.requested != requested.kind() || caps.has(rule.needs)) continue;
        // Every rule runs poll (checked above); keeping the prediction cannot fail, it was
        // valid in `requested`.
        wait_plan runs = wait_plan::poll(requested.predict()).value();
        const std::string from = requested.label();
        const std::string to = runs.label();
        coded_error warning(errc::park_fallback,
                            {std::string_view(from), to_string(rule.needs),
                             caps.why_missing(rule.needs), std::string_view(to)});
        return {std::move(runs), std::move(warning)};
    }
    return {requested, std::nullopt};
}

} // namespace gpu_async

#endif // GPU_ASYNC_CORE_PARK_FALLBACK_HPP
