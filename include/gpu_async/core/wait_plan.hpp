// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief Typed wait plans, parsed once from text, then immutable.
///
/// ```
/// plan     := kind | kind "+predict:" deadline
/// kind     := "block" | "poll" | "flag:park_us=" N ",backstop_us=" N
/// deadline := "margin_us=" N ",min_sleep_us=" N ",max_sleep_us=" N ",window=" N
/// ```
///
/// E.g. `poll+predict:margin_us=150,min_sleep_us=20,max_sleep_us=50000,window=8`. Nothing has a
/// default: a "+predict:" gives all four values.
///
/// Units are microseconds in text, nanoseconds in the types. Standard library only.
///
/// Lexical rules (beyond the grammar): the text is case sensitive and has no spaces; a number is
/// one or more decimal digits, with no sign and no leading zero (write "0", never "00" or
/// "0150"), so every accepted text is already canonical: label(parse(t)) == t. Every key comes
/// exactly once and in the order shown. Bounds: window 1..16; park_us 1..10000;
/// backstop_us 1..1000000; park_us <= backstop_us; min_sleep_us <= max_sleep_us; margin_us,
/// min_sleep_us and max_sleep_us up to the largest value whose nanoseconds fit in 64 bits
/// (18446744073709551 us): a larger value is refused, never wrapped. "block" takes no
/// "+predict:". The first fault found, reading left to right, is the one reported; the error
/// quotes at most the first 64 characters of the text (plan_text_quote_max).
///
/// Parsing allocates nothing unless it fails (then only the error's text); label() allocates
/// its text. What a host can run, and the fallback when it cannot run a plan:
/// <gpu_async/core/park_fallback.hpp>; plans chosen by step rows: <gpu_async/fill/wait_bands.hpp>.
#ifndef GPU_ASYNC_CORE_WAIT_PLAN_HPP
#define GPU_ASYNC_CORE_WAIT_PLAN_HPP

#include <gpu_async/core/error.hpp>
#include <gpu_async/core/result.hpp>
#include <gpu_async/core/time.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpu_async {

/// What a plan does once any predicted sleep is over: the first word of its text.
enum class plan_kind : std::uint8_t {
    block, ///< "block": the vendor's blocking wait (a stream synchronize); takes no prediction
    poll,  ///< "poll": query the status until done
    flag,  ///< "flag": park on the completion word, with a status query at least every backstop
};

/// The largest estimator window (samples kept per readback point).
inline constexpr std::uint32_t window_max = 16;
/// The largest single park of a flag plan: 10 ms.
inline constexpr std::uint64_t park_ns_max = 10'000'000;
/// The largest backstop of a flag plan: 1 s.
inline constexpr std::uint64_t backstop_ns_max = 1'000'000'000;
/// The most characters of a refused plan or band text that its error quotes.
inline constexpr std::size_t plan_text_quote_max = 64;
/// The largest microsecond value a plan text may hold for margin_us, min_sleep_us and
/// max_sleep_us: its nanoseconds are the largest whole microseconds that fit in 64 bits.
inline constexpr std::uint64_t plan_us_max = std::numeric_limits<std::uint64_t>::max() / 1000;

/// The "+predict:" part of a plan: sleep to the predicted completion minus `margin_ns` before
/// parking, when that sleep is at least `min_sleep_ns`, and never longer than `max_sleep_ns`.
struct deadline_plan {
    std::uint64_t margin_ns = 0;
    std::uint64_t min_sleep_ns = 0;
    std::uint64_t max_sleep_ns = 0;
    std::uint32_t window = 0;

    /// The fields as std::chrono::nanoseconds.
    constexpr std::chrono::nanoseconds margin() const noexcept { return dur_ns{margin_ns}; }
    constexpr std::chrono::nanoseconds min_sleep() const noexcept { return dur_ns{min_sleep_ns}; }
    constexpr std::chrono::nanoseconds max_sleep() const noexcept { return dur_ns{max_sleep_ns}; }

    friend constexpr bool operator==(const deadline_plan&, const deadline_plan&) = default;
};

/// A parsed, validated, immutable wait plan.
class wait_plan {
public:
    /// Parses `text`; on failure the error's code is errc::invalid_plan and its message names
    /// the text and the first thing wrong.
    static result<wait_plan> parse(std::string_view text);

