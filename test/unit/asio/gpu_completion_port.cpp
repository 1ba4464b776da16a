// SPDX-License-Identifier: BSL-1.0
// Tests of <gpu_async/gpu_completion_port.hpp> and its reactor service.
#include <gpu_async/gpu_completion_port.hpp>

#include "common/eventually.hpp"
#include "common/io_context_fixture.hpp"
#include "common/reactor_of.hpp"
#include "common/recording_executor.hpp"
#include "common/slots.hpp"
#include "common/tracking_allocator.hpp"

#include "common/asio.hpp"
#include <boost/test/unit_test.hpp>

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <utility>
#include <vector>

namespace unit_asio_gpu_completion_port {

using gpu_async::completion_line;
using gpu_async::error_code;
using gpu_async::gpu_completion_port;
using gpu_async::memory_descriptor;
using gpu_async::test::eventually;
using gpu_async::test::reactor_of;
using gpu_async::test::run_to_completion;
using gpu_async::test::slot;

namespace {

/// A host producer: store (release), then ring the reactor's doorbell.
void store_and_ring(completion_line& line, std::size_t s, std::uint64_t value,
                    gpu_async::doorbell& bell) {
    line.words[s].store(value, std::memory_order_release);
    bell.ring();
}

/// An io_context whose shutdown can be called while I/O objects still live (to test the service
/// shutdown path as ~io_context runs it).
struct shutdownable_context : asio::io_context {
    using asio::io_context::shutdown;
};

/// A handler that counts its invocations and its live copies.
struct counted_handler {
    std::shared_ptr<std::atomic<int>> invoked;
    std::shared_ptr<int> alive; // use_count() - 1 copies alive besides the test's own
    void operator()(error_code) const { invoked->fetch_add(1); }
};

constexpr auto terminal = asio::cancellation_type::terminal;
constexpr auto partial = asio::cancellation_type::partial;
constexpr auto total = asio::cancellation_type::total;

} // namespace

BOOST_AUTO_TEST_SUITE(gpu_completion_port_tests)

// --- the I/O object ----------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(constructs_from_context_and_executor_and_moves) {
    asio::io_context ctx;
    gpu_completion_port a(ctx);
    gpu_completion_port b(ctx.get_executor());
    BOOST_TEST((a.get_executor() == asio::any_io_executor(ctx.get_executor())));
    BOOST_TEST(&reactor_of(a) == &reactor_of(b)); // one reactor per context
    static_assert(!std::is_copy_constructible_v<gpu_completion_port>);
    static_assert(!std::is_copy_assignable_v<gpu_completion_port>);
    static_assert(std::is_nothrow_move_constructible_v<gpu_completion_port>);
    static_assert(
        std::is_same_v<gpu_completion_port::rebind_executor<asio::io_context::executor_type>::other,
                       gpu_async::basic_gpu_completion_port<asio::io_context::executor_type>>);

    // A move takes the pending waits along: cancelling the new port cancels them.
    completion_line line;
    error_code got = asio::error::would_block;
    a.async_wait(memory_descriptor(line, slot(0), 1), [&](error_code ec) { got = ec; });
    gpu_completion_port c(std::move(a));
    BOOST_TEST(a.cancel() == 0u);
    BOOST_TEST(c.pending() == 1u);
    b = std::move(c); // b had none; now owns the wait
    BOOST_TEST(b.cancel() == 1u);
    run_to_completion(ctx);
    BOOST_TEST(got == asio::error::operation_aborted);

    // Converting move from a port of the concrete executor type.
    gpu_async::basic_gpu_completion_port<asio::io_context::executor_type> typed(ctx);
    gpu_completion_port erased(std::move(typed));
    BOOST_TEST(erased.cancel() == 0u);
}

BOOST_AUTO_TEST_CASE(move_assignment_cancels_the_targets_waits) {
    asio::io_context ctx;
    gpu_completion_port a(ctx), b(ctx);
    completion_line line;
    error_code got = asio::error::would_block;
    a.async_wait(memory_descriptor(line, slot(0), 1), [&](error_code ec) { got = ec; });
    a = std::move(b);
    run_to_completion(ctx);
    BOOST_TEST(got == asio::error::operation_aborted);
}

// --- completion tokens -------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(callback_completes_when_a_thread_stores) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line;
    int calls = 0;
    error_code got = asio::error::would_block;
    port.async_wait(memory_descriptor(line, slot(3), 7), [&](error_code ec) {
        ++calls;
        got = ec;
        // What the producer wrote before its store is visible here.
        BOOST_TEST(line.words[3].load(std::memory_order_relaxed) >= 7u);
    });
    std::thread producer([&] {
        for (std::uint64_t v = 1; v <= 7; ++v)
            store_and_ring(line, 3, v, port.bell());
    });
    run_to_completion(ctx);
    producer.join();
    BOOST_TEST(calls == 1);
    BOOST_TEST(!got);
    BOOST_TEST(reactor_of(port).pending() == 0u);
}

BOOST_AUTO_TEST_CASE(producer_that_never_rings_is_seen_within_the_park_bound) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line;
    error_code got = asio::error::would_block;
    port.async_wait(memory_descriptor(line, slot(1), 1), [&](error_code ec) { got = ec; });
    std::thread producer([&] { line.words[1].store(1, std::memory_order_release); }); // a "GPU"
    run_to_completion(ctx);
    producer.join();
    BOOST_TEST(!got);
}

