// SPDX-License-Identifier: BSL-1.0
// The lines' health queries (line/line_health.hpp): registered queries run at most once per fault
// backstop in the process, with no registry lock held; unwatching waits for a running query and
// stops later ones; a query's fault_slot reaches every reactor.
#include <gpu_async/line/detail/line_watchers.hpp>
#include <gpu_async/line/line_health.hpp>
#include <gpu_async/line/line_life.hpp>

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/fill/reactor.hpp>
#include <gpu_async/fill/std_idle.hpp>
#include <gpu_async/host/std_host.hpp>

#include "common/eventually.hpp"
#include "common/fault_recorder.hpp"

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <utility>

namespace unit_hosts_line_health {

using namespace gpu_async;
using namespace gpu_async::test;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t ms = 1'000'000;

// A health query that counts its runs and runs `then` (if any) inside each.
class counting_health final : public line_health {
public:
    std::atomic<int> runs{0};
    std::function<void(const completion_line&)> then;

    void query(const completion_line& line) noexcept override {
        ++runs;
        if (then) then(line);
    }
};

// Watches `line` with `h` for one scope.
class watch_scope {
public:
    watch_scope(const completion_line& line, line_health& h)
        : line_(&line) {
        watch_line_health(line, h);
    }
    ~watch_scope() { unwatch_line_health(*line_); }
    watch_scope(const watch_scope&) = delete;
    watch_scope& operator=(const watch_scope&) = delete;

private:
    const completion_line* line_;
};

} // namespace

BOOST_AUTO_TEST_SUITE(line_health_suite)

BOOST_AUTO_TEST_CASE(nothing_runs_while_no_line_is_watched) {
    BOOST_TEST(!detail::line_health_watched());
    BOOST_TEST(!detail::query_line_health(fresh_health_now()));
}

BOOST_AUTO_TEST_CASE(the_default_backstop_is_ten_milliseconds) {
    BOOST_TEST(default_fault_backstop.count() == 10 * ms);
    BOOST_TEST(fault_backstop().count() == default_fault_backstop.count());
}

BOOST_AUTO_TEST_CASE(queries_run_at_most_once_per_backstop) {
    backstop_scope b(dur_ns::from_ms(10));
    completion_line line;
    counting_health h;
    watch_scope w(line, h);
    BOOST_TEST(detail::line_health_watched());
    const std::uint64_t t = fresh_health_now();
    BOOST_TEST(detail::query_line_health(t));
    BOOST_TEST(h.runs == 1);
    // Before the backstop has passed: nothing runs, at once.
    BOOST_TEST(!detail::query_line_health(t));
    BOOST_TEST(!detail::query_line_health(t + 9 * ms));
    BOOST_TEST(h.runs == 1);
    // One backstop on: due again, from that run on.
    BOOST_TEST(detail::query_line_health(t + 10 * ms));
    BOOST_TEST(h.runs == 2);
    BOOST_TEST(!detail::query_line_health(t + 19 * ms));
    BOOST_TEST(detail::query_line_health(t + 25 * ms));
    BOOST_TEST(h.runs == 3);
    // A clock a whole backstop behind the last run (another clock) counts as due.
    BOOST_TEST(detail::query_line_health(t));
    BOOST_TEST(h.runs == 4);
}

BOOST_AUTO_TEST_CASE(a_zero_backstop_runs_at_every_call_and_max_never) {
    completion_line line;
    counting_health h;
    watch_scope w(line, h);
    const std::uint64_t t = fresh_health_now();
    {
        backstop_scope b(dur_ns::zero());
        BOOST_TEST(detail::query_line_health(t));
        BOOST_TEST(detail::query_line_health(t));
        BOOST_TEST(h.runs == 2);
    }
    {
        backstop_scope b(dur_ns::max());
        BOOST_TEST(fault_backstop().count() == dur_ns::max().count());
        BOOST_TEST(!detail::query_line_health(fresh_health_now()));
        BOOST_TEST(h.runs == 2);
    }
}

BOOST_AUTO_TEST_CASE(every_watched_line_is_queried_with_its_own_line) {
    backstop_scope b(dur_ns::zero());
    completion_line first;
    completion_line second;
    counting_health h1;
    counting_health h2;
    const completion_line* seen1 = nullptr;
    const completion_line* seen2 = nullptr;
    h1.then = [&](const completion_line& l) { seen1 = &l; };
    h2.then = [&](const completion_line& l) { seen2 = &l; };
    watch_scope w1(first, h1);
    watch_scope w2(second, h2);
    BOOST_TEST(detail::query_line_health(fresh_health_now()));
    BOOST_TEST(h1.runs == 1);
    BOOST_TEST(h2.runs == 1);
    BOOST_TEST(seen1 == &first);
    BOOST_TEST(seen2 == &second);
}

