// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/fill/fill_executor.hpp>

#include "common/scripted_idle.hpp"
#include "common/virtual_time.hpp"

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

namespace unit_core_fill_executor {

using namespace gpu_async;
using gpu_async::test::at_us;
using gpu_async::test::desc;
using gpu_async::test::scripted_idle;
using gpu_async::test::store_at;
using gpu_async::test::us;

namespace {

// A source whose word a virtual device stores at a set time (a stream's tail on virtual time).
struct line_source {
    explicit line_source(completion_line& l)
        : line(l) {}
    completion_line& line;
    std::uint64_t target = 1;
    std::error_code fail;
    int queries = 0;
    int arms = 0;

    query_result query() {
        ++queries;
        if (fail) return query_result::failed(fail);
        return reached(line, *slot_id::at(0), target) ? query_result::done()
                                                      : query_result::pending();
    }
    std::error_code block() { return {}; }
    std::error_code arm() {
        ++arms;
        return {};
    }
    memory_descriptor descriptor() const { return desc(line, 0, target); }
    bool park(dur_ns) { return reached(line, *slot_id::at(0), target); }
};
static_assert(completion_source<line_source>);

} // namespace

BOOST_AUTO_TEST_SUITE(fill_executor_suite)

BOOST_AUTO_TEST_CASE(a_spawned_task_runs_once_and_finishes) {
    manual_clock clk;
    scripted_idle idle(clk);
    fill_executor ex;
    int runs = 0;
    ex.spawn([](int& n) -> fill_task<> {
        ++n;
        co_return;
    }(runs));
    BOOST_TEST(ex.tasks_left() == 1u);
    BOOST_TEST(runs == 0); // lazily started
    const auto s = ex.run(idle);
    BOOST_REQUIRE(s.has_value());
    BOOST_TEST(runs == 1);
    BOOST_TEST(s.value().resumptions == 1u);
    BOOST_TEST(ex.tasks_left() == 0u);
    BOOST_TEST(idle.calls.empty());
}

BOOST_AUTO_TEST_CASE(ready_is_true_at_once_for_a_complete_descriptor) {
    manual_clock clk;
    scripted_idle idle(clk);
    completion_line line;
    line.words[2].store(9);
    fill_executor ex;
    std::optional<bool> got;
    ex.spawn([](reactor& r, memory_descriptor d, std::optional<bool>& out) -> fill_task<> {
        out = co_await r.ready(d, std::nullopt);
    }(ex.get_reactor(), desc(line, 2, 9), got));
    const auto s = ex.run(idle);
    BOOST_REQUIRE(s.has_value());
    BOOST_TEST((got == std::optional<bool>(true)));
    BOOST_TEST(s.value().resumptions == 1u); // never suspended
}

BOOST_AUTO_TEST_CASE(ready_is_false_when_the_deadline_passes_first) {
    manual_clock clk;
    scripted_idle idle(clk);
    completion_line line;
    store_at(clk, line, 0, 1, at_us(900)); // too late
    fill_executor ex(us(100));
    std::optional<bool> got;
    mono_ns woke{};
    ex.spawn([](reactor& r, memory_descriptor d, std::optional<bool>& out, mono_ns& t,
                manual_clock& c) -> fill_task<> {
        out = co_await r.ready(d, at_us(250));
        t = c.now();
    }(ex.get_reactor(), desc(line, 0, 1), got, woke, clk));
    const auto s = ex.run(idle);
    BOOST_REQUIRE(s.has_value());
    BOOST_TEST((got == std::optional<bool>(false)));
    BOOST_TEST((woke == at_us(250)));
    BOOST_TEST(s.value().parks == 3u); // 100 + 100 + 50 us: the last park stops at the deadline
    BOOST_TEST(idle.calls.back().bound.count() == 50'000u);
    BOOST_TEST(s.value().idle_time.count() == 250'000u);
}

BOOST_AUTO_TEST_CASE(alarm_resumes_at_its_time_by_sleeping) {
    manual_clock clk;
    scripted_idle idle(clk);
    fill_executor ex;
    mono_ns fired{}, now{};
    ex.spawn([](reactor& r, mono_ns& f, mono_ns& n, manual_clock& c) -> fill_task<> {
        f = co_await r.alarm(at_us(1234));
        n = c.now();
    }(ex.get_reactor(), fired, now, clk));
    const auto s = ex.run(idle);
    BOOST_REQUIRE(s.has_value());
    BOOST_TEST((fired == at_us(1234)));
    BOOST_TEST((now == at_us(1234)));
    BOOST_TEST(s.value().sleeps == 1u);
    BOOST_TEST(s.value().parks == 0u);
    BOOST_TEST(s.value().resumptions == 2u);
}

BOOST_AUTO_TEST_CASE(fill_ordering_ready_work_runs_while_another_task_waits) {
    manual_clock clk;
    scripted_idle idle(clk);
    completion_line line;
    store_at(clk, line, 0, 1, at_us(1000));
    fill_executor ex(us(100));
    std::vector<std::string> log;
    // The executor idles only when no task is ready.
    int idles = 0;
    idle.on_idle = [&] {
        ++idles;
        BOOST_TEST(ex.ready_count() == 0u);
        log.push_back("idle");
    };
    int waiter_resumptions = 0;
    ex.spawn([](reactor& r, memory_descriptor d, std::vector<std::string>& l, int& n,
                manual_clock& c) -> fill_task<> {
        ++n;
        l.push_back("wait");
        const bool ok = co_await r.ready(d, std::nullopt);
        ++n;
        l.push_back(ok ? "done@" + std::to_string(c.now().count()) : "timeout");
    }(ex.get_reactor(), desc(line, 0, 1), log, waiter_resumptions, clk));
    ex.spawn([](std::vector<std::string>& l, manual_clock& c) -> fill_task<> {
        for (int i = 0; i < 4; ++i) {
            c.advance(us(100)); // a slice of CPU work
            l.push_back("slice" + std::to_string(i));
            co_await yield_now();
        }
    }(log, clk));
    const auto s = ex.run(idle);
    BOOST_REQUIRE(s.has_value());
    const std::vector<std::string> expect_head{"wait",   "slice0", "slice1",
                                               "slice2", "slice3", "idle"};
    BOOST_REQUIRE(log.size() > expect_head.size());
    BOOST_TEST(std::vector<std::string>(log.begin(), log.begin() + 6) == expect_head,
               boost::test_tools::per_element());
    BOOST_TEST(log.back() == "done@1000000");
    // Woken only once, although the executor parked six times (400 us of work, then 6 x 100 us).
    BOOST_TEST(waiter_resumptions == 2);
    BOOST_TEST(s.value().parks == 6u);
    BOOST_TEST(idles == 6);
    BOOST_TEST(s.value().resumptions == 2u + 5u); // waiter 2, worker 4 slices + its end
    BOOST_TEST(s.value().idle_time.count() == 600'000u);
}

BOOST_AUTO_TEST_CASE(completions_are_checked_between_resumptions) {
    manual_clock clk;
    scripted_idle idle(clk);
    completion_line line;
    store_at(clk, line, 0, 1, at_us(150));
    fill_executor ex(us(100));
    std::vector<std::string> log;
    ex.spawn([](reactor& r, memory_descriptor d, std::vector<std::string>& l) -> fill_task<> {
        co_await r.ready(d, std::nullopt);
        l.push_back("woken");
    }(ex.get_reactor(), desc(line, 0, 1), log));
    ex.spawn([](std::vector<std::string>& l, manual_clock& c) -> fill_task<> {
        for (int i = 0; i < 4; ++i) {
            c.advance(us(100));
            l.push_back("slice" + std::to_string(i));
            co_await yield_now();
        }
    }(log, clk));
    const auto s = ex.run(idle);
    BOOST_REQUIRE(s.has_value());
    // The store lands during slice 1; the waiter runs right after it, before slice 2.
    const std::vector<std::string> expect{"slice0", "slice1", "woken", "slice2", "slice3"};
    BOOST_TEST(log == expect, boost::test_tools::per_element());
    BOOST_TEST(s.value().woke == 1u);
    BOOST_TEST(s.value().parks == 0u);
    BOOST_TEST(idle.calls.empty());
}

BOOST_AUTO_TEST_CASE(stall_reports_the_tasks_left) {
    manual_clock clk;
    scripted_idle idle(clk);
    fill_executor ex;
    ex.spawn([]() -> fill_task<> {
        co_await std::suspend_always{}; // nothing registered will ever wake it
    }());
    ex.spawn([]() -> fill_task<> { co_return; }());
    const auto s = ex.run(idle);
    BOOST_REQUIRE(!s.has_value());
    BOOST_TEST((s.error().code() == errc::stalled));
    BOOST_TEST(s.error().args().at(0) == "1");
    BOOST_TEST(ex.tasks_left() == 1u);
    BOOST_TEST(ex.stats().resumptions == 2u);
    // The executor's destructor destroys the stalled task (checked by the sanitizers).
}

BOOST_AUTO_TEST_CASE(a_task_destroyed_mid_wait_unregisters) {
    completion_line line;
    reactor r;
    auto t = [](reactor& re, memory_descriptor d) -> fill_task<> {
        co_await re.ready(d, at_us(5));
    }(r, desc(line, 0, 1));
    auto h = t.release();
    h.resume();
    BOOST_TEST(r.watched_count() == 1u);
    h.destroy();
    BOOST_TEST(r.watched_count() == 0u);
    BOOST_TEST(r.empty());
    // Destroyed after firing but before being resumed: taken off the fired list.
    auto t2 = [](reactor& re) -> fill_task<> { co_await re.alarm(at_us(1)); }(r);
    auto h2 = t2.release();
    h2.resume();
    BOOST_TEST(r.fire(at_us(1)) == 1u);
    BOOST_TEST(r.fired_count() == 1u);
    h2.destroy();
    BOOST_TEST(r.empty());
}

BOOST_AUTO_TEST_CASE(tasks_await_tasks_and_get_their_values) {
    manual_clock clk;
    scripted_idle idle(clk);
    fill_executor ex;
    int result = 0;
    struct local {
        static fill_task<int> child(reactor& r, int x) {
            co_await r.alarm(at_us(10));
            co_await yield_now();
            co_return x * 2;
        }
        static fill_task<> parent(reactor& r, int& out) {
            const int a = co_await child(r, 20);
            const int b = co_await child(r, 1);
            out = a + b;
        }
    };
    ex.spawn(local::parent(ex.get_reactor(), result));
    const auto s = ex.run(idle);
    BOOST_REQUIRE(s.has_value());
    BOOST_TEST(result == 42);
    BOOST_TEST(ex.tasks_left() == 0u);
}

BOOST_AUTO_TEST_CASE(a_task_may_spawn_tasks_while_the_executor_runs) {
    manual_clock clk;
    scripted_idle idle(clk);
    fill_executor ex;
    std::vector<int> order;
    struct local {
        static fill_task<> child(std::vector<int>& o, int id) {
            o.push_back(id);
            co_return;
        }
        static fill_task<> parent(fill_executor& e, std::vector<int>& o) {
            o.push_back(0);
            e.spawn(child(o, 1));
            e.spawn(child(o, 2));
            co_await yield_now();
            o.push_back(3);
        }
    };
    ex.spawn(local::parent(ex, order));
    ex.spawn(fill_task<>(local::child(order, 9))); // moved in
    const auto s = ex.run(idle);
    BOOST_REQUIRE(s.has_value());
    const std::vector<int> expect{0, 9, 1, 2, 3};
    BOOST_TEST(order == expect, boost::test_tools::per_element());
    BOOST_TEST(ex.tasks_left() == 0u);
    BOOST_TEST(s.value().resumptions == 5u);
    // An unstarted task that is never spawned is destroyed with its handle.
    auto unstarted = local::child(order, 7);
    BOOST_TEST(!unstarted.done());
    fill_task<> moved = std::move(unstarted);
    BOOST_TEST(unstarted.done()); // empty after the move
    BOOST_TEST(order.size() == 5u);
}

BOOST_AUTO_TEST_CASE(tasks_finishing_out_of_order_and_a_stall_keep_the_task_count) {
    // Roots finish in another order than spawned (each is removed in O(1) by moving the last
    // root into its place); the ones left by a stall are destroyed with the executor, once each
    // (a sanitizer build reports a frame destroyed twice or leaked).
    manual_clock clk;
    scripted_idle idle(clk);
    std::vector<std::size_t> left_at_end;
    int destroyed = 0;
    struct counted {
        int* n;
        ~counted() { ++*n; }
    };
    {
        fill_executor ex;
        const std::uint64_t ends[] = {50, 10, 40, 20, 30};
        for (std::size_t i = 0; i < 10; ++i) {
            if (i % 2 == 0) {
                ex.spawn([](fill_executor& e, mono_ns at, std::vector<std::size_t>& out,
                            int& n) -> fill_task<> {
                    counted c{&n};
                    co_await e.get_reactor().alarm(at);
                    out.push_back(e.tasks_left());
                }(ex, at_us(ends[i / 2]), left_at_end, destroyed));
            } else {
                ex.spawn([](int& n) -> fill_task<> {
                    counted c{&n};
                    co_await std::suspend_always{}; // nothing will ever wake it
                }(destroyed));
            }
        }
        const auto s = ex.run(idle);
        BOOST_REQUIRE(!s.has_value());
        BOOST_TEST((s.error().code() == errc::stalled));
        BOOST_TEST(ex.tasks_left() == 5u);
        BOOST_TEST(destroyed == 5);
    }
    const std::vector<std::size_t> expect{10, 9, 8, 7, 6};
    BOOST_TEST(left_at_end == expect, boost::test_tools::per_element());
    BOOST_TEST(destroyed == 10);
}

BOOST_AUTO_TEST_CASE(spec_14_scenario_on_virtual_time) {
    // A device stores at 2, 4 and 6 ms into three slots of one line; three tasks await one slot
    // each; a fourth does CPU work in slices of 250 us (ten of them).
    manual_clock clk;
    scripted_idle idle(clk);
    completion_line line;
    for (std::size_t i = 0; i < 3; ++i)
        store_at(clk, line, i, 1, at_us(2000 * (i + 1)));
    fill_executor ex(us(100));
    std::vector<std::optional<mono_ns>> done(3);
    int slices = 0;
    for (std::size_t i = 0; i < 3; ++i)
        ex.spawn([](reactor& r, memory_descriptor d, std::optional<mono_ns>& out,
                    manual_clock& c) -> fill_task<> {
            const bool ok = co_await r.ready(d, std::nullopt);
            if (ok) out = c.now();
        }(ex.get_reactor(), desc(line, i, 1), done[i], clk));
    ex.spawn([](int& n, manual_clock& c) -> fill_task<> {
        for (int i = 0; i < 10; ++i) {
            c.advance(us(250));
            ++n;
            co_await yield_now();
        }
    }(slices, clk));
    idle.on_idle = [&] { BOOST_TEST(ex.ready_count() == 0u); };
    const auto s = ex.run(idle);
    BOOST_REQUIRE(s.has_value());
    BOOST_TEST(slices == 10);
    BOOST_TEST((done[0] == at_us(2000)));
    BOOST_TEST((done[1] == at_us(4000)));
    BOOST_TEST((done[2] == at_us(6000)));
    BOOST_TEST((clk.now() == at_us(6000)));
    // The first store landed during the work (found between resumptions); the idle began only
    // at 2.5 ms, when the work was over, and parked 35 times at 100 us to reach 6 ms.
    BOOST_TEST(s.value().woke == 1u);
    BOOST_TEST(s.value().parks == 35u);
    BOOST_TEST(s.value().sleeps == 0u);
    BOOST_TEST(s.value().idle_time.count() == 3'500'000u);
    BOOST_TEST(s.value().resumptions == 3u * 2u + 11u);
    for (const auto& c : idle.calls)
        BOOST_TEST((c.at >= at_us(2500)));
}

BOOST_AUTO_TEST_CASE(fill_wait_runs_the_wait_machine_as_a_task) {
    manual_clock clk;
    scripted_idle idle(clk);
    completion_line line;
    store_at(clk, line, 0, 1, at_us(2340));
    line_source src(line);
    fill_executor ex(us(100));
    std::optional<wait_result> got;
    int slices = 0;
    const wait_plan plan =
        wait_plan::flag(100'000, 1'000'000, deadline_plan{150'000, 20'000, 50'000'000, 8}).value();
    ex.spawn([](reactor& r, line_source& s, wait_plan p, manual_clock& c,
                std::optional<wait_result>& out) -> fill_task<> {
        out = co_await fill_wait(r, s, p, 2'000'000, c);
    }(ex.get_reactor(), src, plan, clk, got));
    ex.spawn([](int& n, manual_clock& c) -> fill_task<> {
        for (int i = 0; i < 3; ++i) {
            c.advance(us(10));
            ++n;
            co_await yield_now();
        }
    }(slices, clk));
    const auto s = ex.run(idle);
    BOOST_REQUIRE(s.has_value());
    BOOST_REQUIRE(got.has_value());
    BOOST_REQUIRE(got->has_value());
    BOOST_TEST(slices == 3);
    BOOST_TEST(src.arms == 1);
    BOOST_TEST((got->value().kind == wait_kind::parked));
    // The predicted sleep became an alarm (the executor slept to 2 ms), then the wait parked on
    // the word until the store at 2.34 ms.
    BOOST_TEST(s.value().sleeps == 1u);
    BOOST_TEST((got->value().outcome == outcome::exact(2'340'000)));
    BOOST_TEST(got->value().slept.count() == 2'000'000u);
    BOOST_TEST(got->value().parks == 4u);
}

BOOST_AUTO_TEST_CASE(fill_wait_on_a_seen_word_with_the_work_pending_lets_others_run) {
    // The word is already there, so each park completes at once without suspending, while the
    // status query says pending four times (more work behind the store). The wait must still
    // give way to the other task between its queries, or it holds the thread until the stream
    // drains.
    struct word_first_source : line_source {
        using line_source::line_source;
        std::vector<char>* log = nullptr;
        query_result query() {
            log->push_back('q');
            return ++queries < 5 ? query_result::pending() : query_result::done();
        }
    };
    manual_clock clk;
    scripted_idle idle(clk);
    completion_line line;
    line.words[0].store(1);
    std::vector<char> log;
    word_first_source src(line);
    src.log = &log;
    fill_executor ex;
    std::optional<wait_result> got;
    ex.spawn([](reactor& r, word_first_source& s, manual_clock& c,
                std::optional<wait_result>& out) -> fill_task<> {
        out = co_await fill_wait(r, s, wait_plan::recommended(), std::nullopt, c);
    }(ex.get_reactor(), src, clk, got));
    ex.spawn([](std::vector<char>& l) -> fill_task<> {
        for (int i = 0; i < 6; ++i) {
            l.push_back('w');
            co_await yield_now();
        }
    }(log));
    const auto s = ex.run(idle);
    BOOST_REQUIRE(s.has_value());
    BOOST_REQUIRE(got.has_value());
    BOOST_REQUIRE(got->has_value());
    BOOST_TEST((got->value().kind == wait_kind::parked));
    BOOST_TEST(src.queries == 5);
    // No two queries in a row: the worker ran between each pair.
    const std::string order(log.begin(), log.end());
    BOOST_TEST(order.find("qq") == std::string::npos, order);
    BOOST_TEST(order.substr(0, 10) == "qwqwqwqwqw");
}

BOOST_AUTO_TEST_CASE(fill_wait_poll_and_errors) {
    {
        manual_clock clk;
        scripted_idle idle(clk);
        completion_line line;
        line_source src(line);
        fill_executor ex;
        std::optional<wait_result> got;
        ex.spawn([](reactor& r, line_source& s, manual_clock& c,
                    std::optional<wait_result>& out) -> fill_task<> {
            out = co_await fill_wait(r, s, wait_plan::poll().value(), std::nullopt, c);
        }(ex.get_reactor(), src, clk, got));
        ex.spawn([](manual_clock& c, completion_line& l) -> fill_task<> {
            for (int i = 0; i < 5; ++i) {
                c.advance(us(10));
                co_await yield_now();
            }
            l.words[0].store(1);
        }(clk, line));
        const auto s = ex.run(idle);
        BOOST_REQUIRE(s.has_value());
        BOOST_REQUIRE(got.has_value());
        BOOST_REQUIRE(got->has_value());
        BOOST_TEST((got->value().kind == wait_kind::parked));
        BOOST_TEST(src.queries == 7); // polls interleave with the worker's slices
    }
    {
        manual_clock clk;
        scripted_idle idle(clk);
        completion_line line;
        line_source src(line);
        src.fail = std::make_error_code(std::errc::io_error);
        fill_executor ex;
        std::optional<wait_result> got;
        ex.spawn([](reactor& r, line_source& s, manual_clock& c,
                    std::optional<wait_result>& out) -> fill_task<> {
            out = co_await fill_wait(r, s, wait_plan::recommended(), std::nullopt, c);
        }(ex.get_reactor(), src, clk, got));
        const auto s = ex.run(idle);
        BOOST_REQUIRE(s.has_value());
        BOOST_REQUIRE(got.has_value());
        BOOST_TEST((got->error() == std::errc::io_error));
    }
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_core_fill_executor
