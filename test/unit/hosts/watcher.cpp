// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/host/std_host.hpp>

#include <gpu_async/device/sim_device.hpp>

#include "common/eventually.hpp"
#include "common/slots.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <random>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace unit_hosts_watcher {

using namespace gpu_async;
using gpu_async::test::eventually;
using gpu_async::test::slot;

namespace {

// Bound of every wait in these tests: far beyond any scan; only a hang reaches it.
constexpr auto long_wait = std::chrono::seconds(10);

/// Waits (at most long_wait) until `w` has scanned once: its first registration is taken in
/// and the thread parks next. True once it has.
bool scanned_once(const std_watcher& w) {
    return eventually([&] { return w.scans() > 0; }, long_wait);
}

} // namespace

BOOST_AUTO_TEST_SUITE(watcher)

BOOST_AUTO_TEST_CASE(register_and_resolve) {
    std_watcher w;
    completion_line line;
    watch_handle h = w.watch(line, slot(2), 5);
    BOOST_TEST(h.valid());
    BOOST_TEST(!h.ready());
    BOOST_TEST(w.pending() == 1u);
    BOOST_TEST(w.lines() == 1u);
    line.words[2].store(4, std::memory_order_release); // not yet
    BOOST_TEST(!h.wait_for(std::chrono::milliseconds(2)));
    line.words[2].store(5, std::memory_order_release);
    BOOST_TEST(h.wait_for(long_wait));
    BOOST_TEST(h.ready());
    BOOST_TEST(w.pending() == 0u);
    BOOST_TEST(w.lines() == 0u);
    BOOST_TEST(w.scans() > 0u);
    BOOST_TEST(!w.waiting().empty());
}

BOOST_AUTO_TEST_CASE(already_complete_resolves) {
    std_watcher w;
    completion_line line;
    line.words[0].store(9);
    watch_handle h = w.watch(memory_descriptor(line, slot(0), 3));
    h.wait();
    BOOST_TEST(h.ready());
}

BOOST_AUTO_TEST_CASE(a_waiter_on_another_thread_is_woken) {
    std_watcher w;
    completion_line line;
    watch_handle h = w.watch(line, slot(1), 1);
    std::atomic<bool> woke{false};
    std::thread waiter([&] {
        h.wait();
        woke = true;
    });
    line.words[1].store(1, std::memory_order_release);
    waiter.join();
    BOOST_TEST(woke.load());
}

BOOST_AUTO_TEST_CASE(drop_before_resolution_removes_it) {
    std_watcher w;
    completion_line line;
    {
        watch_handle h = w.watch(line, slot(0), 1);
        watch_handle g = w.watch(line, slot(7), 1);
        BOOST_TEST(w.pending() == 2u);
        h.reset();
        BOOST_TEST(!h.valid());
        BOOST_TEST(w.pending() == 1u);
        BOOST_TEST(w.lines() == 1u);
    } // g dropped by its destructor
    BOOST_TEST(w.pending() == 0u);
    BOOST_TEST(w.lines() == 0u);
    // A dropped callback never runs, even when its word arrives later.
    std::atomic<int> ran{0};
    {
        watch_handle c = w.on_complete(memory_descriptor(line, slot(3), 1), [&] { ++ran; });
    }
    line.words[3].store(1);
    watch_handle probe = w.watch(line, slot(3), 1); // resolves after a scan of that word
    BOOST_TEST(probe.wait_for(long_wait));
    BOOST_TEST(ran.load() == 0);
}

BOOST_AUTO_TEST_CASE(move_keeps_the_registration) {
    std_watcher w;
    completion_line line;
    watch_handle a = w.watch(line, slot(0), 1);
    watch_handle b(std::move(a));
    BOOST_TEST(!a.valid());
    watch_handle c;
    c = std::move(b);
    BOOST_TEST(w.pending() == 1u);
    line.words[0].store(1);
    BOOST_TEST(c.wait_for(long_wait));
}

BOOST_AUTO_TEST_CASE(targets_in_wrapping_order) {
    std_watcher w;
    completion_line line;
    constexpr std::uint64_t top = ~std::uint64_t{0};
    line.words[0].store(top - 1);
    line.words[1].store(1);
    watch_handle after_wrap = w.watch(line, slot(0), 1); // pending until the word wraps to 1
    watch_handle before = w.watch(line, slot(1), top);   // 1 follows 2^64-1: complete
    watch_handle ahead = w.watch(line, slot(1), 2);      // pending
    BOOST_TEST(before.wait_for(long_wait));
    BOOST_TEST(!after_wrap.ready());
    BOOST_TEST(!ahead.ready());
    line.words[0].store(1);
    BOOST_TEST(after_wrap.wait_for(long_wait));
    BOOST_TEST(!ahead.ready());
    BOOST_TEST(w.pending() == 1u);
}

