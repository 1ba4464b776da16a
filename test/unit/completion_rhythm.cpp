// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/core/completion_rhythm.hpp>
#include <gpu_async/core/watch_table.hpp>

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <limits>
#include <optional>

using namespace gpu_async;

namespace {

constexpr std::uint64_t us = 1000;

mono_ns at_us(std::uint64_t t) {
    return mono_ns{t * us};
}

/// Launch-then-wait: a wait registered at `start`, the slot advancing `len` later.
void cycle(slot_rhythm& r, std::uint64_t start_us, std::uint64_t len_us) {
    r.armed(at_us(start_us));
    r.advanced(at_us(start_us + len_us));
}

} // namespace

BOOST_AUTO_TEST_SUITE(completion_rhythm)

BOOST_AUTO_TEST_CASE(no_window_before_enough_samples) {
    slot_rhythm r;
    BOOST_TEST(!r.expected(dur_ns::max()).has_value());
    std::uint64_t t = 100;
    for (std::size_t i = 0; i + 1 < slot_rhythm::min_samples; ++i) {
        cycle(r, t, 1000);
        t += 1010;
    }
    BOOST_TEST(r.samples() == slot_rhythm::min_samples - 1);
    r.armed(at_us(t));
    BOOST_TEST(!r.expected(dur_ns::max()).has_value());
    r.advanced(at_us(t + 1000));
    BOOST_TEST(r.samples() == slot_rhythm::min_samples);
    r.armed(at_us(t + 1005));
    const std::optional<expected_window> w = r.expected(dur_ns::max());
    BOOST_REQUIRE(w.has_value());
    BOOST_TEST(w->earliest.ns == (t + 1005 + 1000) * us);
    BOOST_TEST(w->latest.ns == (t + 1005 + 1000) * us);
}

BOOST_AUTO_TEST_CASE(window_spans_the_shortest_and_longest_samples_but_one_outlier) {
    slot_rhythm r;
    // 1300: one completion seen late; the window ignores the longest sample.
    const std::uint64_t lens[] = {1000, 990, 1300, 1020, 1005, 1010};
    std::uint64_t t = 0;
    for (const std::uint64_t len : lens) {
        cycle(r, t, len);
        t += len + 7; // the handler's latency before the next launch: not part of a sample
    }
    r.armed(at_us(t));
    const std::optional<expected_window> w = r.expected(dur_ns::from_us(30));
    BOOST_REQUIRE(w.has_value());
    BOOST_TEST(w->earliest.ns == (t + 990) * us);
    BOOST_TEST(w->latest.ns == (t + 1020) * us);
    // A spread of 30 us is not within 29 us: no rhythm worth polling for.
    BOOST_TEST(!r.expected(dur_ns::from_us(29)).has_value());
    // Two late ones are no outlier: the window widens to the second.
    cycle(r, t, 1250);
    t += 1260;
    r.armed(at_us(t));
    const std::optional<expected_window> wide = r.expected(dur_ns::max());
    BOOST_REQUIRE(wide.has_value());
    BOOST_TEST(wide->earliest.ns == (t + 990) * us);
    BOOST_TEST(wide->latest.ns == (t + 1250) * us);
}

BOOST_AUTO_TEST_CASE(only_the_last_window_samples_count) {
    slot_rhythm r;
    std::uint64_t t = 0;
    cycle(r, t, 5000); // an outlier, pushed out by the next `window` samples
    t += 6000;
    for (std::size_t i = 0; i < slot_rhythm::window; ++i) {
        cycle(r, t, 1000);
        t += 1100;
    }
    BOOST_TEST(r.samples() == slot_rhythm::window);
    r.armed(at_us(t));
    const std::optional<expected_window> w = r.expected(dur_ns{});
    BOOST_REQUIRE(w.has_value());
    BOOST_TEST(w->earliest.ns == (t + 1000) * us);
}

BOOST_AUTO_TEST_CASE(pipelined_stream_measures_from_the_last_advance) {
    // Waits registered ahead (no registration between advances): each interval runs from the
    // previous advance.
    slot_rhythm r;
    r.armed(at_us(0));
    for (std::uint64_t k = 1; k <= 6; ++k)
        r.advanced(at_us(k * 500));
    BOOST_TEST(r.samples() == 6U);
    const std::optional<expected_window> w = r.expected(dur_ns{});
    BOOST_REQUIRE(w.has_value());
    BOOST_TEST(w->earliest.ns == 3500 * us);
    BOOST_TEST(w->latest.ns == 3500 * us);
}

BOOST_AUTO_TEST_CASE(several_waits_reached_by_one_scan_count_once) {
    slot_rhythm r;
    std::uint64_t t = 0;
    for (int i = 0; i < 4; ++i) {
        r.armed(at_us(t));
        r.advanced(at_us(t + 200));
        r.advanced(at_us(t + 200)); // a second wait of the slot, same scan
        r.advanced(at_us(t + 200));
        t += 300;
    }
    BOOST_TEST(r.samples() == 4U);
    r.armed(at_us(t));
    const std::optional<expected_window> w = r.expected(dur_ns{});
    BOOST_REQUIRE(w.has_value());
    BOOST_TEST(w->earliest.ns == (t + 200) * us);
}

