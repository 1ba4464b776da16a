// SPDX-License-Identifier: BSL-1.0
// Regression tests of <gpu_async/gpu_completion_port.hpp> under races, wrap-around, busy loops
// and teardown: each case is one way the port once lost, held back or mis-ordered a wait, or read
// freed memory.
#include <gpu_async/gpu_completion_port.hpp>

#include <gpu_async/device/mapped_line.hpp>
#include <gpu_async/device/sim_device.hpp>
#include <gpu_async/line/detail/line_watchers.hpp>
#include <gpu_async/line/line_health.hpp>
#include <gpu_async/line/line_life.hpp>
#include <gpu_async/run_fill.hpp>

#include "common/eventually.hpp"
#include "common/fake_line_driver.hpp"
#include "common/io_context_fixture.hpp"
#include "common/race_rounds.hpp"
#include "common/reactor_of.hpp"
#include "common/run_fill_bounded.hpp"
#include "common/slots.hpp"

#include "common/asio.hpp"
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <vector>

namespace unit_asio_gpu_completion_port_races_and_teardown {

using gpu_async::error_code;
using namespace gpu_async;
using gpu_async::test::eventually;
using gpu_async::test::race_rounds;
using gpu_async::test::reactor_of;
using gpu_async::test::run_to_completion;
using gpu_async::test::slot;

namespace {

/// Runs `ctx` on `n` threads until it runs out of work, at most `bound`; true when it did.
bool run_on_threads(asio::io_context& ctx, int n,
                    std::chrono::seconds bound = gpu_async::test::run_bound) {
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i)
        threads.emplace_back([&] { ctx.run_for(bound); });
    for (auto& t : threads)
        t.join();
    return ctx.stopped();
}

} // namespace

BOOST_AUTO_TEST_SUITE(gpu_completion_port_reliability)

// 1. Registration race: the word passes the target while the wait registers on an empty slot,
// then a later wait on the same slot stays pending. The first must complete all the same. A
// producer thread advances the word without pause, so the store lands inside registration in
// many rounds.
BOOST_AUTO_TEST_CASE(a_store_during_registration_never_strands_the_wait) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line;
    std::atomic<bool> stop{false};
    std::thread producer([&] {
        std::uint64_t w = 0;
        while (!stop.load(std::memory_order_relaxed))
            line.words[0].store(++w, std::memory_order_release);
    });
    const int rounds = race_rounds(3000);
    int stranded = 0;
    std::mt19937 rng(1);
    std::uniform_int_distribution<std::uint64_t> pick(0, 20000);
    for (int round = 0; round < rounds && stranded == 0; ++round) {
        // A spread of distances: some pass during the registration itself.
        const std::uint64_t target = line.words[0].load() + 1 + pick(rng);
        bool first_done = false;
        error_code later_ec;
        port.async_wait(memory_descriptor(line, slot(0), target), [&](error_code ec) {
            BOOST_TEST(!ec);
            first_done = true;
        });
        // Far ahead: pending for the whole test.
        port.async_wait(memory_descriptor(line, slot(0), target + (std::uint64_t{1} << 62)),
                        [&](error_code ec) { later_ec = ec; });
        ctx.restart();
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (!first_done && std::chrono::steady_clock::now() < end)
            ctx.run_one_for(std::chrono::milliseconds(10));
        if (!first_done) ++stranded;
        BOOST_TEST(port.cancel() == 1u); // the later wait
        ctx.restart();
        run_to_completion(ctx);
        BOOST_TEST(later_ec == asio::error::operation_aborted);
    }
    stop = true;
    producer.join();
    BOOST_TEST(stranded == 0);
}

// 2. Stale anchor: the slot is never empty while its word advances by more than 2^63 in steps
// each below 2^63 (2^62 - 1: six of them pass 2^64). Every reached wait completes, each in its
// round; the wait that keeps the slot non-empty is always less than 2^63 ahead.
BOOST_AUTO_TEST_CASE(a_slot_never_empty_across_half_the_ring_completes_every_reached_wait) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line;
    const std::uint64_t step = (std::uint64_t{1} << 62) - 1;
    std::uint64_t word = 0;
    std::vector<int> done;
    auto wait_for = [&](std::uint64_t target, int id) {
        port.async_wait(memory_descriptor(line, slot(2), target), [&done, id](error_code ec) {
            if (!ec) done.push_back(id);
        });
    };
    wait_for(word + step, 0);
    for (int round = 1; round <= 6; ++round) {
        wait_for(word + 2 * step, round); // keeps the slot non-empty past this round's store
        word += step;
        line.words[2].store(word, std::memory_order_release);
        port.bell().ring();
        ctx.restart();
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (static_cast<int>(done.size()) < round && std::chrono::steady_clock::now() < end)
            ctx.run_one_for(std::chrono::milliseconds(10));
        BOOST_TEST_REQUIRE(static_cast<int>(done.size()) == round, "round " << round);
        BOOST_TEST(done.back() == round - 1);
    }
    BOOST_TEST(port.cancel() == 1u);
    ctx.restart();
    run_to_completion(ctx);
}