BOOST_AUTO_TEST_CASE(use_future) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line;
    std::future<void> f = port.async_wait(memory_descriptor(line, slot(0), 1), asio::use_future);
    std::thread runner([&] { ctx.run_for(gpu_async::test::run_bound); });
    store_and_ring(line, 0, 1, port.bell());
    BOOST_TEST((f.wait_for(gpu_async::test::run_bound) == std::future_status::ready));
    BOOST_CHECK_NO_THROW(f.get());
    runner.join();
    BOOST_TEST(ctx.stopped());

    // Cancelled: the future holds a system_error with operation_aborted.
    ctx.restart();
    std::future<void> g = port.async_wait(memory_descriptor(line, slot(0), 2), asio::use_future);
    BOOST_TEST(port.cancel() == 1u);
    run_to_completion(ctx);
    try {
        g.get();
        BOOST_FAIL("a cancelled wait's future must throw");
    } catch (const gpu_async::system_error& e) {
        BOOST_TEST(e.code() == asio::error::operation_aborted);
    }
}

BOOST_AUTO_TEST_CASE(use_awaitable) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line;
    bool done = false;
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
            co_await port.async_wait(memory_descriptor(line, slot(2), 1), asio::use_awaitable);
            auto [ec] = co_await port.async_wait(memory_descriptor(line, slot(2), 1),
                                                 asio::as_tuple(asio::use_awaitable));
            BOOST_TEST(!ec);
            done = true;
        },
        asio::detached);
    std::thread producer([&] { store_and_ring(line, 2, 1, port.bell()); });
    run_to_completion(ctx);
    producer.join();
    BOOST_TEST(done);
}

BOOST_AUTO_TEST_CASE(deferred_keeps_the_descriptor) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line;
    auto make = [&] {
        const memory_descriptor d(line, slot(5), 3); // gone when the deferred op launches
        return port.async_wait(d, asio::deferred);
    };
    auto op = make();
    BOOST_TEST(port.pending() == 0u); // nothing started yet
    error_code got = asio::error::would_block;
    std::move(op)([&](error_code ec) { got = ec; });
    BOOST_TEST(port.pending() == 1u);
    line.words[5].store(2, std::memory_order_release);
    port.bell().ring();
    BOOST_TEST(ctx.run_for(std::chrono::milliseconds(5)) == 0u); // 2 has not reached 3
    store_and_ring(line, 5, 3, port.bell());
    run_to_completion(ctx);
    BOOST_TEST(!got);
}

BOOST_AUTO_TEST_CASE(as_tuple_callback) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line;
    std::optional<std::tuple<error_code>> got;
    port.async_wait(memory_descriptor(line, slot(0), 1),
                    asio::as_tuple([&](std::tuple<error_code> t) { got = t; }));
    port.cancel();
    run_to_completion(ctx);
    BOOST_REQUIRE(got.has_value());
    BOOST_TEST(std::get<0>(*got) == asio::error::operation_aborted);
}

// --- completion through the executor -----------------------------------------------------------

BOOST_AUTO_TEST_CASE(already_complete_descriptor_completes_through_post) {
    asio::io_context ctx;
    gpu_async::test::execution_record record;
    using ex_t = gpu_async::test::recording_executor<asio::io_context::executor_type>;
    gpu_async::basic_gpu_completion_port<ex_t> port(ex_t(ctx.get_executor(), record));
    completion_line line;
    line.words[4].store(10);
    bool initiating = true;
    int calls = 0;
    port.async_wait(memory_descriptor(line, slot(4), 9), [&](error_code ec) {
        BOOST_TEST(!initiating); // never invoked from within async_wait
        BOOST_TEST(!ec);
        ++calls;
    });
    initiating = false;
    BOOST_TEST(calls == 0);
    BOOST_TEST(record.submitted_never.load() >= 1u); // posted (blocking.never)
    run_to_completion(ctx);
    BOOST_TEST(calls == 1);
    BOOST_TEST(record.ran.load() >= 1u);
    BOOST_TEST(!reactor_of(port).watcher_running()); // nothing was ever registered
}

// A handler with an immediate executor of its own (Asio 1.28 / Boost 1.82 and later) completes
// a wait that finished at initiation there: inline for the system executor. A wait that is
// pending, and a handler without one, still complete through the I/O executor. Reported skipped
// where the Asio in use has no immediate executors.
BOOST_AUTO_TEST_CASE(an_immediate_executor_completes_a_finished_wait_there,
                     *boost::unit_test::enable_if<GPU_ASYNC_HAS_IMMEDIATE_EXECUTOR != 0>()) {
#if GPU_ASYNC_HAS_IMMEDIATE_EXECUTOR
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line;
    line.words[0].store(10);
    std::optional<error_code> finished, pending, plain;
    port.async_wait(memory_descriptor(line, slot(0), 9),
                    asio::bind_immediate_executor(asio::system_executor(),
                                                  [&](error_code ec) { finished = ec; }));
    BOOST_TEST_REQUIRE(finished.has_value()); // ran within async_wait
    BOOST_TEST(!*finished);
    port.async_wait(memory_descriptor(line, slot(1), 1),
                    asio::bind_immediate_executor(asio::system_executor(),
                                                  [&](error_code ec) { pending = ec; }));
    port.async_wait(memory_descriptor(line, slot(0), 9), [&](error_code ec) { plain = ec; });
    BOOST_TEST(!pending.has_value());
    BOOST_TEST(!plain.has_value()); // posted, as without an immediate executor
    store_and_ring(line, 1, 1, port.bell());
    run_to_completion(ctx);
    BOOST_TEST_REQUIRE(pending.has_value());
    BOOST_TEST(!*pending);
    BOOST_TEST_REQUIRE(plain.has_value());
    BOOST_TEST(!*plain);
#endif
}

