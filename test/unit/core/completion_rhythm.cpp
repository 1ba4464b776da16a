// SPDX-License-Identifier: BSL-1.0
// completion_rhythm: per (line, slot), the estimator's sleep after a wait's start.
#include <gpu_async/core/completion_rhythm.hpp>

#include "common/slots.hpp"

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace unit_core_completion_rhythm {

using namespace gpu_async;
using gpu_async::test::slot;

namespace {

constexpr std::uint64_t us = 1000;
constexpr std::uint64_t ms = 1000 * us;
constexpr deadline_plan plan{20 * us, 0, 1000 * ms, 8};

} // namespace

BOOST_AUTO_TEST_SUITE(completion_rhythm_tests)

BOOST_AUTO_TEST_CASE(a_slot_without_samples_has_no_sleep) {
    completion_rhythm r;
    completion_line a;
    BOOST_TEST(!r.sleep_ns(a, slot(0), plan).has_value());
    BOOST_TEST(r.estimate(a, slot(0)) == nullptr);
    BOOST_TEST(r.lines() == 0u);
    r.observe(a, slot(3), 2 * ms, plan);
    // The line is known now, its other slots are still cold.
    BOOST_TEST(r.lines() == 1u);
    BOOST_TEST(!r.sleep_ns(a, slot(0), plan).has_value());
    BOOST_TEST(r.estimate(a, slot(0))->samples() == 0u);
    BOOST_TEST(*r.sleep_ns(a, slot(3), plan) == 2 * ms - 20 * us);
}

BOOST_AUTO_TEST_CASE(the_sleep_is_the_least_recent_sample_less_the_margin) {
    completion_rhythm r;
    completion_line a;
    for (std::uint64_t took : {2100 * us, 2050 * us, 2600 * us, 2010 * us, 3900 * us})
        r.observe(a, slot(1), took, plan);
    BOOST_TEST(*r.sleep_ns(a, slot(1), plan) == 2010 * us - 20 * us);
    // An overshoot (a producer that slept long) never raises it.
    r.observe(a, slot(1), 9 * ms, plan);
    BOOST_TEST(*r.sleep_ns(a, slot(1), plan) == 2010 * us - 20 * us);
}

BOOST_AUTO_TEST_CASE(a_low_sample_ages_out_after_the_window) {
    completion_rhythm r;
    completion_line a;
    r.observe(a, slot(2), 100 * us, plan);
    for (int i = 0; i < 7; ++i) {
        r.observe(a, slot(2), 1 * ms, plan);
        BOOST_TEST(*r.sleep_ns(a, slot(2), plan) == 80 * us);
    }
    r.observe(a, slot(2), 1 * ms, plan); // the eighth after it: it is gone
    BOOST_TEST(*r.sleep_ns(a, slot(2), plan) == 1 * ms - 20 * us);
}

BOOST_AUTO_TEST_CASE(a_completion_found_after_a_sleep_is_taken_at_the_middle_of_its_span) {
    completion_rhythm r;
    completion_line a;
    for (int i = 0; i < 8; ++i)
        r.observe(a, slot(4), 2 * ms, plan);
    // Not done at the look 400 us after the start, done at the look 1980 us after it.
    r.observe_between(a, slot(4), 400 * us, 1980 * us, plan);
    BOOST_TEST(*r.sleep_ns(a, slot(4), plan) == 1190 * us - 20 * us);
    // A look past the prediction (an overslept sleep) counts only up to the prediction.
    r.observe_between(a, slot(4), 190 * us, 5 * ms, plan);
    BOOST_TEST(*r.sleep_ns(a, slot(4), plan) == 690 * us - 20 * us);
    // A span that is empty or reversed gives its end.
    r.observe_between(a, slot(4), 900 * us, 100 * us, plan);
    BOOST_TEST(*r.sleep_ns(a, slot(4), plan) == 100 * us - 20 * us);
    // Cold: the middle of the span as given.
    r.observe_between(a, slot(5), 1 * ms, 3 * ms, plan);
    BOOST_TEST(*r.sleep_ns(a, slot(5), plan) == 2 * ms - 20 * us);
}

BOOST_AUTO_TEST_CASE(slots_and_lines_are_apart) {
    completion_rhythm r;
    completion_line a;
    completion_line b;
    r.observe(a, slot(0), 1 * ms, plan);
    r.observe(a, slot(7), 5 * ms, plan);
    r.observe(b, slot(0), 9 * ms, plan);
    BOOST_TEST(*r.sleep_ns(a, slot(0), plan) == 1 * ms - 20 * us);
    BOOST_TEST(*r.sleep_ns(a, slot(7), plan) == 5 * ms - 20 * us);
    BOOST_TEST(*r.sleep_ns(b, slot(0), plan) == 9 * ms - 20 * us);
    BOOST_TEST(r.lines() == 2u);
}

BOOST_AUTO_TEST_CASE(the_plan_bounds_the_sleep) {
    completion_rhythm r;
    completion_line a;
    r.observe(a, slot(0), 10 * us, plan);
    BOOST_TEST(*r.sleep_ns(a, slot(0), plan) == 0u); // saturates at zero
    const deadline_plan picky{20 * us, 50 * us, 3 * ms, 8};
    BOOST_TEST(!r.sleep_ns(a, slot(0), picky).has_value()); // under min_sleep
    r.observe(a, slot(1), 10 * ms, picky);
    BOOST_TEST(*r.sleep_ns(a, slot(1), picky) == 3 * ms); // at most max_sleep
}

BOOST_AUTO_TEST_CASE(forget_drops_a_line_and_a_new_line_there_starts_cold) {
    completion_rhythm r;
    auto a = std::make_unique<completion_line>();
    completion_line b;
    r.observe(*a, slot(0), 1 * ms, plan);
    r.observe(b, slot(0), 1 * ms, plan);
    r.forget(*a);
    BOOST_TEST(r.lines() == 1u);
    BOOST_TEST(!r.sleep_ns(*a, slot(0), plan).has_value());
    BOOST_TEST(r.sleep_ns(b, slot(0), plan).has_value());
    r.forget(*a); // twice: nothing
    BOOST_TEST(r.lines() == 1u);
    r.clear();
    BOOST_TEST(r.lines() == 0u);
    BOOST_TEST(!r.sleep_ns(b, slot(0), plan).has_value());
}

BOOST_AUTO_TEST_CASE(past_max_lines_it_starts_over) {
    completion_rhythm r;
    std::vector<completion_line> lines(completion_rhythm::max_lines + 1);
    for (std::size_t i = 0; i < completion_rhythm::max_lines; ++i)
        r.observe(lines[i], slot(0), 1 * ms, plan);
    BOOST_TEST(r.lines() == completion_rhythm::max_lines);
    // A known line adds nothing.
    r.observe(lines[0], slot(1), 1 * ms, plan);
    BOOST_TEST(r.lines() == completion_rhythm::max_lines);
    // One more line: the table starts over with it alone.
    r.observe(lines.back(), slot(0), 2 * ms, plan);
    BOOST_TEST(r.lines() == 1u);
    BOOST_TEST(!r.sleep_ns(lines[0], slot(0), plan).has_value());
    BOOST_TEST(*r.sleep_ns(lines.back(), slot(0), plan) == 2 * ms - 20 * us);
}

constexpr mono_ns at(std::uint64_t ns) noexcept {
    return mono_ns{ns};
}

BOOST_AUTO_TEST_CASE(a_learner_learns_from_predicted_waits_only) {
    rhythm_learner l;
    completion_line a;
    const memory_descriptor d(a, slot(1), 5);
    l.learn(d, std::nullopt, at(10 * ms), plan); // started while nothing was predicted
    BOOST_TEST(l.rhythm().lines() == 0u);
    BOOST_TEST(!l.expected(d, at(1 * ms), plan).has_value());
    l.learn(d, at(1 * ms), at(3 * ms), plan); // took 2 ms
    BOOST_REQUIRE(l.expected(d, at(4 * ms), plan).has_value());
    BOOST_TEST(l.expected(d, at(4 * ms), plan)->ns == 6 * ms - 20 * us);
    BOOST_TEST(!l.expected(d, std::nullopt, plan).has_value());
    l.forget(a);
    BOOST_TEST(l.rhythm().lines() == 0u);
}

BOOST_AUTO_TEST_CASE(after_a_late_sleep_the_first_scan_learns_between_the_two_looks) {
    rhythm_learner l;
    completion_line a;
    const memory_descriptor d(a, slot(0), 5);
    l.learn(d, at(1 * ms), at(11 * ms), plan); // 10 ms
    // Slept from 5 ms after its start; the device outran the sleep: the sample is the middle
    // of [4 ms, 10 ms] for a wait started at 1 ms and seen at 12 ms.
    l.slept_late(at(5 * ms));
    l.learn(d, at(1 * ms), at(12 * ms), plan);
    BOOST_TEST(*l.rhythm().sleep_ns(a, slot(0), plan) == 7 * ms - 20 * us);
    // Only the first scan after the sleep: the next sample is a plain one.
    l.scanned();
    l.learn(d, at(1 * ms), at(3 * ms), plan);
    BOOST_TEST(*l.rhythm().sleep_ns(a, slot(0), plan) == 2 * ms - 20 * us);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_core_completion_rhythm
