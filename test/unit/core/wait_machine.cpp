// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/core/wait_machine.hpp>

#include "common/fake_source.hpp"
#include "common/virtual_time.hpp"

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <optional>
#include <random>
#include <system_error>
#include <vector>

namespace unit_core_wait_machine {

using namespace gpu_async;
using gpu_async::test::at_us;
using gpu_async::test::fake_source;
using gpu_async::test::us;
using act = wait_action::type;

namespace {

constexpr deadline_plan predict{150'000, 20'000, 50'000'000, 8};

wait_plan poll_plan() {
    return wait_plan::poll().value();
}
wait_plan poll_predict() {
    return wait_plan::poll(predict).value();
}
wait_plan flag_plan() {
    return wait_plan::flag(100'000, 1'000'000).value();
}
wait_plan flag_predict() {
    return wait_plan::flag(100'000, 1'000'000, predict).value();
}

const std::error_code device_error = std::make_error_code(std::errc::io_error);

// Answers to a query, built as a host builds them: the source's query_result, stamped.
wait_event query_done(mono_ns now) {
    return wait_event::queried(query_result::done(), now);
}
wait_event query_pending(mono_ns now) {
    return wait_event::queried(query_result::pending(), now);
}
wait_event query_failed(std::error_code ec, mono_ns now) {
    return wait_event::queried(query_result::failed(ec), now);
}

// A flag plan without prediction started at 0, its first query pending and its word armed:
// the action after the arm (a park).
wait_action start_armed_flag(wait_machine& m) {
    m.start(flag_plan(), std::nullopt, at_us(0));
    m.on_event(query_pending(at_us(0)));
    return m.on_event(wait_event::armed({}, at_us(0)));
}

} // namespace

BOOST_AUTO_TEST_SUITE(wait_machine_suite)

// --- the machine alone, event by event ------------------------------------------------------

BOOST_AUTO_TEST_CASE(block_plan_runs_the_blocking_wait_and_nothing_else) {
    wait_machine m;
    wait_action a = m.start(wait_plan::block(), 5'000'000, at_us(10));
    BOOST_TEST((a.kind == act::block));
    a = m.on_event(wait_event::blocked({}, at_us(510)));
    BOOST_TEST((a.kind == act::done));
    BOOST_TEST(m.finished());
    BOOST_TEST((a.report.kind == wait_kind::blocked));
    BOOST_TEST(!a.report.outcome.has_value());
    BOOST_TEST(a.report.total.count() == 500'000u);
    BOOST_TEST(a.report.slept.count() == 0u);
    BOOST_TEST(a.report.parks == 0u);
    BOOST_TEST(a.report.backstop_queries == 0u);
}

BOOST_AUTO_TEST_CASE(block_error_ends_the_wait_unchanged) {
    wait_machine m;
    m.start(wait_plan::block(), std::nullopt, at_us(0));
    const wait_action a = m.on_event(wait_event::blocked(device_error, at_us(1)));
    BOOST_TEST((a.kind == act::failed));
    BOOST_TEST((a.error == device_error));
}

BOOST_AUTO_TEST_CASE(immediate_done_is_an_exact_residual) {
    for (const wait_plan& p : {poll_plan(), poll_predict(), flag_plan(), flag_predict()}) {
        wait_machine m;
        wait_action a = m.start(p, 1'000'000, at_us(100));
        BOOST_TEST((a.kind == act::query));
        a = m.on_event(query_done(mono_ns{100'000 + 300}));
        BOOST_TEST((a.kind == act::done));
        BOOST_TEST((a.report.kind == wait_kind::immediate));
        BOOST_TEST((a.report.outcome == outcome::exact(300)));
        BOOST_TEST(a.report.total.count() == 300u);
    }
}

BOOST_AUTO_TEST_CASE(late_wake_reports_a_late_outcome_with_the_overshoot) {
    wait_machine m;
    wait_action a = m.start(poll_predict(), 1'000'000, at_us(0));
    BOOST_TEST((a.kind == act::query));
    a = m.on_event(query_pending(at_us(1)));
    BOOST_TEST((a.kind == act::sleep_until));
    BOOST_TEST((a.at == at_us(1000)));
    // The timer overshoots by 200 us.
    a = m.on_event(wait_event::slept(at_us(1200)));
    BOOST_TEST((a.kind == act::query));
    a = m.on_event(query_done(at_us(1201)));
    BOOST_TEST((a.kind == act::done));
    BOOST_TEST((a.report.kind == wait_kind::late));
    BOOST_TEST((a.report.outcome == outcome::late(1'201'000)));
    BOOST_TEST(a.report.slept.count() == 1'199'000u);
    BOOST_TEST(a.report.total.count() == 1'201'000u);
}

BOOST_AUTO_TEST_CASE(poll_queries_until_done) {
    wait_machine m;
    wait_action a = m.start(poll_plan(), 1'000'000, at_us(0)); // no predict: estimate ignored
    for (std::uint64_t t = 0; t < 50; ++t) {
        BOOST_TEST((a.kind == act::query));
        a = m.on_event(query_pending(at_us(t)));
    }
    BOOST_TEST((a.kind == act::query));
    a = m.on_event(query_done(at_us(50)));
    BOOST_TEST((a.report.kind == wait_kind::parked));
    BOOST_TEST((a.report.outcome == outcome::exact(50'000)));
    BOOST_TEST(a.report.slept.count() == 0u);
    BOOST_TEST(a.report.parks == 0u);
}

BOOST_AUTO_TEST_CASE(predicted_poll_after_sleep_polls_with_exact_outcome) {
    wait_machine m;
    wait_action a = m.start(poll_predict(), 500'000, at_us(0));
    a = m.on_event(query_pending(at_us(0)));
    BOOST_TEST((a.kind == act::sleep_until));
    a = m.on_event(wait_event::slept(at_us(500)));
    a = m.on_event(query_pending(at_us(500)));
    BOOST_TEST((a.kind == act::query));
    a = m.on_event(query_done(at_us(700)));
    BOOST_TEST((a.report.kind == wait_kind::parked));
    BOOST_TEST((a.report.outcome == outcome::exact(700'000)));
    BOOST_TEST(a.report.slept.count() == 500'000u);
}

BOOST_AUTO_TEST_CASE(flag_arms_after_the_immediate_check_and_before_any_sleep) {
    wait_machine m;
    wait_action a = m.start(flag_predict(), 2'000'000, at_us(0));
    BOOST_TEST((a.kind == act::query));
    a = m.on_event(query_pending(at_us(1)));
    BOOST_TEST((a.kind == act::arm));
    a = m.on_event(wait_event::armed({}, at_us(2)));
    BOOST_TEST((a.kind == act::sleep_until));
    BOOST_TEST((a.at == at_us(2000)));
    a = m.on_event(wait_event::slept(at_us(2000)));
    BOOST_TEST((a.kind == act::query));
    a = m.on_event(query_pending(at_us(2001)));
    BOOST_TEST((a.kind == act::park));
    BOOST_TEST(a.bound.count() == 100'000u);
    a = m.on_event(wait_event::parked(true, at_us(2050)));
    BOOST_TEST((a.kind == act::query)); // the final query is the authority
    a = m.on_event(query_done(at_us(2051)));
    BOOST_TEST((a.report.kind == wait_kind::parked));
    // The residual is when the word was seen, not when the authority answered.
    BOOST_TEST((a.report.outcome == outcome::exact(2'050'000)));
    BOOST_TEST(a.report.parks == 1u);
    BOOST_TEST(a.report.slept.count() == 1'998'000u);
}

// A host that watches the word while the predicted sleep lasts (a reactor) ends the sleep when the
// word arrives: the late query follows at once, and its answer is the authority.
BOOST_AUTO_TEST_CASE(a_word_seen_during_the_sleep_ends_it_with_the_late_query) {
    wait_machine m;
    wait_action a = m.start(flag_predict(), 2'000'000, at_us(0));
    a = m.on_event(query_pending(at_us(1)));
    a = m.on_event(wait_event::armed({}, at_us(2)));
    BOOST_REQUIRE((a.kind == act::sleep_until));
    // A wake without the word before the sleep's end sleeps again.
    a = m.on_event(wait_event::slept(at_us(700)));
    BOOST_TEST((a.kind == act::sleep_until));
    BOOST_TEST((a.at == at_us(2000)));
    a = m.on_event(wait_event::slept_word_seen(at_us(900)));
    BOOST_TEST((a.kind == act::query));
    a = m.on_event(query_done(at_us(901)));
    BOOST_REQUIRE((a.kind == act::done));
    BOOST_TEST((a.report.kind == wait_kind::late));
    BOOST_TEST(a.report.slept.count() == 898'000u);
    BOOST_TEST(a.report.outcome->is_late());
    // The word seen, the authority still pending: the wait goes on as a flag wait (it parks).
    wait_machine m2;
    a = m2.start(flag_predict(), 2'000'000, at_us(0));
    a = m2.on_event(query_pending(at_us(0)));
    a = m2.on_event(wait_event::armed({}, at_us(0)));
    a = m2.on_event(wait_event::slept_word_seen(at_us(300)));
    BOOST_REQUIRE((a.kind == act::query));
    a = m2.on_event(query_pending(at_us(301)));
    BOOST_TEST((a.kind == act::park));
}

BOOST_AUTO_TEST_CASE(flag_without_prediction_arms_then_parks) {
    wait_machine m;
    wait_action a = m.start(flag_plan(), 2'000'000, at_us(0));
    a = m.on_event(query_pending(at_us(0)));
    BOOST_TEST((a.kind == act::arm));
    a = m.on_event(wait_event::armed({}, at_us(0)));
    BOOST_TEST((a.kind == act::park)); // no prediction: no sleep
}

BOOST_AUTO_TEST_CASE(arm_error_ends_the_wait_unchanged) {
    wait_machine m;
    m.start(flag_predict(), 2'000'000, at_us(0));
    m.on_event(query_pending(at_us(0)));
    const wait_action a = m.on_event(wait_event::armed(device_error, at_us(1)));
    BOOST_TEST((a.kind == act::failed));
    BOOST_TEST((a.error == device_error));
}

BOOST_AUTO_TEST_CASE(backstop_query_at_least_every_backstop_when_the_word_never_comes) {
    wait_machine m;
    wait_action a = start_armed_flag(m);
    std::uint64_t now_us = 0;
    std::uint64_t last_query_us = 0;
    std::uint32_t backstops = 0;
    std::uint32_t parks = 0;
    while (now_us < 10'000) {
        if (a.kind == act::park) {
            BOOST_TEST(a.bound.count() <= 100'000u);
            BOOST_TEST(a.bound.count() > 0u);
            BOOST_TEST(now_us + a.bound.count() / 1000 <= last_query_us + 1000);
            // A host that watches the word continuously parks until the backstop is due.
            BOOST_TEST((a.at == at_us(last_query_us + 1000)));
            now_us += a.bound.count() / 1000;
            ++parks;
            a = m.on_event(wait_event::parked(false, at_us(now_us)));
        } else {
            BOOST_REQUIRE((a.kind == act::query));
            BOOST_TEST(now_us - last_query_us <= 1000u);
            last_query_us = now_us;
            ++backstops;
            a = m.on_event(query_pending(at_us(now_us)));
        }
    }
    BOOST_TEST(backstops == 9u); // at 1, 2, ..., 9 ms; the one due at 10 ms is next
    BOOST_TEST(parks == 100u);
    BOOST_REQUIRE((a.kind == act::query));
    // The status query finally says done although the word never arrived.
    a = m.on_event(query_done(at_us(now_us)));
    BOOST_TEST((a.kind == act::done));
    BOOST_TEST(a.report.backstop_queries == backstops + 1);
    BOOST_TEST(a.report.parks == parks);
    BOOST_TEST((a.report.outcome == outcome::exact(now_us * 1000)));
}

BOOST_AUTO_TEST_CASE(a_host_that_watches_the_word_parks_until_the_backstop_in_one_piece) {
    wait_machine m;
    wait_action a = start_armed_flag(m);
    std::uint32_t parks = 0;
    for (std::uint64_t due_us = 1000; due_us <= 5000; due_us += 1000) {
        BOOST_REQUIRE((a.kind == act::park));
        BOOST_TEST(a.bound.count() == 100'000u); // the piece a host parking in pieces takes
        BOOST_TEST((a.at == at_us(due_us)));     // the end a continuous watch may take
        a = m.on_event(wait_event::parked(false, a.at));
        ++parks;
        BOOST_REQUIRE((a.kind == act::query)); // the backstop, at once
        a = m.on_event(query_pending(at_us(due_us)));
    }
    a = m.on_event(wait_event::parked(true, at_us(5400)));
    BOOST_REQUIRE((a.kind == act::query)); // the word: the final query
    a = m.on_event(query_done(at_us(5410)));
    BOOST_REQUIRE((a.kind == act::done));
    BOOST_TEST(a.report.parks == parks + 1);
    BOOST_TEST(a.report.backstop_queries == parks);
    BOOST_TEST((a.report.outcome == outcome::exact(5'400'000)));
}

BOOST_AUTO_TEST_CASE(a_late_park_is_followed_by_a_backstop_query_at_once) {
    wait_machine m;
    wait_action a = start_armed_flag(m);
    // The host overslept its park by far: the backstop is overdue.
    a = m.on_event(wait_event::parked(false, at_us(5000)));
    BOOST_TEST((a.kind == act::query));
    a = m.on_event(query_pending(at_us(5000)));
    BOOST_TEST((a.kind == act::park));
}

BOOST_AUTO_TEST_CASE(word_seen_but_the_authority_says_pending_keeps_waiting) {
    wait_machine m;
    wait_action a = start_armed_flag(m);
    a = m.on_event(wait_event::parked(true, at_us(10)));
    BOOST_TEST((a.kind == act::query));
    a = m.on_event(query_pending(at_us(11)));
    BOOST_TEST((a.kind == act::park)); // never success on the word alone
    a = m.on_event(wait_event::parked(true, at_us(20)));
    BOOST_TEST((a.kind == act::query));
    a = m.on_event(query_done(at_us(21)));
    BOOST_TEST((a.report.outcome == outcome::exact(20'000)));
    BOOST_TEST(a.report.backstop_queries == 0u);
    BOOST_TEST(a.report.parks == 2u);
}

BOOST_AUTO_TEST_CASE(word_seen_but_the_authority_reports_an_error) {
    wait_machine m;
    wait_action a = start_armed_flag(m);
    a = m.on_event(wait_event::parked(true, at_us(10)));
    a = m.on_event(query_failed(device_error, at_us(11)));
    BOOST_TEST((a.kind == act::failed));
    BOOST_TEST((a.error == device_error));
}

BOOST_AUTO_TEST_CASE(query_errors_end_the_wait_unchanged_at_every_step) {
    // Immediate query.
    {
        wait_machine m;
        m.start(poll_plan(), std::nullopt, at_us(0));
        const auto a = m.on_event(query_failed(device_error, at_us(0)));
        BOOST_TEST((a.error == device_error));
    }
    // Query after the sleep.
    {
        wait_machine m;
        m.start(poll_predict(), 1'000'000, at_us(0));
        m.on_event(query_pending(at_us(0)));
        m.on_event(wait_event::slept(at_us(1000)));
        const auto a = m.on_event(query_failed(device_error, at_us(1000)));
        BOOST_TEST((a.error == device_error));
    }
    // Poll loop.
    {
        wait_machine m;
        m.start(poll_plan(), std::nullopt, at_us(0));
        m.on_event(query_pending(at_us(0)));
        const auto a = m.on_event(query_failed(device_error, at_us(1)));
        BOOST_TEST((a.error == device_error));
    }
    // Backstop query.
    {
        wait_machine m;
        wait_action a = start_armed_flag(m);
        a = m.on_event(wait_event::parked(false, at_us(1000)));
        BOOST_TEST((a.kind == act::query));
        a = m.on_event(query_failed(device_error, at_us(1000)));
        BOOST_TEST((a.error == device_error));
    }
    // An empty code cannot say "failed": the registry's backend code stands in.
    {
        wait_machine m;
        m.start(poll_plan(), std::nullopt, at_us(0));
        const auto a = m.on_event(query_failed({}, at_us(0)));
        BOOST_TEST((a.kind == act::failed));
        BOOST_TEST((a.error == errc::backend));
    }
}

BOOST_AUTO_TEST_CASE(no_sleep_longer_than_the_estimate_allows) {
    // The estimate is capped by the plan's max_sleep.
    {
        wait_machine m;
        m.start(poll_predict(), 900'000'000, at_us(7));
        const auto a = m.on_event(query_pending(at_us(7)));
        BOOST_TEST((a.kind == act::sleep_until));
        BOOST_TEST((a.at == mono_ns{7'000 + 50'000'000}));
    }
    // No estimate (a cold point), or an estimate of zero: no sleep.
    for (const std::optional<std::uint64_t> est :
         {std::optional<std::uint64_t>{}, std::optional<std::uint64_t>{0}}) {
        wait_machine m;
        m.start(poll_predict(), est, at_us(0));
        const auto a = m.on_event(query_pending(at_us(0)));
        BOOST_TEST((a.kind == act::query));
        BOOST_TEST(!m.sleep_deadline().has_value());
    }
    // A sleep whose end has already passed when the query answers is skipped.
    {
        wait_machine m;
        m.start(flag_predict(), 1'000'000, at_us(0));
        m.on_event(query_pending(at_us(900)));
        const auto a = m.on_event(wait_event::armed({}, at_us(1500)));
        BOOST_TEST((a.kind == act::park));
    }
    // A timer that wakes early sleeps again; never a query before the deadline.
    {
        wait_machine m;
        m.start(poll_predict(), 1'000'000, at_us(0));
        auto a = m.on_event(query_pending(at_us(0)));
        a = m.on_event(wait_event::slept(at_us(400)));
        BOOST_TEST((a.kind == act::sleep_until));
        BOOST_TEST((a.at == at_us(1000)));
        a = m.on_event(wait_event::slept(at_us(1000)));
        BOOST_TEST((a.kind == act::query));
        a = m.on_event(query_done(at_us(1000)));
        BOOST_TEST(a.report.slept.count() == 1'000'000u);
    }
}

BOOST_AUTO_TEST_CASE(never_success_from_an_event_that_does_not_answer_the_action) {
    const std::error_code proto = std::make_error_code(std::errc::protocol_error);
    {
        wait_machine m; // not started
        BOOST_TEST((m.on_event(query_done(at_us(0))).error == proto));
    }
    {
        wait_machine m;
        m.start(wait_plan::block(), std::nullopt, at_us(0));
        const auto a = m.on_event(query_done(at_us(0)));
        BOOST_TEST((a.kind == act::failed));
        BOOST_TEST((a.error == proto));
    }
    {
        wait_machine m;
        m.start(poll_plan(), std::nullopt, at_us(0));
        BOOST_TEST((m.on_event(wait_event::blocked({}, at_us(0))).error == proto));
    }
    {
        wait_machine m;
        m.start(flag_plan(), std::nullopt, at_us(0));
        m.on_event(query_pending(at_us(0)));
        // A park that claims the word instead of the arm answer.
        BOOST_TEST((m.on_event(wait_event::parked(true, at_us(0))).error == proto));
    }
    {
        wait_machine m;
        m.start(flag_plan(), std::nullopt, at_us(0));
        m.on_event(query_pending(at_us(0)));
        m.on_event(wait_event::armed({}, at_us(0)));
        BOOST_TEST((m.on_event(query_done(at_us(0))).error == proto));
    }
    {
        wait_machine m;
        m.start(poll_predict(), 1'000'000, at_us(0));
        m.on_event(query_pending(at_us(0)));
        BOOST_TEST((m.on_event(query_done(at_us(1))).error == proto));
    }
    {
        // A finished machine repeats its end.
        wait_machine m;
        m.start(poll_plan(), std::nullopt, at_us(0));
        const auto end = m.on_event(query_done(at_us(3)));
        const auto again = m.on_event(query_failed(device_error, at_us(9)));
        BOOST_TEST((again.kind == act::done));
        BOOST_TEST((again.report == end.report));
    }
}

BOOST_AUTO_TEST_CASE(time_never_goes_backwards_in_the_report) {
    wait_machine m;
    m.start(poll_plan(), std::nullopt, at_us(100));
    m.on_event(query_pending(at_us(200)));
    const auto a = m.on_event(query_done(at_us(150)));
    BOOST_TEST(a.report.total.count() == 100'000u);
    BOOST_TEST((a.report.outcome == outcome::exact(100'000)));
}

BOOST_AUTO_TEST_CASE(to_string_names) {
    BOOST_TEST(to_string(wait_kind::blocked) == "blocked");
    BOOST_TEST(to_string(wait_kind::immediate) == "immediate");
    BOOST_TEST(to_string(wait_kind::late) == "late");
    BOOST_TEST(to_string(wait_kind::parked) == "parked");
    BOOST_TEST(to_string(act::sleep_until) == "sleep_until");
    BOOST_TEST(to_string(act::park) == "park");
    BOOST_TEST(to_string(act::failed) == "failed");
    BOOST_TEST(to_string(act::cancelled) == "cancelled");
}

BOOST_AUTO_TEST_CASE(a_cancellation_answers_any_action_and_ends_the_wait) {
    // Each plan driven to each of its actions, then cancelled instead of answered.
    const auto cancelled_at = [](const wait_plan& plan, auto&& drive) {
        wait_machine m;
        wait_action a = m.start(plan, 2'000'000, at_us(0));
        a = drive(m, a);
        const act asked = a.kind;
        const wait_action end = m.on_event(wait_event::cancelled(at_us(50)));
        BOOST_TEST((end.kind == act::cancelled));
        BOOST_TEST(end.is_terminal());
        BOOST_TEST(!end.error);
        // Finished: every later event, an answer included, repeats it; no success after it.
        BOOST_TEST((m.on_event(query_done(at_us(60))).kind == act::cancelled));
        BOOST_TEST(m.finished());
        return asked;
    };
    const auto none = [](wait_machine&, wait_action a) { return a; };
    BOOST_TEST((cancelled_at(wait_plan::block(), none) == act::block));
    BOOST_TEST((cancelled_at(poll_plan(), none) == act::query));
    BOOST_TEST((cancelled_at(flag_plan(), [](wait_machine& m, wait_action) {
                    return m.on_event(query_pending(at_us(1)));
                }) == act::arm));
    BOOST_TEST((cancelled_at(flag_plan(), [](wait_machine& m, wait_action) {
                    m.on_event(query_pending(at_us(1)));
                    return m.on_event(wait_event::armed({}, at_us(2)));
                }) == act::park));
    BOOST_TEST((cancelled_at(flag_predict(), [](wait_machine& m, wait_action) {
                    m.on_event(query_pending(at_us(1)));
                    return m.on_event(wait_event::armed({}, at_us(2)));
                }) == act::sleep_until));
}

BOOST_AUTO_TEST_CASE(a_cancellation_after_the_end_leaves_the_end_as_it_was) {
    wait_machine m;
    m.start(poll_plan(), std::nullopt, at_us(0));
    const wait_action done = m.on_event(query_done(at_us(3)));
    const wait_action after = m.on_event(wait_event::cancelled(at_us(9)));
    BOOST_TEST((after.kind == act::done));
    BOOST_TEST((after.report == done.report));
    wait_machine f;
    f.start(poll_plan(), std::nullopt, at_us(0));
    f.on_event(query_failed(device_error, at_us(1)));
    BOOST_TEST((f.on_event(wait_event::cancelled(at_us(2))).error == device_error));
}

// --- randomized property test ----------------------------------------------------------------

BOOST_AUTO_TEST_CASE(random_event_scripts_keep_every_invariant) {
    std::mt19937_64 rng(0x9e3779b97f4a7c15ull);
    const std::error_code proto = std::make_error_code(std::errc::protocol_error);
    auto chance = [&](unsigned pct) { return rng() % 100 < pct; };
    std::size_t runs_done = 0;
    std::size_t runs_failed = 0;
    for (int trial = 0; trial < 3000; ++trial) {
        const std::uint64_t park_us = 1 + rng() % 200;
        const std::uint64_t backstop_us = park_us + rng() % 2000;
        const deadline_plan dp{(rng() % 300) * 1000, 0, (1 + rng() % 5000) * 1000, 8};
        std::optional<wait_plan> plan;
        switch (rng() % 5) {
        case 0:
            plan = wait_plan::block();
            break;
        case 1:
            plan = wait_plan::poll().value();
            break;
        case 2:
            plan = wait_plan::poll(dp).value();
            break;
        case 3:
            plan = wait_plan::flag(park_us * 1000, backstop_us * 1000).value();
            break;
        default:
            plan = wait_plan::flag(park_us * 1000, backstop_us * 1000, dp).value();
            break;
        }
        std::optional<std::uint64_t> estimate;
        if (chance(70)) estimate = rng() % 10'000'000;
        const mono_ns start{rng() % 1'000'000'000};
        const bool predicted = plan->predict().has_value() && estimate && *estimate > 0;
        const mono_ns sleep_cap =
            predicted ? start.after(dur_ns{std::min(*estimate, plan->predict()->max_sleep_ns)})
                      : start;

        wait_machine m;
        wait_action a = m.start(*plan, estimate, start);
        mono_ns now = start;
        mono_ns last_query = start;
        std::size_t queries = 0, parks = 0, backstops = 0;
        bool armed = false, slept = false;
        std::optional<wait_event> last; // the last event given
        bool last_mismatched = false;
        bool first_query = false, sleep_query = false;

        for (int step = 0; step < 20'000 && !a.is_terminal(); ++step) {
            // Invariants on the action.
            if (plan->kind() == plan_kind::block) BOOST_REQUIRE((a.kind == act::block));
            if (step == 0 && plan->kind() != plan_kind::block)
                BOOST_REQUIRE((a.kind == act::query));
            const bool after_park = last && last->kind == wait_event::type::parked;
            // Once the word is seen (in a park, or by a host during a sleep), the next action is
            // the final or the late query.
            if (last && last->word_seen) BOOST_REQUIRE((a.kind == act::query));
            switch (a.kind) {
            case act::arm:
                BOOST_REQUIRE((plan->kind() == plan_kind::flag));
                BOOST_REQUIRE(queries == 1u);
                BOOST_REQUIRE(!slept);
                BOOST_REQUIRE(!armed);
                break;
            case act::sleep_until:
                BOOST_REQUIRE(predicted);
                BOOST_REQUIRE(a.at <= sleep_cap);
                if (plan->kind() == plan_kind::flag) BOOST_REQUIRE(armed);
                break;
            case act::park:
                BOOST_REQUIRE((plan->kind() == plan_kind::flag));
                BOOST_REQUIRE(armed);
                BOOST_REQUIRE(a.bound.count() > 0u);
                BOOST_REQUIRE(a.bound.count() <= plan->park_ns());
                BOOST_REQUIRE(now.after(a.bound) <= last_query.after(dur_ns{plan->backstop_ns()}));
                break;
            default:
                break;
            }
            first_query = a.kind == act::query && queries == 0;
            sleep_query = a.kind == act::query && last && last->kind == wait_event::type::slept;
            // Flag queries other than the first, the late one and the final one are backstops.
            if (a.kind == act::query && plan->kind() == plan_kind::flag && !first_query &&
                !sleep_query && !(after_park && last->word_seen))
                ++backstops;
            // A random answer, sometimes of the wrong type.
            now = now.after(dur_ns{rng() % 400'000});
            wait_event ev;
            last_mismatched = chance(1);
            wait_action::type answer = a.kind;
            if (last_mismatched) {
                const act other[] = {act::query, act::block, act::arm, act::sleep_until, act::park};
                do
                    answer = other[rng() % 5];
                while (answer == a.kind);
            }
            switch (answer) {
            case act::query: {
                const unsigned r = static_cast<unsigned>(rng() % 100);
                ev = r < 3    ? query_failed(device_error, now)
                     : r < 15 ? query_done(now)
                              : query_pending(now);
                break;
            }
            case act::block:
                ev = wait_event::blocked(chance(10) ? device_error : std::error_code{}, now);
                break;
            case act::arm:
                ev = wait_event::armed(chance(3) ? device_error : std::error_code{}, now);
                break;
            case act::sleep_until:
                if (!last_mismatched && chance(80)) now = max(now, a.at);
                ev = chance(10) ? wait_event::slept_word_seen(now) : wait_event::slept(now);
                break;
            default:
                ev = wait_event::parked(chance(10), now);
                break;
            }
            if (!last_mismatched) {
                if (a.kind == act::query) {
                    ++queries;
                    last_query = now;
                }
                if (a.kind == act::arm && !ev.error) armed = true;
                if (a.kind == act::sleep_until && (now >= a.at || ev.word_seen)) slept = true;
                if (a.kind == act::park) ++parks;
            }
            last = ev;
            a = m.on_event(ev);
        }
        BOOST_REQUIRE(a.is_terminal());
        if (a.kind == act::done) {
            ++runs_done;
            BOOST_REQUIRE(!last_mismatched);
            // Success only right after a query said done or the blocking wait returned ok.
            if (plan->kind() == plan_kind::block) {
                BOOST_REQUIRE((last->kind == wait_event::type::blocked));
                BOOST_REQUIRE(!last->error);
                BOOST_REQUIRE((a.report.kind == wait_kind::blocked));
                BOOST_REQUIRE(!a.report.outcome.has_value());
            } else {
                BOOST_REQUIRE((last->kind == wait_event::type::queried));
                BOOST_REQUIRE(last->query.is_done());
                BOOST_REQUIRE(a.report.outcome.has_value());
                if (first_query) {
                    BOOST_REQUIRE((a.report.kind == wait_kind::immediate));
                    BOOST_REQUIRE(a.report.outcome->is_exact());
                } else if (sleep_query) {
                    BOOST_REQUIRE((a.report.kind == wait_kind::late));
                    BOOST_REQUIRE(a.report.outcome->is_late());
                } else {
                    BOOST_REQUIRE((a.report.kind == wait_kind::parked));
                    BOOST_REQUIRE(a.report.outcome->is_exact());
                }
                BOOST_REQUIRE(a.report.outcome->ns() <= a.report.total.count());
            }
            BOOST_REQUIRE(a.report.total == now.since(start));
            BOOST_REQUIRE(a.report.parks == parks);
            BOOST_REQUIRE(a.report.backstop_queries == backstops);
            BOOST_REQUIRE(a.report.slept <= a.report.total);
        } else {
            ++runs_failed;
            // A failure is the source's error unchanged, or a protocol error for a bad answer.
            if (last_mismatched)
                BOOST_REQUIRE((a.error == proto));
            else
                BOOST_REQUIRE((a.error == device_error));
        }
    }
    BOOST_TEST(runs_done > 1000u);
    BOOST_TEST(runs_failed > 100u);
}

// --- the inline drivers over a fake source on the manual clock -------------------------------

BOOST_AUTO_TEST_CASE(run_wait_block) {
    manual_clock clk(at_us(5));
    manual_timer tmr(clk);
    fake_source src(clk);
    src.done_at = at_us(800);
    const wait_result r = run_wait(src, wait_plan::block(), std::nullopt, clk, tmr);
    BOOST_REQUIRE(r.has_value());
    BOOST_TEST((r.value().kind == wait_kind::blocked));
    BOOST_TEST(r.value().total.count() == 795'000u);
    BOOST_TEST(src.calls.size() == 1u);
    BOOST_TEST(r.message() == "ok");
}

BOOST_AUTO_TEST_CASE(run_wait_flag_predict_on_virtual_time) {
    manual_clock clk;
    manual_timer tmr(clk);
    fake_source src(clk);
    src.done_at = at_us(2340);
    const wait_result r = run_wait(src, flag_predict(), 2'000'000, clk, tmr);
    BOOST_REQUIRE(r.has_value());
    BOOST_TEST((r.value().kind == wait_kind::parked));
    BOOST_TEST((r.value().outcome == outcome::exact(2'340'000)));
    BOOST_TEST(r.value().slept.count() == 2'000'000u);
    BOOST_TEST(r.value().parks == 4u); // 2000+100+100+100, then the word at 2340
    BOOST_TEST(r.value().total.count() == 2'340'000u);
    // query, arm, (sleep), query, park x4, final query
    BOOST_REQUIRE(src.calls.size() == 8u);
    BOOST_TEST((src.calls[0].what == fake_source::op::query));
    BOOST_TEST((src.calls[1].what == fake_source::op::arm));
    BOOST_TEST(src.calls[1].at.count() == 0u); // armed before the sleep
    BOOST_TEST((src.calls[2].what == fake_source::op::query));
    BOOST_TEST(src.calls[2].at.count() == 2'000'000u);
    BOOST_TEST((src.calls[7].what == fake_source::op::query));
}

BOOST_AUTO_TEST_CASE(run_wait_flag_backstop_finds_done_without_the_word) {
    manual_clock clk;
    manual_timer tmr(clk);
    fake_source src(clk);
    src.done_at = at_us(4500);
    src.word_never = true;
    const wait_result r = run_wait(src, flag_plan(), std::nullopt, clk, tmr);
    BOOST_REQUIRE(r.has_value());
    BOOST_TEST((r.value().outcome == outcome::exact(5'000'000)));
    BOOST_TEST(r.value().backstop_queries == 5u);
    BOOST_TEST(r.value().parks == 50u);
    mono_ns prev{};
    for (const auto& c : src.calls) {
        if (c.what != fake_source::op::query) continue;
        BOOST_TEST(c.at.since(prev).count() <= 1'000'000u);
        prev = c.at;
    }
}

BOOST_AUTO_TEST_CASE(run_wait_late_and_poll) {
    {
        manual_clock clk;
        manual_timer tmr(clk);
        fake_source src(clk);
        src.done_at = at_us(700);
        const wait_result r = run_wait(src, poll_predict(), 1'000'000, clk, tmr);
        BOOST_REQUIRE(r.has_value());
        BOOST_TEST((r.value().kind == wait_kind::late));
        BOOST_TEST((r.value().outcome == outcome::late(1'000'000)));
    }
    {
        manual_clock clk;
        manual_timer tmr(clk);
        fake_source src(clk);
        src.done_at = at_us(30);
        src.query_cost = us(1);
        const wait_result r = run_inline(src, poll_plan(), std::nullopt, clk, tmr);
        BOOST_REQUIRE(r.has_value());
        BOOST_TEST((r.value().kind == wait_kind::parked));
        BOOST_TEST((r.value().outcome == outcome::exact(30'000)));
        BOOST_TEST(src.count(fake_source::op::query) == 30u);
    }
}

BOOST_AUTO_TEST_CASE(run_wait_source_errors_pass_unchanged) {
    manual_clock clk;
    manual_timer tmr(clk);
    {
        fake_source src(clk);
        src.done_at = at_us(5000);
        src.fail_at = at_us(1200);
        const wait_result r = run_wait(src, flag_plan(), std::nullopt, clk, tmr);
        BOOST_REQUIRE(!r.has_value());
        BOOST_TEST((r.error() == src.fail_code));
        BOOST_TEST(!r.detail().has_value());
        BOOST_TEST(r.message() == src.fail_code.message());
    }
    {
        fake_source src(clk);
        src.arm_error = std::make_error_code(std::errc::not_supported);
        const wait_result r = run_wait(src, flag_plan(), std::nullopt, clk, tmr);
        BOOST_TEST((r.error() == std::errc::not_supported));
    }
    {
        fake_source src(clk);
        src.block_error = device_error;
        const wait_result r = run_wait(src, wait_plan::block(), std::nullopt, clk, tmr);
        BOOST_TEST((r.error() == device_error));
    }
}

namespace {
// A timer that only schedules: it never moves the clock (an asynchronous timer seen inline).
struct scheduling_timer {
    int calls = 0;
    void sleep_until(mono_ns) { ++calls; }
};
} // namespace

BOOST_AUTO_TEST_CASE(run_inline_names_the_site_that_pended) {
    {
        manual_clock clk;
        scheduling_timer tmr;
        fake_source src(clk);
        src.done_at = at_us(5000);
        const wait_result r = run_inline(src, poll_predict(), 1'000'000, clk, tmr);
        BOOST_REQUIRE(!r.has_value());
        BOOST_TEST((r.error() == errc::pended_inline));
        BOOST_REQUIRE(r.detail().has_value());
        BOOST_TEST(r.detail()->args().at(0) == "timer sleep_until");
        BOOST_TEST(r.message() == "pended inline: timer sleep_until did not complete at once");
        BOOST_TEST(tmr.calls == 1);
    }
    {
        // A park that neither sees the word nor lets time pass (bound zero is never asked; a
        // source that cannot park returns at once).
        struct no_park_source : fake_source {
            using fake_source::fake_source;
            bool park(dur_ns) { return false; }
        };
        manual_clock clk;
        manual_timer tmr(clk);
        no_park_source src(clk);
        src.done_at = at_us(5000);
        const wait_result r = run_inline(src, flag_plan(), std::nullopt, clk, tmr);
        BOOST_TEST((r.error() == errc::pended_inline));
        BOOST_REQUIRE(r.detail().has_value());
        BOOST_TEST(r.detail()->args().at(0) == "source park");
    }
    {
        manual_clock clk;
        manual_timer tmr(clk);
        fake_source src(clk); // queries cost no time and the work never ends
        const wait_result r = run_inline(src, poll_plan(), std::nullopt, clk, tmr);
        BOOST_TEST((r.error() == errc::pended_inline));
        BOOST_REQUIRE(r.detail().has_value());
        BOOST_TEST(r.detail()->args().at(0) == "source query");
        BOOST_TEST(src.count(fake_source::op::query) == 2u);
    }
    {
        // The word is already there, so every park returns at once having seen it, while the
        // status query keeps saying pending and time stands still: without the check this
        // repeats park and query for ever (here: until the source gives up after 1000 parks).
        struct word_only_source : fake_source {
            using fake_source::fake_source;
            int parks = 0;
            query_result query() {
                const query_result q = fake_source::query();
                return parks >= 1000 ? query_result::done() : q;
            }
            bool park(dur_ns bound) {
                ++parks;
                return fake_source::park(bound);
            }
        };
        manual_clock clk;
        manual_timer tmr(clk);
        word_only_source src(clk);
        src.word_at = at_us(0); // the word arrives, the work never ends
        const wait_result r = run_inline(src, flag_plan(), std::nullopt, clk, tmr);
        BOOST_TEST((r.error() == errc::pended_inline));
        BOOST_REQUIRE(r.detail().has_value());
        BOOST_TEST(r.detail()->args().at(0) == "source query");
        BOOST_TEST(src.parks == 1);
    }
    {
        // Everything completes at once: run_inline gives what run_wait gives.
        manual_clock clk;
        manual_timer tmr(clk);
        fake_source src(clk);
        src.done_at = at_us(2340);
        const wait_result r = run_inline(src, flag_predict(), 2'000'000, clk, tmr);
        BOOST_REQUIRE(r.has_value());
        BOOST_TEST((r.value().outcome == outcome::exact(2'340'000)));
    }
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_core_wait_machine
