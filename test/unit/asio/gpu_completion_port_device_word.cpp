// SPDX-License-Identifier: BSL-1.0
// A device producer that only stores (its completion word, then the doorbell's device word, as
// a GPU line with the doorbell attached does) and never rings: the reactor's waiter sees it
// through the device word, within about one device poll interval without a user-mode monitor
// and at once with one, not at the park bound. Both waiters: the watcher thread and run_fill.
#include <gpu_async/asio/detail/reactor_service.hpp>
#include <gpu_async/device/sim_device.hpp>
#include <gpu_async/gpu_completion_port.hpp>
#include <gpu_async/line/detail/line_watchers.hpp>
#include <gpu_async/line/line_health.hpp>
#include <gpu_async/line/line_life.hpp>
#include <gpu_async/run_fill.hpp>
#include <gpu_async/wait/detail/bell_waiter.hpp>
#include <gpu_async/wait/wordwait.hpp>

#include "common/io_context_fixture.hpp"
#include "common/run_fill_bounded.hpp"

#include "common/asio.hpp"
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <thread>

namespace unit_asio_gpu_completion_port_device_word {

using gpu_async::error_code;
using namespace gpu_async;

namespace {

/// Counts a device producer on a doorbell for its lifetime.
class device_producer {
public:
    explicit device_producer(doorbell& b)
        : bell_(b) {
        bell_.add_device_producer();
    }
    device_producer(const device_producer&) = delete;
    device_producer& operator=(const device_producer&) = delete;
    ~device_producer() { bell_.remove_device_producer(); }

private:
    doorbell& bell_;
};

/// Stores `value` into the slot, then the device signal, as a GPU's batch does; no ring.
void device_store(completion_line& line, std::size_t slot, std::uint64_t value, doorbell& bell) {
    line.words[slot].store(value, std::memory_order_release);
    bell.line().words[doorbell::device_word].store(doorbell::device_signal,
                                                   std::memory_order_release);
}

// The park bound is far longer than the run's bound, and the run's bound shorter than the
// longest single futex sleep of the doorbell (1 s, after which a sleeper looks again anyway): a
// completion within the run proves the device word was seen by the device poll.
constexpr auto long_bound = std::chrono::seconds(30);
constexpr auto run_bound = std::chrono::milliseconds(800);

/// Whether the waiter predicts here: only without a user-mode monitor.
bool predicting_here() {
    return word_wait::probe().path() == word_wait_path::fallback;
}

/// One round on the watcher: a wait on (line, slot) for `target`, stored by a "device" thread
/// `after` its start. Returns whether the handler ran with success within the run's bound.
bool watcher_round(asio::io_context& ctx, gpu_completion_port& port, completion_line& line,
                   std::size_t slot, std::uint64_t target, std::chrono::microseconds after) {
    bool ok = false;
    port.async_wait(memory_descriptor(line, *slot_id::at(slot), target),
                    [&](error_code ec) { ok = !ec; });
    std::thread device([&] {
        if (after.count() != 0) std::this_thread::sleep_for(after);
        device_store(line, slot, target, port.bell());
    });
    const auto t0 = std::chrono::steady_clock::now();
    ctx.run_for(run_bound);
    device.join();
    const bool in_time = std::chrono::steady_clock::now() - t0 < run_bound;
    ctx.restart();
    return ok && in_time;
}

detail::reactor_service& service_of(asio::io_context& ctx) {
    return asio::use_service<detail::reactor_service>(ctx);
}

} // namespace

BOOST_AUTO_TEST_SUITE(gpu_completion_port_device_word_tests)

BOOST_AUTO_TEST_CASE(the_device_poll_knob) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    BOOST_TEST(port.device_poll().count() == default_device_poll.count());
    port.device_poll(std::chrono::microseconds(50));
    BOOST_TEST(port.device_poll().count() == 50000u);
    port.device_poll(dur_ns{});
    BOOST_TEST(port.device_poll().count() == 1u);
    gpu_completion_port other(ctx); // the context's, shared
    BOOST_TEST(other.device_poll().count() == 1u);
}

