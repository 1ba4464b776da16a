// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/core/wait_plan.hpp>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace unit_core_wait_plan {

using namespace gpu_async;

namespace {

constexpr std::string_view predict_suffix =
    "+predict:margin_us=150,min_sleep_us=20,max_sleep_us=50000,window=8";

constexpr deadline_plan fixture_predict{150'000, 20'000, 50'000'000, 8};

// The error's message, or nothing for a value (Boost.Test evaluates a message even on success).
template <class T>
std::string why(const result<T>& r) {
    return r.has_value() ? std::string() : r.error().message();
}

// How a refusal quotes `text`: whole up to 64 characters, else the first 64, "..." and the
// length.
std::string quoted(std::string_view text) {
    if (text.size() <= 64) return std::string(text);
    return std::string(text.substr(0, 64)) + "... (" + std::to_string(text.size()) + " characters)";
}

wait_plan parsed(std::string_view text) {
    auto r = wait_plan::parse(text);
    BOOST_TEST_REQUIRE(r.has_value(), "refused '" << text << "': " << why(r));
    return r.value();
}

} // namespace

BOOST_AUTO_TEST_SUITE(wait_plan_suite)

BOOST_AUTO_TEST_CASE(canonical_fixtures_parse_to_their_fields_and_print_back) {
    const wait_plan b = parsed("block");
    BOOST_TEST((b.kind() == plan_kind::block));
    BOOST_TEST(b.park_ns() == 0u);
    BOOST_TEST(b.backstop_ns() == 0u);
    BOOST_TEST(!b.predict().has_value());
    BOOST_TEST(b.label() == "block");
    BOOST_TEST((b == wait_plan::block()));

    const wait_plan p = parsed("poll");
    BOOST_TEST((p.kind() == plan_kind::poll));
    BOOST_TEST(!p.predict().has_value());
    BOOST_TEST(p.label() == "poll");
    BOOST_TEST((p == wait_plan::poll().value()));

    const std::string poll_predict = "poll" + std::string(predict_suffix);
    const wait_plan pp = parsed(poll_predict);
    BOOST_TEST((pp.kind() == plan_kind::poll));
    BOOST_TEST_REQUIRE(pp.predict().has_value());
    BOOST_TEST(pp.predict()->margin_ns == 150'000u);
    BOOST_TEST(pp.predict()->min_sleep_ns == 20'000u);
    BOOST_TEST(pp.predict()->max_sleep_ns == 50'000'000u);
    BOOST_TEST(pp.predict()->window == 8u);
    BOOST_TEST(pp.label() == poll_predict);
    BOOST_TEST((pp == wait_plan::poll(fixture_predict).value()));

    const wait_plan f = parsed("flag:park_us=100,backstop_us=1000");
    BOOST_TEST((f.kind() == plan_kind::flag));
    BOOST_TEST(f.park_ns() == 100'000u);
    BOOST_TEST(f.backstop_ns() == 1'000'000u);
    BOOST_TEST(!f.predict().has_value());
    BOOST_TEST(f.label() == "flag:park_us=100,backstop_us=1000");
    BOOST_TEST((f == wait_plan::flag(100'000, 1'000'000).value()));

    const std::string flag_predict =
        "flag:park_us=100,backstop_us=1000" + std::string(predict_suffix);
    const wait_plan fp = parsed(flag_predict);
    BOOST_TEST((fp.kind() == plan_kind::flag));
    BOOST_TEST(fp.park_ns() == 100'000u);
    BOOST_TEST(fp.backstop_ns() == 1'000'000u);
    BOOST_TEST((fp.predict() == std::optional<deadline_plan>(fixture_predict)));
    BOOST_TEST(fp.label() == flag_predict);
    BOOST_TEST((fp == wait_plan::flag(100'000, 1'000'000, fixture_predict).value()));

    BOOST_TEST(!(f == fp));
    BOOST_TEST(!(p == pp));
}

BOOST_AUTO_TEST_CASE(recommended_is_the_reference_default) {
    BOOST_TEST(wait_plan::recommended().label() == "flag:park_us=100,backstop_us=1000");
    BOOST_TEST((wait_plan::recommended() == parsed("flag:park_us=100,backstop_us=1000")));
}

BOOST_AUTO_TEST_CASE(bounds_are_inclusive_at_their_edges) {
    BOOST_TEST(parsed("flag:park_us=10000,backstop_us=1000000").park_ns() == park_ns_max);
    BOOST_TEST(parsed("flag:park_us=10000,backstop_us=1000000").backstop_ns() == backstop_ns_max);
    BOOST_TEST(parsed("flag:park_us=1,backstop_us=1").park_ns() == 1000u);
    BOOST_TEST(parsed("flag:park_us=7,backstop_us=7").backstop_ns() == 7000u); // park == backstop
    BOOST_TEST(parsed("poll+predict:margin_us=0,min_sleep_us=0,max_sleep_us=0,window=1")
                   .predict()
                   ->window == 1u);
    BOOST_TEST(parsed("poll+predict:margin_us=0,min_sleep_us=5,max_sleep_us=5,window=16")
                   .predict()
                   ->window == window_max);
    // The largest microsecond value whose nanoseconds fit in 64 bits.
    const wait_plan big = parsed("poll+predict:margin_us=18446744073709551,min_sleep_us="
                                 "18446744073709551,max_sleep_us=18446744073709551,window=3");
    BOOST_TEST(big.predict()->margin_ns == 18'446'744'073'709'551'000u);
    BOOST_TEST(big.predict()->max_sleep_ns == plan_us_max * 1000);
    BOOST_TEST(plan_us_max == 18'446'744'073'709'551u);
}

// Each refused text with the fault its message must name. The message is
// "invalid plan '<text>': <fault>".
struct refusal {
    std::string_view text;
    std::string_view fault;
};

const std::vector<refusal> refusals = {
    {"", "empty text"},
    {"blok", "unknown plan kind 'blok'"},
    {"Block", "unknown plan kind 'Block'"},
    {" poll", "unknown plan kind ' poll'"},
    {"poll ", "unknown plan kind 'poll '"},
    {"wait", "unknown plan kind 'wait'"},
    {":park_us=1", "missing plan kind"},
    {"+predict:margin_us=1,min_sleep_us=1,max_sleep_us=1,window=1", "missing plan kind"},
    {"block:x", "'block' takes no parameters"},
    {"poll:", "'poll' takes no parameters"},
    {"block+predict:margin_us=150,min_sleep_us=20,max_sleep_us=50000,window=8",
     "'block' takes no '+predict:'"},
    {"block+", "'block' takes no '+predict:'"},
    {"poll+", "unknown suffix '+'"},
    {"poll+Predict:margin_us=1,min_sleep_us=1,max_sleep_us=1,window=1", "unknown suffix"},
    {"poll+deadline:margin_us=1", "unknown suffix '+deadline:margin_us=1'"},
    // A prediction has no defaults: the message shows the whole form to write.
    {"poll+predict",
     "unknown suffix '+predict' (expected "
     "'+predict:margin_us=N,min_sleep_us=N,max_sleep_us=N,window=N', every value given)"},
    {"flag:park_us=100,backstop_us=1000+predict",
     "(expected '+predict:margin_us=N,min_sleep_us=N,max_sleep_us=N,window=N'"},
    {"poll+", "unknown suffix '+' (expected '+predict:margin_us=N,"},
    {"flag", "'flag' needs ':park_us=N,backstop_us=N'"},
    {"flag:", "missing key 'park_us'"},
    {"flag:park_us=100", "missing key 'backstop_us'"},
    {"flag:backstop_us=1000", "missing key 'park_us'"},
    {"flag:backstop_us=1000,park_us=100", "'backstop_us' out of order ('park_us' comes before it)"},
    {"flag:park_us=100,park_us=100", "'park_us' given more than once"},
    {"flag:park_us=100,backstop_us=1000,backstop_us=1000", "'backstop_us' given more than once"},
    {"flag:park_us=100,backstop_us=1000,park_us=1", "'park_us' given more than once"},
    {"flag:park_us=100,backstop=1000", "unknown key 'backstop' (expected 'backstop_us')"},
    {"flag:park_us=100,backstop_us=1000,extra=1", "unknown key 'extra' after 'backstop_us'"},
    {"flag:park_us=100,,backstop_us=1000", "empty item"},
    {"flag:,park_us=100,backstop_us=1000", "empty item"},
    {"flag:park_us=100,backstop_us=1000,", "trailing ','"},
    {"flag:park_us,backstop_us=1000", "'park_us' has no value"},
    {"flag:park_us=,backstop_us=1000", "'park_us' has no value"},
    {"flag:park_us=0,backstop_us=1000", "'park_us' must not be zero"},
    {"flag:park_us=100,backstop_us=0", "'backstop_us' must not be zero"},
    {"flag:park_us=10001,backstop_us=1000000",
     "'park_us' is '10001', above its largest value 10000"},
    {"flag:park_us=100,backstop_us=1000001",
     "'backstop_us' is '1000001', above its largest value 1000000"},
    {"flag:park_us=99999999999999999999999,backstop_us=1000",
     "'park_us' is '99999999999999999999999'"},
    {"flag:park_us=2000,backstop_us=1000", "park_us 2000 exceeds backstop_us 1000"},
    {"flag:park_us=-1,backstop_us=1000", "'park_us' value '-1' is not a whole number"},
    {"flag:park_us=+1,backstop_us=1000", "'park_us' has no value"}, // '+' starts the suffix
    {"flag:park_us= 1,backstop_us=1000", "'park_us' value ' 1' is not a whole number"},
    {"flag:park_us=1.5,backstop_us=1000", "'park_us' value '1.5' is not a whole number"},
    {"flag:park_us=0x10,backstop_us=1000", "'park_us' value '0x10' is not a whole number"},
    {"flag:park_us=1e3,backstop_us=1000", "'park_us' value '1e3' is not a whole number"},
    {"flag:park_us=0100,backstop_us=1000", "'park_us' value '0100' has a leading zero"},
    {"flag:park_us=100,backstop_us=00", "'backstop_us' value '00' has a leading zero"},
    {"flag:park_us=1=2,backstop_us=1000", "'park_us' value '1=2' is not a whole number"},
    {"flag:PARK_US=1,backstop_us=1000", "unknown key 'PARK_US' (expected 'park_us')"},
    {"flag:park_us=100,backstop_us=1000+predict:", "missing key 'margin_us'"},
    {"poll+predict:", "missing key 'margin_us'"},
    {"poll+predict:margin_us=150", "missing key 'min_sleep_us'"},
    {"poll+predict:margin_us=150,min_sleep_us=20,max_sleep_us=50000", "missing key 'window'"},
    {"poll+predict:margin_us=150,min_sleep_us=20,window=8", "missing key 'max_sleep_us'"},
    {"poll+predict:min_sleep_us=20,margin_us=150,max_sleep_us=50000,window=8",
     "'min_sleep_us' out of order ('margin_us' comes before it)"},
    {"poll+predict:margin_us=150,min_sleep_us=20,max_sleep_us=50000,window=8,window=8",
     "'window' given more than once"},
    {"poll+predict:margin_us=150,margin_us=150,min_sleep_us=20,max_sleep_us=50000,window=8",
     "'margin_us' given more than once"},
    {"poll+predict:margin_us=150,min_sleep_us=20,max_sleep_us=50000,window=0",
     "'window' must not be zero"},
    {"poll+predict:margin_us=150,min_sleep_us=20,max_sleep_us=50000,window=17",
     "'window' is '17', above its largest value 16"},
    {"poll+predict:margin_us=150,min_sleep_us=20,max_sleep_us=50000,window=18446744073709551616",
     "'window' is '18446744073709551616'"},
    {"poll+predict:margin_us=150,min_sleep_us=50001,max_sleep_us=50000,window=8",
     "min_sleep_us 50001 exceeds max_sleep_us 50000"},
    {"poll+predict:margin_us=18446744073709552,min_sleep_us=20,max_sleep_us=50000,window=8",
     "'margin_us' is '18446744073709552' microseconds, which overflows 64-bit nanoseconds"},
    {"poll+predict:margin_us=150,min_sleep_us=20,max_sleep_us=18446744073709552,window=8",
     "'max_sleep_us' is '18446744073709552' microseconds, which overflows"},
    {"poll+predict:margin_us=18446744073709551616,min_sleep_us=20,max_sleep_us=50000,window=8",
     "'margin_us' is '18446744073709551616' microseconds, which overflows"},
    {"poll+predict:margin_us=150,min_sleep_us=20,max_sleep_us=50000,window=8+predict:",
     "'window' value '8+predict:' is not a whole number"},
    {"poll+predict:margin_us=150;min_sleep_us=20", "'margin_us' value '150;min_sleep_us=20'"},
    {"flag:park_us=100,backstop_us=1000+predict:margin_us=150,min_sleep_us=20,max_sleep_us=50000",
     "missing key 'window'"},
    {"flag:park_us=100,backstop_us=1000+predict:margin_us=150,min_sleep_us=20,max_sleep_us=50000,"
     "window=8,",
     "trailing ','"},
};

BOOST_AUTO_TEST_CASE(every_refusal_names_the_text_and_its_fault) {
    BOOST_TEST(refusals.size() >= 30u);
    for (const auto& [text, fault] : refusals) {
        const auto r = wait_plan::parse(text);
        BOOST_TEST_REQUIRE(!r.has_value(), "accepted '" << text << "'");
        BOOST_TEST((r.error().code() == errc::invalid_plan), text);
        BOOST_TEST((r.error().value() == errc::invalid_plan), text);
        BOOST_TEST(!r.error().is_warning());
        BOOST_TEST_REQUIRE(r.error().args().size() == 2u);
        BOOST_TEST(r.error().args()[0] == quoted(text));
        const std::string message = r.error().message();
        BOOST_TEST(message.starts_with("invalid plan '" + quoted(text) + "': "), message);
        BOOST_TEST(r.error().args()[1].find(fault) != std::string::npos,
                   "'" << text << "' gave '" << message << "', expected to name '" << fault << "'");
    }
}

BOOST_AUTO_TEST_CASE(a_long_value_is_cut_in_the_fault_and_the_text_in_the_quote) {
    const std::string text = "flag:park_us=" + std::string(200, '7') + ",backstop_us=1000";
    const auto r = wait_plan::parse(text);
    BOOST_TEST_REQUIRE(!r.has_value());
    BOOST_TEST(r.error().args()[0] == text.substr(0, 64) + "... (230 characters)");
    BOOST_TEST(r.error().args()[1].find("...'") != std::string::npos);
    BOOST_TEST(r.error().args()[1].size() < 120u);
    BOOST_TEST(r.error().message().size() < 240u);
}

BOOST_AUTO_TEST_CASE(a_one_mebibyte_text_quotes_its_first_64_characters) {
    for (const char fill : {'x', '7', ','}) {
        std::string text = "flag:park_us=100,backstop_us=1000+predict:";
        text.resize(std::size_t{1} << 20, fill);
        const auto r = wait_plan::parse(text);
        BOOST_TEST_REQUIRE(!r.has_value());
        const std::string message = r.error().message();
        BOOST_TEST(message.size() < 300u, message.size());
        BOOST_TEST(message.starts_with("invalid plan '" + text.substr(0, 64) +
                                       "... (1048576 characters)': "),
                   message);
        BOOST_TEST(r.error().args()[0].size() < 100u);
        BOOST_TEST(r.error().args()[1].size() < 200u);
    }
    // The cut never splits a UTF-8 sequence: a 2-byte character straddling the 64th byte goes.
    std::string utf8(63, 'a');
    utf8 += "\xC3\xA9"; // U+00E9, bytes 64 and 65
    utf8 += std::string(100, 'b');
    const auto r = wait_plan::parse(utf8);
    BOOST_TEST_REQUIRE(!r.has_value());
    BOOST_TEST(r.error().args()[0] == std::string(63, 'a') + "... (165 characters)");
    // Exactly 64 characters are quoted whole.
    const std::string edge(64, 'q');
    BOOST_TEST(wait_plan::parse(edge).error().args()[0] == edge);
}

BOOST_AUTO_TEST_CASE(factories_validate_as_parse_does) {
    // Not whole microseconds: the text shows the fraction, the fault names the key.
    const auto half = wait_plan::flag(1'500, 1'000'000);
    BOOST_TEST_REQUIRE(!half.has_value());
    BOOST_TEST((half.error().code() == errc::invalid_plan));
    BOOST_TEST(half.error().args()[0] == "flag:park_us=1.5,backstop_us=1000");
    BOOST_TEST(half.error().args()[1] == "'park_us' 1.5 is not a whole number of microseconds");

    const auto odd_backstop = wait_plan::flag(1'000, 1'000'001);
    BOOST_TEST_REQUIRE(!odd_backstop.has_value());
    BOOST_TEST(odd_backstop.error().args()[1].find("'backstop_us' 1000.001") == 0u);

    const auto zero = wait_plan::flag(0, 1'000'000);
    BOOST_TEST_REQUIRE(!zero.has_value());
    BOOST_TEST(zero.error().args()[1] == "'park_us' must not be zero");

    const auto zero_backstop = wait_plan::flag(1'000, 0);
    BOOST_TEST_REQUIRE(!zero_backstop.has_value());
    BOOST_TEST(zero_backstop.error().args()[1] == "'backstop_us' must not be zero");

    const auto long_park = wait_plan::flag(park_ns_max + 1000, backstop_ns_max);
    BOOST_TEST_REQUIRE(!long_park.has_value());
    BOOST_TEST(long_park.error().args()[1].find("'park_us' is '10001'") == 0u);

    const auto long_backstop = wait_plan::flag(1'000, backstop_ns_max + 1000);
    BOOST_TEST_REQUIRE(!long_backstop.has_value());
    BOOST_TEST(long_backstop.error().args()[1].find("'backstop_us' is '1000001'") == 0u);

    const auto crossed = wait_plan::flag(2'000'000, 1'000'000);
    BOOST_TEST_REQUIRE(!crossed.has_value());
    BOOST_TEST(crossed.error().args()[1].find("park_us 2000 exceeds backstop_us 1000") == 0u);

    const auto max_ns = wait_plan::flag(std::numeric_limits<std::uint64_t>::max(), 1'000'000);
    BOOST_TEST_REQUIRE(!max_ns.has_value());
    BOOST_TEST(max_ns.error().args()[1].find("not a whole number of microseconds") !=
               std::string::npos);

    auto bad = fixture_predict;
    bad.window = 0;
    const auto w0 = wait_plan::poll(bad);
    BOOST_TEST_REQUIRE(!w0.has_value());
    BOOST_TEST(w0.error().args()[0] ==
               quoted("poll+predict:margin_us=150,min_sleep_us=20,max_sleep_us=50000,window=0"));
    BOOST_TEST(w0.error().args()[1] == "'window' must not be zero");

    bad.window = 17;
    const auto w17 = wait_plan::flag(100'000, 1'000'000, bad);
    BOOST_TEST_REQUIRE(!w17.has_value());
    BOOST_TEST(w17.error().args()[1].find("'window' is '17'") == 0u);

    bad = fixture_predict;
    bad.min_sleep_ns = bad.max_sleep_ns + 1000;
    const auto crossed_sleep = wait_plan::poll(bad);
    BOOST_TEST_REQUIRE(!crossed_sleep.has_value());
    BOOST_TEST(crossed_sleep.error().args()[1] == "min_sleep_us 50001 exceeds max_sleep_us 50000");

    bad = fixture_predict;
    bad.margin_ns = 150'001;
    const auto odd_margin = wait_plan::poll(bad);
    BOOST_TEST_REQUIRE(!odd_margin.has_value());
    BOOST_TEST(odd_margin.error().args()[1] ==
               "'margin_us' 150.001 is not a whole number of microseconds");

    bad = fixture_predict;
    bad.max_sleep_ns = std::numeric_limits<std::uint64_t>::max();
    const auto max_sleep = wait_plan::flag(100'000, 1'000'000, bad);
    BOOST_TEST_REQUIRE(!max_sleep.has_value());
    BOOST_TEST(max_sleep.error().args()[1].find("'max_sleep_us' 18446744073709551.615") == 0u);

    // A flag fault is reported before a prediction fault.
    const auto both = wait_plan::flag(0, 1'000'000, bad);
    BOOST_TEST_REQUIRE(!both.has_value());
    BOOST_TEST(both.error().args()[1] == "'park_us' must not be zero");
}

BOOST_AUTO_TEST_CASE(first_fault_reading_left_to_right_is_reported) {
    // Both keys are bad: the park's fault comes first.
    const auto r = wait_plan::parse("flag:park_us=0,backstop_us=x");
    BOOST_TEST_REQUIRE(!r.has_value());
    BOOST_TEST(r.error().args()[1] == "'park_us' must not be zero");
    // A bad flag part is reported before a bad prediction.
    const auto s = wait_plan::parse("flag:park_us=2,backstop_us=1+predict:window=0");
    BOOST_TEST_REQUIRE(!s.has_value());
    BOOST_TEST(s.error().args()[1].find("park_us 2 exceeds backstop_us 1") == 0u);
}

namespace {

std::uint64_t draw(std::mt19937_64& rng, std::uint64_t lo, std::uint64_t hi) {
    return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
}

// A value with an interesting size: small, a bound, or anywhere up to `hi`.
std::uint64_t draw_us(std::mt19937_64& rng, std::uint64_t lo, std::uint64_t hi) {
    switch (draw(rng, 0, 3)) {
    case 0:
        return lo;
    case 1:
        return hi;
    case 2:
        return draw(rng, lo, std::min<std::uint64_t>(hi, lo + 1000));
    default:
        return draw(rng, lo, hi);
    }
}

} // namespace

BOOST_AUTO_TEST_CASE(round_trip_over_random_valid_plans) {
    std::mt19937_64 rng(0x9a17'0001);
    for (int i = 0; i < 5000; ++i) {
        std::optional<deadline_plan> predict;
        const auto kind = static_cast<plan_kind>(draw(rng, 0, 2));
        if (kind != plan_kind::block && draw(rng, 0, 1) == 1) {
            const std::uint64_t max_us = draw_us(rng, 0, plan_us_max);
            const std::uint64_t min_us = draw_us(rng, 0, max_us);
            predict =
                deadline_plan{draw_us(rng, 0, plan_us_max) * 1000, min_us * 1000, max_us * 1000,
                              static_cast<std::uint32_t>(draw(rng, 1, window_max))};
        }
        wait_plan p = wait_plan::block();
        if (kind == plan_kind::poll) {
            auto r = wait_plan::poll(predict);
            BOOST_TEST_REQUIRE(r.has_value(), why(r));
            p = r.value();
        } else if (kind == plan_kind::flag) {
            const std::uint64_t park_us = draw_us(rng, 1, park_ns_max / 1000);
            const std::uint64_t backstop_us = draw_us(rng, park_us, backstop_ns_max / 1000);
            auto r = wait_plan::flag(park_us * 1000, backstop_us * 1000, predict);
            BOOST_TEST_REQUIRE(r.has_value(), why(r));
            p = r.value();
        }
        const std::string text = p.label();
        const auto back = wait_plan::parse(text);
        BOOST_TEST_REQUIRE(back.has_value(), text << ": " << why(back));
        BOOST_TEST_REQUIRE((back.value() == p), text);
        BOOST_TEST_REQUIRE(back.value().label() == text);
    }
}

BOOST_AUTO_TEST_CASE(every_accepted_text_is_canonical) {
    // Mutations of the canonical fixtures: whatever parses prints back exactly as written, and
    // whatever is refused says invalid_plan with a fault.
    const std::vector<std::string> seeds = {
        "block", "poll", "poll" + std::string(predict_suffix), "flag:park_us=100,backstop_us=1000",
        "flag:park_us=100,backstop_us=1000" + std::string(predict_suffix)};
    const std::string alphabet = "0123456789,=:+_abcdefghiklmoprsuwx;- ";
    std::mt19937_64 rng(0x9a17'0002);
    int accepted = 0;
    for (int i = 0; i < 20000; ++i) {
        std::string text = seeds[draw(rng, 0, seeds.size() - 1)];
        const auto edits = draw(rng, 1, 3);
        for (std::uint64_t e = 0; e < edits; ++e) {
            const std::size_t at = text.empty() ? 0 : draw(rng, 0, text.size() - 1);
            const char c = alphabet[draw(rng, 0, alphabet.size() - 1)];
            switch (draw(rng, 0, 2)) {
            case 0:
                if (!text.empty()) text[at] = c;
                break;
            case 1:
                text.insert(text.begin() + static_cast<std::ptrdiff_t>(at), c);
                break;
            default:
                if (!text.empty()) text.erase(at, 1);
            }
        }
        const auto r = wait_plan::parse(text);
        if (r.has_value()) {
            ++accepted;
            BOOST_TEST_REQUIRE(r.value().label() == text);
        } else {
            BOOST_TEST_REQUIRE((r.error().code() == errc::invalid_plan));
            BOOST_TEST_REQUIRE(!r.error().args().at(1).empty());
        }
    }
    BOOST_TEST(accepted > 100); // the mutations do reach valid texts other than the seeds
}

BOOST_AUTO_TEST_CASE(chrono_accessors) {
    using namespace std::chrono_literals;
    const auto p = wait_plan::parse("flag:park_us=100,backstop_us=1000+predict:margin_us=150,"
                                    "min_sleep_us=20,max_sleep_us=50000,window=8");
    BOOST_REQUIRE(p.has_value());
    BOOST_TEST((p.value().park() == 100us));
    BOOST_TEST((p.value().backstop() == 1ms));
    BOOST_REQUIRE(p.value().predict().has_value());
    BOOST_TEST((p.value().predict()->margin() == 150us));
    BOOST_TEST((p.value().predict()->min_sleep() == 20us));
    BOOST_TEST((p.value().predict()->max_sleep() == 50ms));
    BOOST_TEST((wait_plan::block().park() == 0ns));
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_core_wait_plan
