// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/fill/std_idle.hpp>
#include <gpu_async/host/std_host.hpp>

#include <gpu_async/device/sim_device.hpp>
#include <gpu_async/fill/fill_executor.hpp>

#include "common/work_gate.hpp"

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <string>
#include <thread>

namespace unit_hosts_std_host {

using namespace gpu_async;

namespace {

wait_plan plan_of(std::string_view text) {
    auto p = wait_plan::parse(text);
    BOOST_TEST_REQUIRE(p.has_value(), text);
    return p.value();
}

constexpr std::string_view flag_text = "flag:park_us=100,backstop_us=1000";
constexpr std::string_view flag_predict_text =
    "flag:park_us=100,backstop_us=1000+predict:margin_us=150,min_sleep_us=20,max_sleep_us=50000,"
    "window=8";
constexpr std::string_view poll_predict_text =
    "poll+predict:margin_us=150,min_sleep_us=20,max_sleep_us=50000,window=8";

// Work after its gate opens: long enough for a predicting point to learn a sleep.
constexpr dur_ns work = dur_ns::from_ms(20);

} // namespace

BOOST_AUTO_TEST_SUITE(std_host)

BOOST_AUTO_TEST_CASE(clock_is_monotonic) {
    const std_clock clk;
    mono_ns last = clk.now();
    for (int i = 0; i < 1000; ++i) {
        const mono_ns t = clk.now();
        BOOST_TEST(t.ns >= last.ns);
        last = t;
    }
    BOOST_TEST(std_clock::to_time_point(mono_ns::max()).time_since_epoch().count() > 0);
}

BOOST_AUTO_TEST_CASE(timer_never_returns_before_the_deadline) {
    const std_clock clk;
    std_timer tmr;
    const mono_ns start = clk.now();
    const mono_ns at = start.after(dur_ns::from_ms(2));
    tmr.sleep_until(at);
    const mono_ns end = clk.now();
    BOOST_TEST(end.ns >= at.ns);
    BOOST_TEST_MESSAGE("std_timer: 2 ms sleep overshot by " << end.since(at).count() << " ns");
    // A deadline in the past returns at once (and still not before it).
    tmr.sleep_until(start);
    BOOST_TEST(clk.now().ns >= start.ns);
}

BOOST_AUTO_TEST_CASE(idle_says_which_park_it_runs) {
    const std_idle idle;
    BOOST_TEST((idle.path() == word_wait::probe().path()));
    BOOST_TEST(idle.name() == word_wait::probe().name());
    BOOST_TEST(!idle.name().empty());
    const std_idle portable(word_wait::portable());
    BOOST_TEST((portable.path() == word_wait_path::fallback));
    BOOST_TEST(std_idle::label() == "gpu-reactor");
    BOOST_TEST_MESSAGE("std_idle parks with: " << idle.name());
}

BOOST_AUTO_TEST_CASE(idle_park_sees_a_store_and_honours_its_bound) {
    std_idle idle;
    completion_line line;
    const memory_descriptor d(line, *slot_id::at(3), 1);
    // Nothing stores: the park ends at its bound (not before), returning false.
    const mono_ns before = idle.now();
    BOOST_TEST(!idle.park_line(
        line, [&] { return d.is_complete(); }, dur_ns::from_us(500)));
    BOOST_TEST(idle.now().since(before).count() >= dur_ns::from_us(500).count());
    // A store from another thread ends a long park.
    std::thread producer([&] { line.words[3].store(1, std::memory_order_release); });
    const bool seen = idle.park_line(
        line, [&] { return d.is_complete(); }, dur_ns::from_ms(10000));
    producer.join();
    BOOST_TEST(seen);
    // Sleeping to a deadline.
    const mono_ns at = idle.now().after(dur_ns::from_us(300));
    idle.sleep_until(at);
    BOOST_TEST(idle.now().ns >= at.ns);
}

BOOST_AUTO_TEST_CASE(plan_capabilities_follow_the_probe) {
    const plan_capabilities portable = std_plan_capabilities(word_wait::portable());
    BOOST_TEST(!portable.has(plan_capability::word_park));
    BOOST_TEST(portable.why_missing(plan_capability::word_park) == "no user-mode monitor");
    BOOST_TEST(portable.has(plan_capability::word_store));
    const resolved_plan r = resolve(plan_of(flag_text), portable);
    BOOST_TEST(r.plan.label() == "poll");
    BOOST_TEST_REQUIRE(r.warning.has_value());
    BOOST_TEST(r.warning->code() == errc::park_fallback);
    const plan_capabilities probed = std_plan_capabilities();
    BOOST_TEST(probed.has(plan_capability::word_park) ==
               (word_wait::probe().path() != word_wait_path::fallback));
}

BOOST_AUTO_TEST_CASE(blocking_wait_with_each_plan) {
    sim_device dev;
    auto s_handle = dev.make_stream();
    sim_stream& s = *s_handle;
    point_table<std::string> table;
    struct row {
        std::string_view plan;
        wait_kind kind;
    };
    for (const row& r :
         {row{"block", wait_kind::blocked}, row{"poll", wait_kind::parked},
          row{flag_text, wait_kind::parked}, row{flag_predict_text, wait_kind::parked}}) {
        BOOST_TEST_CONTEXT(r.plan) {
            // Pending at the first query whatever the scheduler does: the work waits behind a
            // gate the wait opens at its second query, its first park or its block().
            gpu_async::test::work_gate gate;
            const std::uint64_t seq = s.enqueue(gate.item());
            gpu_async::test::gated_source src{s, gate, 2, true};
            const wait_result res = wait_blocking(src, plan_of(r.plan), table, std::string(r.plan));
            BOOST_TEST_REQUIRE(res.has_value(), res.message());
            BOOST_TEST(s.descriptor_for(seq).is_complete());
            BOOST_TEST(s.query().is_done());
            BOOST_TEST((res.value().kind == r.kind));
            BOOST_TEST(res.value().total.count() > 0);
            BOOST_TEST_MESSAGE(r.plan << ": " << to_string(res.value().kind) << " in "
                                      << res.value().total.count() << " ns, " << res.value().parks
                                      << " parks");
        }
    }
    // Only the predicting plan fed the table.
    BOOST_TEST(table.size() == 1u);
    BOOST_TEST(table.find(std::string(flag_predict_text)) != nullptr);
}

BOOST_AUTO_TEST_CASE(predicting_wait_learns_then_sleeps) {
    sim_device dev;
    auto s_handle = dev.make_stream();
    sim_stream& s = *s_handle;
    point_table<int> table;
    const wait_plan plan = plan_of(poll_predict_text);
    // Each wait's work waits behind a gate it opens at its second query: pending at the first
    // whatever the scheduler does, then `work` long.
    gpu_async::test::work_gate cold_gate;
    s.enqueue(cold_gate.item());
    s.enqueue(work);
    gpu_async::test::gated_source cold_source{s, cold_gate, 2, false};
    const wait_result cold = wait_blocking(cold_source, plan, table, 7);
    BOOST_TEST_REQUIRE(cold.has_value(), cold.message());
    BOOST_TEST(cold.value().slept.count() == 0u); // a cold point does not sleep
    BOOST_TEST_REQUIRE(table.sleep_ns(7, *plan.predict()).has_value());
    gpu_async::test::work_gate warm_gate;
    s.enqueue(warm_gate.item());
    s.enqueue(work);
    gpu_async::test::gated_source warm_source{s, warm_gate, 2, false};
    const wait_result warm = wait_blocking(warm_source, plan, table, 7);
    BOOST_TEST_REQUIRE(warm.has_value(), warm.message());
    BOOST_TEST(warm.value().slept.count() > 0u);
    BOOST_TEST(s.query().is_done());
    BOOST_TEST_MESSAGE("warm wait: " << to_string(warm.value().kind) << ", slept "
                                     << warm.value().slept.count() << " ns of "
                                     << warm.value().total.count());
}

BOOST_AUTO_TEST_CASE(blocking_wait_reports_a_device_fault_and_learns_nothing) {
    sim_device dev;
    point_table<int> table;
    for (std::string_view text :
         {std::string_view("block"), std::string_view("poll"), flag_text, flag_predict_text}) {
        BOOST_TEST_CONTEXT(text) {
            auto s_handle = dev.make_stream();
            sim_stream& s = *s_handle;
            s.enqueue(dur_ns::from_ms(1));
            s.enqueue_fault();
            const wait_result r = wait_blocking(s, plan_of(text), table, 1);
            BOOST_TEST(!r.has_value());
            BOOST_TEST((r.error() == errc::device_fault));
        }
    }
    BOOST_TEST(table.empty());
}

BOOST_AUTO_TEST_CASE(fill_executor_runs_on_the_std_idle) {
    sim_device dev;
    auto a_handle = dev.make_stream();
    sim_stream& a = *a_handle;
    auto b_handle = dev.make_stream();
    sim_stream& b = *b_handle;
    fill_executor ex;
    const std_clock clk;
    std::atomic<int> finished{0};
    // The items wait behind a gate that a task opens once the reactor has parked: the waits
    // pend however slow the machine.
    gpu_async::test::work_gate gate;
    // Park steps of 2 ms: a sanitizer build's turns take tens of microseconds, and with 100 us
    // steps one may expire before every turn, so the reactor never idles.
    auto waiter = [&](sim_stream& s) -> fill_task<> {
        s.enqueue(gate.item());
        auto r = co_await fill_wait(
            ex.get_reactor(), s, plan_of("flag:park_us=2000,backstop_us=10000"), std::nullopt, clk);
        if (r.has_value()) ++finished;
    };
    auto opener = [&]() -> fill_task<> {
        for (int i = 0; i < 5000 && ex.stats().parks == 0; ++i) // at most a second
            co_await ex.get_reactor().alarm(clk.now().after(dur_ns::from_us(200)));
        gate.open();
    };
    ex.spawn(waiter(a));
    ex.spawn(waiter(b));
    ex.spawn(opener());
    std_idle idle;
    auto stats = ex.run(idle);
    BOOST_TEST_REQUIRE(stats.has_value());
    BOOST_TEST(finished.load() == 2);
    BOOST_TEST(stats.value().parks > 0u);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_hosts_std_host