// A wait that completes on its immediate executor at initiation never counts as the context's
// outstanding work, as Asio's own operations do: it used to count on its port's queue and let
// that go at once, which, for the port's only wait, stopped the io_context outside run(), so a
// plain wait started next never ran. The same for a handler with an executor of its own (a
// strand), whose work guards went the same way. Reported skipped where the Asio in use has no
// immediate executors.
BOOST_AUTO_TEST_CASE(an_immediate_completion_leaves_the_context_running,
                     *boost::unit_test::enable_if<GPU_ASYNC_HAS_IMMEDIATE_EXECUTOR != 0>()) {
#if GPU_ASYNC_HAS_IMMEDIATE_EXECUTOR
    // `bind(ctx, h)`: the handler of the port's only wait, complete at initiation. (Where it
    // runs is an_immediate_executor_completes_a_finished_wait_there's to check.)
    const auto check = [](const char* handler, auto bind) {
        BOOST_TEST_CONTEXT(handler) {
            asio::io_context ctx;
            gpu_completion_port port(ctx);
            completion_line line;
            line.words[0].store(10);
            line.words[1].store(10);
            std::optional<error_code> immediate, plain;
            port.async_wait(memory_descriptor(line, slot(0), 9),
                            bind(ctx, [&](error_code ec) { immediate = ec; }));
            BOOST_TEST(!ctx.stopped()); // its end left the context's work alone
            port.async_wait(memory_descriptor(line, slot(1), 9),
                            [&](error_code ec) { plain = ec; });
            run_to_completion(ctx);
            BOOST_TEST((immediate == error_code())); // ran, with success
            BOOST_TEST((plain == error_code()));
        }
    };
    check("on the I/O executor", [](asio::io_context&, auto h) {
        return asio::bind_immediate_executor(asio::system_executor(), std::move(h));
    });
    check("on a strand", [](asio::io_context& ctx, auto h) {
        return asio::bind_immediate_executor(
            asio::system_executor(), asio::bind_executor(asio::make_strand(ctx), std::move(h)));
    });
#endif
}

BOOST_AUTO_TEST_CASE(bind_executor_strand_runs_on_the_strand) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    auto strand = asio::make_strand(ctx);
    std::vector<std::unique_ptr<completion_line>> lines;
    std::atomic<int> on_strand{0}, calls{0};
    constexpr int n = 64;
    for (int i = 0; i < n; ++i) {
        lines.push_back(std::make_unique<completion_line>());
        port.async_wait(memory_descriptor(*lines.back(), slot(0), 1),
                        asio::bind_executor(strand, [&](error_code ec) {
                            if (!ec && strand.running_in_this_thread()) ++on_strand;
                            ++calls;
                        }));
    }
    std::thread producer([&] {
        for (auto& l : lines)
            store_and_ring(*l, 0, 1, port.bell());
    });
    std::thread second([&] { ctx.run_for(gpu_async::test::run_bound); });
    run_to_completion(ctx);
    producer.join();
    second.join();
    BOOST_TEST(calls.load() == n);
    BOOST_TEST(on_strand.load() == n);
}

#if GPU_ASYNC_ASIO_HAS_TS_EXECUTORS
// io_context::strand is one of the Networking TS executors ([BOOST_]ASIO_NO_TS_EXECUTORS removes
// it).
BOOST_AUTO_TEST_CASE(legacy_io_context_strand_as_the_handler_executor) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    asio::io_context::strand legacy(ctx);
    completion_line line;
    bool on_strand = false;
    port.async_wait(memory_descriptor(line, slot(0), 1),
                    asio::bind_executor(legacy, [&](error_code ec) {
                        on_strand = !ec && legacy.running_in_this_thread();
                    }));
    std::thread producer([&] { store_and_ring(line, 0, 1, port.bell()); });
    run_to_completion(ctx);
    producer.join();
    BOOST_TEST(on_strand);
}
#endif

#if GPU_ASYNC_ASIO_HAS_TS_EXECUTORS
// The legacy polymorphic executor (asio::executor) as the handler's: its work is a work guard.
BOOST_AUTO_TEST_CASE(legacy_polymorphic_executor_as_the_handler_executor) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    const asio::executor legacy(ctx.get_executor());
    completion_line line;
    bool called = false;
    port.async_wait(memory_descriptor(line, slot(0), 1),
                    asio::bind_executor(legacy, [&](error_code ec) { called = !ec; }));
    std::thread producer([&] { store_and_ring(line, 0, 1, port.bell()); });
    run_to_completion(ctx);
    producer.join();
    BOOST_TEST(called);
}
#endif

// A handler bound to another context's executor, of the port's own polymorphic type: the wait
// holds work on that context too (its run() returns only after the handler ran there), and on the
// port's (its run() returns after the completion). The same executor is counted once: both runs
// end when the work does.
BOOST_AUTO_TEST_CASE(a_handler_on_another_context_keeps_that_context_running) {
    asio::io_context ctx, other;
    gpu_completion_port port(ctx);
    completion_line line;
    std::atomic<bool> ran_on_other{false};
    const asio::any_io_executor other_ex = other.get_executor();
    port.async_wait(memory_descriptor(line, slot(0), 1),
                    asio::bind_executor(other_ex, [&](error_code ec) {
                        ran_on_other = !ec && other.get_executor().running_in_this_thread();
                    }));
    // Started before the store: without work of the wait's on it, it would return at once.
    std::thread runner([&] { other.run_for(gpu_async::test::run_bound); });
    std::thread producer([&] { store_and_ring(line, 0, 1, port.bell()); });
    run_to_completion(ctx);
    producer.join();
    runner.join();
    BOOST_TEST(ran_on_other.load());
    BOOST_TEST(other.stopped()); // ran out of work, within the bound
    // Same executor: one count, released at the completion.
    bool done = false;
    port.async_wait(memory_descriptor(line, slot(0), 2),
                    asio::bind_executor(port.get_executor(), [&](error_code ec) { done = !ec; }));
    ctx.restart();
    std::thread again([&] { store_and_ring(line, 0, 2, port.bell()); });
    run_to_completion(ctx);
    again.join();
    BOOST_TEST(done);
}

