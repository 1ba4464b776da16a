// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief Choose the wait plan by the row count of the current step, e.g. the batch rows of an
/// LLM decode step.
///
/// ```
/// bands := plan | plan (";rows>=" N ":" plan){1,3}
/// ```
///
/// The first band starts at 0 rows and takes no edge; each later band starts at its edge,
/// inclusive, and edges strictly increase, up to 2^32-1; at most 4 bands. Numbers follow the plan
/// rules (digits only, no leading zero), so every accepted text is canonical:
/// label(parse(t)) == t. A refusal is errc::invalid_plan with the arguments {text, fault} (a text
/// over plan_text_quote_max characters is quoted up to that many); a bad plan inside a band
/// names the band.
///
/// Parsing allocates nothing unless it fails; selecting reads at most 4 edges.
///
/// Standard library only.
#ifndef GPU_ASYNC_FILL_WAIT_BANDS_HPP
#define GPU_ASYNC_FILL_WAIT_BANDS_HPP

#include <gpu_async/core/error.hpp>
#include <gpu_async/core/park_fallback.hpp>
#include <gpu_async/core/result.hpp>
#include <gpu_async/core/wait_plan.hpp>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpu_async {

/// The most bands a wait_bands holds.
inline constexpr std::size_t bands_max = 4;

/// The largest row count (and band edge): 2^32-1.
inline constexpr std::uint32_t band_rows_max = std::numeric_limits<std::uint32_t>::max();

/// One band: `plan` runs for row counts from `min_rows` (inclusive) up to the next band's edge.
struct wait_band {
    std::uint32_t min_rows;
    wait_plan plan;

    friend bool operator==(const wait_band&, const wait_band&) = default;
};

/// The rows of the current step, shared by the thread that forms steps (publishes once per
/// step) and every waiter (reads in O(1)). One atomic 32-bit value on a cache line of its own.
class alignas(64) step_rows {
public:
    step_rows() = default;
    explicit step_rows(std::uint32_t rows) noexcept
        : rows_(rows) {}

    /// Publishes the row count of the step that starts now.
    void publish(std::uint32_t rows) noexcept { rows_.store(rows, std::memory_order_release); }

    /// The row count last published (0 before any).
    std::uint32_t load() const noexcept { return rows_.load(std::memory_order_acquire); }

private:
    static_assert(std::atomic<std::uint32_t>::is_always_lock_free);
    std::atomic<std::uint32_t> rows_{0};
};

/// Up to 4 wait plans keyed by the first row count each applies to. Immutable once made.
class wait_bands {
public:
    /// One band: `plan` for every row count.
    explicit wait_bands(wait_plan plan) noexcept
        : count_(1) {
        bands_[0] = {0, std::move(plan)};
    }

    /// Parses `text`; on failure the error's code is errc::invalid_plan and its message names
    /// the text and the first fault.
    static result<wait_bands> parse(std::string_view text);

    /// Bands from values, validated as parse() validates (1 to 4 bands, the first at 0 rows,
    /// edges strictly increasing).
    static result<wait_bands> make(std::span<const wait_band> bands);

    /// The plan for a step of `rows` rows: the last band whose edge is at most `rows`.
    const wait_plan& select(std::uint32_t rows) const noexcept {
        std::size_t i = count_ - 1;
        while (i > 0 && rows < bands_[i].min_rows)
            --i;
        return bands_[i].plan;
    }

    /// The plan for the step last published on `rows`.
    const wait_plan& select(const step_rows& rows) const noexcept { return select(rows.load()); }

    /// The bands, first at 0 rows.
    std::span<const wait_band> bands() const noexcept { return {bands_.data(), count_}; }
    std::size_t size() const noexcept { return count_; }

    /// The canonical text: parse(label()) gives back these bands.
    std::string label() const;