// 3a. Cross-thread cancellation racing completion: a parallel group of a port wait and a timer
// on an io_context run by 4 threads; the device store and the timer land together, so the
// group's cancellation of the port wait races its completion on another thread.
BOOST_AUTO_TEST_CASE(parallel_group_races_on_four_threads) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    sim_device dev({2, false});
    const int rounds = race_rounds(2000);
    std::vector<gpu_async::sim_stream_handle> streams;
    for (int i = 0; i < 8; ++i) {
        streams.push_back(dev.make_stream(dev.make_line(), slot(0)));
        streams.back()->set_doorbell(port.shared_bell());
    }
    std::atomic<int> finished{0};
    std::atomic<int> device_won{0};
    std::atomic<int> timer_won{0};
    std::atomic<int> bad{0};
    for (int i = 0; i < rounds; ++i) {
        sim_stream& s = *streams[static_cast<std::size_t>(i) % streams.size()];
        const auto d = std::chrono::microseconds(50 + i % 50);
        const std::uint64_t seq = s.enqueue(dur_ns{static_cast<std::uint64_t>(d.count()) * 1000});
        auto timer = std::make_shared<asio::steady_timer>(ctx, d);
        asio::experimental::make_parallel_group(
            port.async_wait(s.descriptor_for(seq), asio::deferred),
            timer->async_wait(asio::deferred))
            .async_wait(asio::experimental::wait_for_one(),
                        [&, timer](std::array<std::size_t, 2> order, error_code port_ec,
                                   error_code timer_ec) {
                            if (order[0] == 0) {
                                ++device_won;
                                if (port_ec) ++bad;
                            } else {
                                ++timer_won;
                                if (timer_ec) ++bad;
                                // The port wait was cancelled, or completed in the race.
                                if (port_ec && port_ec != asio::error::operation_aborted) ++bad;
                            }
                            ++finished;
                        });
    }
    BOOST_TEST(run_on_threads(ctx, 4));
    BOOST_TEST(finished.load() == rounds);
    BOOST_TEST(bad.load() == 0);
    BOOST_TEST(device_won.load() + timer_won.load() == rounds);
    BOOST_TEST(port.pending() == 0u);
}

// 3b. A per-operation signal emitted through asio::post(ctx, ...) on a 4-thread io_context, so
// it runs on one thread while the wait completes on another.
BOOST_AUTO_TEST_CASE(signal_posted_to_the_context_races_completion_on_four_threads) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    const int rounds = race_rounds(4000);
    std::vector<completion_line> lines(16);
    std::atomic<int> ok{0};
    std::atomic<int> aborted{0};
    std::atomic<int> other{0};
    std::atomic<int> emitted{0};
    struct round_state {
        asio::cancellation_signal sig;
    };
    for (int i = 0; i < rounds; ++i) {
        completion_line& line = lines[static_cast<std::size_t>(i) % lines.size()];
        const std::size_t s = static_cast<std::size_t>(i / 16) % line_words;
        const std::uint64_t target = line.words[s].load() + 1;
        // Shared by the handler and the emitting step: the signal lives until both have run.
        auto state = std::make_shared<round_state>();
        port.async_wait(memory_descriptor(line, slot(s), target),
                        asio::bind_cancellation_slot(state->sig.slot(), [&, state](error_code ec) {
                            if (!ec)
                                ++ok;
                            else if (ec == asio::error::operation_aborted)
                                ++aborted;
                            else
                                ++other;
                        }));
        asio::post(ctx, [&, state] {
            state->sig.emit(asio::cancellation_type::terminal);
            ++emitted;
        });
        line.words[s].store(target, std::memory_order_release);
        if (i % 8 == 7) port.bell().ring();
    }
    port.bell().ring();
    BOOST_TEST(run_on_threads(ctx, 4));
    BOOST_TEST(ok.load() + aborted.load() == rounds);
    BOOST_TEST(other.load() == 0);
    BOOST_TEST(emitted.load() == rounds);
    BOOST_TEST(port.pending() == 0u);
}