BOOST_AUTO_TEST_CASE(a_registration_while_one_runs_keeps_its_start) {
    slot_rhythm r;
    std::uint64_t t = 0;
    for (int i = 0; i < 4; ++i) {
        r.armed(at_us(t));
        r.armed(at_us(t + 50)); // a second wait on the same slot: the interval runs from t
        r.advanced(at_us(t + 400));
        t += 500;
    }
    r.armed(at_us(t));
    const std::optional<expected_window> w = r.expected(dur_ns{});
    BOOST_REQUIRE(w.has_value());
    BOOST_TEST(w->earliest.ns == (t + 400) * us);
}

BOOST_AUTO_TEST_CASE(window_end_saturates) {
    slot_rhythm r;
    constexpr std::uint64_t big = std::numeric_limits<std::uint64_t>::max() / 2;
    for (std::uint64_t i = 0; i < 4; ++i) {
        r.armed(mono_ns{i});
        r.advanced(mono_ns{big + i});
    }
    r.armed(mono_ns{big + 10});
    const std::optional<expected_window> w = r.expected(dur_ns::max());
    BOOST_REQUIRE(w.has_value());
    BOOST_TEST(w->latest.ns == std::numeric_limits<std::uint64_t>::max());
}

BOOST_AUTO_TEST_CASE(an_advance_ends_at_the_last_look_that_found_nothing) {
    slot_rhythm r;
    std::uint64_t t = 0;
    for (int i = 0; i < 4; ++i) {
        r.armed(at_us(t));
        // Seen 1000 us after the start; the last look that found nothing was at 980 us.
        r.advanced(at_us(t + 1000), at_us(t + 980), dur_ns::from_us(50));
        t += 1100;
    }
    BOOST_TEST(r.samples() == 4U);
    r.armed(at_us(t));
    std::optional<expected_window> w = r.expected(dur_ns{});
    BOOST_REQUIRE(w.has_value());
    BOOST_TEST(w->earliest.ns == (t + 980) * us);
    // Known only within 400 us (a long sleep): no sample, but the next interval starts at the
    // lower end.
    r.advanced(at_us(t + 1500), at_us(t + 1100), dur_ns::from_us(50));
    BOOST_TEST(r.samples() == 4U);
    // A last look before the interval's start bounds nothing: the start does.
    r.armed(at_us(t + 2000));
    r.advanced(at_us(t + 2990), at_us(t + 10), dur_ns::from_us(50));
    BOOST_TEST(r.samples() == 4U); // known within 990 us only
    r.armed(at_us(t + 4000));
    r.advanced(at_us(t + 4030), at_us(t + 10), dur_ns::from_us(50));
    BOOST_TEST(r.samples() == 5U); // within 30 us: the sample is 0, at the start
    r.armed(at_us(t + 5000));
    w = r.expected(dur_ns::max());
    BOOST_REQUIRE(w.has_value());
    BOOST_TEST(w->earliest.ns == (t + 5000) * us);
}

BOOST_AUTO_TEST_CASE(schedule_without_windows_sleeps_one_step) {
    const poll_schedule ps(at_us(1000), dur_ns::from_us(20), dur_ns::from_us(10),
                           dur_ns::from_us(40));
    BOOST_TEST(!ps.chosen().has_value());
    const poll_move m = ps.move();
    BOOST_TEST((m.kind == poll_move::kind_type::sleep));
    BOOST_TEST(m.until.ns == 1020 * us);
}

BOOST_AUTO_TEST_CASE(schedule_sleeps_to_the_earliest_window_less_the_margin) {
    poll_schedule ps(at_us(1000), dur_ns::from_us(100), dur_ns::from_us(10), dur_ns::from_us(40));
    ps.add({at_us(1080), at_us(1090)});
    ps.add({at_us(1050), at_us(1060)}); // starts first: chosen
    ps.add({at_us(1300), at_us(1310)});
    const poll_move m = ps.move();
    BOOST_TEST((m.kind == poll_move::kind_type::sleep));
    BOOST_TEST(m.until.ns == 1040 * us);
    BOOST_REQUIRE(ps.chosen().has_value());
    BOOST_TEST(ps.chosen()->earliest.ns == 1040 * us);
    BOOST_TEST(ps.chosen()->latest.ns == 1070 * us);
}

BOOST_AUTO_TEST_CASE(schedule_sleeps_to_a_far_window_when_every_slot_has_one) {
    poll_schedule ps(at_us(1000), dur_ns::from_us(20), dur_ns::from_us(10), dur_ns::from_us(40));
    ps.add({at_us(2000), at_us(2010)});
    ps.add({at_us(3000), at_us(3010)});
    BOOST_TEST(!ps.any_unpredicted());
    const poll_move m = ps.move();
    BOOST_TEST((m.kind == poll_move::kind_type::sleep));
    BOOST_TEST(m.until.ns == 1990 * us);
}

