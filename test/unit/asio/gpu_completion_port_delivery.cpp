// SPDX-License-Identifier: BSL-1.0
// How <gpu_async/gpu_completion_port.hpp> and its reactor service deliver completed waits to their
// handlers: delivery that cannot strand a completion (no allocation, an executor that refuses or
// drops the drain, a throwing handler), and handlers destroyed undelivered at shutdown whose
// destructors emit cancellation signals.
#include <gpu_async/gpu_completion_port.hpp>

#include "common/io_context_fixture.hpp"
#include "common/reactor_of.hpp"
#include "common/slots.hpp"
#include "common/tracking_allocator.hpp"

#include "common/asio.hpp"
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

namespace unit_asio_gpu_completion_port_delivery {

using gpu_async::completion_line;
using gpu_async::error_code;
using gpu_async::gpu_completion_port;
using gpu_async::memory_descriptor;
using gpu_async::test::slot;

namespace {

/// An io_context whose shutdown can be called while I/O objects still live.
struct shutdownable_context : asio::io_context {
    using asio::io_context::shutdown;
};

/// A handler whose destructor emits a cancellation signal (as an object owning a signal for
/// another pending operation may do when the last handler referring to it goes away).
struct emitting_on_destruction {
    asio::cancellation_signal* sig;
    std::shared_ptr<std::atomic<int>> invoked;
    emitting_on_destruction(asio::cancellation_signal& s, std::shared_ptr<std::atomic<int>> i)
        : sig(&s)
        , invoked(std::move(i)) {}
    emitting_on_destruction(emitting_on_destruction&& o) noexcept
        : sig(std::exchange(o.sig, nullptr))
        , invoked(std::move(o.invoked)) {}
    emitting_on_destruction& operator=(emitting_on_destruction&&) = delete;
    ~emitting_on_destruction() {
        if (sig != nullptr) sig->emit(asio::cancellation_type::terminal);
    }
    void operator()(error_code) { invoked->fetch_add(1); }
};

} // namespace

BOOST_AUTO_TEST_SUITE(gpu_completion_port_delivery_tests)

BOOST_AUTO_TEST_CASE(shutdown_with_a_handler_destructor_emitting_another_waits_signal) {
    // Two pending waits on one slot; the one with the later target (destroyed first at
    // shutdown) is bound to `sig`, which outlives the waits; the other's handler emits `sig`
    // from its destructor. The cancellation handler left in `sig`'s slot must not reach the
    // destroyed wait (ASan: heap-use-after-free).
    auto invoked = std::make_shared<std::atomic<int>>(0);
    completion_line line;
    asio::cancellation_signal sig;
    {
        shutdownable_context ctx;
        gpu_completion_port port(ctx);
        port.async_wait(memory_descriptor(line, slot(0), 1), emitting_on_destruction(sig, invoked));
        port.async_wait(memory_descriptor(line, slot(0), 2),
                        asio::bind_cancellation_slot(
                            sig.slot(), [invoked](error_code) { invoked->fetch_add(1); }));
        BOOST_TEST(port.pending() == 2u);
        ctx.shutdown();
        BOOST_TEST(port.pending() == 0u);
    }
    BOOST_TEST(invoked->load() == 0);
}

BOOST_AUTO_TEST_CASE(handler_destroyed_by_the_scheduler_emitting_a_destroyed_waits_signal) {
    // A queued completion whose handler emits, from its destructor, the signal of a wait that
    // the reactor's shutdown has already destroyed (the scheduler shuts down after the reactor).
    auto invoked = std::make_shared<std::atomic<int>>(0);
    completion_line line;
    completion_line done;
    done.words[0].store(1);
    asio::cancellation_signal sig;
    {
        shutdownable_context ctx;
        gpu_completion_port port(ctx);
        port.async_wait(memory_descriptor(line, slot(0), 1),
                        asio::bind_cancellation_slot(
                            sig.slot(), [invoked](error_code) { invoked->fetch_add(1); }));
        // Complete at initiation: its completion is queued on the context, never run.
        port.async_wait(memory_descriptor(done, slot(0), 1), emitting_on_destruction(sig, invoked));
        BOOST_TEST(port.pending() == 1u);
        ctx.shutdown(); // the reactor destroys the pending wait, then the scheduler the queue
        BOOST_TEST(port.pending() == 0u);
    }
    BOOST_TEST(invoked->load() == 0);
}

BOOST_AUTO_TEST_CASE(delivering_an_already_complete_wait_allocates_nothing) {
    // The op is the one allocation made with the handler's allocator; its delivery (the port's
    // drain, posted with the completion queue's own memory) needs none, so an allocator that
    // fails from the second attempt on cannot strand or lose the completion.
    asio::io_context ctx;
    gpu_async::basic_gpu_completion_port<asio::io_context::executor_type> port(ctx);
    completion_line line;
    line.words[0].store(1);
    gpu_async::test::allocation_counters counters;
    counters.fail_at = 2;
    asio::cancellation_signal sig;
    int invoked = 0;
    port.async_wait(
        memory_descriptor(line, slot(0), 1),
        asio::bind_cancellation_slot(
            sig.slot(), asio::bind_allocator(gpu_async::test::tracking_allocator<int>(counters),
                                             [&](error_code ec) { invoked += ec ? 100 : 1; })));
    BOOST_TEST(counters.attempts.load() == 1u);
    sig.emit(asio::cancellation_type::terminal); // decided at initiation: nothing to cancel
    BOOST_TEST(ctx.run_for(gpu_async::test::run_bound) == 1u);
    BOOST_TEST(ctx.stopped());
    BOOST_TEST(invoked == 1);
    BOOST_TEST(counters.allocations.load() == 1u);
    BOOST_TEST(counters.deallocations.load() == 1u);
}

BOOST_AUTO_TEST_CASE(cancel_delivers_every_wait_without_allocating) {
    // Three pending waits; cancel() queues their completions and one drain delivers them all,
    // with no allocation: an allocator failing after the three ops changes nothing.
    asio::io_context ctx;
    gpu_async::basic_gpu_completion_port<asio::io_context::executor_type> port(ctx);
    completion_line line;
    gpu_async::test::allocation_counters counters;
    counters.fail_at = 4;
    int aborted = 0, other = 0;
    for (std::uint64_t t = 1; t <= 3; ++t)
        port.async_wait(memory_descriptor(line, slot(0), t),
                        asio::bind_allocator(
                            gpu_async::test::tracking_allocator<int>(counters), [&](error_code ec) {
                                ec == asio::error::operation_aborted ? ++aborted : ++other;
                            }));
    BOOST_TEST(port.cancel() == 3u);
    BOOST_TEST(port.pending() == 0u);
    BOOST_TEST(ctx.run_for(gpu_async::test::run_bound) == 1u); // one drain, three handlers
    BOOST_TEST(ctx.stopped());
    BOOST_TEST(aborted == 3);
    BOOST_TEST(other == 0);
    BOOST_TEST(counters.attempts.load() == 3u);
    BOOST_TEST(counters.allocations.load() == counters.deallocations.load());
}

namespace {

/// An executor over an io_context that refuses (throws std::bad_alloc from execute) or drops
/// (destroys unrun) the next submissions, as counted by its shared counters.
struct unreliable_executor {
    asio::io_context* ctx;
    std::shared_ptr<std::atomic<int>> refuse;
    std::shared_ptr<std::atomic<int>> drop;
    std::shared_ptr<std::atomic<int>> executed;

