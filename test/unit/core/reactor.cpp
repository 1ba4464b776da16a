// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/fill/reactor.hpp>

#include "common/scripted_idle.hpp"
#include "common/virtual_time.hpp"

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

namespace unit_core_reactor {

using namespace gpu_async;
using gpu_async::test::at_us;
using gpu_async::test::desc;
using gpu_async::test::scripted_idle;
using gpu_async::test::store_at;
using gpu_async::test::us;

namespace {

static_assert(reactor_idle<scripted_idle>);

// A line life (given to the reactor) whose slot 0 is retired and reused right after it judged a
// wait of generation 1 (when `retire_next` is set): the judgement says live, then the slot moves to
// generation 3, the epoch moves, and the new stream stores `store`. The FILL reactor hears of
// no retirement; it must not complete the old wait with the new stream's number.
struct reused_slot {
    std::uint64_t generation = 1;
    std::uint64_t epoch = 1;
    bool retire_next = false;
    completion_line* line = nullptr;
    std::uint64_t store = 0;
};
reused_slot life;

line_status reused_status(const memory_descriptor& d) noexcept {
    const line_status st =
        d.generation() == life.generation ? line_status::live : line_status::stale;
    if (life.retire_next && d.generation() == 1) {
        life.retire_next = false;
        life.generation = 3;
        ++life.epoch;
        life.line->words[0].store(life.store, std::memory_order_release);
    }
    return st;
}
std::uint64_t reused_epoch() noexcept {
    return life.epoch;
}

/// Sets reused_status's slot up for one test; its reactor is given it (life()).
struct reused_life {
    explicit reused_life(completion_line& line, std::uint64_t store) {
        life = reused_slot{};
        life.line = &line;
        life.store = store;
    }
    static line_life_functions functions() noexcept { return {&reused_status, &reused_epoch}; }
    reused_life(const reused_life&) = delete;
    reused_life& operator=(const reused_life&) = delete;
};

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

// A descriptor found complete as it registered waits for the next fire(), which reads it again:
// set back meanwhile, it is watched again there, and its deadline, passed by then, ends it.
BOOST_AUTO_TEST_CASE(a_wait_complete_at_registration_then_set_back_expires_at_its_deadline) {
    completion_line line;
    line.words[0].store(5);
    reactor r;
    reactor_waiter w;
    r.watch(desc(line, 0, 5), at_us(10), w);
    BOOST_TEST(r.any_complete_on(line));
    line.words[0].store(4); // set back
    BOOST_TEST(!r.any_complete_on(line));
    BOOST_TEST(r.fire(at_us(20)) == 1u);
    BOOST_TEST(r.pop_fired() == &w);
    BOOST_TEST(!w.completed);
    BOOST_TEST((w.end == wait_end::expired));
    BOOST_TEST(r.watched_count() == 0u);
}

// A descriptor found complete as it registered can still be cancelled before it fires; the
// others found with it fire.
BOOST_AUTO_TEST_CASE(a_wait_complete_at_registration_is_cancelled_before_it_fires) {
    completion_line line;
    line.words[0].store(5);
    reactor r;
    reactor_waiter a, b, c;
    const reactor::registration ida = r.watch(desc(line, 0, 5), std::nullopt, a);
    r.watch(desc(line, 0, 3), std::nullopt, b);
    const reactor::registration idc = r.watch(desc(line, 0, 4), at_us(1), c);
    BOOST_TEST(r.cancel(ida));
    BOOST_TEST(!r.cancel(ida));
    BOOST_TEST(r.cancel(idc));
    BOOST_TEST(r.fire(at_us(5)) == 1u);
    BOOST_TEST(r.pop_fired() == &b);
    BOOST_TEST(r.pop_fired() == nullptr);
    BOOST_TEST(r.empty());
}

BOOST_AUTO_TEST_CASE(targets_across_the_wrap_fire_in_wrapping_order) {
    completion_line line;
    constexpr std::uint64_t top = ~std::uint64_t{0};
    line.words[4].store(top - 1);
    reactor r;
    reactor_waiter at1, at0, at_top, done_w;
    r.watch(desc(line, 4, 1), std::nullopt, at1);          // two stores past the wrap
    r.watch(desc(line, 4, 0), std::nullopt, at0);          // one store past it
    r.watch(desc(line, 4, top), std::nullopt, at_top);     // the last value before it
    r.watch(desc(line, 4, top - 5), std::nullopt, done_w); // already reached when watched
    BOOST_TEST(r.any_complete_on(line));
    BOOST_TEST(r.fire(at_us(0)) == 1u);
    BOOST_TEST(r.pop_fired() == &done_w);
    BOOST_TEST(!r.any_complete_on(line));
    line.words[4].store(0);
    BOOST_TEST(r.any_complete_on(line));
    BOOST_TEST(r.fire(at_us(0)) == 2u);
    BOOST_TEST(r.pop_fired() == &at0); // registration order
    BOOST_TEST(r.pop_fired() == &at_top);
    BOOST_TEST(r.watched_count() == 1u);
    line.words[4].store(1);
    BOOST_TEST(r.fire(at_us(0)) == 1u);
    BOOST_TEST(r.pop_fired() == &at1);
    BOOST_TEST(r.empty());
}

// The reactor keeps its registrations in ordered groups; this checks it against the rule it
// implements, a scan of every registration, over random registrations, stores (forward across
// the wrap, sometimes back, sometimes far), deadlines, alarms and cancels.
BOOST_AUTO_TEST_CASE(fire_agrees_with_a_scan_of_every_registration) {
    struct model_entry {
        reactor::registration id;
        bool alarm;
        std::optional<memory_descriptor> d;
        std::optional<mono_ns> at;
        reactor_waiter* w;
    };
    std::mt19937_64 rng(7);
    for (int trial = 0; trial < 200; ++trial) {
        completion_line lines[3];
        const std::uint64_t start = ~std::uint64_t{0} - rng() % 64;
        for (auto& l : lines)
            for (auto& word : l.words)
                word.store(start + rng() % 4);
        reactor r;
        std::vector<reactor_waiter> waiters(64);
        std::vector<model_entry> model;
        std::size_t used = 0;
        mono_ns now = at_us(0);
        for (int step = 0; step < 60; ++step) {
            // Register a few.
            for (int k = 0; k < 3 && used < waiters.size(); ++k) {
                reactor_waiter& w = waiters[used++];
                const std::optional<mono_ns> at =
                    rng() % 2 == 0 ? std::optional<mono_ns>(now.after(us(rng() % 50)))
                                   : std::nullopt;
                if (rng() % 5 == 0) {
                    const mono_ns a = now.after(us(rng() % 50));
                    model.push_back({r.add_alarm(a, w), true, std::nullopt, a, &w});
                    continue;
                }
                const completion_line& l = lines[rng() % 3];
                const std::size_t slot = rng() % 8;
                const std::uint64_t word = l.words[slot].load();
                std::uint64_t target = word - 3 + rng() % 24;
                if (rng() % 25 == 0) target = word + (std::uint64_t{1} << 63) + rng() % 8; // far
                const memory_descriptor d = desc(l, slot, target);
                model.push_back({r.watch(d, at, w), false, d, at, &w});
            }
            // Cancel one now and then.
            if (!model.empty() && rng() % 6 == 0) {
                const std::size_t i = rng() % model.size();
                BOOST_REQUIRE(r.cancel(model[i].id));
                model.erase(model.begin() + static_cast<std::ptrdiff_t>(i));
            }
            // Move words: mostly forward, sometimes back, rarely far.
            for (int k = 0; k < 4; ++k) {
                auto& word = lines[rng() % 3].words[rng() % 8];
                const std::uint64_t roll = rng() % 40;
                if (roll == 0)
                    word.store(word.load() + (std::uint64_t{1} << 62) + rng() % 8);
                else if (roll == 1) // half the range away: behind every target it had reached
                    word.store(word.load() + (std::uint64_t{1} << 63) + rng() % 8);
                else if (roll < 4)
                    word.store(word.load() - rng() % 6);
                else
                    word.store(word.load() + rng() % 5);
            }
            now = now.after(us(rng() % 20));
            // What a scan says.
            bool complete_on[3] = {false, false, false};
            std::vector<std::pair<reactor_waiter*, bool>> expect_descriptors, expect_alarms;
            std::vector<model_entry> left;
            std::optional<mono_ns> earliest;
            for (const auto& e : model) {
                if (e.alarm) {
                    if (*e.at <= now)
                        expect_alarms.emplace_back(e.w, true);
                    else
                        left.push_back(e);
                    continue;
                }
                const bool done = e.d->is_complete();
                for (int i = 0; i < 3; ++i)
                    complete_on[i] = complete_on[i] || (done && &e.d->line() == &lines[i]);
                if (done || (e.at && *e.at <= now))
                    expect_descriptors.emplace_back(e.w, done);
                else
                    left.push_back(e);
            }
            for (int i = 0; i < 3; ++i)
                BOOST_REQUIRE(r.any_complete_on(lines[i]) == complete_on[i]);
            BOOST_REQUIRE(r.fire(now) == expect_descriptors.size() + expect_alarms.size());
            for (const auto* expect : {&expect_descriptors, &expect_alarms}) {
                for (const auto& [w, completed] : *expect) {
                    BOOST_REQUIRE(r.pop_fired() == w);
                    BOOST_REQUIRE(w->completed == completed);
                    BOOST_REQUIRE((w->fired_at == now));
                }
            }
            BOOST_REQUIRE(r.pop_fired() == nullptr);
            model = std::move(left);
            for (const auto& e : model)
                if (e.at && (!earliest || *e.at < *earliest)) earliest = e.at;
            BOOST_REQUIRE((r.earliest_deadline() == earliest));
            BOOST_REQUIRE(r.watched_count() + r.alarm_count() == model.size());
        }
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

BOOST_AUTO_TEST_CASE(ready_is_not_complete_when_its_slot_is_reused_across_the_read) {
    completion_line line;
    reused_life slot_life(line, 5);
    reactor r(reused_life::functions());
    life.retire_next = true; // between ready()'s judgement and its read
    auto awaiter = r.ready(memory_descriptor(line, *slot_id::at(0), 5, 1));
    BOOST_TEST(!awaiter.await_ready());
    BOOST_TEST(line.words[0].load() == 5u);
}

BOOST_AUTO_TEST_CASE(fire_does_not_complete_a_wait_whose_slot_was_reused_while_it_scanned) {
    completion_line line;
    reused_life slot_life(line, 5);
    reactor r(reused_life::functions());
    reactor_waiter old_w;
    r.watch(memory_descriptor(line, *slot_id::at(0), 5, 1), std::nullopt, old_w);
    BOOST_TEST(r.fire(at_us(1)) == 0u);
    // Another line's life moves, so the next fire judges its waits again: the judgement says
    // live, then the slot is reused and its new stream stores the old wait's target before the
    // scan reads it.
    ++life.epoch;
    life.retire_next = true;
    BOOST_TEST(r.fire(at_us(2)) == 1u);
    BOOST_TEST(r.pop_fired() == &old_w);
    BOOST_TEST(!old_w.completed);
    BOOST_TEST((old_w.end == wait_end::aborted));
    // A wait of the new stream completes.
    reactor_waiter new_w;
    r.watch(memory_descriptor(line, *slot_id::at(0), 5, 3), std::nullopt, new_w);
    BOOST_TEST(r.fire(at_us(3)) == 1u);
    BOOST_TEST(r.pop_fired() == &new_w);
    BOOST_TEST(new_w.completed);
}

BOOST_AUTO_TEST_CASE(fire_does_not_complete_an_early_wait_whose_slot_was_reused) {
    // Found complete when registered, then judged and read again at fire(): the slot is reused
    // between that judgement and that read.
    completion_line line;
    line.words[0].store(5);
    reused_life slot_life(line, 6);
    reactor r(reused_life::functions());
    reactor_waiter early_w;
    r.watch(memory_descriptor(line, *slot_id::at(0), 5, 1), std::nullopt, early_w);
    life.retire_next = true;
    BOOST_TEST(r.fire(at_us(1)) == 1u);
    BOOST_TEST(r.pop_fired() == &early_w);
    BOOST_TEST(!early_w.completed);
    BOOST_TEST((early_w.end == wait_end::aborted));
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_core_reactor