BOOST_AUTO_TEST_CASE(bind_allocator_is_used_and_freed_before_the_upcall) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    gpu_async::test::allocation_counters counters;
    completion_line line;
    std::size_t live_in_handler = 99;
    bool called = false;
    port.async_wait(
        memory_descriptor(line, slot(0), 1),
        asio::bind_allocator(gpu_async::test::tracking_allocator<void>(counters), [&](error_code) {
            called = true;
            live_in_handler = counters.live();
        }));
    BOOST_TEST(counters.allocations.load() >= 1u);
    std::thread producer([&] { store_and_ring(line, 0, 1, port.bell()); });
    run_to_completion(ctx);
    producer.join();
    BOOST_TEST(called);
    BOOST_TEST(live_in_handler == 0u);
    BOOST_TEST(counters.live() == 0u);
    BOOST_TEST(counters.live_bytes.load() == 0u);
}

BOOST_AUTO_TEST_CASE(work_is_held_while_pending) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line;
    bool called = false;
    port.async_wait(memory_descriptor(line, slot(0), 1), [&](error_code) { called = true; });
    // With nothing else to do, run() would return at once if the wait held no work.
    BOOST_TEST(ctx.run_for(std::chrono::milliseconds(10)) == 0u);
    BOOST_TEST(!ctx.stopped());
    store_and_ring(line, 0, 1, port.bell());
    run_to_completion(ctx);
    BOOST_TEST(called);
}

// The port's completion queue counts its waits' outstanding work (the ops hold none): run()
// keeps running while any wait of any port is pending, stops once the last one has ended, and a
// wait started after that takes the work again.
BOOST_AUTO_TEST_CASE(work_is_counted_by_the_port_while_any_wait_is_pending) {
    asio::io_context ctx;
    gpu_completion_port a(ctx);
    gpu_completion_port b(ctx);
    completion_line line;
    int ended = 0;
    auto count = [&](error_code) { ++ended; };
    a.async_wait(memory_descriptor(line, slot(0), 1), count);
    a.async_wait(memory_descriptor(line, slot(0), 2), count);
    b.async_wait(memory_descriptor(line, slot(1), 1), count);
    store_and_ring(line, 0, 1, a.bell());
    BOOST_TEST(eventually([&] {
        ctx.poll();
        return ended == 1;
    }));
    BOOST_TEST(!ctx.stopped()); // poll() stops a context only when it has no work left
    a.cancel();
    BOOST_TEST(eventually([&] {
        ctx.poll();
        return ended == 2;
    }));
    BOOST_TEST(!ctx.stopped()); // b's wait holds it
    store_and_ring(line, 1, 1, b.bell());
    run_to_completion(ctx);
    BOOST_TEST(ended == 3);
    BOOST_TEST(ctx.stopped());
    ctx.restart();
    a.async_wait(memory_descriptor(line, slot(0), 3), count);
    BOOST_TEST(ctx.run_for(std::chrono::milliseconds(10)) == 0u);
    BOOST_TEST(!ctx.stopped());
    store_and_ring(line, 0, 3, a.bell());
    run_to_completion(ctx);
    BOOST_TEST(ended == 4);
}

// A wait costs one allocation, with its handler's allocator: a handler that runs on the port's
// executor has an op that holds no executor and no work guard; one with an executor of its own
// has an op of another type, which holds that executor and its work too. Both are freed before
// the upcall.
BOOST_AUTO_TEST_CASE(a_wait_allocates_once_whatever_its_handlers_executor) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line;
    gpu_async::test::allocation_counters plain;
    gpu_async::test::allocation_counters own;
    std::size_t live_in_plain = 99;
    std::size_t live_in_own = 99;
    int ended = 0;
    port.async_wait(
        memory_descriptor(line, slot(0), 1),
        asio::bind_allocator(gpu_async::test::tracking_allocator<void>(plain), [&](error_code ec) {
            ended += ec ? 0 : 1;
            live_in_plain = plain.live();
        }));
    BOOST_TEST(plain.allocations.load() == 1u);
    auto strand = asio::make_strand(ctx);
    port.async_wait(memory_descriptor(line, slot(0), 1),
                    asio::bind_executor(
                        strand, asio::bind_allocator(gpu_async::test::tracking_allocator<void>(own),
                                                     [&](error_code ec) {
                                                         ended += ec ? 0 : 1;
                                                         live_in_own = own.live();
                                                     })));
    BOOST_TEST(own.allocations.load() == 1u);
    store_and_ring(line, 0, 1, port.bell());
    run_to_completion(ctx);
    BOOST_TEST(ended == 2);
    BOOST_TEST(live_in_plain == 0u);
    BOOST_TEST(live_in_own == 0u);
    BOOST_TEST(plain.live() == 0u);
    BOOST_TEST(own.live() == 0u);
}