// 3c. A signal emitted from a plain std::thread while the waits complete on the io_context's
// threads: each wait ends exactly once, either way.
BOOST_AUTO_TEST_CASE(signals_from_a_foreign_thread_race_completion) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    const int rounds = race_rounds(2000);
    completion_line line;
    std::vector<std::unique_ptr<asio::cancellation_signal>> sigs;
    std::atomic<int> ended{0};
    std::atomic<int> twice{0};
    std::vector<std::atomic<int>> seen(static_cast<std::size_t>(rounds));
    for (int i = 0; i < rounds; ++i) {
        sigs.push_back(std::make_unique<asio::cancellation_signal>());
        const std::size_t s = static_cast<std::size_t>(i) % line_words;
        port.async_wait(memory_descriptor(line, slot(s), static_cast<std::uint64_t>(i / 8 + 1)),
                        asio::bind_cancellation_slot(sigs.back()->slot(), [&, i](error_code) {
                            if (seen[static_cast<std::size_t>(i)]++ != 0) ++twice;
                            ++ended;
                        }));
    }
    std::thread canceller([&] {
        for (int i = rounds - 1; i >= 0; i -= 2)
            sigs[static_cast<std::size_t>(i)]->emit(asio::cancellation_type::terminal);
    });
    std::thread producer([&] {
        for (int v = 1; v <= rounds / 8 + 1; ++v) {
            for (std::size_t s = 0; s < line_words; ++s)
                line.words[s].store(static_cast<std::uint64_t>(v), std::memory_order_release);
            port.bell().ring();
        }
    });
    std::thread runner([&] { ctx.run_for(gpu_async::test::run_bound); });
    canceller.join();
    producer.join();
    runner.join();
    BOOST_TEST(ctx.stopped());
    BOOST_TEST(ended.load() == rounds);
    BOOST_TEST(twice.load() == 0);
    // The signals outlive the context's handlers; emitting again finds nothing.
    for (auto& sig : sigs)
        sig->emit(asio::cancellation_type::terminal);
    BOOST_TEST(port.pending() == 0u);
}

// 4. run_fill starvation: a handler that keeps re-posting itself (a cooperative yield loop) must
// not hold a device completion back; the lines are scanned at least once per park bound.
BOOST_AUTO_TEST_CASE(run_fill_serves_a_completion_while_a_handler_keeps_yielding) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line;
    bool completed = false;
    std::uint64_t yields_at_completion = 0;
    std::uint64_t yields = 0;
    const auto cap = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    port.async_wait(memory_descriptor(line, slot(0), 1), [&](error_code ec) {
        BOOST_TEST(!ec);
        completed = true;
        yields_at_completion = yields;
    });
    // The store comes from another thread and does not ring (as a GPU's).
    std::thread device([&] { line.words[0].store(1, std::memory_order_release); });
    std::function<void()> yield_loop = [&] {
        ++yields;
        if (!completed && std::chrono::steady_clock::now() < cap) asio::post(ctx, yield_loop);
    };
    asio::post(ctx, yield_loop);
    const std::size_t ran = run_fill(ctx);
    device.join();
    BOOST_TEST(ran > 1u);
    BOOST_TEST(completed);
    // Served while the loop was still yielding, long before the cap ended it.
    BOOST_TEST((std::chrono::steady_clock::now() < cap));
    // The loop ended because the wait completed (its last turn saw the flag).
    BOOST_TEST(yields <= yields_at_completion + 1);
}

// 5a. A simulated device destroyed while waits on its lines are pending (the port declared
// first, as the examples do): each wait ends with operation_aborted, exactly once, and nothing
// reads the freed lines (AddressSanitizer checks the latter).
BOOST_AUTO_TEST_CASE(destroying_the_device_ends_its_waits) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    std::vector<int> ends(12, 0);
    std::vector<error_code> ecs(12);
    {
        std::vector<gpu_async::sim_stream_handle> owned; // outlives the device: dropped no-op
        sim_device dev;
        completion_line& shared = dev.make_line();
        for (int i = 0; i < 12; ++i) {
            sim_stream& s = *owned.emplace_back(
                i < 8 ? dev.make_stream(shared, slot(static_cast<std::size_t>(i)))
                      : dev.make_stream());
            s.set_doorbell(port.shared_bell());
            const std::uint64_t seq = s.enqueue(dur_ns::from_ms(60000));
            port.async_wait(s.descriptor_for(seq), [&, i](error_code ec) {
                ++ends[static_cast<std::size_t>(i)];
                ecs[static_cast<std::size_t>(i)] = ec;
            });
        }
        BOOST_TEST(port.pending() == 12u);
    } // the device, its lines and its workers go here
    BOOST_TEST(port.pending() == 0u);
    run_to_completion(ctx);
    for (int i = 0; i < 12; ++i) {
        BOOST_TEST(ends[static_cast<std::size_t>(i)] == 1);
        BOOST_TEST(ecs[static_cast<std::size_t>(i)] == asio::error::operation_aborted);
    }
}