BOOST_AUTO_TEST_CASE(no_query_runs_after_unwatch) {
    backstop_scope b(dur_ns::zero());
    completion_line line;
    counting_health h;
    watch_line_health(line, h);
    BOOST_TEST(detail::query_line_health(fresh_health_now()));
    unwatch_line_health(line);
    BOOST_TEST(!detail::line_health_watched());
    BOOST_TEST(!detail::query_line_health(fresh_health_now()));
    BOOST_TEST(h.runs == 1);
    unwatch_line_health(line); // not watched: nothing
}

BOOST_AUTO_TEST_CASE(a_query_may_unwatch_another_line_which_then_does_not_run) {
    backstop_scope b(dur_ns::zero());
    completion_line first;
    completion_line second;
    counting_health h1;
    counting_health h2;
    // Whichever runs first unwatches the other (no deadlock: the other is not running).
    h1.then = [&](const completion_line&) { unwatch_line_health(second); };
    h2.then = [&](const completion_line&) { unwatch_line_health(first); };
    watch_line_health(first, h1);
    watch_line_health(second, h2);
    BOOST_TEST(detail::query_line_health(fresh_health_now()));
    BOOST_TEST(h1.runs + h2.runs == 1);
    // The one that ran is still watched; the other is not.
    BOOST_TEST(detail::line_health_watched());
    unwatch_line_health(first);
    unwatch_line_health(second);
    BOOST_TEST(!detail::line_health_watched());
}

BOOST_AUTO_TEST_CASE(unwatch_waits_for_the_running_query_of_its_line) {
    backstop_scope b(dur_ns::zero());
    completion_line line;
    counting_health h;
    std::atomic<bool> entered{false};
    std::atomic<bool> release{false};
    std::atomic<bool> finished{false};
    h.then = [&](const completion_line&) {
        entered = true;
        while (!release)
            std::this_thread::yield();
        finished = true;
    };
    watch_line_health(line, h);
    std::thread runner([&] { detail::query_line_health(fresh_health_now()); });
    BOOST_TEST_REQUIRE(eventually([&] { return entered.load(); }));
    std::atomic<bool> returned{false};
    bool finished_first = false;
    std::thread unwatcher([&] {
        unwatch_line_health(line);
        finished_first = finished.load();
        returned = true;
    });
    // The unwatch has taken the entry out (nothing is watched any more) and waits for the query.
    BOOST_TEST(eventually([&] { return !detail::line_health_watched(); }));
    BOOST_TEST(!returned.load());
    release = true;
    unwatcher.join();
    runner.join();
    BOOST_TEST(returned.load());
    BOOST_TEST(finished_first);
    BOOST_TEST(h.runs == 1);
}

BOOST_AUTO_TEST_CASE(runs_do_not_overlap) {
    backstop_scope b(dur_ns::zero());
    completion_line line;
    counting_health h;
    std::atomic<bool> entered{false};
    std::atomic<bool> release{false};
    bool second_ran = true;
    h.then = [&](const completion_line&) {
        if (h.runs > 1) return;
        entered = true;
        while (!release)
            std::this_thread::yield();
    };
    watch_scope w(line, h);
    std::thread runner([&] { detail::query_line_health(fresh_health_now()); });
    BOOST_TEST_REQUIRE(eventually([&] { return entered.load(); }));
    second_ran = detail::query_line_health(fresh_health_now());
    release = true;
    runner.join();
    BOOST_TEST(!second_ran);
    BOOST_TEST(h.runs == 1);
}

// A turn that comes due while a run is under way is not lost. Here a second caller (a reactor
// whose backstop came due during a slow query) calls in from inside the run, at virtual time
// t + 10 ms: it may not run then (runs never overlap), and the first call after the run takes
// the turn. The caller used to claim the turn (the last run's time moved to t + 10 ms) and then
// skip it, so nothing ran until t + 20 ms: a fault after the run's query was seen only after
// two backstops.
BOOST_AUTO_TEST_CASE(a_turn_due_while_a_run_is_under_way_is_not_lost) {
    backstop_scope b(dur_ns::from_ms(10));
    completion_line line;
    counting_health h;
    const std::uint64_t t = fresh_health_now();
    bool inner_ran = true;
    h.then = [&](const completion_line&) {
        if (h.runs == 1) inner_ran = detail::query_line_health(t + 10 * ms);
    };
    watch_scope w(line, h);
    BOOST_TEST(detail::query_line_health(t));
    BOOST_TEST(!inner_ran); // no overlap
    BOOST_TEST(h.runs == 1);
    // Due since t + 10 ms: the next call runs it.
    BOOST_TEST(detail::query_line_health(t + 11 * ms));
    BOOST_TEST(h.runs == 2);
    // That run is the last one now: the next turn is a backstop after it.
    BOOST_TEST(!detail::query_line_health(t + 20 * ms));
    BOOST_TEST(detail::query_line_health(t + 21 * ms));
    BOOST_TEST(h.runs == 3);
}

