// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/device/sim_device.hpp>

#include <gpu_async/core/wait_machine.hpp>
#include <gpu_async/core/wait_plan.hpp>
#include <gpu_async/host/std_clock.hpp>

#include "common/eventually.hpp"
#include "common/work_gate.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <system_error>
#include <thread>
#include <vector>

namespace unit_devices_sim_device {

using namespace gpu_async;
using gpu_async::test::eventually;

namespace {

static_assert(completion_source<sim_stream>);
static_assert(!std::is_copy_constructible_v<sim_stream>);
static_assert(!std::is_constructible_v<sim_stream, sim_device&>);
static_assert(!std::is_copy_constructible_v<sim_device>);
static_assert(!std::is_copy_constructible_v<sim_stream_handle>);
static_assert(!std::is_copy_assignable_v<sim_stream_handle>);
static_assert(std::is_nothrow_move_constructible_v<sim_stream_handle>);
static_assert(std::is_nothrow_move_assignable_v<sim_stream_handle>);
static_assert(!std::is_convertible_v<sim_stream_handle, bool>);
static_assert(!std::is_convertible_v<sim_stream_handle, sim_stream&>);

constexpr dur_ns long_bound = dur_ns::from_ms(10000);

// Parks on `s` until its tail is stored or it fails; bounded at ~10 s in all.
bool settle(const sim_stream& s) {
    for (int i = 0; i < 100; ++i) {
        if (s.park(dur_ns::from_ms(100))) return true;
        if (s.query().is_failed()) return false;
    }
    return false;
}

} // namespace

BOOST_AUTO_TEST_SUITE(sim_device_suite)

BOOST_AUTO_TEST_CASE(sequence_numbers_and_descriptor) {
    sim_device dev;
    auto s_handle = dev.make_stream();
    sim_stream& s = *s_handle;
    BOOST_TEST(s.tail() == 0u);
    BOOST_TEST(s.query().is_done()); // nothing enqueued
    BOOST_TEST(s.descriptor().is_complete());
    BOOST_TEST(s.slot().index() == 0u);
    BOOST_TEST(s.enqueue(dur_ns::from_us(10)) == 1u);
    BOOST_TEST(s.enqueue([] {}) == 2u);
    BOOST_TEST(s.enqueue([] {}, dur_ns::from_us(10)) == 3u);
    BOOST_TEST(s.tail() == 3u);
    const memory_descriptor d = s.descriptor();
    BOOST_TEST(&d.line() == &s.line());
    BOOST_TEST(d.target() == 3u);
    BOOST_TEST(s.arm().value() == 0);
    BOOST_TEST(!s.block());
    BOOST_TEST(s.word() == 3u);
    BOOST_TEST(s.query().is_done());
    BOOST_TEST(d.is_complete());
    BOOST_TEST(s.descriptor_for(2).is_complete());
    BOOST_TEST(!s.error());
}

BOOST_AUTO_TEST_CASE(items_run_in_order_per_stream) {
    sim_device dev;
    auto s_handle = dev.make_stream();
    sim_stream& s = *s_handle;
    std::vector<int> order; // written by the device thread only, read after block()
    s.enqueue([&] { order.push_back(1); }, dur_ns::from_us(300));
    s.enqueue([&] { order.push_back(2); });
    s.enqueue([&] { order.push_back(3); }, dur_ns::from_us(100));
    BOOST_TEST(!s.block());
    BOOST_TEST((order == std::vector<int>{1, 2, 3}));
}

BOOST_AUTO_TEST_CASE(payload_visible_once_the_word_says_done) {
    // The release store behind each item publishes everything the item wrote (non-atomic data
    // here: ThreadSanitizer checks the happens-before edge).
    sim_device dev({2, false});
    auto s_handle = dev.make_stream();
    sim_stream& s = *s_handle;
    std::array<std::uint64_t, 512> payload{};
    for (std::uint64_t i = 0; i < payload.size(); ++i) {
        const std::uint64_t seq = s.enqueue([&payload, i] { payload[i] = i * 7 + 1; });
        BOOST_REQUIRE(seq == i + 1);
    }
    for (std::uint64_t i = 0; i < payload.size(); ++i) {
        const memory_descriptor d = s.descriptor_for(i + 1);
        while (!d.is_complete())
            word_wait::probe().park(
                d.line(), [&] { return d.is_complete(); }, long_bound);
        BOOST_TEST(payload[i] == i * 7 + 1);
    }
}

BOOST_AUTO_TEST_CASE(callable_may_be_move_only) {
    sim_device dev;
    auto s_handle = dev.make_stream();
    sim_stream& s = *s_handle;
    auto p = std::make_unique<int>(5);
    std::atomic<int> seen{0};
    s.enqueue([q = std::move(p), &seen] { seen.store(*q); });
    BOOST_TEST(!s.block());
    BOOST_TEST(seen.load() == 5);
}

BOOST_AUTO_TEST_CASE(fault_is_reported_and_sticky) {
    sim_device dev;
    auto s_handle = dev.make_stream();
    sim_stream& s = *s_handle;
    std::atomic<bool> ran_after{false};
    s.enqueue(dur_ns::from_us(50));
    const std::uint64_t bad = s.enqueue_fault();
    s.enqueue([&] { ran_after = true; });
    BOOST_TEST(bad == 2u);
    const std::error_code ec = s.block();
    BOOST_TEST((ec == errc::device_fault));
    const query_result q = s.query();
    BOOST_TEST(q.is_failed());
    BOOST_TEST((q.error == errc::device_fault));
    BOOST_TEST((s.error() == errc::device_fault));
    BOOST_TEST((s.arm() == errc::device_fault));
    BOOST_TEST(s.word() == 1u);      // the fault's number and everything behind it: never stored
    BOOST_TEST(!s.park(long_bound)); // returns at once: the stream failed
    BOOST_TEST(s.descriptor_for(1).is_complete());
    BOOST_TEST(!s.descriptor().is_complete());
    // Work enqueued after a fault never runs.
    s.enqueue([&] { ran_after = true; });
    BOOST_TEST(s.query().is_failed());
    dev.shutdown(sim_shutdown::drain);
    BOOST_TEST(!ran_after.load());
    BOOST_TEST(s.word() == 1u);
}

BOOST_AUTO_TEST_CASE(callable_returning_an_error_faults) {
    sim_device dev;
    auto s_handle = dev.make_stream();
    sim_stream& s = *s_handle;
    s.enqueue([]() -> std::error_code { return {}; });
    BOOST_TEST(!s.block());
    s.enqueue([]() -> std::error_code { return make_error_code(errc::backend); });
    BOOST_TEST((s.block() == errc::backend));
    BOOST_TEST((s.query().error == errc::backend));
    BOOST_TEST(s.word() == 1u);
    // A fault code given as empty becomes device_fault.
    auto t_handle = dev.make_stream();
    sim_stream& t = *t_handle;
    t.enqueue_fault(std::error_code{});
    BOOST_TEST((t.block() == errc::device_fault));
}

BOOST_AUTO_TEST_CASE(manual_mode_steps_each_completion) {
    sim_device dev({1, true});
    BOOST_TEST(dev.manual());
    auto a_handle = dev.make_stream();
    sim_stream& a = *a_handle;
    auto b_handle = dev.make_stream();
    sim_stream& b = *b_handle;
    int ran = 0;
    a.enqueue(dur_ns::from_ms(10000)); // durations are ignored in manual mode
    a.enqueue([&] { ++ran; });
    b.enqueue([&] { ++ran; });
    BOOST_TEST(a.query().is_pending());
    BOOST_TEST((a.block() == errc::stalled)); // nothing but the caller would complete it
    BOOST_TEST(!a.park(dur_ns::zero()));
    BOOST_TEST(a.word() == 0u);
    BOOST_TEST(dev.step(a));
    BOOST_TEST(a.word() == 1u);
    BOOST_TEST(a.query().is_pending());
    BOOST_TEST(dev.step(b)); // out of enqueue order, as the test likes
    BOOST_TEST(b.query().is_done());
    BOOST_TEST(ran == 1);
    BOOST_TEST(dev.step_all() == 1u);
    BOOST_TEST(ran == 2);
    BOOST_TEST(a.query().is_done());
    BOOST_TEST(!a.block());
    BOOST_TEST(!dev.step(a));
    BOOST_TEST(dev.step_all() == 0u);
    a.enqueue_fault();
    BOOST_TEST(dev.step(a));
    BOOST_TEST((a.block() == errc::device_fault));
}

BOOST_AUTO_TEST_CASE(step_refuses_a_threaded_device_or_a_foreign_stream) {
    sim_device threaded;
    auto s_handle = threaded.make_stream();
    sim_stream& s = *s_handle;
    BOOST_TEST(!threaded.step(s));
    BOOST_TEST(threaded.step_all() == 0u);
    sim_device manual({1, true});
    BOOST_TEST(!manual.step(s));
}

BOOST_AUTO_TEST_CASE(manual_park_sees_a_step_from_another_thread) {
    sim_device dev({1, true});
    auto s_handle = dev.make_stream();
    sim_stream& s = *s_handle;
    s.enqueue([] {});
    std::thread stepper([&] { dev.step(s); });
    BOOST_TEST(settle(s));
    stepper.join();
}

BOOST_AUTO_TEST_CASE(shutdown_drain_runs_everything) {
    sim_device dev({2, false});
    std::vector<gpu_async::sim_stream_handle> streams;
    for (int i = 0; i < 8; ++i)
        streams.push_back(dev.make_stream());
    for (auto& s : streams)
        for (int k = 0; k < 5; ++k)
            s->enqueue(dur_ns::from_us(200));
    dev.shutdown(sim_shutdown::drain);
    for (auto& s : streams) {
        BOOST_TEST(s->word() == 5u);
        BOOST_TEST(s->query().is_done());
    }
    // Refused after shutdown: never stored, reported as cancelled.
    sim_stream& s = *streams[0];
    BOOST_TEST(s.enqueue(dur_ns::zero()) == 6u);
    BOOST_TEST((s.query().error == std::errc::operation_canceled));
    BOOST_TEST((s.block() == std::errc::operation_canceled));
    BOOST_TEST(s.word() == 5u);
    dev.shutdown(sim_shutdown::cancel); // idempotent
}

BOOST_AUTO_TEST_CASE(shutdown_drain_manual_steps_the_rest) {
    sim_device dev({1, true});
    auto s_handle = dev.make_stream();
    sim_stream& s = *s_handle;
    for (int k = 0; k < 3; ++k)
        s.enqueue(dur_ns::zero());
    dev.shutdown(sim_shutdown::drain);
    BOOST_TEST(s.word() == 3u);
    BOOST_TEST(s.query().is_done());
}

BOOST_AUTO_TEST_CASE(shutdown_cancel_finishes_the_running_item_only) {
    sim_device dev;
    auto s_handle = dev.make_stream();
    sim_stream& s = *s_handle;
    std::atomic<bool> started{false}, release{false}, second_ran{false};
    s.enqueue([&] {
        started = true;
        while (!release.load())
            std::this_thread::yield();
    });
    s.enqueue([&] { second_ran = true; }, dur_ns::from_ms(60000));
    BOOST_REQUIRE(eventually([&] { return started.load(); }));
    std::thread stopper([&] { dev.shutdown(sim_shutdown::cancel); });
    release = true;
    stopper.join(); // returns long before the second item's minute
    BOOST_TEST(s.word() == 1u);
    BOOST_TEST(!second_ran.load());
    BOOST_TEST((s.query().error == std::errc::operation_canceled));
    BOOST_TEST((s.block() == std::errc::operation_canceled));
}

BOOST_AUTO_TEST_CASE(destructor_cancels_pending_work) {
    std::atomic<bool> ran{false};
    completion_line outside; // outlives the device
    {
        sim_stream_handle own_handle, shared_handle; // outlive the device: dropping them is a no-op
        sim_device dev({3, false});
        own_handle = dev.make_stream();
        sim_stream& own = *own_handle;
        shared_handle = dev.make_stream(outside, *slot_id::at(4));
        sim_stream& shared = *shared_handle;
        own.enqueue([&] { ran = true; }, dur_ns::from_ms(60000));
        shared.enqueue([&] { ran = true; }, dur_ns::from_ms(60000));
    } // no worker may touch the device's lines after this
    BOOST_TEST(!ran.load());
    BOOST_TEST(outside.words[4].load() == 0u);
}

BOOST_AUTO_TEST_CASE(ringing_a_doorbell) {
    sim_device dev;
    const auto bell_owner = std::make_shared<doorbell>();
    doorbell& bell = *bell_owner;
    auto s_handle = dev.make_stream(bell.line(), *slot_id::at(3));
    sim_stream& s = *s_handle;
    s.set_doorbell(bell_owner);
    std::uint64_t payload = 0;
    for (std::uint64_t i = 1; i <= 50; ++i) {
        s.enqueue([&payload, i] { payload = i; });
        BOOST_TEST(s.park(long_bound)); // sleeps on the doorbell's futex
        BOOST_TEST(payload == i);
    }
    // The ring follows the store: it may land just after park returned.
    BOOST_TEST(eventually([&] { return bell.count() == 50u; }));
    BOOST_TEST(bell.line().words[3].load() == 50u);
    // A fault rings too, so a sleeper learns of it.
    s.enqueue_fault(errc::device_fault, dur_ns::from_us(100));
    BOOST_TEST(!s.park(long_bound));
    BOOST_TEST(s.query().is_failed());
    BOOST_TEST(eventually([&] { return bell.count() == 51u; }));
    s.set_doorbell(nullptr);
    BOOST_TEST(bell_owner.use_count() == 2); // the stream keeps every doorbell it was given
}

BOOST_AUTO_TEST_CASE(many_streams_sharing_lines_complete_in_any_order) {
    // What the reactor tests need: 4096 descriptors over 512 lines, one stream per slot, a few
    // worker threads, random durations (so a random completion order).
    sim_device dev({2, false});
    const auto bell = std::make_shared<doorbell>();
    std::vector<gpu_async::sim_stream_handle> streams;
    streams.reserve(4096);
    for (int l = 0; l < 512; ++l) {
        completion_line& line = dev.make_line();
        for (std::size_t k = 0; k < line_words; ++k) {
            streams.push_back(dev.make_stream(line, *slot_id::at(k)));
            streams.back()->set_doorbell(bell);
        }
    }
    BOOST_TEST(dev.stream_count() == 4096u);
    std::mt19937_64 rng(12345);
    std::uniform_int_distribution<std::uint64_t> us(0, 3000);
    std::atomic<std::uint64_t> order{0};
    std::vector<std::uint64_t> finished_at(streams.size());
    for (std::size_t i = 0; i < streams.size(); ++i)
        streams[i]->enqueue([&, i] { finished_at[i] = order.fetch_add(1); },
                            dur_ns::from_us(us(rng)));
    // One waiter on the doorbell, scanning everything after each wake.
    std::size_t left = streams.size();
    std::vector<bool> seen(streams.size(), false);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (left != 0 && std::chrono::steady_clock::now() < deadline) {
        const std::uint64_t rung = bell->count();
        for (std::size_t i = 0; i < streams.size(); ++i) {
            if (!seen[i] && streams[i]->query().is_done()) {
                seen[i] = true;
                --left;
            }
        }
        if (left != 0) bell->wait([&] { return bell->count() != rung; }, dur_ns::from_ms(100));
    }
    BOOST_TEST(left == 0u);
    // Completion order differs from enqueue order somewhere (random durations).
    BOOST_TEST(!std::is_sorted(finished_at.begin(), finished_at.end()));
}

BOOST_AUTO_TEST_CASE(query_arm_park_loop) {
    // The loop a host runs: query; arm; bounded parks with a backstop query. The item waits for a
    // gate the loop opens at its first park, so "pending first" does not depend on timing.
    sim_device dev;
    test::work_gate gate;
    auto s_handle = dev.make_stream();
    sim_stream& s = *s_handle;
    s.enqueue(gate.item());
    BOOST_TEST(s.query().is_pending());
    BOOST_TEST(!s.arm());
    const memory_descriptor d = s.descriptor();
    std::uint32_t parks = 0;
    bool done = false;
    for (int i = 0; i < 100000 && !done; ++i) {
        ++parks;
        gate.open();
        if (s.park(dur_ns::from_us(100)))
            done = s.query().is_done();
        else if (s.query().is_failed())
            break;
    }
    BOOST_TEST(done);
    BOOST_TEST(d.is_complete());
    BOOST_TEST(parks >= 1u);
}

BOOST_AUTO_TEST_CASE(drives_the_wait_machine) {
    std_clock clk; // the process clock and a sleeping timer drive the machine end to end
    std_timer tmr;
    sim_device dev;
    {
        // Flag plan: pending at the first query, the gate opens at the first park.
        test::work_gate gate;
        auto s_handle = dev.make_stream();
        sim_stream& s = *s_handle;
        s.enqueue(gate.item());
        test::gated_source src{s, gate, 0, true};
        const auto plan = wait_plan::flag(100'000, 1'000'000);
        BOOST_REQUIRE(plan.has_value());
        const wait_result r = run_wait(src, plan.value(), std::nullopt, clk, tmr);
        BOOST_REQUIRE(r.has_value());
        BOOST_TEST((r.value().kind == wait_kind::parked));
        BOOST_TEST(r.value().parks >= 1u);
        BOOST_TEST(s.query().is_done());
    }
    {
        auto s_handle = dev.make_stream();
        sim_stream& s = *s_handle;
        const wait_result r = run_wait(s, wait_plan::recommended(), std::nullopt, clk, tmr);
        BOOST_REQUIRE(r.has_value());
        BOOST_TEST((r.value().kind == wait_kind::immediate));
    }
    {
        auto s_handle = dev.make_stream();
        sim_stream& s = *s_handle;
        const std::uint64_t seq = s.enqueue(dur_ns::from_ms(1));
        const wait_result r = run_wait(s, wait_plan::block(), std::nullopt, clk, tmr);
        BOOST_REQUIRE(r.has_value());
        BOOST_TEST((r.value().kind == wait_kind::blocked));
        BOOST_TEST(s.word() == seq);
    }
    {
        // A fault ends the wait with the device's error, whichever query or park sees it.
        auto s_handle = dev.make_stream();
        sim_stream& s = *s_handle;
        s.enqueue(dur_ns::from_ms(1));
        s.enqueue_fault();
        const wait_result r = run_wait(s, wait_plan::recommended(), std::nullopt, clk, tmr);
        BOOST_TEST(!r.has_value());
        BOOST_TEST((r.error() == errc::device_fault));
    }
    {
        // Poll plan: pending at the first query, the gate opens at the second.
        test::work_gate gate;
        auto s_handle = dev.make_stream();
        sim_stream& s = *s_handle;
        s.enqueue(gate.item());
        test::gated_source src{s, gate, 2, false};
        const auto plan = wait_plan::poll();
        BOOST_REQUIRE(plan.has_value());
        const wait_result r = run_wait(src, plan.value(), std::nullopt, clk, tmr);
        BOOST_REQUIRE(r.has_value());
        BOOST_TEST((r.value().kind == wait_kind::parked));
        BOOST_TEST(src.queries >= 2);
    }
}

BOOST_AUTO_TEST_CASE(manual_device_under_run_inline) {
    // On a manual device nothing moves by itself: a park that sees nothing while the clock stands
    // still is reported by run_inline, never a hang.
    manual_clock clk;
    manual_timer tmr(clk);
    sim_device dev({1, true});
    auto s_handle = dev.make_stream();
    sim_stream& s = *s_handle;
    s.enqueue(dur_ns::zero());
    const wait_result pending = run_inline(s, wait_plan::recommended(), std::nullopt, clk, tmr);
    BOOST_TEST((pending.error() == errc::pended_inline));
    BOOST_TEST(dev.step(s));
    const wait_result r = run_inline(s, wait_plan::recommended(), std::nullopt, clk, tmr);
    BOOST_REQUIRE(r.has_value());
    BOOST_TEST((r.value().kind == wait_kind::immediate));
}

BOOST_AUTO_TEST_CASE(handle_owns_its_stream) {
    sim_device dev({1, true});
    sim_stream_handle empty;
    BOOST_TEST(!empty);
    BOOST_TEST(empty.get() == nullptr);
    empty.reset(); // nothing to give back
    sim_stream_handle a = dev.make_stream();
    BOOST_TEST_REQUIRE(static_cast<bool>(a));
    BOOST_TEST(a.get() == &*a);
    BOOST_TEST(a->tail() == 0u);
    BOOST_TEST(dev.stream_count() == 1u);
    sim_stream* const raw = a.get();
    sim_stream_handle b = std::move(a);
    BOOST_TEST(!a); // NOLINT(bugprone-use-after-move): a moved-from handle is empty
    BOOST_TEST(b.get() == raw);
    BOOST_TEST(dev.stream_count() == 1u);
    sim_stream_handle c = dev.make_stream();
    BOOST_TEST(dev.stream_count() == 2u);
    c = std::move(b); // c's first stream is given back
    BOOST_TEST(c.get() == raw);
    BOOST_TEST(dev.stream_count() == 1u);
    c.reset();
    BOOST_TEST(!c);
    BOOST_TEST(dev.stream_count() == 0u);
    {
        const sim_stream_handle scoped = dev.make_stream();
        BOOST_TEST(dev.stream_count() == 1u);
    }
    BOOST_TEST(dev.stream_count() == 0u);
}

BOOST_AUTO_TEST_CASE(giving_back_drops_queued_work_and_reuses_the_line) {
    sim_device dev({2, false});
    std::atomic<bool> ran{false};
    sim_stream_handle s = dev.make_stream();
    completion_line* const line = &s->line();
    s->enqueue(dur_ns::zero());
    BOOST_TEST_REQUIRE(settle(*s));
    s->enqueue([&] { ran = true; }, dur_ns::from_ms(60000));
    s->enqueue(dur_ns::zero());
    BOOST_TEST(dev.line_count() == 1u);
    s.reset();
    BOOST_TEST(eventually([&] { return dev.stream_count() == 0u; }));
    BOOST_TEST(!ran.load());
    // The dropped numbers (2, 3) were never stored.
    BOOST_TEST(line->words[0].load() == 1u);
    // The retired line serves the next stream, zeroed.
    sim_stream_handle t = dev.make_stream();
    BOOST_TEST(&t->line() == line);
    BOOST_TEST(dev.line_count() == 1u);
    BOOST_TEST(t->word() == 0u);
    BOOST_TEST(t->tail() == 0u);
    BOOST_TEST(t->enqueue(dur_ns::zero()) == 1u);
    BOOST_TEST(settle(*t));
    BOOST_TEST(t->word() == 1u);
}

BOOST_AUTO_TEST_CASE(giving_back_while_an_item_runs) {
    std::atomic<bool> running{false};
    std::atomic<bool> second_ran{false};
    sim_device dev({1, false});
    test::work_gate gate;
    sim_stream_handle s = dev.make_stream();
    sim_stream_handle other = dev.make_stream(); // same worker: runs once the first one is freed
    s->enqueue([&running, held = gate.item()] {
        running = true;
        (void)held();
    });
    s->enqueue([&] { second_ran = true; });
    BOOST_TEST_REQUIRE(eventually([&] { return running.load(); }));
    s.reset(); // the worker is inside the first item: it frees the stream when that ends
    BOOST_TEST(dev.stream_count() == 2u);
    gate.open();
    BOOST_TEST(eventually([&] { return dev.stream_count() == 1u; }));
    other->enqueue(dur_ns::zero());
    BOOST_TEST(settle(*other));
    BOOST_TEST(!second_ran.load());
}

BOOST_AUTO_TEST_CASE(many_give_backs_keep_memory_bounded) {
    sim_device dev({2, false});
    constexpr int cycles = 100000;
    for (int i = 0; i < cycles; ++i) {
        sim_stream_handle s = dev.make_stream();
        if (i % 3 == 0) s->enqueue(dur_ns::zero());
        if (i % 5 == 0) s->enqueue(dur_ns::from_us(50)); // often still queued when dropped
        if (i % 1000 == 0) BOOST_TEST_REQUIRE(settle(*s));
    }
    BOOST_TEST(eventually([&] { return dev.stream_count() == 0u; }));
    // Lines are only added while every kept one is still held by a worker finishing its stream.
    BOOST_TEST(dev.line_count() <= 64u);
    sim_device manual({1, true});
    for (int i = 0; i < cycles; ++i) {
        sim_stream_handle s = manual.make_stream();
        s->enqueue(dur_ns::zero());
        if (i % 2 == 0) BOOST_TEST_REQUIRE(manual.step(*s));
    }
    BOOST_TEST(manual.stream_count() == 0u);
    BOOST_TEST(manual.line_count() == 1u);
}

BOOST_AUTO_TEST_CASE(manual_give_back_drops_the_queue) {
    sim_device dev({1, true});
    completion_line& shared = dev.make_line();
    sim_stream_handle a = dev.make_stream(shared, *slot_id::at(2));
    sim_stream_handle b = dev.make_stream();
    bool ran = false;
    a->enqueue([&] { ran = true; });
    b->enqueue(dur_ns::zero());
    a.reset();
    BOOST_TEST(dev.stream_count() == 1u);
    BOOST_TEST(dev.step_all() == 1u); // only b's item
    BOOST_TEST(!ran);
    BOOST_TEST(shared.words[2].load() == 0u);
    BOOST_TEST(b->word() == 1u);
    BOOST_TEST(dev.line_count() == 2u); // a caller's or shared line is never retired or reused
}

BOOST_AUTO_TEST_CASE(handle_outliving_its_device) {
    sim_stream_handle idle, busy;
    {
        sim_device dev({1, false});
        idle = dev.make_stream();
        busy = dev.make_stream();
        busy->enqueue(dur_ns::from_ms(60000));
    } // the device frees its streams
    BOOST_TEST(!idle);
    idle.reset(); // the device is gone: nothing to give back, no crash
    BOOST_TEST(!idle);
    sim_stream_handle moved = std::move(busy);
    moved = sim_stream_handle{};
    BOOST_TEST(!moved);
}

// The port declared before the device, as a new user may write it, so the device goes first:
// its handles then say so. operator bool is false, get() is null, and a call through -> or *
// throws errc::device_gone instead of reaching the stream the device freed (it used to test
// true, and enqueue was a heap-use-after-free in sim_stream::push: a crash in a release build).
BOOST_AUTO_TEST_CASE(a_handle_whose_device_is_gone_says_so) {
    const auto gone = [](const std::system_error& e) { return e.code() == errc::device_gone; };
    for (const bool manual : {true, false}) {
        sim_stream_handle h;
        {
            sim_device dev({1, manual});
            h = dev.make_stream();
            BOOST_TEST_REQUIRE(static_cast<bool>(h));
            BOOST_TEST(h->enqueue(dur_ns::from_us(1)) == 1u);
        }
        BOOST_TEST(!h);
        BOOST_TEST(h.get() == nullptr);
        BOOST_CHECK_EXCEPTION(h->enqueue(dur_ns::from_us(1)), std::system_error, gone);
        BOOST_CHECK_EXCEPTION(static_cast<void>((*h).tail()), std::system_error, gone);
        sim_stream_handle moved = std::move(h);
        BOOST_TEST(!moved);
        BOOST_CHECK_EXCEPTION(static_cast<void>(moved->word()), std::system_error, gone);
        moved.reset(); // nothing to give back
        BOOST_TEST(!moved);
    }
}

// A descriptor for a number the stream was never given would never complete, and a wait on it
// would hang unnoticed: descriptor_for refuses it with errc::invalid_target (it used to give
// it). Every number up to the tail, in wrapping order, is given.
BOOST_AUTO_TEST_CASE(descriptor_for_a_number_past_the_tail_is_refused) {
    const auto invalid = [](const std::system_error& e) {
        return e.code() == errc::invalid_target;
    };
    sim_device dev({1, true});
    auto s = dev.make_stream();
    BOOST_TEST(s->descriptor_for(0).is_complete()); // nothing enqueued: the start is reached
    BOOST_CHECK_EXCEPTION(s->descriptor_for(1), std::system_error, invalid);
    const std::uint64_t seq = s->enqueue(dur_ns{});
    BOOST_TEST(s->descriptor_for(seq).target() == seq);
    BOOST_TEST(!s->descriptor_for(seq).is_complete());
    BOOST_CHECK_EXCEPTION(s->descriptor_for(seq + 1), std::system_error, invalid);
    BOOST_CHECK_EXCEPTION(s->descriptor_for(seq + 1000), std::system_error, invalid);
    BOOST_TEST(dev.step_all() == 1u);
    BOOST_TEST(s->descriptor_for(seq).is_complete());
    BOOST_TEST(s->descriptor().target() == seq); // descriptor() names the tail: never refused

    // Across the wrap: a caller's line whose word starts two short of 2^64.
    completion_line line;
    line.words[3].store(~std::uint64_t{0} - 1, std::memory_order_relaxed);
    sim_device wrapping({1, true});
    auto w = wrapping.make_stream(line, *slot_id::at(3));
    BOOST_TEST(w->enqueue(dur_ns{}) == ~std::uint64_t{0});
    BOOST_TEST(w->enqueue(dur_ns{}) == 0u);
    BOOST_TEST(w->descriptor_for(~std::uint64_t{0}).target() == ~std::uint64_t{0});
    BOOST_TEST(w->descriptor_for(0).target() == 0u);
    BOOST_CHECK_EXCEPTION(w->descriptor_for(1), std::system_error, invalid);
}

// A number before the stream's start was never given to it either: a `-1` sentinel, a number
// half the sequence space away, or one of an earlier stream on the slot would complete at once
// for work the stream never did. Only start() through tail() are given, in wrapping order.
BOOST_AUTO_TEST_CASE(descriptor_for_a_number_before_the_start_is_refused) {
    const auto invalid = [](const std::system_error& e) {
        return e.code() == errc::invalid_target;
    };
    constexpr std::uint64_t half = std::uint64_t{1} << 63;
    sim_device dev({1, true});
    auto s = dev.make_stream();
    BOOST_TEST(s->start() == 0u);
    const std::uint64_t seq = s->enqueue(dur_ns{});
    BOOST_TEST(dev.step_all() == 1u);
    BOOST_CHECK_EXCEPTION(s->descriptor_for(~std::uint64_t{0}), std::system_error, invalid);
    BOOST_CHECK_EXCEPTION(s->descriptor_for(half + 5), std::system_error, invalid);
    BOOST_CHECK_EXCEPTION(s->descriptor_for(half), std::system_error, invalid);
    BOOST_TEST(s->descriptor_for(seq).is_complete());
    BOOST_TEST(s->descriptor_for(0).is_complete());

    // A stream on a slot an earlier stream stored into starts where that one stopped.
    completion_line line;
    line.words[2].store(40, std::memory_order_relaxed);
    auto later = dev.make_stream(line, *slot_id::at(2));
    BOOST_TEST(later->start() == 40u);
    BOOST_TEST(later->enqueue(dur_ns{}) == 41u);
    BOOST_TEST(later->descriptor_for(40).target() == 40u);
    BOOST_TEST(later->descriptor_for(41).target() == 41u);
    BOOST_CHECK_EXCEPTION(later->descriptor_for(39), std::system_error, invalid);
    BOOST_CHECK_EXCEPTION(later->descriptor_for(1), std::system_error, invalid);
    BOOST_CHECK_EXCEPTION(later->descriptor_for(42), std::system_error, invalid);
    BOOST_TEST(dev.step_all() == 1u);

    // Across the wrap, from a start two short of 2^64.
    completion_line top;
    top.words[0].store(~std::uint64_t{0} - 1, std::memory_order_relaxed);
    auto w = dev.make_stream(top, *slot_id::at(0));
    BOOST_TEST(w->enqueue(dur_ns{}) == ~std::uint64_t{0});
    BOOST_TEST(w->enqueue(dur_ns{}) == 0u);
    BOOST_TEST(w->descriptor_for(~std::uint64_t{0} - 1).target() == ~std::uint64_t{0} - 1);
    BOOST_CHECK_EXCEPTION(w->descriptor_for(~std::uint64_t{0} - 2), std::system_error, invalid);
    BOOST_CHECK_EXCEPTION(w->descriptor_for(half), std::system_error, invalid);
    BOOST_TEST(dev.step_all() == 2u);
}

BOOST_AUTO_TEST_CASE(std_chrono_durations) {
    using namespace std::chrono_literals;
    sim_device dev({1, false});
    sim_stream_handle s = dev.make_stream();
    const auto start = std::chrono::steady_clock::now();
    BOOST_TEST(s->enqueue(3ms) == 1u);
    std::atomic<bool> ran{false};
    BOOST_TEST(s->enqueue([&] { ran = true; }, 1ms) == 2u);
    BOOST_TEST(s->park(10s));
    BOOST_TEST((std::chrono::steady_clock::now() - start >= 4ms));
    BOOST_TEST(ran.load());
    BOOST_TEST(s->enqueue(-1ms) == 3u); // negative: zero
    BOOST_TEST(settle(*s));
    const std::uint64_t f = s->enqueue_fault(make_error_code(errc::backend), 1ms);
    BOOST_TEST(!s->park(10s));
    BOOST_TEST((s->error() == errc::backend));
    BOOST_TEST(s->word() == f - 1);
}

BOOST_AUTO_TEST_CASE(device_store_signal_stores_the_device_word_and_never_rings) {
    sim_device::options o;
    o.manual = true;
    sim_device dev(o);
    auto bell = std::make_shared<doorbell>();
    auto h = dev.make_stream();
    h->set_doorbell(bell, sim_signal::device_store);
    BOOST_TEST(bell->device_producers() == 1u);
    h->set_doorbell(bell, sim_signal::device_store); // counted once
    BOOST_TEST(bell->device_producers() == 1u);
    const std::uint64_t rings = bell->count();
    const std::uint64_t seq = h->enqueue(dur_ns{});
    BOOST_TEST(!bell->device_signaled());
    dev.step_all();
    BOOST_TEST(h->word() == seq);
    BOOST_TEST(bell->device_signaled());
    BOOST_TEST(bell->count() == rings); // no ring, no futex wake
    BOOST_TEST(bell->take_device_signal());
    BOOST_TEST(!bell->device_signaled());

    // Back to ringing: no longer a device producer; stores ring.
    h->set_doorbell(bell, sim_signal::ring);
    BOOST_TEST(bell->device_producers() == 0u);
    h->enqueue(dur_ns{});
    dev.step_all();
    BOOST_TEST(bell->count() == rings + 1);
    BOOST_TEST(!bell->device_signaled());

    // A stream given back, or its device destroyed, ends its count.
    h->set_doorbell(bell, sim_signal::device_store);
    auto other = dev.make_stream();
    other->set_doorbell(bell, sim_signal::device_store);
    BOOST_TEST(bell->device_producers() == 2u);
    h.reset();
    BOOST_TEST(bell->device_producers() == 1u);
    other->set_doorbell(nullptr);
    BOOST_TEST(bell->device_producers() == 0u);
    other->set_doorbell(bell, sim_signal::device_store);
    BOOST_TEST(bell->device_producers() == 1u);
}

BOOST_AUTO_TEST_CASE(device_store_producers_end_with_their_device) {
    auto bell = std::make_shared<doorbell>();
    {
        sim_device dev;
        auto h = dev.make_stream();
        h->set_doorbell(bell, sim_signal::device_store);
        const std::uint64_t seq = h->enqueue(std::chrono::microseconds(50));
        BOOST_TEST(h->park(dur_ns::from_ms(5000))); // the word wait, not the futex: no ring
        BOOST_TEST(h->word() == seq);
        BOOST_TEST(bell->device_producers() == 1u);
    }
    BOOST_TEST(bell->device_producers() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_devices_sim_device
