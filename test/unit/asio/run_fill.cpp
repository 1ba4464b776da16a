// SPDX-License-Identifier: BSL-1.0
// Tests of <gpu_async/run_fill.hpp>.
#include <gpu_async/run_fill.hpp>

#include <gpu_async/gpu_completion_port.hpp>

#include "common/io_context_fixture.hpp"
#include "common/reactor_of.hpp"
#include "common/run_fill_bounded.hpp"
#include "common/slots.hpp"

#include "common/asio.hpp"
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace unit_asio_run_fill {

using gpu_async::completion_line;
using gpu_async::error_code;
using gpu_async::gpu_completion_port;
using gpu_async::memory_descriptor;
using gpu_async::run_fill;
using gpu_async::test::run_fill_bounded;
using gpu_async::test::slot;

BOOST_AUTO_TEST_SUITE(run_fill_tests)

BOOST_AUTO_TEST_CASE(returns_at_once_without_work) {
    asio::io_context ctx;
    BOOST_TEST(run_fill_bounded(ctx) == 0u);
    BOOST_TEST(ctx.stopped());
}

BOOST_AUTO_TEST_CASE(counts_handlers_like_run) {
    asio::io_context ctx;
    int ran = 0;
    for (int i = 0; i < 5; ++i)
        asio::post(ctx, [&] { ++ran; });
    BOOST_TEST(run_fill_bounded(ctx) == 5u);
    BOOST_TEST(ran == 5);
}

BOOST_AUTO_TEST_CASE(gpu_completion_runs_on_the_calling_thread_with_no_watcher) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line;
    std::thread::id ran_on;
    bool watcher_during = true;
    port.async_wait(memory_descriptor(line, slot(0), 1), [&](error_code ec) {
        BOOST_TEST(!ec);
        ran_on = std::this_thread::get_id();
        watcher_during = gpu_async::test::reactor_of(port).watcher_running();
    });
    std::thread producer([&] {
        line.words[0].store(1, std::memory_order_release);
        port.bell().ring();
    });
    BOOST_TEST(run_fill_bounded(ctx) == 1u);
    producer.join();
    BOOST_TEST((ran_on == std::this_thread::get_id()));
    BOOST_TEST(!watcher_during); // the watcher stood down: no extra thread
}

BOOST_AUTO_TEST_CASE(gpu_store_without_ring_is_seen_within_the_park_bound) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line;
    bool done = false;
    port.async_wait(memory_descriptor(line, slot(2), 1), [&](error_code ec) { done = !ec; });
    std::thread producer([&] { line.words[2].store(1, std::memory_order_release); });
    run_fill_bounded(ctx);
    producer.join();
    BOOST_TEST(done);
}

BOOST_AUTO_TEST_CASE(tcp_acceptor_timer_and_gpu_wait_on_one_context) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    asio::ip::tcp::acceptor acceptor(ctx, {asio::ip::make_address("127.0.0.1"), 0});
    asio::ip::tcp::socket server(ctx), client(ctx);
    asio::steady_timer timer(ctx, std::chrono::milliseconds(1));
    std::atomic<int> served{0};
    bool gpu = false;
    completion_line line;
    acceptor.async_accept(server, [&](error_code ec) { served += !ec; });
    client.async_connect(acceptor.local_endpoint(), [&](error_code ec) { served += !ec; });
    timer.async_wait([&](error_code ec) { served += !ec; });
    // The GPU wait completes only after the sockets and the timer were served while it pended.
    port.async_wait(memory_descriptor(line, slot(0), 1), [&](error_code ec) {
        gpu = !ec;
        BOOST_TEST(served.load() == 3);
    });
    std::thread producer([&] {
        while (served.load() != 3)
            std::this_thread::yield();
        line.words[0].store(1, std::memory_order_release);
        port.bell().ring();
    });
    BOOST_TEST(run_fill_bounded(ctx) == 4u);
    producer.join();
    BOOST_TEST(served.load() == 3);
    BOOST_TEST(gpu);
}