// 5e. Plan-driven waits over the streams of a device that is destroyed while they run (polling,
// parked, sleeping to a prediction): each ends with operation_aborted exactly once and never
// calls its freed source again.
BOOST_AUTO_TEST_CASE(destroying_the_device_ends_its_plan_driven_waits) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    const char* plans[] = {"poll", "flag:park_us=100,backstop_us=1000",
                           ("flag:park_us=100,backstop_us=1000+predict:margin_us=10,"
                            "min_sleep_us=1,max_sleep_us=5000,window=4")};
    std::vector<int> ends(3, 0);
    std::vector<error_code> ecs(3);
    std::thread runner;
    {
        // Before the device: the handles outlive it (dropping them then is a no-op), so the
        // device's destruction, not a give-back, ends the waits.
        std::vector<gpu_async::sim_stream_handle> streams;
        sim_device dev;
        for (int i = 0; i < 3; ++i)
            streams.push_back(dev.make_stream());
        // Teach the predicting point a long completion so the wait sleeps.
        {
            auto warm_handle = dev.make_stream();
            sim_stream& warm = *warm_handle;
            warm.enqueue(dur_ns::from_ms(3));
            bool ok = false;
            port.async_wait(warm, wait_plan::parse(plans[2]).value(), "p",
                            [&](error_code ec, wait_report) { ok = !ec; });
            run_to_completion(ctx);
            BOOST_TEST_REQUIRE(ok);
            ctx.restart();
        }
        for (int i = 0; i < 3; ++i) {
            streams[static_cast<std::size_t>(i)]->enqueue(dur_ns::from_ms(60000));
            port.async_wait(*streams[static_cast<std::size_t>(i)],
                            wait_plan::parse(plans[i]).value(), "p",
                            [&, i](error_code ec, wait_report) {
                                ++ends[static_cast<std::size_t>(i)];
                                ecs[static_cast<std::size_t>(i)] = ec;
                            });
        }
        // The waits run on another thread while the device goes away under them.
        runner = std::thread([&] { ctx.run_for(gpu_async::test::run_bound); });
        // Whatever step each has reached (its first query, a park, the predicted sleep), it ends
        // aborted; the pause only lets them get past their first step.
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    runner.join();
    BOOST_TEST(ctx.stopped());
    for (int i = 0; i < 3; ++i) {
        BOOST_TEST(ends[static_cast<std::size_t>(i)] == 1, plans[i]);
        BOOST_TEST(ecs[static_cast<std::size_t>(i)] == asio::error::operation_aborted, plans[i]);
    }
}

// 5b. retire_line on a caller's own line, from another thread, while the watcher scans it.
BOOST_AUTO_TEST_CASE(retiring_a_line_from_another_thread) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    auto line = std::make_unique<completion_line>();
    int aborted = 0;
    for (std::size_t s = 0; s < line_words; ++s)
        port.async_wait(memory_descriptor(*line, slot(s), 5), [&](error_code ec) {
            if (ec == asio::error::operation_aborted) ++aborted;
        });
    std::thread owner([&] {
        retire_line(*line);
        line.reset(); // freed: no reactor reads it any more
    });
    owner.join();
    run_to_completion(ctx);
    BOOST_TEST(aborted == static_cast<int>(line_words));
    // Retiring a line nobody watches does nothing.
    completion_line other;
    retire_line(other);
}

// 5c. A mapped (CUDA/HIP) line destroyed while a wait on it is pending.
BOOST_AUTO_TEST_CASE(destroying_a_mapped_line_ends_its_waits) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    gpu_async::test::fake_line_driver fake;
    fake.hold_writes = true; // the store stays "on the device": the wait is pending
    error_code got = asio::error::would_block;
    {
        auto line = mapped_line::create_on(fake.table(), 0);
        BOOST_TEST_REQUIRE(line.has_value());
        gpu_async::test::fake_stream stream = fake.stream_on(0);
        auto d = line.value().store(slot(1), &stream);
        BOOST_TEST_REQUIRE(d.has_value());
        port.async_wait(d.value(), [&](error_code ec) { got = ec; });
        BOOST_TEST(port.pending() == 1u);
    }
    BOOST_TEST(port.pending() == 0u);
    run_to_completion(ctx);
    BOOST_TEST(got == asio::error::operation_aborted);
}