    /// The plan "block".
    static wait_plan block() noexcept { return wait_plan(plan_kind::block, 0, 0, std::nullopt); }

    /// The plan "poll", optionally with a prediction. Validated as parse() validates.
    static result<wait_plan> poll(std::optional<deadline_plan> predict = std::nullopt);

    /// The plan "flag:park_us=..,backstop_us=..", optionally with a prediction. Values are in
    /// nanoseconds and must be whole microseconds. Validated as parse() validates.
    static result<wait_plan> flag(std::uint64_t park_ns, std::uint64_t backstop_ns,
                                  std::optional<deadline_plan> predict = std::nullopt);

    /// The recommended default: "flag:park_us=100,backstop_us=1000".
    static wait_plan recommended() noexcept {
        return wait_plan(plan_kind::flag, 100'000, 1'000'000, std::nullopt);
    }

    plan_kind kind() const noexcept { return kind_; }
    /// The bound of one park (flag plans; zero otherwise).
    std::uint64_t park_ns() const noexcept { return park_ns_; }
    /// The longest time between two status queries while parking (flag plans; zero otherwise).
    std::uint64_t backstop_ns() const noexcept { return backstop_ns_; }
    /// park_ns() as std::chrono::nanoseconds.
    std::chrono::nanoseconds park() const noexcept { return dur_ns{park_ns_}; }
    /// backstop_ns() as std::chrono::nanoseconds.
    std::chrono::nanoseconds backstop() const noexcept { return dur_ns{backstop_ns_}; }
    /// The prediction, when the plan has one.
    const std::optional<deadline_plan>& predict() const noexcept { return predict_; }

    /// The canonical text: parse(label()) gives back this plan.
    std::string label() const;

    friend bool operator==(const wait_plan&, const wait_plan&) = default;

private:
    wait_plan(plan_kind kind, std::uint64_t park_ns, std::uint64_t backstop_ns,
              std::optional<deadline_plan> predict) noexcept
        : kind_(kind)
        , park_ns_(park_ns)
        , backstop_ns_(backstop_ns)
        , predict_(predict) {}

    plan_kind kind_;
    std::uint64_t park_ns_;
    std::uint64_t backstop_ns_;
    std::optional<deadline_plan> predict_;
};

// ---------------------------------------------------------------------------------------------
// Implementation (the core is header-only).

namespace detail {

/// One key of a plan text: its name, its smallest and largest value as written, and whether it
/// is in microseconds (stored times 1000).
struct plan_key {
    std::string_view name;
    std::uint64_t min;
    std::uint64_t max;
    bool micro;
};

inline constexpr std::array<plan_key, 2> flag_keys{{
    {"park_us", 1, park_ns_max / 1000, true},
    {"backstop_us", 1, backstop_ns_max / 1000, true},
}};

inline constexpr std::array<plan_key, 4> deadline_keys{{
    {"margin_us", 0, plan_us_max, true},
    {"min_sleep_us", 0, plan_us_max, true},
    {"max_sleep_us", 0, plan_us_max, true},
    {"window", 1, window_max, false},
}};

/// `v` in single quotes, cut to a readable length.
inline std::string plan_quote(std::string_view v) {
    constexpr std::size_t most = 48;
    std::string out;
    out.reserve(std::min(v.size(), most) + 5);
    out += '\'';
    if (v.size() <= most) {
        out.append(v);
    } else {
        out.append(v.substr(0, most));
        out += "...";
    }
    out += '\'';
    return out;
}

/// `text` as a refusal quotes it: whole up to plan_text_quote_max characters; longer, its first
/// plan_text_quote_max characters (never splitting a UTF-8 sequence), "..." and its length.
inline std::string plan_text_excerpt(std::string_view text) {
    if (text.size() <= plan_text_quote_max) return std::string(text);
    std::size_t cut = plan_text_quote_max;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
        --cut;
    std::string out(text.substr(0, cut));
    out += "... (";
    out += std::to_string(text.size());
    out += " characters)";
    return out;
}

/// errc::invalid_plan with the arguments {the text's excerpt, fault}: a huge text never makes a
/// huge message.
inline coded_error invalid_plan_error(std::string_view text, std::string fault) {
    return coded_error(errc::invalid_plan,
                       std::vector<std::string>{plan_text_excerpt(text), std::move(fault)});
}

/// `ns` as microseconds: whole, or with the fraction a non-whole value needs ("1.5").
inline std::string plan_us_text(std::uint64_t ns) {
    std::string out = std::to_string(ns / 1000);
    if (const std::uint64_t frac = ns % 1000; frac != 0) {
        std::string f = std::to_string(frac);
        f.insert(0, 3 - f.size(), '0');
        while (f.back() == '0')
            f.pop_back();
        out += '.';
        out += f;
    }
    return out;
}

enum class plan_number { ok, empty, not_digits, leading_zero, too_large };

/// Decimal digits only; no sign, no spaces, no leading zero; refuses (never wraps) a value
/// beyond 64 bits.
constexpr plan_number parse_plan_number(std::string_view v, std::uint64_t& out) noexcept {
    if (v.empty()) return plan_number::empty;
    for (const char c : v)
        if (c < '0' || c > '9') return plan_number::not_digits;
    if (v.size() > 1 && v.front() == '0') return plan_number::leading_zero;
    std::uint64_t n = 0;
    for (const char c : v) {
        const auto d = static_cast<std::uint64_t>(c - '0');
        if (n > (std::numeric_limits<std::uint64_t>::max() - d) / 10) return plan_number::too_large;
        n = n * 10 + d;
    }
    out = n;
    return plan_number::ok;
}

inline std::string plan_above_max(const plan_key& key, std::string_view value) {
    std::string out = "'";
    out.append(key.name);
    if (key.micro && key.max == plan_us_max) {
        out += "' is " + plan_quote(value) +
               " microseconds, which overflows 64-bit nanoseconds (at most " +
               std::to_string(plan_us_max) + ")";
    } else {
        out += "' is " + plan_quote(value) + ", above its largest value " + std::to_string(key.max);
    }
    return out;
}

/// The first fault of `value` for `key`, or none (and `out` holds the stored value).
inline std::optional<std::string> parse_plan_value(const plan_key& key, std::string_view value,
                                                   std::uint64_t& out) {
    std::uint64_t n = 0;
    switch (parse_plan_number(value, n)) {
    case plan_number::ok:
        break;
    case plan_number::empty:
        return "'" + std::string(key.name) + "' has no value (expected digits after '=')";
    case plan_number::not_digits:
        return "'" + std::string(key.name) + "' value " + plan_quote(value) +
               " is not a whole number (digits only: no sign, space or point)";
    case plan_number::leading_zero:
        return "'" + std::string(key.name) + "' value " + plan_quote(value) + " has a leading zero";
    case plan_number::too_large:
        return plan_above_max(key, value);
    }
    if (n < key.min) return "'" + std::string(key.name) + "' must not be zero";
    if (n > key.max) return plan_above_max(key, value);
    out = key.micro ? n * 1000 : n;
    return std::nullopt;
}

/// True when an item of `body` at or after `pos` has the key `name`.
constexpr bool plan_has_key_at_or_after(std::string_view body, std::size_t pos,
                                        std::string_view name) noexcept {
    while (pos <= body.size()) {
        const std::size_t comma = body.find(',', pos);
        const std::string_view item = body.substr(
            pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
        if (item.substr(0, item.find('=')) == name) return true;
        if (comma == std::string_view::npos) break;
        pos = comma + 1;
    }
    return false;
}

/// Parses "k1=v1,k2=v2,..." with exactly `keys`, in order; stores the values in `values`.
template <std::size_t N>
std::optional<std::string> parse_plan_keys(std::string_view body,
                                           const std::array<plan_key, N>& keys,
                                           std::array<std::uint64_t, N>& values) {
    constexpr auto npos = std::string_view::npos;
    const auto known = [&](std::string_view k) -> std::size_t {
        for (std::size_t j = 0; j < N; ++j)
            if (keys[j].name == k) return j;
        return npos;
    };
    std::size_t i = 0;
    std::size_t pos = 0;
    for (;;) {
        const std::size_t comma = body.find(',', pos);
        const std::string_view item = body.substr(pos, comma == npos ? npos : comma - pos);
        if (item.empty()) {
            if (comma != npos) return std::string("empty item (a ',' with no key=value before it)");
            if (i < N) return "missing key '" + std::string(keys[i].name) + "'";
            return std::string("trailing ','");
        }
        const std::size_t eq = item.find('=');
        const std::string_view key = item.substr(0, eq);
        const std::size_t at = known(key);
        if (i >= N) {
            if (at != npos) return "'" + std::string(key) + "' given more than once";
            return "unknown key " + plan_quote(key) + " after '" + std::string(keys[N - 1].name) +
                   "'";
        }
        if (at != i) {
            const std::string expected(keys[i].name);
            if (at == npos)
                return "unknown key " + plan_quote(key) + " (expected '" + expected + "')";
            if (at < i) return "'" + std::string(key) + "' given more than once";
            if (plan_has_key_at_or_after(body, comma == npos ? body.size() + 1 : comma + 1,
                                         keys[i].name))
                return "'" + std::string(key) + "' out of order ('" + expected +
                       "' comes before it)";
            return "missing key '" + expected + "'";
        }
        if (eq == npos)
            return "'" + std::string(key) + "' has no value (expected '" + std::string(key) +
                   "=N')";
        if (auto fault = parse_plan_value(keys[i], item.substr(eq + 1), values[i])) return fault;
        ++i;
        if (comma == npos) break;
        pos = comma + 1;
    }
    if (i < N) return "missing key '" + std::string(keys[i].name) + "'";
    return std::nullopt;
}

/// The first fault of a flag plan's park and backstop, given in nanoseconds, or none.
inline std::optional<std::string> check_flag_plan(std::uint64_t park_ns,
                                                  std::uint64_t backstop_ns) {
    const std::array<std::pair<std::uint64_t, const plan_key*>, 2> fields{
        {{park_ns, &flag_keys[0]}, {backstop_ns, &flag_keys[1]}}};
    for (const auto& [ns, key] : fields) {
        if (ns % 1000 != 0)
            return "'" + std::string(key->name) + "' " + plan_us_text(ns) +
                   " is not a whole number of microseconds";
        std::uint64_t out = 0;
        if (auto fault = parse_plan_value(*key, std::to_string(ns / 1000), out)) return fault;
    }
    if (park_ns > backstop_ns)
        return "park_us " + plan_us_text(park_ns) + " exceeds backstop_us " +
               plan_us_text(backstop_ns) + " (a park must not outlast the backstop)";
    return std::nullopt;
}

/// The first fault of a prediction, or none.
inline std::optional<std::string> check_deadline_plan(const deadline_plan& d) {
    const std::array<std::uint64_t, 3> times{d.margin_ns, d.min_sleep_ns, d.max_sleep_ns};
    for (std::size_t j = 0; j < times.size(); ++j) {
        if (times[j] % 1000 != 0)
            return "'" + std::string(deadline_keys[j].name) + "' " + plan_us_text(times[j]) +
                   " is not a whole number of microseconds";
    }
    std::uint64_t out = 0;
    if (auto fault = parse_plan_value(deadline_keys[3], std::to_string(d.window), out))
        return fault;
    if (d.min_sleep_ns > d.max_sleep_ns)
        return "min_sleep_us " + plan_us_text(d.min_sleep_ns) + " exceeds max_sleep_us " +
               plan_us_text(d.max_sleep_ns);
    return std::nullopt;
}

/// The text of a plan in the grammar (canonical for a valid plan; non-whole microseconds of a
/// refused factory call are shown with a fraction).
inline std::string plan_text(plan_kind kind, std::uint64_t park_ns, std::uint64_t backstop_ns,
                             const std::optional<deadline_plan>& predict) {
    std::string out;
    out.reserve(predict ? 112 : 40);
    switch (kind) {
    case plan_kind::block:
        out += "block";
        break;
    case plan_kind::poll:
        out += "poll";
        break;
    case plan_kind::flag:
        out += "flag:park_us=";
        out += plan_us_text(park_ns);
        out += ",backstop_us=";
        out += plan_us_text(backstop_ns);
        break;
    }
    if (predict) {
        out += "+predict:margin_us=";
        out += plan_us_text(predict->margin_ns);
        out += ",min_sleep_us=";
        out += plan_us_text(predict->min_sleep_ns);
        out += ",max_sleep_us=";
        out += plan_us_text(predict->max_sleep_ns);
        out += ",window=";
        out += std::to_string(predict->window);
    }
    return out;
}

} // namespace detail

inline result<wait_plan> wait_plan::parse(std::string_view text) {
    constexpr auto npos = std::string_view::npos;
    const auto fail = [text](std::string fault) {
        return result<wait_plan>(detail::invalid_plan_error(text, std::move(fault)));
    };
    if (text.empty()) return fail("empty text (expected block, poll or flag)");

    const std::size_t plus = text.find('+');
    const std::string_view kind_text = text.substr(0, plus);
    const std::size_t colon = kind_text.find(':');
    const std::string_view word = kind_text.substr(0, colon);

    plan_kind kind = plan_kind::poll;
    std::array<std::uint64_t, 2> flag{};
    if (word == "block" || word == "poll") {
        kind = word == "block" ? plan_kind::block : plan_kind::poll;
        if (colon != npos)
            return fail("'" + std::string(word) + "' takes no parameters (found " +
                        detail::plan_quote(kind_text.substr(colon)) + ")");
    } else if (word == "flag") {
        kind = plan_kind::flag;
        if (colon == npos) return fail("'flag' needs ':park_us=N,backstop_us=N'");
        if (auto fault =
                detail::parse_plan_keys(kind_text.substr(colon + 1), detail::flag_keys, flag))
            return fail(*fault);
        if (flag[0] > flag[1])
            return fail("park_us " + detail::plan_us_text(flag[0]) + " exceeds backstop_us " +
                        detail::plan_us_text(flag[1]) + " (a park must not outlast the backstop)");
    } else if (word.empty()) {
        return fail("missing plan kind (expected block, poll or flag)");
    } else {
        return fail("unknown plan kind " + detail::plan_quote(word) +
                    " (expected block, poll or flag)");
    }
    if (plus == npos) return wait_plan(kind, flag[0], flag[1], std::nullopt);

    constexpr std::string_view predict_tag = "+predict:";
    if (kind == plan_kind::block)
        return fail("'block' takes no '+predict:' (nothing to sleep in front of a blocking wait)");
    const std::string_view suffix = text.substr(plus);
    if (!suffix.starts_with(predict_tag))
        return fail("unknown suffix " + detail::plan_quote(suffix) +
                    " (expected '+predict:margin_us=N,min_sleep_us=N,max_sleep_us=N,window=N',"
                    " every value given)");
    std::array<std::uint64_t, 4> d{};
    if (auto fault =
            detail::parse_plan_keys(suffix.substr(predict_tag.size()), detail::deadline_keys, d))
        return fail(*fault);
    if (d[1] > d[2])
        return fail("min_sleep_us " + detail::plan_us_text(d[1]) + " exceeds max_sleep_us " +
                    detail::plan_us_text(d[2]));
    return wait_plan(kind, flag[0], flag[1],
                     deadline_plan{d[0], d[1], d[2], static_cast<std::uint32_t>(d[3])});
}

inline result<wait_plan> wait_plan::poll(std::optional<deadline_plan> predict) {
    if (predict) {
        if (auto fault = detail::check_deadline_plan(*predict))
            return detail::invalid_plan_error(detail::plan_text(plan_kind::poll, 0, 0, predict),
                                              std::move(*fault));
    }
    return wait_plan(plan_kind::poll, 0, 0, predict);
}

inline result<wait_plan> wait_plan::flag(std::uint64_t park_ns, std::uint64_t backstop_ns,
                                         std::optional<deadline_plan> predict) {
    std::optional<std::string> fault = detail::check_flag_plan(park_ns, backstop_ns);
    if (!fault && predict) fault = detail::check_deadline_plan(*predict);
    if (fault)
        return detail::invalid_plan_error(
            detail::plan_text(plan_kind::flag, park_ns, backstop_ns, predict), std::move(*fault));
    return wait_plan(plan_kind::flag, park_ns, backstop_ns, predict);
}

inline std::string wait_plan::label() const {
    return detail::plan_text(kind_, park_ns_, backstop_ns_, predict_);
}

} // namespace gpu_async

#endif // GPU_ASYNC_CORE_WAIT_PLAN_HPP