BOOST_AUTO_TEST_CASE(callback_form_runs_then_is_ready) {
    std_watcher w;
    completion_line line;
    std::atomic<std::thread::id> ran_on{};
    watch_handle h = w.on_complete(memory_descriptor(line, slot(4), 2),
                                   [&] { ran_on = std::this_thread::get_id(); });
    line.words[4].store(2);
    BOOST_TEST(h.wait_for(long_wait));
    BOOST_TEST((ran_on.load() != std::thread::id{}));
    BOOST_TEST((ran_on.load() != std::this_thread::get_id()));
}

BOOST_AUTO_TEST_CASE(a_callback_that_registers_again_does_not_deadlock) {
    std_watcher w;
    completion_line line;
    std::mutex m;
    std::vector<watch_handle> chained;
    std::atomic<int> round{0};
    // Each callback registers the next target of the same slot from inside, then drops an
    // unrelated pending registration: both take the watcher's lock, which must be free.
    watch_handle spare = w.watch(line, slot(6), 1);
    std::function<void()> next = [&] {
        const int r = ++round;
        if (r == 1) spare.reset();
        if (r < 5) {
            watch_handle h =
                w.on_complete(memory_descriptor(line, slot(0), std::uint64_t(r + 1)), next);
            std::lock_guard lk(m);
            chained.push_back(std::move(h));
        }
    };
    watch_handle first = w.on_complete(memory_descriptor(line, slot(0), 1), next);
    for (std::uint64_t v = 1; v <= 5; ++v) {
        line.words[0].store(v, std::memory_order_release);
        BOOST_TEST_REQUIRE(eventually([&] { return round.load() >= static_cast<int>(v); }));
    }
    BOOST_TEST(round.load() == 5);
    BOOST_TEST(first.ready());
    BOOST_TEST(w.pending() == 0u);
    std::lock_guard lk(m);
    BOOST_TEST(chained.size() == 4u);
    chained.clear();
}

BOOST_AUTO_TEST_CASE(thousands_of_handles_over_many_lines) {
    std_watcher w;
    constexpr std::size_t n_lines = 200;
    constexpr std::size_t per_slot = 4; // 200 lines x 8 slots x 4 targets = 6400 handles
    std::deque<completion_line> lines(n_lines);
    std::vector<watch_handle> handles;
    std::vector<bool> is_callback;
    std::atomic<std::size_t> callbacks{0};
    std::mt19937_64 rng(42);
    for (auto& line : lines)
        for (std::size_t s = 0; s < line_words; ++s)
            for (std::size_t t = 1; t <= per_slot; ++t) {
                const memory_descriptor d(line, slot(s), t);
                is_callback.push_back(rng() % 2 == 0);
                if (is_callback.back())
                    handles.push_back(w.on_complete(d, [&] { ++callbacks; }));
                else
                    handles.push_back(w.watch(d));
            }
    BOOST_TEST(w.pending() == n_lines * line_words * per_slot);
    BOOST_TEST(w.lines() == n_lines);
    // Drop every fourth before anything completes.
    for (std::size_t i = 0; i < handles.size(); i += 4)
        handles[i].reset();
    const std::size_t kept = handles.size() - (handles.size() + 3) / 4;
    std::size_t kept_callbacks = 0;
    for (std::size_t i = 0; i < handles.size(); ++i)
        if (handles[i].valid() && is_callback[i]) ++kept_callbacks;
    BOOST_TEST(w.pending() == kept);
    // Complete the lines in a random order.
    std::vector<std::size_t> order(n_lines);
    for (std::size_t i = 0; i < n_lines; ++i)
        order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (std::size_t i : order)
        for (std::size_t s = 0; s < line_words; ++s)
            lines[i].words[s].store(per_slot, std::memory_order_release);
    for (auto& h : handles)
        if (h.valid()) BOOST_TEST_REQUIRE(h.wait_for(long_wait));
    BOOST_TEST(w.pending() == 0u);
    BOOST_TEST(w.lines() == 0u);
    handles.clear();
    BOOST_TEST(callbacks.load() == kept_callbacks);
}

