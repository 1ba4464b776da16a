#include <gpu_async/core/reactor.hpp>

#include "common/scripted_idle.hpp"

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

using namespace gpu_async;
using gpu_async::test::scripted_idle;
using gpu_async::test::store_at;

namespace {

constexpr mono_ns at_us(std::uint64_t us) {
    return mono_ns{us * 1000};
}
constexpr dur_ns us(std::uint64_t n) {
    return dur_ns::from_us(n);
}

memory_descriptor desc(const completion_line& line, std::size_t slot, std::uint64_t target) {
    return memory_descriptor(line, *slot_id::at(slot), target);
}

static_assert(reactor_idle<scripted_idle>);

} // namespace

BOOST_AUTO_TEST_SUITE(reactor_suite)

BOOST_AUTO_TEST_CASE(fire_wakes_completed_descriptors_and_passed_deadlines) {
    completion_line line;
    reactor r;
    reactor_waiter done_w, deadline_w, pending_w, both_w, alarm_w, later_w;
    r.watch(desc(line, 0, 1), std::nullopt, done_w);
    r.watch(desc(line, 1, 1), at_us(10), deadline_w);
    r.watch(desc(line, 2, 1), at_us(20), pending_w);
    r.watch(desc(line, 3, 1), at_us(10), both_w);
    r.add_alarm(at_us(10), alarm_w);
    r.add_alarm(at_us(11), later_w);
    BOOST_TEST(r.fire(at_us(9)) == 0u);
    BOOST_TEST(r.pop_fired() == nullptr);

    line.words[0].store(1);
    line.words[3].store(7); // completed, and its deadline has passed too: completion wins
    BOOST_TEST(r.fire(at_us(10)) == 4u);
    BOOST_TEST(r.pop_fired() == &done_w);
    BOOST_TEST(r.pop_fired() == &deadline_w);
    BOOST_TEST(r.pop_fired() == &both_w);
    BOOST_TEST(r.pop_fired() == &alarm_w);
    BOOST_TEST(r.pop_fired() == nullptr);
    BOOST_TEST(done_w.completed);
    BOOST_TEST(!deadline_w.completed);
    BOOST_TEST(both_w.completed);
    BOOST_TEST(alarm_w.completed);
    BOOST_TEST((deadline_w.fired_at == at_us(10)));
    BOOST_TEST(r.watched_count() == 1u);
    BOOST_TEST(r.alarm_count() == 1u);
    BOOST_TEST(!r.empty());
}

BOOST_AUTO_TEST_CASE(cancel_before_and_after_firing) {
    completion_line line;
    reactor r;
    reactor_waiter a, b, c;
    const auto ia = r.watch(desc(line, 0, 1), std::nullopt, a);
    const auto ib = r.add_alarm(at_us(1), b);
    const auto ic = r.watch(desc(line, 1, 1), std::nullopt, c);
    BOOST_TEST(r.cancel(ia));
    BOOST_TEST(!r.cancel(ia));
    BOOST_TEST(r.cancel(ib));
    line.words[1].store(1);
    BOOST_TEST(r.fire(at_us(0)) == 1u);
    BOOST_TEST(r.fired_count() == 1u);
    BOOST_TEST(r.cancel(ic)); // taken off the fired list
    BOOST_TEST(r.pop_fired() == nullptr);
    BOOST_TEST(r.empty());
    BOOST_TEST(!r.cancel(12345));
}

BOOST_AUTO_TEST_CASE(turn_wakes_without_idling_when_something_is_due) {
    manual_clock clk(at_us(3));
    scripted_idle idle(clk);
    completion_line line;
    line.words[0].store(2);
    reactor r;
    reactor_waiter w;
    r.watch(desc(line, 0, 2), std::nullopt, w);
    const auto t = r.turn(idle, us(100), 1);
    BOOST_REQUIRE(t.has_value());
    BOOST_TEST((t.value().idled == idle_kind::none));
    BOOST_TEST(t.value().woken == 1u);
    BOOST_TEST(idle.calls.empty());
    BOOST_TEST(r.pop_fired() == &w);
}