// --- cancellation ------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(per_operation_cancellation_table) {
    for (auto type : {terminal, partial, total}) {
        BOOST_TEST_CONTEXT("cancellation type " << static_cast<unsigned>(type)) {
            asio::io_context ctx;
            gpu_completion_port port(ctx);
            completion_line line;
            asio::cancellation_signal sig;

            // Before completion: aborted.
            error_code got = asio::error::would_block;
            port.async_wait(
                memory_descriptor(line, slot(0), 1),
                asio::bind_cancellation_slot(sig.slot(), [&](error_code ec) { got = ec; }));
            sig.emit(type);
            BOOST_TEST(port.pending() == 0u); // unlinked at once
            run_to_completion(ctx);
            BOOST_TEST(got == asio::error::operation_aborted);
            // The handler stays (clearing it would race a signal from another thread); it holds
            // a key, so emitting it now finds nothing.
            BOOST_TEST(sig.slot().has_handler());
            got = asio::error::would_block;
            sig.emit(type);
            run_to_completion(ctx);
            BOOST_TEST(got == asio::error::would_block);

            // After completion was decided (already complete, completion queued): no effect.
            ctx.restart();
            line.words[0].store(1);
            got = asio::error::would_block;
            port.async_wait(
                memory_descriptor(line, slot(0), 1),
                asio::bind_cancellation_slot(sig.slot(), [&](error_code ec) { got = ec; }));
            sig.emit(type);
            run_to_completion(ctx);
            BOOST_TEST(!got);

            // After the watcher completed it (not yet run): no effect.
            ctx.restart();
            got = asio::error::would_block;
            port.async_wait(
                memory_descriptor(line, slot(0), 2),
                asio::bind_cancellation_slot(sig.slot(), [&](error_code ec) { got = ec; }));
            store_and_ring(line, 0, 2, port.bell());
            BOOST_TEST(eventually([&] { return port.pending() == 0u; }));
            sig.emit(type);
            run_to_completion(ctx);
            BOOST_TEST(!got);

            // After the handler ran: emitting does nothing (the key is not registered).
            sig.emit(type);
            BOOST_TEST(port.pending() == 0u);

            // Emitted from another thread while pending: aborted.
            ctx.restart();
            got = asio::error::would_block;
            port.async_wait(
                memory_descriptor(line, slot(0), 3),
                asio::bind_cancellation_slot(sig.slot(), [&](error_code ec) { got = ec; }));
            std::thread canceller([&] { sig.emit(type); });
            canceller.join();
            run_to_completion(ctx);
            BOOST_TEST(got == asio::error::operation_aborted);
        }
    }
}

BOOST_AUTO_TEST_CASE(cancellation_none_is_ignored) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line;
    asio::cancellation_signal sig;
    error_code got = asio::error::would_block;
    port.async_wait(memory_descriptor(line, slot(0), 1),
                    asio::bind_cancellation_slot(sig.slot(), [&](error_code ec) { got = ec; }));
    sig.emit(asio::cancellation_type::none);
    BOOST_TEST(port.pending() == 1u);
    store_and_ring(line, 0, 1, port.bell());
    run_to_completion(ctx);
    BOOST_TEST(!got);
}

BOOST_AUTO_TEST_CASE(cancellation_racing_completion_completes_exactly_once) {
    // A producer and a canceller race for 200 waits; each handler runs exactly once with either
    // result, never both.
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    constexpr int n = 200;
    std::vector<std::unique_ptr<completion_line>> lines;
    std::vector<std::unique_ptr<asio::cancellation_signal>> sigs;
    std::vector<int> calls(n, 0);
    for (int i = 0; i < n; ++i) {
        lines.push_back(std::make_unique<completion_line>());
        sigs.push_back(std::make_unique<asio::cancellation_signal>());
        port.async_wait(memory_descriptor(*lines.back(), slot(0), 1),
                        asio::bind_cancellation_slot(sigs.back()->slot(),
                                                     [&calls, i](error_code) { ++calls[i]; }));
    }
    std::thread producer([&] {
        for (auto& l : lines)
            store_and_ring(*l, 0, 1, port.bell());
    });
    std::thread canceller([&] {
        for (auto& s : sigs)
            s->emit(terminal);
    });
    producer.join();
    canceller.join();
    run_to_completion(ctx);
    BOOST_TEST(std::count(calls.begin(), calls.end(), 1) == n);
}

BOOST_AUTO_TEST_CASE(cancel_returns_the_number_cancelled) {
    asio::io_context ctx;
    gpu_completion_port port(ctx), other(ctx);
    completion_line line;
    int aborted = 0, ok = 0;
    auto h = [&](error_code ec) { ec == asio::error::operation_aborted ? ++aborted : ++ok; };
    port.async_wait(memory_descriptor(line, slot(0), 1), h);
    port.async_wait(memory_descriptor(line, slot(0), 2), h);
    port.async_wait(memory_descriptor(line, slot(1), 1), h);
    other.async_wait(memory_descriptor(line, slot(1), 1), h); // another port: untouched
    line.words[2].store(5);
    port.async_wait(memory_descriptor(line, slot(2), 5), h); // complete at once: not counted
    BOOST_TEST(port.cancel() == 3u);
    BOOST_TEST(port.cancel() == 0u);
    BOOST_TEST(other.pending() == 1u);
    store_and_ring(line, 1, 1, other.bell());
    run_to_completion(ctx);
    BOOST_TEST(aborted == 3);
    BOOST_TEST(ok == 2);
}

BOOST_AUTO_TEST_CASE(destroying_a_port_cancels_its_waits) {
    asio::io_context ctx;
    completion_line line;
    int aborted = 0;
    {
        gpu_completion_port port(ctx);
        for (std::uint64_t t = 1; t <= 5; ++t)
            port.async_wait(memory_descriptor(line, slot(0), t), [&](error_code ec) {
                if (ec == asio::error::operation_aborted) ++aborted;
            });
    }
    BOOST_TEST(aborted == 0); // never from within the destructor
    run_to_completion(ctx);
    BOOST_TEST(aborted == 5);
}

// --- shutdown ----------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(context_destroyed_with_10000_pending_waits) {
    auto invoked = std::make_shared<std::atomic<int>>(0);
    auto alive = std::make_shared<int>(0);
    std::vector<std::unique_ptr<completion_line>> lines(100);
    for (auto& l : lines)
        l = std::make_unique<completion_line>();
    {
        shutdownable_context ctx;
        gpu_completion_port port(ctx);
        for (int i = 0; i < 10000; ++i)
            port.async_wait(memory_descriptor(*lines[i % 100], slot(i % 8), 1 + i / 800),
                            counted_handler{invoked, alive});
        BOOST_TEST(alive.use_count() == 10001);
        BOOST_TEST(reactor_of(port).pending() == 10000u);
        ctx.shutdown(); // what ~io_context does first: handlers destroyed, never invoked
        BOOST_TEST(alive.use_count() == 1);
        BOOST_TEST(reactor_of(port).pending() == 0u);
        BOOST_TEST(!reactor_of(port).watcher_running());
        // A wait started after shutdown (e.g. from a handler's destructor) is destroyed too.
        port.async_wait(memory_descriptor(*lines[0], slot(0), 99), counted_handler{invoked, alive});
        BOOST_TEST(alive.use_count() == 1);
        BOOST_TEST(!reactor_of(port).watcher_running());
    }
    BOOST_TEST(invoked->load() == 0);
}

