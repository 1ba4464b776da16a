// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/core/estimator.hpp>

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <unordered_map>

namespace unit_core_estimator {

using namespace gpu_async;

namespace {

constexpr std::uint64_t us = 1000;
constexpr std::uint64_t ms = 1000 * us;
constexpr deadline_plan plan{150 * us, 20 * us, 50 * ms, 8};
constexpr std::uint64_t u64_max = std::numeric_limits<std::uint64_t>::max();

// A key that is ordered but not hashable.
struct ordered_key {
    int v;
    friend auto operator<=>(const ordered_key&, const ordered_key&) = default;
};

// A key that is hashable but not ordered.
struct hashed_key {
    int v;
    friend bool operator==(const hashed_key&, const hashed_key&) = default;
};

// A printable form of an optional duration ("none" or the nanoseconds).
std::string show(const std::optional<std::uint64_t>& ns) {
    return ns ? std::to_string(*ns) : std::string("none");
}
std::string show(std::uint64_t ns) {
    return std::to_string(ns);
}

struct not_a_key {
    int v;
};

} // namespace

} // namespace unit_core_estimator

template <>
struct std::hash<unit_core_estimator::hashed_key> {
    std::size_t operator()(const unit_core_estimator::hashed_key& k) const noexcept {
        return std::hash<int>{}(k.v);
    }
};