BOOST_AUTO_TEST_CASE(turn_with_only_alarms_sleeps_to_the_earliest) {
    manual_clock clk;
    scripted_idle idle(clk);
    reactor r;
    reactor_waiter a, b;
    r.add_alarm(at_us(700), a);
    r.add_alarm(at_us(300), b);
    const auto t = r.turn(idle, us(100), 2);
    BOOST_REQUIRE(t.has_value());
    BOOST_TEST((t.value().idled == idle_kind::slept));
    BOOST_TEST(t.value().woken == 1u);
    BOOST_TEST(t.value().idle_time.count() == 300'000u);
    BOOST_REQUIRE(idle.calls.size() == 1u);
    BOOST_TEST((idle.calls[0].until == at_us(300)));
    BOOST_TEST(r.pop_fired() == &b);
    BOOST_TEST((b.fired_at == at_us(300)));
}

BOOST_AUTO_TEST_CASE(turn_parks_on_the_line_of_the_earliest_registered_descriptor) {
    manual_clock clk;
    scripted_idle idle(clk);
    completion_line first, second;
    reactor r;
    reactor_waiter w1, w2;
    r.watch(desc(second, 0, 1), std::nullopt, w2); // registered first
    r.watch(desc(first, 0, 1), std::nullopt, w1);
    const auto t = r.turn(idle, us(100), 2);
    BOOST_REQUIRE(t.has_value());
    BOOST_TEST((t.value().idled == idle_kind::parked));
    BOOST_TEST(t.value().woken == 0u);
    BOOST_TEST(t.value().park_bound.count() == 100'000u);
    BOOST_REQUIRE(idle.calls.size() == 1u);
    BOOST_TEST(idle.calls[0].line == &second);
    BOOST_TEST(idle.calls[0].bound.count() == 100'000u);
    BOOST_TEST((clk.now() == at_us(100)));
}

BOOST_AUTO_TEST_CASE(one_park_watches_every_slot_of_its_line) {
    manual_clock clk;
    scripted_idle idle(clk);
    completion_line line;
    reactor r;
    reactor_waiter w0, w5;
    r.watch(desc(line, 0, 1), std::nullopt, w0);
    r.watch(desc(line, 5, 3), std::nullopt, w5);
    store_at(clk, line, 5, 3, at_us(40)); // a store to another slot of the parked line
    const auto t = r.turn(idle, us(100), 2);
    BOOST_REQUIRE(t.has_value());
    BOOST_TEST((t.value().idled == idle_kind::parked));
    BOOST_TEST(t.value().woken == 1u);
    BOOST_TEST(idle.calls.at(0).result);
    BOOST_TEST((idle.calls.at(0).returned == at_us(40)));
    BOOST_TEST(r.pop_fired() == &w5);
    BOOST_TEST(w5.completed);
}

BOOST_AUTO_TEST_CASE(never_parks_past_a_deadline) {
    manual_clock clk;
    scripted_idle idle(clk);
    completion_line line, other;
    reactor r;
    reactor_waiter w, x, a;
    r.watch(desc(line, 0, 1), std::nullopt, w);
    r.watch(desc(other, 0, 1), at_us(150), x); // another line's deadline bounds the park
    auto t = r.turn(idle, dur_ns::from_ms(1), 2);
    BOOST_REQUIRE(t.has_value());
    BOOST_TEST(idle.calls.at(0).bound.count() == 150'000u);
    BOOST_TEST(t.value().woken == 1u);
    BOOST_TEST(r.pop_fired() == &x);
    BOOST_TEST(!x.completed);
    BOOST_TEST((x.fired_at == at_us(150)));
    // An alarm bounds the park too.
    r.add_alarm(at_us(170), a);
    t = r.turn(idle, dur_ns::from_ms(1), 2);
    BOOST_REQUIRE(t.has_value());
    BOOST_TEST(idle.calls.at(1).bound.count() == 20'000u);
    BOOST_TEST(r.pop_fired() == &a);
}

BOOST_AUTO_TEST_CASE(random_registrations_never_park_past_the_earliest_deadline) {
    std::mt19937_64 rng(42);
    for (int trial = 0; trial < 500; ++trial) {
        manual_clock clk(mono_ns{rng() % 1'000'000});
        scripted_idle idle(clk);
        completion_line lines[3];
        reactor r;
        std::vector<reactor_waiter> waiters(12);
        std::optional<mono_ns> earliest;
        for (auto& w : waiters) {
            const mono_ns at = clk.now().after(dur_ns{1 + rng() % 5'000'000});
            if (rng() % 4 == 0) {
                r.add_alarm(at, w);
                earliest = earliest ? min(*earliest, at) : at;
            } else if (rng() % 2 == 0) {
                r.watch(desc(lines[rng() % 3], rng() % 8, 1), at, w);
                earliest = earliest ? min(*earliest, at) : at;
            } else {
                r.watch(desc(lines[rng() % 3], rng() % 8, 1), std::nullopt, w);
            }
        }
        const dur_ns bound{1 + rng() % 3'000'000};
        const mono_ns start = clk.now();
        const auto t = r.turn(idle, bound, waiters.size());
        BOOST_REQUIRE(t.has_value());
        BOOST_REQUIRE(idle.calls.size() == 1u);
        if (earliest) BOOST_REQUIRE(clk.now() <= *earliest);
        if (idle.calls[0].what == scripted_idle::op::park)
            BOOST_REQUIRE(clk.now() <= start.after(bound));
    }
}

BOOST_AUTO_TEST_CASE(nothing_registered_with_tasks_left_is_a_stall) {
    manual_clock clk;
    scripted_idle idle(clk);
    reactor r;
    const auto t = r.turn(idle, us(100), 3);
    BOOST_REQUIRE(!t.has_value());
    BOOST_TEST((t.error().code() == errc::stalled));
    BOOST_REQUIRE(t.error().args().size() == 1u);
    BOOST_TEST(t.error().args()[0] == "3");
    BOOST_TEST(t.error().message() ==
               "stalled: 3 task(s) left and nothing registered to wake them");
    BOOST_TEST(idle.calls.empty());
    // No tasks left: nothing to do, no error.
    const auto none = r.turn(idle, us(100), 0);
    BOOST_REQUIRE(none.has_value());
    BOOST_TEST((none.value().idled == idle_kind::none));
}

BOOST_AUTO_TEST_SUITE_END()