BOOST_AUTO_TEST_CASE(shutdown_after_the_cancellation_signal_is_gone) {
    // A pending wait whose signal was destroyed first: shutdown destroys it without touching the
    // slot (ASan would see a use after free), as a queued completion is destroyed with the context.
    auto invoked = std::make_shared<std::atomic<int>>(0);
    auto alive = std::make_shared<int>(0);
    completion_line line;
    {
        shutdownable_context ctx;
        gpu_completion_port port(ctx);
        {
            asio::cancellation_signal sig;
            port.async_wait(
                memory_descriptor(line, slot(0), 1),
                asio::bind_cancellation_slot(sig.slot(), counted_handler{invoked, alive}));
        }
        ctx.shutdown();
        BOOST_TEST(alive.use_count() == 1);
    }
    {
        asio::io_context ctx;
        {
            gpu_completion_port port(ctx);
            asio::cancellation_signal sig;
            port.async_wait(
                memory_descriptor(line, slot(0), 1),
                asio::bind_cancellation_slot(sig.slot(), counted_handler{invoked, alive}));
        } // sig, then the port (its cancel queues the completion)
    }     // the queued completion is destroyed with the context
    BOOST_TEST(alive.use_count() == 1);
    BOOST_TEST(invoked->load() == 0);
}

BOOST_AUTO_TEST_CASE(context_destroyed_with_completions_queued) {
    // Completions posted but never run: ~io_context destroys them (and the ops) uninvoked.
    auto invoked = std::make_shared<std::atomic<int>>(0);
    auto alive = std::make_shared<int>(0);
    completion_line line;
    line.words[0].store(1);
    {
        asio::io_context ctx;
        gpu_completion_port port(ctx);
        for (int i = 0; i < 100; ++i)
            port.async_wait(memory_descriptor(line, slot(0), 1), counted_handler{invoked, alive});
        port.async_wait(memory_descriptor(line, slot(1), 1), counted_handler{invoked, alive});
        port.cancel(); // the pending one: its aborted completion is queued too
    }
    BOOST_TEST(alive.use_count() == 1);
    BOOST_TEST(invoked->load() == 0);
}

// --- the reactor service -----------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(watcher_starts_lazily_and_survives_fork_notifications) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    BOOST_TEST(!reactor_of(port).watcher_running());
    completion_line line;
    int calls = 0;
    port.async_wait(memory_descriptor(line, slot(0), 1), [&](error_code ec) {
        BOOST_TEST(!ec);
        ++calls;
    });
    BOOST_TEST(reactor_of(port).watcher_running());
    ctx.notify_fork(asio::execution_context::fork_prepare);
    BOOST_TEST(!reactor_of(port).watcher_running()); // no thread across fork()
    ctx.notify_fork(asio::execution_context::fork_parent);
    BOOST_TEST(reactor_of(port).watcher_running()); // a wait is pending: restarted
    store_and_ring(line, 0, 1, port.bell());
    run_to_completion(ctx);
    BOOST_TEST(calls == 1);

    ctx.notify_fork(asio::execution_context::fork_prepare);
    ctx.notify_fork(asio::execution_context::fork_child);
    BOOST_TEST(!reactor_of(port).watcher_running()); // nothing pending: lazily, later
    ctx.restart();
    port.async_wait(memory_descriptor(line, slot(0), 2), [&](error_code ec) {
        BOOST_TEST(!ec);
        ++calls;
    });
    store_and_ring(line, 0, 2, port.bell());
    run_to_completion(ctx);
    BOOST_TEST(calls == 2);
}

// A registration that comes while notify_fork(fork_prepare) stops and joins the watcher starts no
// second watcher: the one being joined must still see its stop. (Before, a start in that window
// cleared the stop flag the first watcher was joined on, and the join never returned.) Looped:
// the window is one wake of the watcher long.
BOOST_AUTO_TEST_CASE(a_registration_while_the_watcher_is_joined_for_fork_starts_no_second_one) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line; // never stored: every wait stays pending until cancelled
    std::atomic<int> ended{0};
    const auto count = [&](error_code ec) {
        BOOST_TEST((ec == asio::error::operation_aborted));
        ended.fetch_add(1);
    };
    constexpr int rounds = 200;
    constexpr int per_round = 8;
    for (int round = 0; round < rounds; ++round) {
        port.async_wait(memory_descriptor(line, slot(0), 1), count); // the watcher runs
        BOOST_TEST_REQUIRE(reactor_of(port).watcher_running());
        std::atomic<bool> go{false};
        std::thread registrar([&] {
            while (!go.load()) {
            }
            for (int i = 0; i < per_round; ++i)
                port.async_wait(memory_descriptor(line, slot(1), 1), count);
        });
        auto joined = std::make_shared<std::promise<void>>();
        std::future<void> done = joined->get_future();
        std::thread forker([&, joined] {
            go.store(true);
            ctx.notify_fork(asio::execution_context::fork_prepare);
            joined->set_value();
        });
        if (done.wait_for(2 * gpu_async::test::run_bound) != std::future_status::ready) {
            // A hang, not a slow machine: the stopped watcher never ends. Nothing can join it.
            BOOST_ERROR("notify_fork(fork_prepare) never returned in round " << round);
            std::abort();
        }
        forker.join();
        registrar.join();
        ctx.notify_fork(asio::execution_context::fork_parent);
        BOOST_TEST_REQUIRE(reactor_of(port).watcher_running()); // waits pending: restarted
    }
    port.cancel();
    run_to_completion(ctx);
    BOOST_TEST(ended.load() == rounds * (per_round + 1));
}