BOOST_AUTO_TEST_CASE(watches_simulated_device_streams) {
    sim_device dev;
    std_watcher w;
    completion_line& shared = dev.make_line();
    std::vector<gpu_async::sim_stream_handle> owned;
    std::vector<watch_handle> handles;
    std::vector<std::pair<sim_stream*, std::uint64_t>> tails;
    for (std::size_t i = 0; i < 24; ++i) {
        // Eight streams share one line slot by slot; the rest have lines of their own.
        sim_stream& s = *owned.emplace_back(i < line_words ? dev.make_stream(shared, slot(i))
                                                           : dev.make_stream());
        std::uint64_t last = 0;
        for (int k = 0; k < 3; ++k)
            last = s.enqueue(dur_ns::from_us(100 + 50 * i));
        handles.push_back(w.watch(s.descriptor_for(last)));
        tails.emplace_back(&s, last);
    }
    for (std::size_t i = 0; i < handles.size(); ++i) {
        BOOST_TEST_REQUIRE(handles[i].wait_for(long_wait));
        // Resolved only once the stream stored its last number.
        BOOST_TEST(sequence_reached(tails[i].first->word(), tails[i].second));
    }
    BOOST_TEST(w.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(sleeps_while_nothing_is_watched) {
    std_watcher w;
    completion_line line;
    {
        watch_handle h = w.watch(line, slot(0), 1);
        line.words[0].store(1);
        BOOST_TEST(h.wait_for(long_wait));
    }
    // With nothing watched the thread sleeps on its doorbell: no scans happen.
    const std::uint64_t scans = w.scans();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    BOOST_TEST(w.scans() == scans);
}

// The watcher waits as the reactor service does, on its doorbell: a producer that rings after
// its store is seen at once, long before the park bound (a minute here).
BOOST_AUTO_TEST_CASE(a_producer_that_rings_is_seen_before_the_park_bound) {
    std_watcher w(dur_ns::from_ms(60000));
    completion_line line;
    watch_handle h = w.watch(line, slot(2), 1);
    // Let the thread take the wait in and park (without a ring it would sleep the whole bound).
    BOOST_TEST_REQUIRE(scanned_once(w));
    std::thread producer([&] {
        line.words[2].store(1, std::memory_order_release);
        w.bell().ring();
    });
    BOOST_TEST(h.wait_for(std::chrono::seconds(20)));
    producer.join();
}

// A device producer counted on the watcher's doorbell stores its signal into the doorbell's
// device word and never rings: the watcher sees it within the device poll interval (or at once
// with a user-mode monitor), not the park bound.
BOOST_AUTO_TEST_CASE(a_device_signal_on_the_doorbell_is_seen_before_the_park_bound) {
    std_watcher w(dur_ns::from_ms(60000));
    BOOST_TEST(w.device_poll().ns == default_device_poll.ns);
    w.device_poll(dur_ns::from_us(50));
    BOOST_TEST(w.device_poll().ns == dur_ns::from_us(50).ns);
    doorbell& bell = w.bell();
    bell.add_device_producer();
    completion_line line;
    watch_handle h = w.watch(line, slot(5), 7);
    BOOST_TEST_REQUIRE(scanned_once(w));
    line.words[5].store(7, std::memory_order_release);
    bell.line().words[doorbell::device_word].store(doorbell::device_signal,
                                                   std::memory_order_release);
    BOOST_TEST(h.wait_for(std::chrono::seconds(20)));
    bell.remove_device_producer();
}

// on_end: the empty code when the descriptor completes, on the watcher thread.
BOOST_AUTO_TEST_CASE(on_end_reports_completion) {
    std_watcher w;
    completion_line line;
    std::mutex m;
    std::vector<std::error_code> codes;
    std::thread::id ran_on{};
    watch_handle h = w.on_end(memory_descriptor(line, slot(5), 3), [&](std::error_code ec) {
        std::lock_guard lk(m);
        codes.push_back(ec);
        ran_on = std::this_thread::get_id();
    });
    BOOST_TEST(h.valid());
    BOOST_TEST(w.pending() == 1u);
    line.words[5].store(3, std::memory_order_release);
    BOOST_TEST(h.wait_for(long_wait));
    std::lock_guard lk(m);
    BOOST_TEST_REQUIRE(codes.size() == 1u);
    BOOST_TEST(!codes[0]);
    BOOST_TEST((ran_on != std::this_thread::get_id()));
    BOOST_TEST(w.pending() == 0u);
}

// shutdown(): pending on_end registrations end with errc::shut_down, stop listeners run, both on
// the watcher thread before shutdown() returns; the other forms stay pending and droppable.
BOOST_AUTO_TEST_CASE(shutdown_ends_on_end_registrations_and_runs_stop_listeners) {
    std_watcher w;
    completion_line line;
    std::vector<std::error_code> codes;
    std::vector<std::thread::id> threads;
    std::mutex m;
    const auto record = [&](std::error_code ec) {
        std::lock_guard lk(m);
        codes.push_back(ec);
        threads.push_back(std::this_thread::get_id());
    };
    watch_handle e1 = w.on_end(memory_descriptor(line, slot(0), 1), record);
    watch_handle e2 = w.on_end(memory_descriptor(line, slot(2), 1), record);
    int stops = 0;
    watch_handle stop = w.on_stop([&] {
        std::lock_guard lk(m);
        ++stops;
        threads.push_back(std::this_thread::get_id());
    });
    int dropped_stops = 0;
    watch_handle dropped_stop = w.on_stop([&] { ++dropped_stops; });
    dropped_stop.reset();
    watch_handle fut = w.watch(line, slot(3), 1);
    std::atomic<int> plain{0};
    watch_handle cb = w.on_complete(memory_descriptor(line, slot(4), 1), [&] { ++plain; });
    BOOST_TEST(!w.stopped());
    BOOST_TEST(w.pending() == 4u);
    w.shutdown();
    BOOST_TEST(w.stopped());
    {
        std::lock_guard lk(m);
        BOOST_TEST_REQUIRE(codes.size() == 2u);
        for (const std::error_code& ec : codes)
            BOOST_TEST((ec == errc::shut_down));
        BOOST_TEST(stops == 1);
        for (const std::thread::id t : threads)
            BOOST_TEST((t != std::this_thread::get_id()));
    }
    BOOST_TEST(dropped_stops == 0);
    BOOST_TEST(e1.ready());
    BOOST_TEST(e2.ready());
    BOOST_TEST(stop.ready());
    // The future and on_complete forms never resolve, and are still counted and droppable.
    BOOST_TEST(!fut.ready());
    BOOST_TEST(!cb.ready());
    BOOST_TEST(w.pending() == 2u);
    line.words[3].store(1);
    line.words[4].store(1);
    BOOST_TEST(!fut.wait_for(std::chrono::milliseconds(5)));
    BOOST_TEST(plain.load() == 0);
    fut.reset();
    cb.reset();
    BOOST_TEST(w.pending() == 0u);
    // After the stop: on_end and on_stop give an empty handle and never run; shutdown() again is
    // harmless.
    bool ran = false;
    watch_handle late =
        w.on_end(memory_descriptor(line, slot(0), 1), [&](std::error_code) { ran = true; });
    watch_handle late_stop = w.on_stop([&] { ran = true; });
    BOOST_TEST(!late.valid());
    BOOST_TEST(!late_stop.valid());
    w.shutdown();
    BOOST_TEST(!ran);
    e1.reset();
    stop.reset();
}

// The destructor stops as shutdown() does: the callbacks run before it returns. Each drops its
// own handle (allowed on the watcher thread), so no handle outlives the watcher.
BOOST_AUTO_TEST_CASE(destructor_ends_on_end_registrations) {
    completion_line line;
    std::atomic<int> shut{0};
    std::atomic<int> stops{0};
    std::mutex m;
    std::vector<watch_handle> hs; // declared before the watcher: destroyed after it
    watch_handle stop;
    {
        std_watcher w;
        for (std::size_t i = 0; i < 3; ++i) {
            std::lock_guard lk(m);
            hs.push_back(w.on_end(memory_descriptor(line, slot(i), 1), [&, i](std::error_code ec) {
                if (ec == errc::shut_down) ++shut;
                std::lock_guard lk2(m);
                hs[i].reset();
            }));
        }
        stop = w.on_stop([&] {
            ++stops;
            stop.reset();
        });
        BOOST_TEST(shut.load() == 0);
    }
    BOOST_TEST(shut.load() == 3);
    BOOST_TEST(stops.load() == 1);
    for (const watch_handle& h : hs)
        BOOST_TEST(!h.valid());
    BOOST_TEST(!stop.valid());
}

// Handles dropped on another thread while shutdown() joins the watcher thread: drop() used to read
// the std::thread that join() writes. The drops below start once the first registration's callback
// has run and go on while the thread ends and is joined, unordered with the join. ThreadSanitizer
// cannot see the write inside libstdc++'s join(); Helgrind does (valgrind --tool=helgrind
// gpu_async_hosts_tests --run_test=watcher/drop_while_shutdown_joins).
BOOST_AUTO_TEST_CASE(drop_while_shutdown_joins) {
    constexpr std::size_t n = 200;
    for (int round = 0; round < 5; ++round) {
        completion_line line;
        std::atomic<bool> ended{false};
        std::atomic<std::size_t> shut{0};
        std_watcher w;
        std::vector<watch_handle> hs;
        for (std::size_t i = 0; i < n; ++i)
            hs.push_back(w.on_end(memory_descriptor(line, slot(i % 8), 1), [&](std::error_code ec) {
                if (ec == errc::shut_down) ++shut;
                ended = true;
            }));
        std::thread stopper([&] { w.shutdown(); });
        BOOST_TEST_REQUIRE(eventually([&] { return ended.load(); }));
        for (watch_handle& h : hs)
            h.reset(); // races the join in `stopper`
        stopper.join();
        BOOST_TEST(shut.load() == n);
        BOOST_TEST(w.stopped());
    }
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_hosts_watcher