    asio::execution_context& query(asio::execution::context_t) const noexcept { return *ctx; }
    static constexpr asio::execution::blocking_t::never_t
    query(asio::execution::blocking_t) noexcept {
        return asio::execution::blocking.never;
    }
    template <class F>
    void execute(F&& f) const {
        if (refuse->load() > 0) {
            refuse->fetch_sub(1);
            throw std::bad_alloc();
        }
        if (drop->load() > 0) {
            drop->fetch_sub(1);
            [[maybe_unused]] auto discarded = std::forward<F>(f); // destroyed unrun
            return;
        }
        executed->fetch_add(1);
        asio::post(*ctx, std::forward<F>(f));
    }
    friend bool operator==(const unreliable_executor& a, const unreliable_executor& b) noexcept {
        return a.ctx == b.ctx && a.refuse == b.refuse;
    }
};

unreliable_executor make_unreliable(asio::io_context& ctx, int refuse, int drop) {
    return {&ctx, std::make_shared<std::atomic<int>>(refuse),
            std::make_shared<std::atomic<int>>(drop), std::make_shared<std::atomic<int>>(0)};
}

} // namespace

BOOST_AUTO_TEST_CASE(a_drain_the_executor_refuses_is_posted_again) {
    // Posting the drain throws twice: the completions stay queued and the service posts the
    // drain again (within a park bound) until it is taken; each handler runs exactly once.
    asio::io_context ctx;
    auto guard = asio::make_work_guard(ctx);
    const unreliable_executor ex = make_unreliable(ctx, 2, 0);
    gpu_async::basic_gpu_completion_port<unreliable_executor> port(ex);
    completion_line line;
    int ok = 0, failed = 0;
    for (std::uint64_t t = 1; t <= 3; ++t)
        port.async_wait(memory_descriptor(line, slot(1), t), [&](error_code ec) {
            ec ? ++failed : ++ok;
            if (ok + failed == 3) ctx.stop();
        });
    line.words[1].store(3, std::memory_order_release);
    port.bell().ring();
    ctx.run_for(gpu_async::test::run_bound);
    BOOST_TEST_REQUIRE(ctx.stopped());
    BOOST_TEST(ok == 3);
    BOOST_TEST(failed == 0);
    BOOST_TEST(ex.refuse->load() == 0);
    BOOST_TEST(ex.executed->load() >= 1);
    BOOST_TEST(port.pending() == 0u);
    BOOST_TEST(gpu_async::test::reactor_of(port).drains_out() == 0u); // no drain counted twice
}

BOOST_AUTO_TEST_CASE(an_executor_that_refuses_the_drain_many_times_is_retried_without_recursion) {
    // Each refusal destroys the drain the executor was handed (asio::post wraps it first): the
    // queue goes back to the waiter, which posts it again after one park bound (1 us here). A
    // repost from inside the destroyed drain recursed once per refusal (a stack overflow near
    // 100 000).
    asio::io_context ctx;
    auto guard = asio::make_work_guard(ctx);
    const unreliable_executor ex = make_unreliable(ctx, 150000, 0);
    gpu_async::basic_gpu_completion_port<unreliable_executor> port(ex);
    port.park_bound(std::chrono::microseconds(1));
    completion_line line;
    line.words[4].store(1);
    int calls = 0;
    port.async_wait(memory_descriptor(line, slot(4), 1), [&](error_code ec) {
        BOOST_TEST(!ec);
        ++calls;
        ctx.stop();
    });
    ctx.run_for(std::chrono::seconds(60));
    BOOST_TEST_REQUIRE(ctx.stopped());
    BOOST_TEST(calls == 1);
    BOOST_TEST(ex.refuse->load() == 0);
    BOOST_TEST(gpu_async::test::reactor_of(port).drains_out() == 0u);
}

BOOST_AUTO_TEST_CASE(a_drain_the_executor_drops_unrun_is_posted_again) {
    // The executor destroys the first drain without running it while the context lives: the
    // queued completion is not destroyed with it but delivered by the next drain.
    asio::io_context ctx;
    auto guard = asio::make_work_guard(ctx);
    const unreliable_executor ex = make_unreliable(ctx, 0, 1);
    gpu_async::basic_gpu_completion_port<unreliable_executor> port(ex);
    completion_line line;
    line.words[2].store(5);
    int calls = 0;
    error_code got = asio::error::would_block;
    port.async_wait(memory_descriptor(line, slot(2), 5), [&](error_code ec) {
        ++calls;
        got = ec;
        ctx.stop();
    });
    ctx.run_for(gpu_async::test::run_bound);
    BOOST_TEST_REQUIRE(ctx.stopped());
    BOOST_TEST(calls == 1);
    BOOST_TEST(!got);
    BOOST_TEST(ex.drop->load() == 0);
    BOOST_TEST(gpu_async::test::reactor_of(port).drains_out() == 0u);
}

BOOST_AUTO_TEST_CASE(a_throwing_handler_leaves_the_rest_of_its_batch_queued) {
    // One drain delivers three completions; the first handler throws out of run(), as Asio
    // propagates handler exceptions. The other two stay queued and run at the next run().
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line;
    std::vector<std::uint64_t> order;
    for (std::uint64_t t = 1; t <= 3; ++t)
        port.async_wait(memory_descriptor(line, slot(3), t), [&order, t](error_code ec) {
            BOOST_TEST(!ec);
            order.push_back(t);
            if (t == 1) throw std::runtime_error("handler failure");
        });
    line.words[3].store(3, std::memory_order_release);
    port.bell().ring();
    BOOST_CHECK_THROW(ctx.run_for(gpu_async::test::run_bound), std::runtime_error);
    BOOST_TEST(order.size() == 1u);
    BOOST_TEST(gpu_async::test::reactor_of(port).drains_out() == 1u); // posted again
    ctx.restart();
    gpu_async::test::run_to_completion(ctx);
    BOOST_TEST((order == std::vector<std::uint64_t>{1, 2, 3}));
    BOOST_TEST(gpu_async::test::reactor_of(port).drains_out() == 0u);
}

BOOST_AUTO_TEST_CASE(throwing_strand_handlers_each_leave_their_own_run) {
    // Issue 27, item 4. One drain delivers three completions whose handlers, bound to a strand,
    // all throw. The strand runs each inline through the io_context executor's execute(), which
    // catches and keeps what it throws for after the drain: the drain used to go on, and the
    // three came back as one asio::multiple_exceptions keeping only the first. As with
    // steady_timer waits, each std::runtime_error must leave its own run(), the rest of the
    // batch waiting for the next.
    asio::io_context ctx;
    auto strand = asio::make_strand(ctx);
    gpu_completion_port port(ctx);
    completion_line line;
    std::vector<std::uint64_t> order;
    for (std::uint64_t t = 1; t <= 3; ++t)
        port.async_wait(memory_descriptor(line, slot(3), t),
                        asio::bind_executor(strand, [&order, t](error_code ec) {
                            BOOST_TEST(!ec);
                            order.push_back(t);
                            throw std::runtime_error("handler " + std::to_string(t));
                        }));
    line.words[3].store(3, std::memory_order_release);
    port.bell().ring();
    for (std::uint64_t t = 1; t <= 3; ++t) {
        ctx.restart();
        try {
            ctx.run_for(gpu_async::test::run_bound);
            BOOST_ERROR("run() returned without handler " << t << "'s exception");
        } catch (const std::runtime_error& e) {
            BOOST_TEST(e.what() == "handler " + std::to_string(t));
        } catch (const std::exception& e) {
            BOOST_ERROR("run() threw " << e.what() << " instead of handler " << t
                                       << "'s exception");
        }
        BOOST_TEST(order.size() == t);
    }
    ctx.restart();
    gpu_async::test::run_to_completion(ctx);
    BOOST_TEST((order == std::vector<std::uint64_t>{1, 2, 3}));
    BOOST_TEST(gpu_async::test::reactor_of(port).drains_out() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_asio_gpu_completion_port_delivery