    friend bool operator==(const wait_bands& a, const wait_bands& b) noexcept {
        if (a.count_ != b.count_) return false;
        for (std::size_t i = 0; i < a.count_; ++i)
            if (!(a.bands_[i] == b.bands_[i])) return false;
        return true;
    }

private:
    wait_bands() noexcept = default;

    std::array<wait_band, bands_max> bands_{{{0, wait_plan::block()},
                                             {0, wait_plan::block()},
                                             {0, wait_plan::block()},
                                             {0, wait_plan::block()}}};
    std::size_t count_ = 0;
};

/// Bands with each band's plan resolved against the host, and one park-fallback warning per
/// band whose plan differs (in band order).
struct resolved_bands {
    wait_bands bands;
    std::vector<coded_error> warnings;
};

/// Resolves every band's plan against `caps` (see resolve(const wait_plan&, ...)); the edges
/// stay as they are.
inline resolved_bands resolve(const wait_bands& requested, const plan_capabilities& caps);

// ---------------------------------------------------------------------------------------------
// Implementation (the core is header-only).

namespace detail {

inline std::string band_name(std::size_t index, std::uint32_t min_rows) {
    std::string out = "band " + std::to_string(index + 1);
    if (index > 0) out += " (rows>=" + std::to_string(min_rows) + ")";
    return out;
}

inline void append_band_text(std::string& out, std::size_t index, std::uint32_t min_rows,
                             const wait_plan& plan) {
    if (index > 0) {
        out += ";rows>=";
        out += std::to_string(min_rows);
        out += ':';
    }
    out += plan.label();
}

} // namespace detail

namespace detail {

/// Takes band `index`'s (index > 0) "rows>=N:" edge off the front of `band` and checks it against
/// the band before's edge, `previous`. Returns the edge, or none with the fault in `fault`.
inline std::optional<std::uint32_t> take_band_edge(std::string_view& band, std::size_t index,
                                                   std::uint32_t previous, std::string& fault) {
    constexpr std::string_view edge_tag = "rows>=";
    const std::string ordinal = "band " + std::to_string(index + 1);
    if (!band.starts_with(edge_tag)) {
        fault = ordinal + " has no 'rows>=N:' edge (found " + plan_quote(band) + ")";
        return std::nullopt;
    }
    band.remove_prefix(edge_tag.size());
    const std::size_t colon = band.find(':');
    if (colon == std::string_view::npos) {
        fault = ordinal + " has no ':' after its edge (found " + plan_quote(band) + ")";
        return std::nullopt;
    }
    const std::string_view edge = band.substr(0, colon);
    std::uint64_t n = 0;
    switch (parse_plan_number(edge, n)) {
    case plan_number::ok:
        break;
    case plan_number::empty:
        fault = ordinal + " has an empty edge 'rows>='";
        return std::nullopt;
    case plan_number::not_digits:
        fault = ordinal + " edge " + plan_quote(edge) + " is not a whole number (digits only)";
        return std::nullopt;
    case plan_number::leading_zero:
        fault = ordinal + " edge " + plan_quote(edge) + " has a leading zero";
        return std::nullopt;
    case plan_number::too_large:
        n = std::uint64_t(band_rows_max) + 1;
        break;
    }
    if (n > band_rows_max) {
        fault = ordinal + " edge " + plan_quote(edge) + " is above the largest row count " +
                std::to_string(band_rows_max);
        return std::nullopt;
    }
    const auto min_rows = static_cast<std::uint32_t>(n);
    if (min_rows <= previous) {
        fault = "edges not increasing: " + ordinal +
                " starts at rows>=" + std::to_string(min_rows) + ", not above " +
                band_name(index - 1, previous) + (index == 1 ? " at 0 rows" : "");
        return std::nullopt;
    }
    band.remove_prefix(colon + 1);
    return min_rows;
}

} // namespace detail