BOOST_AUTO_TEST_CASE(schedule_steps_while_a_slot_has_no_window) {
    poll_schedule ps(at_us(1000), dur_ns::from_us(20), dur_ns::from_us(10), dur_ns::from_us(40));
    ps.add({at_us(2000), at_us(2010)});
    ps.add_unpredicted();
    BOOST_TEST(ps.any_unpredicted());
    poll_move m = ps.move();
    BOOST_TEST((m.kind == poll_move::kind_type::sleep));
    BOOST_TEST(m.until.ns == 1020 * us);
    // A window over counts as a slot without one (the slot is late).
    poll_schedule late(at_us(1000), dur_ns::from_us(20), dur_ns::from_us(10), dur_ns::from_us(40));
    late.add({at_us(2000), at_us(2010)});
    late.add({at_us(900), at_us(950)});
    BOOST_TEST(late.any_unpredicted());
    m = late.move();
    BOOST_TEST(m.until.ns == 1020 * us);
    // A window that opens before the step ends is slept to.
    poll_schedule near(at_us(1000), dur_ns::from_us(20), dur_ns::from_us(10), dur_ns::from_us(40));
    near.add({at_us(1015), at_us(1016)});
    near.add_unpredicted();
    BOOST_TEST(near.move().until.ns == 1005 * us);
}

BOOST_AUTO_TEST_CASE(schedule_polls_inside_a_window_clipped_to_the_budget) {
    poll_schedule ps(at_us(1000), dur_ns::from_us(20), dur_ns::from_us(5), dur_ns::from_us(30));
    ps.add({at_us(1000), at_us(1100)}); // 995..1105 widened, clipped to 995..1025
    const poll_move m = ps.move();
    BOOST_TEST((m.kind == poll_move::kind_type::poll));
    BOOST_TEST(m.until.ns == 1025 * us);
}

BOOST_AUTO_TEST_CASE(schedule_skips_windows_already_over) {
    poll_schedule ps(at_us(1000), dur_ns::from_us(20), dur_ns::from_us(5), dur_ns::from_us(30));
    ps.add({at_us(900), at_us(990)}); // ends (widened) at 995: over
    BOOST_TEST(!ps.chosen().has_value());
    ps.add({at_us(1002), at_us(1004)}); // 997..1009: open now
    const poll_move m = ps.move();
    BOOST_TEST((m.kind == poll_move::kind_type::poll));
    BOOST_TEST(m.until.ns == 1009 * us);
}

BOOST_AUTO_TEST_CASE(schedule_margin_saturates_at_zero) {
    poll_schedule ps(mono_ns{0}, dur_ns::from_us(20), dur_ns::from_us(10), dur_ns::max());
    ps.add({mono_ns{3 * us}, mono_ns{std::numeric_limits<std::uint64_t>::max() - 1}});
    BOOST_REQUIRE(ps.chosen().has_value());
    BOOST_TEST(ps.chosen()->earliest.ns == 0U);
    BOOST_TEST(ps.chosen()->latest.ns == std::numeric_limits<std::uint64_t>::max());
    BOOST_TEST((ps.move().kind == poll_move::kind_type::poll));
}

BOOST_AUTO_TEST_CASE(watch_table_reports_watched_slots) {
    completion_line line;
    watch_table<int> table;
    BOOST_TEST(!table.watched(line, *slot_id::at(2)));
    const auto sink = [](int, watch_end) {};
    const std::optional<watch_table<int>::handle> h =
        table.insert(memory_descriptor(line, *slot_id::at(2), 5), 1, sink);
    BOOST_REQUIRE(h.has_value());
    BOOST_TEST(table.watched(line, *slot_id::at(2)));
    BOOST_TEST(!table.watched(line, *slot_id::at(3)));
    BOOST_TEST(table.watched_slots() == 1U);
    completion_line other;
    const std::optional<watch_table<int>::handle> h2 =
        table.insert(memory_descriptor(line, *slot_id::at(2), 6), 2, sink);
    const std::optional<watch_table<int>::handle> h3 =
        table.insert(memory_descriptor(other, *slot_id::at(7), 1), 3, sink);
    BOOST_REQUIRE(h2.has_value());
    BOOST_REQUIRE(h3.has_value());
    BOOST_TEST(table.watched_slots() == 2U); // two waits on one slot count once
    table.erase(*h);
    BOOST_TEST(table.watched(line, *slot_id::at(2))); // h2 is still there
    table.erase(*h2);
    BOOST_TEST(!table.watched(line, *slot_id::at(2)));
    BOOST_TEST(table.watched_slots() == 1U);
    table.erase(*h3);
    BOOST_TEST(table.watched_slots() == 0U);
}

BOOST_AUTO_TEST_SUITE_END()