BOOST_AUTO_TEST_CASE(a_device_poll_park_spins_first_only_at_the_default_poll_or_faster) {
    const dur_ns spin{doorbell::spin_ns};
    const dur_ns bound = dur_ns::from_ms(10);
    const auto first_spin = [&](dur_ns s, dur_ns poll) {
        const park_policy::park_shape shape = park_policy::park(bound, false, true, true, s, poll);
        BOOST_TEST((shape.kind == park_policy::park_kind::steps));
        BOOST_TEST(shape.step.count() == poll.count());
        return shape.spin.count();
    };
    BOOST_TEST(first_spin(spin, default_device_poll) == spin.count());
    BOOST_TEST(first_spin(spin, dur_ns::from_us(5)) == spin.count());
    BOOST_TEST(first_spin(spin, dur_ns::from_us(21)) == 0u);
    BOOST_TEST(first_spin(spin, dur_ns::from_ms(1)) == 0u);
    // Dense rings keep their (longer) spin at any poll.
    const dur_ns dense_spin = default_wait_tuning.busy_spin;
    BOOST_TEST(first_spin(dense_spin, dur_ns::from_ms(1)) == dense_spin.count());
}

BOOST_AUTO_TEST_CASE(the_watcher_sees_a_store_only_device_through_the_device_word) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    port.park_bound(long_bound);
    device_producer producer(port.bell());
    completion_line line;
    int done = 0;
    for (std::uint64_t round = 1; round <= 5; ++round) {
        port.async_wait(memory_descriptor(line, *slot_id::at(2), round), [&](error_code ec) {
            BOOST_TEST(!ec);
            ++done;
        });
        // Stored once the watcher has gone to sleep on the bell (it registered the wait).
        std::thread device([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            device_store(line, 2, round, port.bell());
        });
        const auto t0 = std::chrono::steady_clock::now();
        ctx.run_for(run_bound);
        device.join();
        BOOST_TEST_REQUIRE(done == static_cast<int>(round));
        BOOST_TEST((std::chrono::steady_clock::now() - t0 < run_bound));
        ctx.restart();
    }
}

BOOST_AUTO_TEST_CASE(run_fill_sees_a_store_only_device_through_the_device_word) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    device_producer producer(port.bell());
    completion_line line;
    bool done = false;
    port.async_wait(memory_descriptor(line, *slot_id::at(5), 1), [&](error_code ec) {
        BOOST_TEST(!ec);
        done = true; // then run_fill runs out of work and returns
    });
    std::jthread device([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        device_store(line, 5, 1, port.bell());
    });
    fill_options opts;
    opts.park_bound = long_bound;
    const auto t0 = std::chrono::steady_clock::now();
    test::run_fill_bounded(ctx, opts, run_bound); // fails if the store is never seen
    BOOST_TEST(done);
    BOOST_TEST((std::chrono::steady_clock::now() - t0 < run_bound));
}

BOOST_AUTO_TEST_CASE(run_fill_serves_a_posted_handler_while_device_signals_keep_ending_its_parks) {
    // Device signals that complete none of this context's waits (another port's lines share the
    // doorbell) end each park at once; after each, run_fill asks the io_context too, so a
    // handler posted from another thread runs long before the park bound (longer than the
    // test's own watchdog).
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    device_producer producer(port.bell());
    completion_line line;
    std::atomic<bool> posted_ran{false};
    std::atomic<bool> quit{false}; // set when the test ends, also by a failed requirement
    bool gpu = false;
    port.async_wait(memory_descriptor(line, *slot_id::at(3), 1), [&](error_code ec) {
        BOOST_TEST(posted_ran.load());
        gpu = !ec;
    });
    std::thread device([&] {
        while (!posted_ran.load() && !quit.load()) {
            port.bell().line().words[doorbell::device_word].store(doorbell::device_signal,
                                                                  std::memory_order_release);
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
        if (!quit.load()) device_store(line, 3, 1, port.bell());
    });
    std::thread other([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        asio::post(ctx, [&] { posted_ran = true; });
    });
    struct joiner {
        std::atomic<bool>& quit;
        std::thread& a;
        std::thread& b;
        ~joiner() {
            quit = true;
            a.join();
            b.join();
        }
    } join_at_exit{quit, device, other};
    fill_options opts;
    opts.park_bound = 4 * test::run_bound;
    const auto t0 = std::chrono::steady_clock::now();
    BOOST_TEST(test::run_fill_bounded(ctx, opts) == 2u);
    BOOST_TEST((std::chrono::steady_clock::now() - t0 < run_bound));
    BOOST_TEST(posted_ran.load());
    BOOST_TEST(gpu);
}

BOOST_AUTO_TEST_CASE(a_simulated_store_only_stream_is_seen_through_the_device_word) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    port.park_bound(long_bound);
    sim_device dev;
    auto s = dev.make_stream();
    s->set_doorbell(port.shared_bell(), sim_signal::device_store);
    int done = 0;
    for (int round = 1; round <= 5; ++round) {
        port.async_wait(s->descriptor_for(s->enqueue(std::chrono::microseconds(500))),
                        [&](error_code ec) {
                            BOOST_TEST(!ec);
                            ++done;
                        });
        ctx.run_for(run_bound);
        BOOST_TEST_REQUIRE(done == round);
        ctx.restart();
    }
}