BOOST_AUTO_TEST_CASE(handler_posted_from_another_thread_is_served_while_a_gpu_wait_pends) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line;
    std::atomic<bool> posted_ran{false};
    bool gpu = false;
    port.async_wait(memory_descriptor(line, slot(0), 1), [&](error_code ec) { gpu = !ec; });
    std::thread other([&] {
        asio::post(ctx, [&] { posted_ran = true; });
        while (!posted_ran.load())
            std::this_thread::yield();
        line.words[0].store(1, std::memory_order_release); // no ring: a GPU store
    });
    BOOST_TEST(run_fill_bounded(ctx) == 2u);
    other.join();
    BOOST_TEST(posted_ran.load());
    BOOST_TEST(gpu);
}

BOOST_AUTO_TEST_CASE(stop_returns_and_the_watcher_resumes) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line;
    bool gpu = false;
    port.async_wait(memory_descriptor(line, slot(0), 1), [&](error_code ec) { gpu = !ec; });
    asio::post(ctx, [&] { ctx.stop(); });
    BOOST_TEST(run_fill_bounded(ctx) == 1u);
    BOOST_TEST(!gpu);
    BOOST_TEST(gpu_async::test::reactor_of(port)
                   .watcher_running()); // a wait is pending: the watcher is back
    ctx.restart();
    line.words[0].store(1, std::memory_order_release);
    port.bell().ring();
    gpu_async::test::run_to_completion(ctx); // plain run(): the watcher completes it
    BOOST_TEST(gpu);
}

BOOST_AUTO_TEST_CASE(exception_from_a_handler_propagates) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line;
    line.words[0].store(1);
    port.async_wait(memory_descriptor(line, slot(0), 1),
                    [](error_code) { throw std::runtime_error("handler failed"); });
    completion_line other;
    bool second = false;
    port.async_wait(memory_descriptor(other, slot(0), 1), [&](error_code ec) { second = !ec; });
    BOOST_CHECK_THROW(run_fill_bounded(ctx), std::runtime_error);
    BOOST_TEST(gpu_async::test::reactor_of(port).watcher_running());
    other.words[0].store(1, std::memory_order_release);
    port.bell().ring();
    BOOST_TEST(run_fill_bounded(ctx) == 1u); // resumes like run() after an exception
    BOOST_TEST(second);
}

BOOST_AUTO_TEST_CASE(wait_started_by_another_thread_while_idle) {
    // No GPU wait pending: run_fill blocks in the io_context; a wait started from another thread
    // is noticed within the idle bound and completes on the run_fill thread.
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    auto guard = asio::make_work_guard(ctx);
    completion_line line;
    std::thread::id ran_on;
    std::thread other([&] {
        port.async_wait(memory_descriptor(line, slot(0), 1), [&](error_code ec) {
            BOOST_TEST(!ec);
            ran_on = std::this_thread::get_id();
            guard.reset();
        });
        line.words[0].store(1, std::memory_order_release);
        port.bell().ring();
    });
    run_fill_bounded(ctx, {gpu_async::default_park_bound, gpu_async::dur_ns::from_us(200)});
    other.join();
    BOOST_TEST((ran_on == std::this_thread::get_id()));
}

BOOST_AUTO_TEST_CASE(zero_bounds_are_taken_as_the_shortest) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line;
    bool done = false;
    port.async_wait(memory_descriptor(line, slot(0), 1), [&](error_code ec) { done = !ec; });
    std::thread producer([&] { line.words[0].store(1, std::memory_order_release); });
    BOOST_TEST(run_fill_bounded(ctx, {gpu_async::dur_ns{}, gpu_async::dur_ns{}}) == 1u);
    producer.join();
    BOOST_TEST(done);
}