// 5d. A simulated device that outlives the io_context after set_doorbell: its streams keep the
// doorbell alive and ring it safely.
BOOST_AUTO_TEST_CASE(a_device_outliving_the_context_rings_safely) {
    sim_device dev;
    auto s_handle = dev.make_stream();
    sim_stream& s = *s_handle;
    std::weak_ptr<doorbell> watched;
    {
        asio::io_context ctx;
        gpu_completion_port port(ctx);
        s.set_doorbell(port.shared_bell());
        watched = port.shared_bell();
        bool done = false;
        port.async_wait(s.descriptor_for(s.enqueue(dur_ns::from_us(100))),
                        [&](error_code ec) { done = !ec; });
        run_to_completion(ctx);
        BOOST_TEST(done);
    } // the reactor and its service go; the stream still holds the doorbell
    BOOST_TEST(!watched.expired());
    const std::uint64_t rung = watched.lock()->count();
    for (int i = 0; i < 20; ++i)
        s.enqueue(dur_ns::from_us(10));
    BOOST_TEST(s.block().value() == 0);
    // Each item rings after its store: the last ring may follow block()'s return.
    BOOST_TEST(eventually([&] { return watched.lock()->count() >= rung + 20; }));
}

// 6. Handlers completed by one scan run in ascending target order per slot (the order the device
// finished them). The waits start, and the word moves past them all, inside a handler under
// run_fill: no watcher thread, and nothing scans before the handler returns, so one take-in
// judges them all. (Started from the test's thread with a watcher running, its take-in could
// judge some before the store and some after: two scans, each in order, not one.)
BOOST_AUTO_TEST_CASE(one_scan_completes_a_slot_in_ascending_target_order) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line;
    const std::uint64_t base = ~std::uint64_t{0} - 20; // across the wrap too
    line.words[4].store(base);
    std::vector<std::uint64_t> targets;
    for (std::uint64_t k = 1; k <= 40; ++k)
        targets.push_back(base + k);
    std::mt19937 rng(7);
    std::shuffle(targets.begin(), targets.end(), rng);
    std::vector<std::uint64_t> order;
    asio::post(ctx, [&] {
        for (std::uint64_t t : targets)
            port.async_wait(memory_descriptor(line, slot(4), t), [&order, t](error_code ec) {
                if (!ec) order.push_back(t);
            });
        line.words[4].store(base + 40, std::memory_order_release);
        port.bell().ring();
    });
    gpu_async::test::run_fill_bounded(ctx);
    BOOST_TEST_REQUIRE(order.size() == 40u);
    for (std::size_t i = 1; i < order.size(); ++i)
        BOOST_TEST(order[i] - base > order[i - 1] - base);
}

BOOST_AUTO_TEST_CASE(giving_a_stream_back_ends_the_waits_on_its_own_line) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    sim_device dev({1, false});
    sim_stream_handle own = dev.make_stream();
    sim_stream_handle shared = dev.make_stream(dev.make_line(), slot(1));
    own->set_doorbell(port.shared_bell());
    shared->set_doorbell(port.shared_bell());
    const std::uint64_t queued = own->enqueue(dur_ns::from_ms(60000));
    const std::uint64_t other = shared->enqueue(dur_ns::zero());
    std::optional<error_code> own_end, shared_end;
    port.async_wait(own->descriptor_for(queued), [&](error_code ec) { own_end = ec; });
    port.async_wait(shared->descriptor_for(other), [&](error_code ec) { shared_end = ec; });
    completion_line& line = own->line();
    own.reset();                            // its queued item goes, its line is retired
    BOOST_TEST(line.words[0].load() == 0u); // the queued number was never stored
    run_to_completion(ctx);
    BOOST_REQUIRE(own_end.has_value());
    BOOST_TEST((*own_end == asio::error::operation_aborted));
    BOOST_REQUIRE(shared_end.has_value());
    BOOST_TEST(!*shared_end);
    BOOST_TEST(port.pending() == 0u);
    BOOST_TEST(dev.stream_count() == 1u);
}