BOOST_AUTO_TEST_CASE(real_fork_with_a_pending_wait) {
    // notify_fork around a real fork(): in the child the watcher restarts and completes the wait
    // inherited from the parent; in the parent it completes as well.
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line;
    bool done = false;
    port.async_wait(memory_descriptor(line, slot(0), 1), [&](error_code ec) { done = !ec; });
    ctx.notify_fork(asio::execution_context::fork_prepare);
    const pid_t pid = ::fork();
    BOOST_TEST_REQUIRE(pid >= 0);
    if (pid == 0) {
        ctx.notify_fork(asio::execution_context::fork_child);
        std::thread producer([&] { store_and_ring(line, 0, 1, port.bell()); });
        ctx.run_for(gpu_async::test::run_bound);
        producer.join();
        ::_exit(done && ctx.stopped() ? 0 : 1);
    }
    ctx.notify_fork(asio::execution_context::fork_parent);
    int status = 0;
    BOOST_TEST_REQUIRE(::waitpid(pid, &status, 0) == pid);
    BOOST_TEST(WIFEXITED(status));
    BOOST_TEST(WEXITSTATUS(status) == 0);
    BOOST_TEST(!done);
    store_and_ring(line, 0, 1, port.bell());
    run_to_completion(ctx);
    BOOST_TEST(done);
}