BOOST_AUTO_TEST_CASE(fill_options_take_std_chrono_and_dur_ns) {
    using namespace std::chrono_literals;
    gpu_async::fill_options o;
    BOOST_TEST((o.park_bound == gpu_async::default_park_bound.chrono()));
    BOOST_TEST((o.idle_bound == 1ms));
    o.park_bound = 50us;
    o.idle_bound = gpu_async::dur_ns::from_us(200); // dur_ns still accepted
    BOOST_TEST((o.idle_bound == 200us));
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line;
    bool done = false;
    port.async_wait(memory_descriptor(line, slot(0), 1), [&](error_code ec) { done = !ec; });
    std::thread producer([&] { line.words[0].store(1, std::memory_order_release); }); // no ring
    BOOST_TEST(run_fill(ctx, o) == 1u); // seen within a 50 us park bound
    producer.join();
    BOOST_TEST(done);
    o.park_bound = -1ms; // taken as 1 ns
    o.idle_bound = 0ms;
    ctx.restart();
    BOOST_TEST(run_fill(ctx, o) == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

// Who waits for the service's lines: one record, each change published at once.
BOOST_AUTO_TEST_SUITE(waiter_roster_suite)

using gpu_async::dur_ns;
using gpu_async::detail::waiter_roster;

BOOST_AUTO_TEST_CASE(a_watcher_is_needed_only_while_nobody_waits_or_stops) {
    waiter_roster r;
    BOOST_TEST(r.needs_watcher(true));
    BOOST_TEST(!r.present());
    r.watcher_started();
    BOOST_TEST(!r.needs_watcher(true));
    BOOST_TEST(r.present());
    BOOST_TEST(!r.stopping());
    // Being stopped: no waiter, yet none may start until its stopper has joined it.
    r.watcher_stopping();
    BOOST_TEST(!r.present());
    BOOST_TEST(r.stopping());
    BOOST_TEST(!r.needs_watcher(true));
    r.watcher_joined();
    BOOST_TEST(!r.stopping());
    BOOST_TEST(r.needs_watcher(true));
}

BOOST_AUTO_TEST_CASE(fill_drivers_wait_with_the_longest_of_their_bounds) {
    waiter_roster r;
    BOOST_TEST(r.fill_bound().ns == 0u);
    r.fill_begun(dur_ns::from_us(50));
    r.fill_begun(dur_ns::from_us(200));
    r.fill_begun(dur_ns::from_us(200));
    BOOST_TEST(r.fill_active());
    BOOST_TEST(r.present());
    BOOST_TEST(!r.needs_watcher(true));
    BOOST_TEST(r.fill_bound().ns == dur_ns::from_us(200).ns);
    r.fill_ended(dur_ns::from_us(200));
    BOOST_TEST(r.fill_bound().ns == dur_ns::from_us(200).ns); // the other 200 us driver runs
    r.fill_ended(dur_ns::from_us(200));
    BOOST_TEST(r.fill_bound().ns == dur_ns::from_us(50).ns);
    // A watcher stopped while a driver runs leaves the driver present.
    r.watcher_started();
    r.watcher_stopping();
    BOOST_TEST(r.present());
    r.watcher_joined();
    r.fill_ended(dur_ns::from_us(50));
    BOOST_TEST(!r.present());
    BOOST_TEST(r.fill_bound().ns == 0u);
    BOOST_TEST(r.needs_watcher(true));
}

BOOST_AUTO_TEST_CASE(no_watcher_is_needed_without_waits_or_after_shutdown) {
    waiter_roster r;
    BOOST_TEST(!r.needs_watcher(false));
    BOOST_TEST(!r.shut_down());
    r.shutting_down();
    BOOST_TEST(r.shut_down());
    BOOST_TEST(!r.needs_watcher(true));
    BOOST_TEST(!r.present());
    // Shutdown is final: a watcher stopped and joined after it leaves none needed.
    r.watcher_started();
    r.watcher_stopping();
    r.watcher_joined();
    BOOST_TEST(r.shut_down());
    BOOST_TEST(!r.needs_watcher(true));
    // And a FILL driver that ends after it starts none either.
    r.fill_begun(dur_ns::from_us(50));
    r.fill_ended(dur_ns::from_us(50));
    BOOST_TEST(!r.needs_watcher(true));
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_asio_run_fill