// 7. While a drain is out the watcher leaves the scanning to it (its end scans), but a drain held
// back on its thread (a handler that does not return) must not hold back the other ports: the
// watcher scans again after one park bound in which no drain ran. Port a's handler waits, on
// one of two threads, for port b's completion, which only the watcher can find.
BOOST_AUTO_TEST_CASE(a_handler_that_keeps_its_thread_does_not_hold_back_another_ports_waits) {
    // Quiet, and with rings coming densely from another thread (the watcher then sleeps in its
    // stand-back rather than spin).
    for (const bool dense : {false, true}) {
        asio::io_context ctx;
        gpu_completion_port a(ctx), b(ctx);
        completion_line line;
        std::atomic<bool> b_done{false};
        bool b_seen_inside_a = false;
        std::thread ringer;
        if (dense)
            ringer = std::thread([&] {
                while (!b_done.load(std::memory_order_acquire))
                    a.bell().ring();
            });
        a.async_wait(memory_descriptor(line, slot(0), 1), [&](error_code ec) {
            BOOST_TEST(!ec);
            line.words[1].store(1, std::memory_order_release); // b's word, no ring of its own
            const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
            while (!b_done.load(std::memory_order_acquire) &&
                   std::chrono::steady_clock::now() < end)
                std::this_thread::sleep_for(std::chrono::microseconds(200));
            b_seen_inside_a = b_done.load(std::memory_order_acquire);
        });
        b.async_wait(memory_descriptor(line, slot(1), 1), [&](error_code ec) {
            BOOST_TEST(!ec);
            b_done.store(true, std::memory_order_release);
        });
        if (dense) std::this_thread::sleep_for(std::chrono::milliseconds(5)); // busy mode
        line.words[0].store(1, std::memory_order_release);
        a.bell().ring();
        BOOST_TEST_REQUIRE(run_on_threads(ctx, 2));
        b_done.store(true, std::memory_order_release); // ends the ringer in any case
        if (ringer.joinable()) ringer.join();
        BOOST_TEST(b_seen_inside_a, "dense rings: " << dense);
        BOOST_TEST(reactor_of(a).drains_out() == 0u);
    }
}

