// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/core/park_policy.hpp>
#include <gpu_async/core/time.hpp>

#include <boost/test/unit_test.hpp>

#include <optional>
#include <vector>

namespace unit_core_park_policy {

using namespace gpu_async;

namespace {

using step = park_policy::step;

/// The expected completions of the pending waits, as the service hands them to the policy.
struct expectations {
    std::vector<std::optional<mono_ns>> at;
    void operator()(auto&& each) const {
        for (const auto& a : at)
            each(a);
    }
};

} // namespace

BOOST_AUTO_TEST_SUITE(park_policy_suite)

BOOST_AUTO_TEST_CASE(
    the_top_of_a_pass_posts_retries_first_then_idles_for_a_caller_then_stands_back) {
    const auto top = [](bool retries, bool caller, bool drains) {
        park_policy::view v;
        v.retries = retries;
        v.caller_drives = caller;
        v.drains_out = drains;
        v.found = true; // what a scan would find does not count before the scan
        v.pending = true;
        return park_policy::next(v);
    };
    BOOST_TEST((top(true, true, true) == step::post_retries));
    BOOST_TEST((top(false, true, true) == step::idle));
    BOOST_TEST((top(false, false, true) == step::stand_back));
    BOOST_TEST((top(false, false, false) == step::scan));
}

BOOST_AUTO_TEST_CASE(after_a_scan_found_waits_go_out_before_any_park) {
    const auto after_scan = [](bool found, bool pending, bool deadlines) {
        park_policy::view v;
        v.scanned = true;
        v.retries = true; // the top of a pass's concerns do not count after the scan
        v.caller_drives = true;
        v.drains_out = true;
        v.found = found;
        v.pending = pending;
        v.deadlines = deadlines;
        return park_policy::next(v);
    };
    BOOST_TEST((after_scan(true, true, true) == step::deliver));
    BOOST_TEST((after_scan(true, false, false) == step::deliver));
    BOOST_TEST((after_scan(false, true, true) == step::park));
    BOOST_TEST((after_scan(false, true, false) == step::park));
    BOOST_TEST((after_scan(false, false, true) == step::sleep));
    BOOST_TEST((after_scan(false, false, false) == step::idle));
}

BOOST_AUTO_TEST_CASE(a_park_never_passes_the_earliest_deadline) {
    manual_clock clock;
    clock.advance(dur_ns::from_ms(1));
    const mono_ns now = clock.now();
    const dur_ns pb = dur_ns::from_us(100);
    BOOST_TEST(park_policy::park_for(now, pb, std::nullopt).ns == pb.ns);
    BOOST_TEST(park_policy::park_for(now, pb, now.after(dur_ns::from_us(40))).ns ==
               dur_ns::from_us(40).ns);
    BOOST_TEST(park_policy::park_for(now, pb, now.after(dur_ns::from_us(400))).ns == pb.ns);
    // A deadline already passed: no park at all.
    clock.advance(dur_ns::from_us(50));
    BOOST_TEST(park_policy::park_for(clock.now(), pb, now).ns == 0u);
}

BOOST_AUTO_TEST_CASE(a_stand_back_lasts_ten_park_bounds_at_most_and_never_past_a_deadline) {
    manual_clock clock;
    clock.advance(dur_ns::from_ms(1));
    const mono_ns now = clock.now();
    const dur_ns pb = dur_ns::from_us(100);
    const auto none = [](dur_ns b) { return b; };
    const auto w = park_policy::stand_back(now, pb, none);
    BOOST_TEST(w.round.ns == pb.ns);
    BOOST_TEST(w.until.ns == now.after(dur_ns::from_ms(1)).ns);
    // A deadline 250 us away shortens both.
    const mono_ns deadline = now.after(dur_ns::from_us(250));
    const auto to_deadline = [&](dur_ns b) { return min(b, deadline.since(now)); };
    const auto d = park_policy::stand_back(now, pb, to_deadline);
    BOOST_TEST(d.round.ns == pb.ns);
    BOOST_TEST(d.until.ns == deadline.ns);
    // A huge park bound saturates instead of wrapping.
    const auto big = park_policy::stand_back(now, dur_ns{~std::uint64_t{0} / 2}, none);
    BOOST_TEST(big.until.ns >= now.ns);
    // It goes on only while the drains progress, nothing ends it, and the window is open.
    BOOST_TEST(park_policy::stand_back_again(1, 2, false, now, w.until));
    BOOST_TEST(!park_policy::stand_back_again(2, 2, false, now, w.until));
    BOOST_TEST(!park_policy::stand_back_again(1, 2, true, now, w.until));
    BOOST_TEST(!park_policy::stand_back_again(1, 2, false, w.until, w.until));
}

BOOST_AUTO_TEST_CASE(a_predicted_sleep_needs_every_wait_learnt_and_a_park_that_can_step) {
    const mono_ns now{1'000'000};
    const dur_ns bound = dur_ns::from_us(100);
    const dur_ns poll = dur_ns::from_us(5);
    const expectations learnt{{now.after(dur_ns::from_us(60)), now.after(dur_ns::from_us(80))}};
    // Sleep to the earliest, then poll for two intervals.
    const auto p = park_policy::predicted_sleep(now, bound, poll, 2, true, learnt);
    BOOST_REQUIRE(p.has_value());
    BOOST_TEST(p->sleep.ns == dur_ns::from_us(60).ns);
    BOOST_TEST(p->poll.ns == dur_ns::from_us(10).ns);
    // One wait not learnt: step.
    const expectations one_unknown{{now.after(dur_ns::from_us(60)), std::nullopt}};
    BOOST_TEST(!park_policy::predicted_sleep(now, bound, poll, 2, true, one_unknown));
    // Not predicting, nothing pending, too many pending, a poll as long as the bound: step.
    BOOST_TEST(!park_policy::predicted_sleep(now, bound, poll, 2, false, learnt));
    BOOST_TEST(!park_policy::predicted_sleep(now, bound, poll, 0, true, learnt));
    BOOST_TEST(!park_policy::predicted_sleep(now, bound, poll, park_policy::predict_max_pending + 1,
                                             true, learnt));
    BOOST_TEST(!park_policy::predicted_sleep(now, bound, bound, 2, true, learnt));
    // Due within two polls: not worth a sleep.
    const expectations soon{{now.after(dur_ns::from_us(10))}};
    BOOST_TEST(!park_policy::predicted_sleep(now, bound, poll, 1, true, soon));
    // Past the bound: sleep the whole bound, no poll.
    const expectations late{{now.after(dur_ns::from_us(500))}};
    const auto q = park_policy::predicted_sleep(now, bound, poll, 1, true, late);
    BOOST_REQUIRE(q.has_value());
    BOOST_TEST(q->sleep.ns == bound.ns);
    BOOST_TEST(q->poll.ns == 0u);
    // Close to the bound: the poll stops at the bound.
    const expectations near{{now.after(dur_ns::from_us(95))}};
    const auto r = park_policy::predicted_sleep(now, bound, poll, 1, true, near);
    BOOST_REQUIRE(r.has_value());
    BOOST_TEST(r->poll.ns == dur_ns::from_us(5).ns);
}

BOOST_AUTO_TEST_CASE(two_polls_saturate) {
    BOOST_TEST(park_policy::two_polls(dur_ns{7}).ns == 14u);
    BOOST_TEST(park_policy::two_polls(dur_ns{~std::uint64_t{0}}).ns == ~std::uint64_t{0});
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_core_park_policy
