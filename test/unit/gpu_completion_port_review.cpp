// SPDX-License-Identifier: BSL-1.0
// Review regressions of <gpu_async/gpu_completion_port.hpp> and its reactor service: shutdown
// with handlers whose destructors emit cancellation signals, and allocation failure while a
// completion is handed to the executor (at initiation and at cancel()).
#include <gpu_async/gpu_completion_port.hpp>

#include "common/io_context_fixture.hpp"
#include "common/tracking_allocator.hpp"

#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

namespace asio = boost::asio;
using boost::system::error_code;
using gpu_async::completion_line;
using gpu_async::gpu_completion_port;
using gpu_async::memory_descriptor;
using gpu_async::slot_id;

namespace {

slot_id slot(std::size_t i) {
    return *slot_id::at(i);
}

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

BOOST_AUTO_TEST_SUITE(gpu_completion_port_review_tests)

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

BOOST_AUTO_TEST_CASE(allocation_failure_posting_an_already_complete_wait) {
    // The op's allocation (the first) succeeds; posting its completion (the second allocation,
    // made with the handler's allocator through the io_context's executor) fails. async_wait
    // throws, the op is freed exactly once, the handler is never invoked, no work is left, and
    // the cancellation slot no longer refers to the freed op.
    asio::io_context ctx;
    gpu_async::basic_gpu_completion_port<asio::io_context::executor_type> port(ctx);
    completion_line line;
    line.words[0].store(1);
    gpu_async::test::allocation_counters counters;
    counters.fail_at = 2;
    asio::cancellation_signal sig;
    int invoked = 0;
    BOOST_CHECK_THROW(
        port.async_wait(
            memory_descriptor(line, slot(0), 1),
            asio::bind_cancellation_slot(
                sig.slot(), asio::bind_allocator(gpu_async::test::tracking_allocator<int>(counters),
                                                 [&](error_code) { ++invoked; }))),
        std::bad_alloc);
    BOOST_TEST(counters.attempts.load() == 2u);
    BOOST_TEST(counters.allocations.load() == 1u);
    BOOST_TEST(counters.deallocations.load() == 1u);
    sig.emit(asio::cancellation_type::terminal); // the slot was cleared: nothing to reach
    BOOST_TEST(ctx.run_for(gpu_async::test::run_bound) == 0u);
    BOOST_TEST(ctx.stopped());
    BOOST_TEST(invoked == 0);

    // The port still works afterwards.
    counters.fail_at = 0;
    port.async_wait(memory_descriptor(line, slot(0), 1),
                    asio::bind_allocator(gpu_async::test::tracking_allocator<int>(counters),
                                         [&](error_code ec) { invoked += ec ? 100 : 1; }));
    ctx.restart();
    gpu_async::test::run_to_completion(ctx);
    BOOST_TEST(invoked == 1);
    BOOST_TEST(counters.allocations.load() == counters.deallocations.load());
}

BOOST_AUTO_TEST_CASE(allocation_failure_while_cancel_posts_completes_the_others) {
    // Three pending waits; cancel() posts their completions and the first post fails. The
    // exception propagates, the failed wait is destroyed uninvoked, and the other two still
    // complete (aborted): none is left unlinked yet alive, holding work for ever.
    asio::io_context ctx;
    gpu_async::basic_gpu_completion_port<asio::io_context::executor_type> port(ctx);
    completion_line line;
    gpu_async::test::allocation_counters counters;
    counters.fail_at = 4; // three op allocations succeed, the first completion's post fails
    int aborted = 0, other = 0;
    for (std::uint64_t t = 1; t <= 3; ++t)
        port.async_wait(memory_descriptor(line, slot(0), t),
                        asio::bind_allocator(
                            gpu_async::test::tracking_allocator<int>(counters), [&](error_code ec) {
                                ec == asio::error::operation_aborted ? ++aborted : ++other;
                            }));
    BOOST_CHECK_THROW(port.cancel(), std::bad_alloc);
    BOOST_TEST(port.pending() == 0u);
    BOOST_TEST(ctx.run_for(gpu_async::test::run_bound) == 2u);
    BOOST_TEST(ctx.stopped());
    BOOST_TEST(aborted == 2);
    BOOST_TEST(other == 0);
    BOOST_TEST(counters.allocations.load() == counters.deallocations.load());
}

BOOST_AUTO_TEST_SUITE_END()