namespace unit_core_estimator {

BOOST_AUTO_TEST_SUITE(estimator_suite)

BOOST_AUTO_TEST_CASE(outcome_kinds) {
    static_assert(outcome::exact(5).is_exact());
    static_assert(outcome::late(5).is_late());
    static_assert(outcome::exact(5).ns() == 5);
    static_assert(!(outcome::exact(5) == outcome::late(5)));
    BOOST_TEST((outcome::late(7).kind() == outcome::kind_type::late));
}

BOOST_AUTO_TEST_CASE(key_kinds_pick_their_map) {
    static_assert(std::is_same_v<point_table<std::string>::map_type,
                                 std::unordered_map<std::string, point_estimate>>);
    static_assert(
        std::is_same_v<point_table<int>::map_type, std::unordered_map<int, point_estimate>>);
    static_assert(
        std::is_same_v<point_table<ordered_key>::map_type, std::map<ordered_key, point_estimate>>);
    static_assert(std::is_same_v<point_table<hashed_key>::map_type,
                                 std::unordered_map<hashed_key, point_estimate>>);
    static_assert(point_key<ordered_key> && point_key<hashed_key> && point_key<const char*>);
    static_assert(!point_key<not_a_key>);

    point_table<ordered_key> o;
    o.observe({1}, plan, outcome::exact(1 * ms));
    BOOST_TEST(show(o.sleep_ns({1}, plan)) == show(850 * us));
    point_table<hashed_key> h;
    h.observe({1}, plan, outcome::exact(1 * ms));
    BOOST_TEST(show(h.sleep_ns({1}, plan)) == show(850 * us));
}

BOOST_AUTO_TEST_CASE(spec_fixture_min_of_samples_then_window_of_eight) {
    point_table<std::string> t;
    t.observe("decode", plan, outcome::exact(1000 * us));
    t.observe("decode", plan, outcome::exact(900 * us));
    t.observe("decode", plan, outcome::exact(1100 * us));
    BOOST_TEST(show(t.sleep_ns("decode", plan)) == show(750 * us));
    for (int i = 0; i < 8; ++i)
        t.observe("decode", plan, outcome::exact(2 * ms));
    BOOST_TEST(show(t.sleep_ns("decode", plan)) == show(1850 * us));
    BOOST_TEST(t.size() == 1u);
}

BOOST_AUTO_TEST_CASE(spec_fixture_single_samples) {
    const auto single = [](std::uint64_t sample) {
        point_table<int> t;
        t.observe(0, plan, outcome::exact(sample));
        return t.sleep_ns(0, plan);
    };
    BOOST_TEST(!single(160 * us).has_value());           // 10 us < min_sleep 20 us
    BOOST_TEST(!single(100 * us).has_value());           // saturates at 0
    BOOST_TEST(show(single(u64_max)) == show(50 * ms));  // exactly max_sleep
    BOOST_TEST(show(single(170 * us)) == show(20 * us)); // min_sleep is kept
    BOOST_TEST(!single(170 * us - 1).has_value());
    BOOST_TEST(show(single(0)) == "none");
}

BOOST_AUTO_TEST_CASE(window_eight_forgets_the_ninth_sample_back) {
    point_table<int> t;
    t.observe(1, plan, outcome::exact(100 * us)); // the minimum, then eight larger ones
    for (int i = 0; i < 7; ++i)
        t.observe(1, plan, outcome::exact(3 * ms));
    BOOST_TEST(show(t.prediction_ns(1, plan)) == show(100 * us));
    t.observe(1, plan, outcome::exact(3 * ms)); // the 100 us sample drops out
    BOOST_TEST(show(t.prediction_ns(1, plan)) == show(3 * ms));
    BOOST_TEST(t.find(1)->samples() == 8u);
    BOOST_TEST(t.find(1)->sample(0) == 3 * ms);
}

BOOST_AUTO_TEST_CASE(late_outcomes_halve_and_never_raise) {
    point_table<int> t;
    t.observe(1, plan, outcome::exact(2 * ms));
    t.observe(1, plan, outcome::late(10 * ms)); // min(10 ms, 2 ms) / 2
    BOOST_TEST(t.find(1)->sample(0) == 1 * ms);
    BOOST_TEST(show(t.prediction_ns(1, plan)) == show(1 * ms));
    t.observe(1, plan, outcome::late(10 * ms));
    BOOST_TEST(show(t.prediction_ns(1, plan)) == show(500 * us));
    t.observe(1, plan, outcome::late(100 * us)); // woke below the prediction: woke / 2
    BOOST_TEST(show(t.prediction_ns(1, plan)) == show(50 * us));
    BOOST_TEST(!t.sleep_ns(1, plan).has_value());
}

BOOST_AUTO_TEST_CASE(late_on_a_cold_point_pushes_half_of_woke) {
    point_table<int> t;
    BOOST_TEST(!t.sleep_ns(1, plan).has_value());
    t.observe(1, plan, outcome::late(2 * ms));
    BOOST_TEST(show(t.prediction_ns(1, plan)) == show(1 * ms));
    BOOST_TEST(show(t.sleep_ns(1, plan)) == show(850 * us));
    point_table<int> odd;
    odd.observe(1, plan, outcome::late(u64_max));
    BOOST_TEST(show(odd.prediction_ns(1, plan)) == show(u64_max / 2));
}

BOOST_AUTO_TEST_CASE(an_unknown_key_gives_none_and_creates_nothing) {
    point_table<std::string> t;
    BOOST_TEST(t.empty());
    BOOST_TEST(!t.sleep_ns("nowhere", plan).has_value());
    BOOST_TEST(!t.prediction_ns("nowhere", plan).has_value());
    BOOST_TEST(t.find("nowhere") == nullptr);
    BOOST_TEST(t.empty());
    BOOST_TEST(t.size() == 0u);
    t.observe("a", plan, outcome::exact(1 * ms));
    t.observe("b", plan, outcome::exact(2 * ms));
    BOOST_TEST(!t.empty());
    BOOST_TEST(t.size() == 2u);
    BOOST_TEST(show(t.sleep_ns("b", plan)) == show(1850 * us));
    BOOST_TEST(t.erase("a"));
    BOOST_TEST(!t.erase("a"));
    BOOST_TEST(t.size() == 1u);
    t.clear();
    BOOST_TEST(t.empty());
}

BOOST_AUTO_TEST_CASE(window_comes_from_the_plan_and_is_clamped) {
    deadline_plan one = plan;
    one.window = 1;
    point_table<int> t;
    t.observe(1, plan, outcome::exact(1 * ms));
    t.observe(1, plan, outcome::exact(5 * ms));
    BOOST_TEST(show(t.prediction_ns(1, plan)) == show(1 * ms));
    BOOST_TEST(show(t.prediction_ns(1, one)) == show(5 * ms)); // newest only
    t.observe(1, one, outcome::exact(7 * ms));                 // keeps the last one sample
    BOOST_TEST(t.find(1)->samples() == 1u);
    BOOST_TEST(show(t.prediction_ns(1, plan)) == show(7 * ms));

    deadline_plan zero = plan;
    zero.window = 0; // not a parsed plan: read as 1
    deadline_plan huge = plan;
    huge.window = 1000; // read as 16
    point_table<int> c;
    for (std::uint64_t i = 0; i < 40; ++i)
        c.observe(1, huge, outcome::exact((40 - i) * ms)); // decreasing: the newest is the min
    BOOST_TEST(c.find(1)->samples() == window_max);
    c.observe(1, huge, outcome::exact(100 * ms));
    BOOST_TEST(show(c.prediction_ns(1, huge)) == show(1 * ms));
    BOOST_TEST(show(c.prediction_ns(1, zero)) == show(100 * ms));
    for (int i = 0; i < 15; ++i)
        c.observe(1, huge, outcome::exact(100 * ms));
    BOOST_TEST(show(c.prediction_ns(1, huge)) == show(100 * ms));
}

BOOST_AUTO_TEST_CASE(invariants_over_random_outcome_sequences) {
    std::mt19937_64 rng(0x9a17'0004);
    const auto draw = [&](std::uint64_t lo, std::uint64_t hi) {
        return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
    };
    for (int run = 0; run < 300; ++run) {
        const std::uint64_t max_sleep = draw(0, 100 * ms);
        const deadline_plan p{draw(0, 2 * ms), draw(0, max_sleep), max_sleep,
                              static_cast<std::uint32_t>(draw(1, window_max))};
        point_table<int> t;
        // A cold point never sleeps.
        BOOST_TEST_REQUIRE(!t.sleep_ns(run, p).has_value());
        for (int step = 0; step < 200; ++step) {
            const std::uint64_t ns = draw(0, 3) == 0 ? draw(0, u64_max) : draw(0, 20 * ms);
            const std::optional<std::uint64_t> before = t.prediction_ns(run, p);
            if (draw(0, 2) == 0) {
                t.observe(run, p, outcome::late(ns));
                const std::optional<std::uint64_t> after = t.prediction_ns(run, p);
                BOOST_TEST_REQUIRE(after.has_value());
                // A late outcome never raises the prediction; its sample is at most half.
                if (before) BOOST_TEST_REQUIRE(*after <= *before);
                BOOST_TEST_REQUIRE(t.find(run)->sample(0) <= ns / 2);
                if (before) BOOST_TEST_REQUIRE(t.find(run)->sample(0) <= *before / 2);
            } else {
                t.observe(run, p, outcome::exact(ns));
                BOOST_TEST_REQUIRE(t.find(run)->sample(0) == ns);
                BOOST_TEST_REQUIRE(*t.prediction_ns(run, p) <= ns);
            }
            // The prediction is the minimum of the last `window` samples.
            const point_estimate& e = *t.find(run);
            BOOST_TEST_REQUIRE(e.samples() <= p.window);
            std::uint64_t m = u64_max;
            for (std::size_t age = 0; age < e.samples(); ++age)
                m = std::min(m, e.sample(age));
            BOOST_TEST_REQUIRE(*t.prediction_ns(run, p) == m);
            // The sleep follows the arithmetic, and never exceeds max_sleep.
            const std::optional<std::uint64_t> s = t.sleep_ns(run, p);
            const std::uint64_t raw = m > p.margin_ns ? m - p.margin_ns : 0;
            if (raw < p.min_sleep_ns) {
                BOOST_TEST_REQUIRE(!s.has_value());
            } else {
                BOOST_TEST_REQUIRE(s.has_value());
                BOOST_TEST_REQUIRE(*s <= p.max_sleep_ns);
                BOOST_TEST_REQUIRE(*s >= p.min_sleep_ns);
                BOOST_TEST_REQUIRE(*s == std::min(raw, p.max_sleep_ns));
            }
        }
        BOOST_TEST_REQUIRE(t.size() == 1u);
    }
}

BOOST_AUTO_TEST_CASE(estimates_are_constexpr) {
    constexpr auto sleep = [] {
        point_estimate e;
        e.observe(plan, outcome::exact(1 * ms));
        e.observe(plan, outcome::late(400 * us));
        return e.sleep_ns(plan);
    }();
    static_assert(sleep == std::optional<std::uint64_t>(50 * us));
    BOOST_TEST(show(sleep) == show(50 * us));
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_core_estimator