// 8. A watcher that stands back for a drain the executor never runs (the context is not run)
// while rings come densely sleeps until that drain ends or one park bound passes; a shutdown must
// wake it at once, not after the bound (a minute here) nor after its next look.
BOOST_AUTO_TEST_CASE(shutdown_wakes_a_watcher_standing_back_for_a_drain_never_run) {
    auto ctx = std::make_unique<asio::io_context>();
    auto port = std::make_unique<gpu_completion_port>(*ctx);
    port->park_bound(std::chrono::seconds(60));
    detail::reactor_service& svc = reactor_of(*port);
    completion_line line;
    int ran = 0;
    port->async_wait(memory_descriptor(line, slot(2), 1), [&](error_code) { ++ran; });
    port->async_wait(memory_descriptor(line, slot(3), 1), [&](error_code) { ++ran; });
    // Dense rings for a while (the watcher's busy mode), then the completion whose drain is
    // posted to the idle context.
    std::atomic<bool> stop{false};
    std::thread ringer([&] {
        while (!stop.load(std::memory_order_relaxed))
            port->bell().ring();
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    line.words[2].store(1, std::memory_order_release);
    port->bell().ring();
    BOOST_TEST_REQUIRE(eventually([&] { return svc.drains_out() != 0; }));
    BOOST_TEST_REQUIRE(svc.drains_out() == 1u);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    stop = true;
    ringer.join();
    port.reset(); // cancels the other wait: queued behind the same unrun drain
    const auto t0 = std::chrono::steady_clock::now();
    ctx.reset(); // shutdown: joins the watcher, destroys the unrun drain and its waits
    const auto took = std::chrono::steady_clock::now() - t0;
    BOOST_TEST(ran == 0);
    // The bound is 60 s and a stand-back sleep lasts at most 1 s before it looks again: without
    // the wake, the join takes about a second (the margin is for a loaded machine).
    BOOST_TEST(took < std::chrono::milliseconds(900));
}

// 9. Thousands of registrations between two looks at the lines (more than the service has room
// for in its array of new registrations: the rest wait on its overflow stack) keep their
// registration order: handlers of one slot run in ascending target order, and those of one
// target in the order they were started; pending() counts them all meanwhile. From one thread,
// then from two at once (each thread's own order kept), served by the watcher and by run_fill.
BOOST_AUTO_TEST_CASE(thousands_of_registrations_keep_their_order) {
    constexpr std::size_t n = 3000;
    for (const bool fill : {false, true}) {
        asio::io_context ctx{1};
        gpu_completion_port port(ctx);
        completion_line line;
        std::vector<std::size_t> order;
        for (std::size_t i = 0; i < n; ++i)
            port.async_wait(memory_descriptor(line, slot(2), 1 + i % 3),
                            [&order, i](error_code ec) {
                                if (!ec) order.push_back(i);
                            });
        BOOST_TEST(port.pending() == n);
        line.words[2].store(3, std::memory_order_release);
        port.bell().ring();
        if (fill) {
            gpu_async::test::run_fill_bounded(ctx); // returns once every handler ran
        } else {
            run_to_completion(ctx);
        }
        BOOST_TEST_REQUIRE(order.size() == n, "fill: " << fill);
        std::size_t k = 0;
        for (std::size_t t = 0; t < 3; ++t)
            for (std::size_t i = t; i < n; i += 3, ++k)
                BOOST_TEST_REQUIRE(order[k] == i, "fill: " << fill << ", at " << k);
    }
    // Two registering threads, each on its own slot, one target.
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line;
    std::vector<std::size_t> order[2];
    std::atomic<int> ready{0};
    auto start = [&](int t) {
        ready.fetch_add(1);
        while (ready.load() < 2)
            std::this_thread::yield();
        for (std::size_t i = 0; i < n; ++i)
            port.async_wait(memory_descriptor(line, slot(t), 1), [&order, t, i](error_code ec) {
                if (!ec) order[t].push_back(i);
            });
    };
    std::thread a(start, 0), b(start, 1);
    a.join();
    b.join();
    BOOST_TEST(port.pending() == 2 * n);
    line.words[0].store(1, std::memory_order_release);
    line.words[1].store(1, std::memory_order_release);
    port.bell().ring();
    run_to_completion(ctx);
    for (int t = 0; t < 2; ++t) {
        BOOST_TEST_REQUIRE(order[t].size() == n);
        for (std::size_t i = 0; i < n; ++i)
            BOOST_TEST_REQUIRE(order[t][i] == i, "thread " << t << ", at " << i);
    }
}

// 10. A cancellation takes the new registrations in as a scan does; one it finds complete must
// not leave before an earlier wait of its slot and target that the same store reached (it still
// sits in the table). The store and the cancellation come inside one handler under run_fill, so
// no scan comes between.
BOOST_AUTO_TEST_CASE(a_cancellation_keeps_one_targets_order) {
    asio::io_context ctx{1};
    gpu_completion_port port(ctx);
    completion_line line;
    std::vector<char> order;
    asio::cancellation_signal signal;
    bool d_aborted = false;
    port.async_wait(memory_descriptor(line, slot(0), 1), [&](error_code ec) {
        if (!ec) order.push_back('A');
    });
    port.async_wait(memory_descriptor(line, slot(1), 1),
                    asio::bind_cancellation_slot(signal.slot(), [&](error_code ec) {
                        d_aborted = ec == asio::error::operation_aborted;
                    }));
    // A cancellation takes A into the table (pending: its word is 0).
    asio::cancellation_signal first;
    port.async_wait(memory_descriptor(line, slot(2), 1),
                    asio::bind_cancellation_slot(first.slot(), [](error_code) {}));
    first.emit(asio::cancellation_type::terminal);
    asio::post(ctx, [&] {
        BOOST_TEST(port.pending() == 2u); // A and D
        port.async_wait(memory_descriptor(line, slot(0), 1), [&](error_code ec) {
            if (!ec) order.push_back('B');
        });
        line.words[0].store(1, std::memory_order_release); // no ring: no scan is asked for
        signal.emit(asio::cancellation_type::terminal);    // its merge finds B complete
    });
    gpu_async::test::run_fill_bounded(ctx); // returns once every handler ran
    BOOST_TEST(d_aborted);
    BOOST_TEST((order == std::vector<char>{'A', 'B'}));
}

// 11. After run_fill returns, the service has no waiter until a registration starts the
// watcher: a wait started then must not wait for the next run_fill.
BOOST_AUTO_TEST_CASE(a_wait_started_after_run_fill_returned_is_served_by_the_watcher) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line;
    gpu_async::test::run_fill_bounded(ctx); // nothing to do: it returns at once
    bool served = false;
    // And once run_fill has served a wait too.
    port.async_wait(memory_descriptor(line, slot(4), 1), [&](error_code ec) { served = !ec; });
    line.words[4].store(1, std::memory_order_release);
    port.bell().ring();
    ctx.restart();
    gpu_async::test::run_fill_bounded(ctx);
    BOOST_TEST_REQUIRE(served);
    for (std::uint64_t target = 2; target <= 4; ++target) {
        ctx.restart();
        bool ok = false;
        port.async_wait(memory_descriptor(line, slot(4), target), [&](error_code ec) { ok = !ec; });
        std::jthread producer([&] { // joined however the test leaves
            std::this_thread::sleep_for(std::chrono::microseconds(300));
            line.words[4].store(target, std::memory_order_release);
            port.bell().ring();
        });
        run_to_completion(ctx); // fails if no watcher serves it
        BOOST_TEST_REQUIRE(ok, "target " << target);
    }
}

// 12. A registration from another thread racing run_fill's return: either run_fill takes it in
// before it ends, or the registration starts the watcher. Never neither.
BOOST_AUTO_TEST_CASE(a_registration_racing_run_fills_return_is_never_stranded) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line;
    const int rounds = race_rounds(400);
    for (int round = 1; round <= rounds; ++round) {
        ctx.restart();
        const auto target = static_cast<std::uint64_t>(round);
        std::atomic<bool> go{false};
        bool ok = false;
        std::jthread registrar([&] { // joined however the test leaves
            while (!go.load(std::memory_order_acquire)) {
            }
            port.async_wait(memory_descriptor(line, slot(6), target),
                            [&](error_code ec) { ok = !ec; });
            line.words[6].store(target, std::memory_order_release);
            port.bell().ring();
        });
        go.store(true, std::memory_order_release);
        gpu_async::test::run_fill_bounded(ctx); // returns when out of work, the wait's or none
        registrar.join();
        ctx.restart();
        run_to_completion(ctx); // the wait, if run_fill had ended before it registered
        BOOST_TEST_REQUIRE(ok, "round " << round);
    }
}