inline result<wait_bands> wait_bands::parse(std::string_view text) {
    constexpr auto npos = std::string_view::npos;
    const auto fail = [text](std::string fault) {
        return result<wait_bands>(detail::invalid_plan_error(text, std::move(fault)));
    };
    if (text.empty()) return fail("empty text (expected a plan, then optional ';rows>=N:plan')");

    wait_bands out;
    std::size_t pos = 0;
    for (std::size_t index = 0;; ++index) {
        const std::size_t semi = text.find(';', pos);
        std::string_view band = text.substr(pos, semi == npos ? npos : semi - pos);
        if (index >= bands_max)
            return fail("more than " + std::to_string(bands_max) + " bands (band " +
                        std::to_string(index + 1) + " is one too many)");
        std::uint32_t min_rows = 0;
        if (index == 0 && band.starts_with("rows>="))
            return fail("the first band must start at 0 rows and takes no edge (found " +
                        detail::plan_quote(band.substr(0, band.find(':'))) + ")");
        if (index > 0) {
            std::string fault;
            const auto edge =
                detail::take_band_edge(band, index, out.bands_[index - 1].min_rows, fault);
            if (!edge) return fail(std::move(fault));
            min_rows = *edge;
        }
        auto plan = wait_plan::parse(band);
        if (!plan)
            return fail(detail::band_name(index, min_rows) +
                        " has a bad plan: " + plan.error().message());
        out.bands_[index] = {min_rows, std::move(plan).value()};
        out.count_ = index + 1;
        if (semi == npos) break;
        pos = semi + 1;
    }
    return out;
}

inline result<wait_bands> wait_bands::make(std::span<const wait_band> bands) {
    std::string text;
    for (std::size_t i = 0; i < bands.size(); ++i)
        detail::append_band_text(text, i, bands[i].min_rows, bands[i].plan);
    const auto fail = [&text](std::string fault) {
        return result<wait_bands>(detail::invalid_plan_error(text, std::move(fault)));
    };
    if (bands.empty()) return fail("no bands (at least one, at most 4)");
    if (bands.size() > bands_max)
        return fail("more than " + std::to_string(bands_max) + " bands (" +
                    std::to_string(bands.size()) + ")");
    if (bands[0].min_rows != 0)
        return fail("the first band must start at 0 rows (it starts at " +
                    std::to_string(bands[0].min_rows) + ")");
    wait_bands out;
    for (std::size_t i = 0; i < bands.size(); ++i) {
        if (i > 0 && bands[i].min_rows <= bands[i - 1].min_rows)
            return fail("edges not increasing: band " + std::to_string(i + 1) +
                        " starts at rows>=" + std::to_string(bands[i].min_rows) + ", not above " +
                        detail::band_name(i - 1, bands[i - 1].min_rows) +
                        (i == 1 ? " at 0 rows" : ""));
        out.bands_[i] = bands[i];
    }
    out.count_ = bands.size();
    return out;
}

inline std::string wait_bands::label() const {
    std::string out;
    for (std::size_t i = 0; i < count_; ++i)
        detail::append_band_text(out, i, bands_[i].min_rows, bands_[i].plan);
    return out;
}

inline resolved_bands resolve(const wait_bands& requested, const plan_capabilities& caps) {
    std::array<wait_band, bands_max> bands{{{0, wait_plan::block()},
                                            {0, wait_plan::block()},
                                            {0, wait_plan::block()},
                                            {0, wait_plan::block()}}};
    std::vector<coded_error> warnings;
    const auto in = requested.bands();
    for (std::size_t i = 0; i < in.size(); ++i) {
        resolved_plan r = resolve(in[i].plan, caps);
        bands[i] = {in[i].min_rows, std::move(r.plan)};
        if (r.warning) warnings.push_back(std::move(*r.warning));
    }
    // The edges are those of a valid wait_bands, so make() cannot refuse them.
    return {wait_bands::make({bands.data(), in.size()}).value(), std::move(warnings)};
}

} // namespace gpu_async

#endif // GPU_ASYNC_FILL_WAIT_BANDS_HPP