// The same with two threads: a caller that finds the run under way (blocked inside its query)
// returns false at once, and the turn it found due runs at the first call after the run.
BOOST_AUTO_TEST_CASE(a_caller_finding_a_run_under_way_leaves_its_turn_due) {
    backstop_scope b(dur_ns::from_ms(10));
    completion_line line;
    counting_health h;
    std::atomic<bool> entered{false};
    std::atomic<bool> release{false};
    h.then = [&](const completion_line&) {
        if (h.runs > 1) return;
        entered = true;
        while (!release)
            std::this_thread::yield();
    };
    watch_scope w(line, h);
    const std::uint64_t t = fresh_health_now();
    std::thread runner([&] { detail::query_line_health(t); });
    BOOST_TEST_REQUIRE(eventually([&] { return entered.load(); }));
    const bool ran_during = detail::query_line_health(t + 10 * ms);
    release = true;
    runner.join();
    BOOST_TEST(!ran_during);
    BOOST_TEST(h.runs == 1);
    BOOST_TEST(detail::query_line_health(t + 11 * ms));
    BOOST_TEST(h.runs == 2);
}

BOOST_AUTO_TEST_CASE(a_querys_fault_reaches_every_reactor_and_the_side_table) {
    backstop_scope b(dur_ns::zero());
    fault_recorder reactor;
    completion_line line;
    const std::uint64_t g = adopt_line(line);
    counting_health h;
    h.then = [](const completion_line& l) { fault_slot(l, *slot_id::at(3)); };
    watch_scope w(line, h);
    const memory_descriptor d(line, *slot_id::at(3), 1, g);
    BOOST_TEST((descriptor_status(d) == line_status::live));
    BOOST_TEST(detail::query_line_health(fresh_health_now()));
    const auto faults = reactor.faults_of(line);
    BOOST_TEST_REQUIRE(faults.size() == 1u);
    BOOST_TEST(faults[0].slot == 3u);
    BOOST_TEST((descriptor_status(d) == line_status::faulted));
    retire_line(line);
}

// Nothing tells the FILL executor's reactor of a fault (it runs on its caller's thread, with no
// lock to take): its idle runs the health queries before it parks, so a faulted context ends
// the reactor's waits on its lines too, at the turn after the query.
BOOST_AUTO_TEST_CASE(the_fill_reactors_idle_runs_the_queries_and_its_waits_end_faulted) {
    backstop_scope b(dur_ns::zero());
    completion_line line;
    const std::uint64_t g = adopt_line(line);
    counting_health h;
    h.then = [](const completion_line& l) { fault_slot(l, *slot_id::at(2)); };
    watch_scope w(line, h);
    reactor r;
    std_idle idle;
    reactor_waiter faulted;
    r.watch(memory_descriptor(line, *slot_id::at(2), 1, g), std::nullopt, faulted);
    // Without the queries every turn parks a whole bound and the wait never ends.
    for (int turns = 0; turns < 20 && r.fired_count() == 0; ++turns)
        BOOST_TEST_REQUIRE(r.turn(idle, dur_ns::from_ms(1), 0).has_value());
    BOOST_TEST(h.runs.load() >= 1);
    BOOST_TEST_REQUIRE(r.fired_count() == 1u);
    BOOST_TEST(r.pop_fired() == &faulted);
    BOOST_TEST(!faulted.completed);
    BOOST_TEST((faulted.end == wait_end::faulted));
    retire_line(line);
}

// With a zero backstop the queries run at every park; one that finds nothing must not cut the
// park short, or the FILL executor would spin while it waits.
BOOST_AUTO_TEST_CASE(the_fill_reactors_idle_still_parks_when_the_queries_find_nothing) {
    backstop_scope b(dur_ns::zero());
    completion_line line;
    const std::uint64_t g = adopt_line(line);
    counting_health h; // finds nothing
    watch_scope w(line, h);
    reactor r;
    std_idle idle;
    reactor_waiter never;
    const reactor::registration id =
        r.watch(memory_descriptor(line, *slot_id::at(1), 1, g), std::nullopt, never);
    const auto turn = r.turn(idle, dur_ns::from_ms(2), 0);
    BOOST_TEST_REQUIRE(turn.has_value());
    BOOST_TEST(h.runs.load() >= 1);
    BOOST_TEST((turn.value().idled == idle_kind::parked));
    BOOST_TEST(turn.value().idle_time.count() >= dur_ns::from_ms(1).count()); // it parked
    BOOST_TEST(r.cancel(id));
    retire_line(line);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_hosts_line_health