// A port's cancel() from one thread while two threads start waits on it and on a second port,
// and a third stores their words: the engine keeps each port's waits as a group through
// take-ins, scans and late take-ins under way. Every handler runs once; the waits the cancel()
// calls counted are exactly the first port's aborted ones; the second port loses none.
BOOST_AUTO_TEST_CASE(a_ports_cancel_racing_starts_and_completions_ends_only_its_own_waits) {
    const int rounds = race_rounds(40);
    constexpr std::size_t per_port = 200;
    for (int round = 0; round < rounds; ++round) {
        asio::io_context ctx;
        gpu_completion_port a(ctx), b(ctx);
        std::vector<std::unique_ptr<completion_line>> lines(per_port);
        for (auto& l : lines)
            l = std::make_unique<completion_line>();
        std::vector<std::atomic<int>> calls_a(per_port), calls_b(per_port);
        std::atomic<std::size_t> aborted_a{0}, aborted_b{0}, started{0};
        std::atomic<bool> starting{true};
        std::size_t counted = 0;
        auto starter = [&](gpu_completion_port& port, std::vector<std::atomic<int>>& calls,
                           std::atomic<std::size_t>& aborted) {
            for (std::size_t i = 0; i < per_port; ++i) {
                // Each line's slot 0 for port a, slot 1 for port b.
                const std::size_t s = &port == &a ? 0 : 1;
                port.async_wait(memory_descriptor(*lines[i], slot(s), 1),
                                [&calls, &aborted, i](error_code ec) {
                                    ++calls[i];
                                    if (ec == asio::error::operation_aborted) ++aborted;
                                });
                ++started;
            }
        };
        std::thread start_a([&] { starter(a, calls_a, aborted_a); });
        std::thread start_b([&] { starter(b, calls_b, aborted_b); });
        std::thread producer([&] {
            for (std::size_t i = 0; i < per_port; i += 3) {
                lines[i]->words[0].store(1, std::memory_order_release);
                lines[i]->words[1].store(1, std::memory_order_release);
                a.bell().ring();
            }
        });
        std::thread canceller([&] {
            while (starting.load())
                counted += a.cancel();
            counted += a.cancel();
        });
        start_a.join();
        start_b.join();
        starting = false;
        canceller.join();
        producer.join();
        BOOST_TEST(a.pending() == 0u);
        for (std::size_t i = 0; i < per_port; ++i) {
            lines[i]->words[0].store(1, std::memory_order_release);
            lines[i]->words[1].store(1, std::memory_order_release);
        }
        a.bell().ring();
        BOOST_TEST(run_on_threads(ctx, 2));
        BOOST_TEST(started.load() == 2 * per_port);
        BOOST_TEST(aborted_a.load() == counted);
        BOOST_TEST(aborted_b.load() == 0u);
        BOOST_TEST(b.pending() == 0u);
        for (std::size_t i = 0; i < per_port; ++i) {
            BOOST_TEST(calls_a[i].load() == 1);
            BOOST_TEST(calls_b[i].load() == 1);
        }
    }
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_asio_gpu_completion_port_races_and_teardown