BOOST_AUTO_TEST_CASE(the_watcher_learns_a_slots_rhythm_and_still_sees_an_earlier_store) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    BOOST_TEST(port.predicts());
    port.park_bound(long_bound); // the predicted sleep is not cut short by the park bound
    device_producer producer(port.bell());
    detail::reactor_service& svc = service_of(ctx);
    completion_line line;
    std::uint64_t target = 0;
    for (int round = 0; round < 8; ++round)
        BOOST_TEST_REQUIRE(
            watcher_round(ctx, port, line, 3, ++target, std::chrono::milliseconds(2)));
    if (!predicting_here()) {
        // A monitor sees the device's store at once: nothing is learnt.
        BOOST_TEST(svc.rhythm_lines() == 0u);
        return;
    }
    BOOST_TEST(svc.rhythm_lines() == 1u);
    const std::optional<std::uint64_t> learnt = svc.rhythm_sleep_ns(line, *slot_id::at(3));
    BOOST_TEST_REQUIRE(learnt.has_value());
    BOOST_TEST(!svc.rhythm_sleep_ns(line, *slot_id::at(4)).has_value()); // another slot: cold
    // A store far earlier than any seen is still seen (within the sleep, not lost).
    BOOST_TEST_REQUIRE(watcher_round(ctx, port, line, 3, ++target, std::chrono::microseconds(0)));
    BOOST_TEST(svc.rhythm_sleep_ns(line, *slot_id::at(3)).has_value());
    // Steady again: every wait completes.
    for (int round = 0; round < 4; ++round)
        BOOST_TEST_REQUIRE(
            watcher_round(ctx, port, line, 3, ++target, std::chrono::milliseconds(1)));
}

BOOST_AUTO_TEST_CASE(a_rhythm_is_forgotten_when_its_line_retires_and_not_learnt_when_off) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    device_producer producer(port.bell());
    detail::reactor_service& svc = service_of(ctx);
    completion_line line;
    BOOST_TEST_REQUIRE(watcher_round(ctx, port, line, 0, 1, std::chrono::microseconds(300)));
    BOOST_TEST(svc.rhythm_lines() == (predicting_here() ? 1u : 0u));
    retire_line(line);
    BOOST_TEST(svc.rhythm_lines() == 0u);
    BOOST_TEST(!svc.rhythm_sleep_ns(line, *slot_id::at(0)).has_value());

    port.predicts(false);
    BOOST_TEST(!port.predicts());
    gpu_completion_port other(ctx); // the context's, shared
    BOOST_TEST(!other.predicts());
    for (std::uint64_t target = 2; target <= 4; ++target)
        BOOST_TEST_REQUIRE(
            watcher_round(ctx, port, line, 0, target, std::chrono::microseconds(300)));
    BOOST_TEST(svc.rhythm_lines() == 0u);
}

BOOST_AUTO_TEST_CASE(without_device_producers_nothing_is_predicted) {
    // Host producers ring the doorbell: the waiter wakes on the ring and learns nothing.
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    detail::reactor_service& svc = service_of(ctx);
    completion_line line;
    for (std::uint64_t target = 1; target <= 3; ++target) {
        bool ok = false;
        port.async_wait(memory_descriptor(line, *slot_id::at(1), target),
                        [&](error_code ec) { ok = !ec; });
        std::thread producer([&] {
            std::this_thread::sleep_for(std::chrono::microseconds(300));
            line.words[1].store(target, std::memory_order_release);
            port.bell().ring();
        });
        ctx.run_for(run_bound);
        producer.join();
        ctx.restart();
        BOOST_TEST_REQUIRE(ok);
    }
    BOOST_TEST(svc.rhythm_lines() == 0u);
}