BOOST_AUTO_TEST_CASE(park_bound_setting) {
    asio::io_context ctx;
    auto& svc = asio::use_service<gpu_async::detail::reactor_service>(ctx);
    BOOST_TEST(svc.park_bound().count() == gpu_async::default_park_bound.count());
    svc.park_bound(gpu_async::dur_ns::from_us(20));
    BOOST_TEST(svc.park_bound().count() == 20'000u);
    svc.park_bound(gpu_async::dur_ns{}); // zero is taken as the shortest bound
    BOOST_TEST(svc.park_bound().count() == 1u);
    svc.park_bound(gpu_async::dur_ns::from_ms(5));
    // With a long bound, a producer that never rings is still seen (within the bound).
    gpu_completion_port port(ctx);
    completion_line line;
    bool done = false;
    port.async_wait(memory_descriptor(line, slot(0), 1), [&](error_code ec) { done = !ec; });
    std::thread producer([&] { line.words[0].store(1, std::memory_order_release); });
    run_to_completion(ctx);
    producer.join();
    BOOST_TEST(done);
}

BOOST_AUTO_TEST_CASE(wrapping_targets_complete_in_order) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line;
    constexpr std::uint64_t top = ~std::uint64_t{0};
    line.words[0].store(top - 2);
    std::vector<std::uint64_t> order;
    for (std::uint64_t t : {std::uint64_t{1}, top, std::uint64_t{0}, top - 1})
        port.async_wait(memory_descriptor(line, slot(0), t), [&, t](error_code ec) {
            BOOST_TEST(!ec);
            order.push_back(t);
        });
    store_and_ring(line, 0, top - 1, port.bell());
    BOOST_TEST(eventually([&] { return port.pending() == 3u; }));
    store_and_ring(line, 0, top, port.bell());
    BOOST_TEST(eventually([&] { return port.pending() == 2u; }));
    store_and_ring(line, 0, 1, port.bell()); // wrapped past 0 to 1
    run_to_completion(ctx);
    BOOST_TEST(order.size() == 4u);
    BOOST_TEST(port.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(thousands_of_descriptors_over_hundreds_of_lines_in_random_order) {
    // 512 lines x 4 slots x 2 targets = 4096 descriptors, completed by a producer thread in
    // random order (per slot the sequence increases, as a stream's does); every one completes
    // exactly once.
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    constexpr std::size_t n_lines = 512, n_slots = 4, n_targets = 2;
    std::vector<std::unique_ptr<completion_line>> lines(n_lines);
    for (auto& l : lines)
        l = std::make_unique<completion_line>();
    std::vector<int> calls(n_lines * n_slots * n_targets, 0);
    for (std::size_t l = 0; l < n_lines; ++l)
        for (std::size_t s = 0; s < n_slots; ++s)
            for (std::size_t t = 0; t < n_targets; ++t) {
                const std::size_t i = (l * n_slots + s) * n_targets + t;
                port.async_wait(memory_descriptor(*lines[l], slot(s), t + 1),
                                [&calls, i](error_code ec) {
                                    BOOST_TEST(!ec);
                                    ++calls[i];
                                });
            }
    BOOST_TEST(port.pending() == calls.size());
    std::vector<std::size_t> stores; // each (line, slot) twice: first store 1, then 2
    for (std::size_t k = 0; k < n_lines * n_slots; ++k) {
        stores.push_back(k);
        stores.push_back(k);
    }
    std::shuffle(stores.begin(), stores.end(), std::mt19937(12345));
    std::thread producer([&] {
        for (std::size_t k : stores) {
            auto& w = lines[k / n_slots]->words[k % n_slots];
            w.store(w.load(std::memory_order_relaxed) + 1, std::memory_order_release);
            port.bell().ring();
        }
    });
    run_to_completion(ctx);
    producer.join();
    BOOST_TEST(std::count(calls.begin(), calls.end(), 1) == static_cast<long>(calls.size()));
}

BOOST_AUTO_TEST_CASE(multi_threaded_io_context) {
    asio::io_context ctx(4);
    gpu_completion_port port(ctx);
    constexpr std::size_t n = 1000;
    std::vector<std::unique_ptr<completion_line>> lines(50);
    for (auto& l : lines)
        l = std::make_unique<completion_line>();
    std::atomic<std::size_t> ok{0};
    for (std::size_t i = 0; i < n; ++i)
        port.async_wait(memory_descriptor(*lines[i % 50], slot(i % 8), 1 + i / 400),
                        [&](error_code ec) {
                            if (!ec) ++ok;
                        });
    std::thread producer([&] {
        for (std::uint64_t v = 1; v <= 3; ++v)
            for (auto& l : lines)
                for (std::size_t s = 0; s < 8; ++s)
                    store_and_ring(*l, s, v, port.bell());
    });
    std::vector<std::thread> runners;
    for (int i = 0; i < 3; ++i)
        runners.emplace_back([&] { ctx.run_for(gpu_async::test::run_bound); });
    run_to_completion(ctx);
    producer.join();
    for (auto& t : runners)
        t.join();
    BOOST_TEST(ok.load() == n);
}

BOOST_AUTO_TEST_CASE(thread_pool) {
    asio::thread_pool pool(3);
    gpu_completion_port port(pool);
    completion_line line;
    std::promise<error_code> p1, p2;
    port.async_wait(memory_descriptor(line, slot(0), 1), [&](error_code ec) { p1.set_value(ec); });
    asio::cancellation_signal sig;
    port.async_wait(
        memory_descriptor(line, slot(1), 1),
        asio::bind_cancellation_slot(sig.slot(), [&](error_code ec) { p2.set_value(ec); }));
    asio::post(pool, [&] { sig.emit(total); });
    store_and_ring(line, 0, 1, port.bell());
    auto f1 = p1.get_future(), f2 = p2.get_future();
    BOOST_TEST_REQUIRE((f1.wait_for(gpu_async::test::run_bound) == std::future_status::ready));
    BOOST_TEST_REQUIRE((f2.wait_for(gpu_async::test::run_bound) == std::future_status::ready));
    BOOST_TEST(!f1.get());
    BOOST_TEST(f2.get() == asio::error::operation_aborted);
    pool.join();
}

BOOST_AUTO_TEST_CASE(concurrent_initiation_completion_and_port_cancel_on_a_thread_pool) {
    // Four threads start 250 waits each while a producer completes every other one and a
    // canceller calls cancel() (the port's) midway: every handler runs exactly once, and the
    // waits cancel() counted are exactly the aborted ones.
    asio::thread_pool pool(4);
    gpu_completion_port port(pool);
    constexpr std::size_t per_thread = 250, threads = 4, n = per_thread * threads;
    std::vector<std::unique_ptr<completion_line>> lines(n);
    for (auto& l : lines)
        l = std::make_unique<completion_line>();
    std::vector<std::atomic<int>> calls(n);
    std::atomic<std::size_t> ok{0}, aborted{0}, counted{0};
    std::atomic<std::size_t> started{0};
    std::vector<std::thread> starters;
    for (std::size_t t = 0; t < threads; ++t)
        starters.emplace_back([&, t] {
            for (std::size_t k = 0; k < per_thread; ++k) {
                const std::size_t i = t * per_thread + k;
                port.async_wait(memory_descriptor(*lines[i], slot(0), 1), [&, i](error_code ec) {
                    ++calls[i];
                    if (!ec)
                        ++ok;
                    else if (ec == asio::error::operation_aborted)
                        ++aborted;
                });
                ++started;
            }
        });
    std::thread producer([&] {
        for (std::size_t i = 0; i < n; i += 2)
            store_and_ring(*lines[i], 0, 1, port.bell());
    });
    for (auto& t : starters)
        t.join();
    producer.join();
    std::thread canceller([&] { counted = port.cancel(); });
    canceller.join();
    // What cancel() did not catch completes when its line is stored.
    for (std::size_t i = 1; i < n; i += 2)
        store_and_ring(*lines[i], 0, 1, port.bell());
    BOOST_TEST(eventually([&] { return ok.load() + aborted.load() == n; }));
    pool.join();
    BOOST_TEST(started.load() == n);
    BOOST_TEST(aborted.load() == counted.load());
    for (std::size_t i = 0; i < n; ++i)
        BOOST_TEST(calls[i].load() == 1);
}

BOOST_AUTO_TEST_CASE(tcp_acceptor_and_gpu_wait_under_run) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    asio::ip::tcp::acceptor acceptor(ctx, {asio::ip::make_address("127.0.0.1"), 0});
    asio::ip::tcp::socket server(ctx), client(ctx);
    bool accepted = false, connected = false, gpu = false;
    acceptor.async_accept(server, [&](error_code ec) { accepted = !ec; });
    client.async_connect(acceptor.local_endpoint(), [&](error_code ec) { connected = !ec; });
    completion_line line;
    port.async_wait(memory_descriptor(line, slot(0), 1), [&](error_code ec) { gpu = !ec; });
    std::thread producer([&] { store_and_ring(line, 0, 1, port.bell()); });
    run_to_completion(ctx);
    producer.join();
    BOOST_TEST(accepted);
    BOOST_TEST(connected);
    BOOST_TEST(gpu);
}

BOOST_AUTO_TEST_CASE(park_bound_takes_std_chrono) {
    using namespace std::chrono_literals;
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    port.park_bound(250us);
    BOOST_TEST(port.park_bound().count() == 250'000u);
    const std::chrono::nanoseconds read = port.park_bound();
    BOOST_TEST((read == 250us));
    port.park_bound(std::chrono::duration<double, std::milli>(0.5));
    BOOST_TEST((port.park_bound().chrono() == 500us));
    port.park_bound(0s); // zero is taken as the shortest bound
    BOOST_TEST(port.park_bound().count() == 1u);
    port.park_bound(gpu_async::dur_ns::from_us(20)); // dur_ns still accepted
    BOOST_TEST(port.park_bound().count() == 20'000u);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_asio_gpu_completion_port
