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

BOOST_AUTO_TEST_CASE(a_stand_back_lasts_the_tunings_park_bounds_at_most_and_never_past_a_deadline) {
    manual_clock clock;
    clock.advance(dur_ns::from_ms(1));
    const mono_ns now = clock.now();
    const dur_ns pb = dur_ns::from_us(100);
    const auto none = [](dur_ns b) { return b; };
    const auto w = park_policy::stand_back(now, pb, none);
    BOOST_TEST(w.round.ns == pb.ns);
    // A hundred park bounds by default: long enough for a drain of a large batch to end.
    BOOST_TEST(default_wait_tuning.stand_back_bounds == 100u);
    BOOST_TEST(w.until.ns == now.after(dur_ns::from_ms(10)).ns);
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
    BOOST_TEST(!park_policy::predicted_sleep(
        now, bound, poll, default_wait_tuning.predict_max_pending + 1, true, learnt));
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

BOOST_AUTO_TEST_CASE(nothing_registered_idles_at_the_top_of_a_pass) {
    park_policy::view v;
    v.empty = true;
    BOOST_TEST((park_policy::next(v) == step::idle));
    v.retries = true; // drains to post still go first
    BOOST_TEST((park_policy::next(v) == step::post_retries));
}

using kind = park_policy::park_kind;

BOOST_AUTO_TEST_CASE(a_park_takes_the_monitor_a_sleep_or_device_poll_steps) {
    const dur_ns bound = dur_ns::from_us(100);
    const dur_ns spin = default_wait_tuning.spin;
    const dur_ns poll = default_wait_tuning.device_poll;
    BOOST_TEST((park_policy::park(dur_ns{}, false, true, true, spin, poll).kind == kind::none));
    BOOST_TEST((park_policy::park(bound, true, true, true, spin, poll) ==
                park_policy::park_shape{kind::monitor, {}, bound}));
    // Nothing watched, or no device producer: every wake is a ring, one futex sleep does.
    BOOST_TEST((park_policy::park(bound, false, false, true, spin, poll) ==
                park_policy::park_shape{kind::sleep, spin, bound}));
    BOOST_TEST((park_policy::park(bound, false, true, false, spin, poll) ==
                park_policy::park_shape{kind::sleep, spin, bound}));
    BOOST_TEST((park_policy::park(bound, false, true, true, spin, poll) ==
                park_policy::park_shape{kind::steps, spin, poll}));
    // A zero poll steps by 1 ns, never by zero.
    BOOST_TEST(park_policy::park(bound, false, true, true, spin, dur_ns{}).step.ns == 1u);
}

BOOST_AUTO_TEST_CASE(the_spin_follows_the_ring_rate_once_per_window) {
    const wait_tuning& t = default_wait_tuning;
    const mono_ns start{5'000'000};
    const park_policy::ring_window w{start, 100};
    const dur_ns spin = t.spin;
    // The window is still open: no decision.
    BOOST_TEST(
        !park_policy::spin_for_rings(start.after(t.ring_rate_window - dur_ns{1}), w, 900, spin));
    const mono_ns end = start.after(t.ring_rate_window);
    const std::uint64_t per_window = t.ring_rate_window.ns / t.busy_gap.ns; // dense at this rate
    BOOST_TEST(park_policy::spin_for_rings(end, w, 100 + per_window, spin)->ns == t.busy_spin.ns);
    // Between the two gaps the spin stays as it is, either way.
    const std::uint64_t between = t.ring_rate_window.ns / (t.busy_gap.ns * 3 / 2);
    BOOST_TEST(park_policy::spin_for_rings(end, w, 100 + between, t.busy_spin)->ns ==
               t.busy_spin.ns);
    BOOST_TEST(park_policy::spin_for_rings(end, w, 100 + between, spin)->ns == spin.ns);
    // Sparse, or no ring at all: back to the short spin.
    const std::uint64_t sparse = t.ring_rate_window.ns / (t.busy_gap.ns * 3);
    BOOST_TEST(park_policy::spin_for_rings(end, w, 100 + sparse, t.busy_spin)->ns == spin.ns);
    BOOST_TEST(park_policy::spin_for_rings(end, w, 100, t.busy_spin)->ns == spin.ns);
    BOOST_TEST(park_policy::dense(t.busy_spin));
    BOOST_TEST(!park_policy::dense(spin));
}

BOOST_AUTO_TEST_CASE(a_replay_of_ring_rates_on_virtual_time) {
    // A waiter that parks every 100 us, with rings every 10 us for 3 ms, then every 200 us:
    // dense from the end of the first window, short again at the first window after the change.
    const wait_tuning& t = default_wait_tuning;
    mono_ns now{1'000'000'000};
    park_policy::ring_window w{now, 0};
    dur_ns spin = t.spin;
    std::uint64_t rings = 0;
    std::vector<bool> dense_at_ms;
    for (int us = 0; us < 6000; us += 100) {
        rings += us < 3000 ? 10 : (us % 200 == 0 ? 1 : 0);
        now = now.after(dur_ns::from_us(100));
        if (const auto s = park_policy::spin_for_rings(now, w, rings, spin)) {
            spin = *s;
            w = {now, rings};
            dense_at_ms.push_back(park_policy::dense(spin));
        }
    }
    const std::vector<bool> expected{true, true, true, false, false, false};
    BOOST_TEST(dense_at_ms == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_registration_is_urgent_only_within_one_park_bound) {
    const mono_ns now{1'000'000};
    const dur_ns pb = dur_ns::from_us(100);
    BOOST_TEST(!park_policy::urgent(dur_ns{}, std::nullopt, now, pb));
    BOOST_TEST(!park_policy::urgent(pb, std::nullopt, now, pb));
    BOOST_TEST(park_policy::urgent(pb - dur_ns{1}, std::nullopt, now, pb));
    BOOST_TEST(park_policy::urgent(dur_ns{}, now.after(pb - dur_ns{1}), now, pb));
    BOOST_TEST(!park_policy::urgent(dur_ns{}, now.after(pb), now, pb));
    BOOST_TEST(park_policy::urgent(dur_ns{}, now, now, pb)); // due now
}

BOOST_AUTO_TEST_CASE(a_waiter_predicts_only_when_a_store_cannot_wake_it_and_it_can_step) {
    const dur_ns poll = dur_ns::from_us(20);
    const dur_ns bound = dur_ns::from_us(100);
    BOOST_TEST(park_policy::predicts(true, true, false, poll, bound));
    BOOST_TEST(!park_policy::predicts(false, true, false, poll, bound)); // turned off
    BOOST_TEST(!park_policy::predicts(true, false, false, poll, bound)); // every producer rings
    BOOST_TEST(!park_policy::predicts(true, true, true, poll, bound));   // the monitor sees it
    BOOST_TEST(!park_policy::predicts(true, true, false, bound, bound)); // no step fits
}

BOOST_AUTO_TEST_CASE(who_scans_and_when) {
    BOOST_TEST(!park_policy::drain_scans(false, false));
    BOOST_TEST(park_policy::drain_scans(true, false));
    BOOST_TEST(park_policy::drain_scans(false, true));
    const mono_ns last{10'000};
    const dur_ns pb = dur_ns::from_us(100);
    BOOST_TEST(!park_policy::scan_due(last.after(pb - dur_ns{1}), last, pb));
    BOOST_TEST(park_policy::scan_due(last.after(pb), last, pb));
}

BOOST_AUTO_TEST_CASE(a_stand_back_round_spins_first_and_sleeps_only_while_dense) {
    const wait_tuning& t = default_wait_tuning;
    const dur_ns poll = dur_ns::from_us(20);
    const auto r = park_policy::stand_back_round(true, t.busy_spin, false, poll);
    BOOST_TEST(r.spin.ns == t.stand_back_spin.ns); // capped
    BOOST_TEST(r.sleep);
    BOOST_TEST(r.round.ns == t.longest_sleep.ns);
    BOOST_TEST(park_policy::stand_back_round(true, t.busy_spin, true, poll).round.ns == poll.ns);
    const auto sparse = park_policy::stand_back_round(true, t.spin, true, poll);
    BOOST_TEST(sparse.spin.ns == t.spin.ns);
    BOOST_TEST(!sparse.sleep);
    BOOST_TEST(park_policy::stand_back_round(false, t.busy_spin, false, poll).spin.ns == 0u);
}

BOOST_AUTO_TEST_CASE(a_tuning_of_its_own_changes_every_decision_that_reads_it) {
    wait_tuning t;
    t.stand_back_bounds = 3;
    t.busy_spin = dur_ns::from_us(50);
    t.device_poll = dur_ns::from_us(40);
    const mono_ns now{0};
    const dur_ns pb = dur_ns::from_us(100);
    const auto w = park_policy::stand_back(
        now, pb, [](dur_ns b) { return b; }, t);
    BOOST_TEST(w.until.ns == dur_ns::from_us(300).ns);
    BOOST_TEST(park_policy::dense(dur_ns::from_us(50), t));
    // A 30 us poll is at or under this tuning's default poll: it spins first.
    BOOST_TEST(park_policy::park(pb, false, true, true, t.spin, dur_ns::from_us(30), t).spin.ns ==
               t.spin.ns);
    t.predict_max_pending = 1;
    const expectations two{{now.after(dur_ns::from_us(60)), now.after(dur_ns::from_us(70))}};
    BOOST_TEST(!park_policy::predicted_sleep(now, pb, dur_ns::from_us(5), 2, true, two, t));
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_core_park_policy