BOOST_AUTO_TEST_CASE(run_fill_learns_the_rhythm_too) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    device_producer producer(port.bell());
    detail::reactor_service& svc = service_of(ctx);
    completion_line line;
    for (std::uint64_t target = 1; target <= 6; ++target) {
        bool ok = false;
        port.async_wait(memory_descriptor(line, *slot_id::at(6), target),
                        [&](error_code ec) { ok = !ec; });
        std::jthread device([&] {
            std::this_thread::sleep_for(std::chrono::microseconds(1500));
            device_store(line, 6, target, port.bell());
        });
        test::run_fill_bounded(ctx, {}, run_bound); // fails if the store is never seen
        device.join();
        ctx.restart();
        BOOST_TEST_REQUIRE(ok);
    }
    if (predicting_here()) {
        BOOST_TEST(svc.rhythm_lines() == 1u);
        BOOST_TEST(svc.rhythm_sleep_ns(line, *slot_id::at(6)).has_value());
    } else {
        BOOST_TEST(svc.rhythm_lines() == 0u);
    }
}

BOOST_AUTO_TEST_CASE(no_rhythm_is_learnt_when_the_device_poll_reaches_the_park_bound) {
    // With a device poll no shorter than the park bound every park sleeps the whole bound, with
    // or without a prediction, so nothing is learnt (no clock read, no lookup per wait).
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    device_producer producer(port.bell());
    detail::reactor_service& svc = service_of(ctx);
    completion_line line;
    port.device_poll(std::chrono::milliseconds(1));
    port.park_bound(std::chrono::milliseconds(1));
    std::uint64_t target = 0;
    for (int round = 0; round < 3; ++round)
        BOOST_TEST_REQUIRE(
            watcher_round(ctx, port, line, 2, ++target, std::chrono::microseconds(300)));
    BOOST_TEST(svc.rhythm_lines() == 0u);
    // A bound longer than one poll: a park can step, a prediction can save those steps, and it
    // learns.
    port.park_bound(std::chrono::microseconds(1500));
    for (int round = 0; round < 3; ++round)
        BOOST_TEST_REQUIRE(
            watcher_round(ctx, port, line, 2, ++target, std::chrono::microseconds(300)));
    BOOST_TEST(svc.rhythm_lines() == (predicting_here() ? 1u : 0u));
}

BOOST_AUTO_TEST_CASE(under_run_fill_its_own_park_bound_decides_whether_a_rhythm_is_learnt) {
    // The port's park bound is long (the watcher would learn); run_fill parks at its own bound.
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    port.park_bound(long_bound);
    port.device_poll(std::chrono::microseconds(500));
    device_producer producer(port.bell());
    detail::reactor_service& svc = service_of(ctx);
    completion_line line;
    std::uint64_t target = 0;
    // Waits started by handlers under run_fill, as a FILL driver's are.
    auto rounds = [&](std::chrono::nanoseconds fill_bound) {
        for (int round = 0; round < 3; ++round) {
            bool ok = false;
            const std::uint64_t t = ++target;
            asio::post(ctx, [&, t] {
                port.async_wait(memory_descriptor(line, *slot_id::at(5), t),
                                [&](error_code ec) { ok = !ec; });
            });
            std::jthread device([&, t] {
                std::this_thread::sleep_for(std::chrono::microseconds(1500));
                device_store(line, 5, t, port.bell());
            });
            fill_options options;
            options.park_bound = fill_bound;
            test::run_fill_bounded(ctx, options, run_bound); // fails if a store is never seen
            device.join();
            ctx.restart();
            BOOST_TEST_REQUIRE(ok);
        }
    };
    rounds(std::chrono::microseconds(500)); // the poll reaches run_fill's bound
    BOOST_TEST(svc.rhythm_lines() == 0u);
    // run_fill has ended: the watcher's own (long) bound applies again, and it learns.
    for (int round = 0; round < 3; ++round)
        BOOST_TEST_REQUIRE(
            watcher_round(ctx, port, line, 5, ++target, std::chrono::microseconds(300)));
    BOOST_TEST(svc.rhythm_lines() == (predicting_here() ? 1u : 0u));
    retire_line(line);
    BOOST_TEST(svc.rhythm_lines() == 0u);
    rounds(std::chrono::milliseconds(5)); // a bound longer than the poll under run_fill too
    BOOST_TEST(svc.rhythm_lines() == (predicting_here() ? 1u : 0u));
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_asio_gpu_completion_port_device_word
