// The completion queue of <gpu_async/gpu_completion_port.hpp>: completions reach the I/O
// executor in batches (one drain per batch); the drain's failure and shutdown paths.
#include <gpu_async/gpu_completion_port.hpp>

#include "common/io_context_fixture.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/execution.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <stdexcept>
#include <thread>
#include <vector>

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

struct shutdownable_context : asio::io_context {
    using asio::io_context::shutdown;
};

struct counted_handler {
    std::shared_ptr<std::atomic<int>> invoked;
    std::shared_ptr<int> alive; // use_count() - 1 copies alive besides the test's own
    void operator()(error_code) const { invoked->fetch_add(1); }
};

/// An io_context executor whose execute() throws std::bad_alloc while `*fail` is set (as a
/// post that cannot allocate would).
class failing_executor {
public:
    failing_executor(asio::io_context::executor_type inner, const std::atomic<bool>& fail) noexcept
        : inner_(inner)
        , fail_(&fail) {}

    asio::execution_context& query(asio::execution::context_t) const noexcept {
        return inner_.context();
    }
    static constexpr asio::execution::blocking_t query(asio::execution::blocking_t) noexcept {
        return asio::execution::blocking.never;
    }
    failing_executor require(asio::execution::blocking_t::never_t) const noexcept { return *this; }

    template <class F>
    void execute(F&& f) const {
        if (fail_->load()) throw std::bad_alloc();
        asio::post(inner_, std::forward<F>(f));
    }

    bool operator==(const failing_executor&) const noexcept = default;

private:
    asio::io_context::executor_type inner_;
    const std::atomic<bool>* fail_;
};

static_assert(asio::execution::is_executor<failing_executor>::value);

} // namespace

BOOST_AUTO_TEST_SUITE(gpu_completion_port_queue_tests)

BOOST_AUTO_TEST_CASE(failed_drain_post_at_initiation_destroys_the_op_uninvoked) {
    asio::io_context ctx;
    std::atomic<bool> fail{true};
    gpu_async::basic_gpu_completion_port<failing_executor> port(
        failing_executor(ctx.get_executor(), fail));
    completion_line line;
    line.words[0].store(1);
    auto invoked = std::make_shared<std::atomic<int>>(0);
    auto alive = std::make_shared<int>(0);
    asio::cancellation_signal sig;
    BOOST_CHECK_THROW(
        port.async_wait(memory_descriptor(line, slot(0), 1),
                        asio::bind_cancellation_slot(sig.slot(), counted_handler{invoked, alive})),
        std::bad_alloc);
    BOOST_TEST(alive.use_count() == 1);          // the op and its handler are gone
    sig.emit(asio::cancellation_type::terminal); // the slot was cleared: nothing to reach
    BOOST_TEST(ctx.run_for(gpu_async::test::run_bound) == 0u);
    BOOST_TEST(invoked->load() == 0);

    // The queue works again once posting does.
    fail = false;
    port.async_wait(memory_descriptor(line, slot(0), 1), counted_handler{invoked, alive});
    ctx.restart();
    gpu_async::test::run_to_completion(ctx);
    BOOST_TEST(invoked->load() == 1);
    BOOST_TEST(alive.use_count() == 1);
}

BOOST_AUTO_TEST_CASE(failed_drain_post_at_cancel_destroys_the_whole_batch_uninvoked) {
    asio::io_context ctx;
    std::atomic<bool> fail{false};
    gpu_async::basic_gpu_completion_port<failing_executor> port(
        failing_executor(ctx.get_executor(), fail));
    completion_line line;
    auto invoked = std::make_shared<std::atomic<int>>(0);
    auto alive = std::make_shared<int>(0);
    for (std::uint64_t t = 1; t <= 3; ++t)
        port.async_wait(memory_descriptor(line, slot(0), t), counted_handler{invoked, alive});
    BOOST_TEST(alive.use_count() == 4);
    fail = true;
    BOOST_CHECK_THROW(port.cancel(), std::bad_alloc);
    BOOST_TEST(port.pending() == 0u);
    BOOST_TEST(alive.use_count() == 1); // every queued op destroyed exactly once (ASan)
    fail = false;
    BOOST_TEST(ctx.run_for(gpu_async::test::run_bound) == 0u);
    BOOST_TEST(invoked->load() == 0);
}

BOOST_AUTO_TEST_CASE(shutdown_with_completions_queued_in_the_drain) {
    // The drain is posted but never runs: the scheduler's shutdown destroys it, and it destroys
    // every queued op uninvoked, while the port is still alive; the port is destroyed after.
    auto invoked = std::make_shared<std::atomic<int>>(0);
    auto alive = std::make_shared<int>(0);
    completion_line done;
    done.words[0].store(1);
    completion_line line;
    {
        shutdownable_context ctx;
        gpu_completion_port port(ctx);
        for (int i = 0; i < 100; ++i)
            port.async_wait(memory_descriptor(done, slot(0), 1), counted_handler{invoked, alive});
        port.async_wait(memory_descriptor(line, slot(0), 1), counted_handler{invoked, alive});
        port.async_wait(memory_descriptor(line, slot(1), 1), counted_handler{invoked, alive});
        BOOST_TEST(port.cancel() == 2u); // queued behind the 100
        port.async_wait(memory_descriptor(line, slot(2), 1), counted_handler{invoked, alive});
        BOOST_TEST(alive.use_count() == 104);
        ctx.shutdown(); // the reactor destroys the pending one, the scheduler the drain
        BOOST_TEST(alive.use_count() == 1);
        BOOST_TEST(port.pending() == 0u);
        BOOST_TEST(port.cancel() == 0u);
    }
    BOOST_TEST(alive.use_count() == 1);
    BOOST_TEST(invoked->load() == 0);
}

BOOST_AUTO_TEST_CASE(port_destroyed_while_its_drain_is_queued) {
    // The queue outlives its port: the queued completions still run (aborted or reached).
    asio::io_context ctx;
    completion_line done;
    done.words[0].store(1);
    completion_line line;
    int reached = 0, aborted = 0;
    {
        gpu_completion_port port(ctx);
        port.async_wait(memory_descriptor(done, slot(0), 1),
                        [&](error_code ec) { ec ? ++aborted : ++reached; });
        port.async_wait(memory_descriptor(line, slot(0), 1), [&](error_code ec) {
            ec == asio::error::operation_aborted ? ++aborted : ++reached;
        });
    } // cancels the pending one
    gpu_async::test::run_to_completion(ctx);
    BOOST_TEST(reached == 1);
    BOOST_TEST(aborted == 1);
}

BOOST_AUTO_TEST_CASE(burst_of_10000_cancelled_completions_is_one_batch_in_order) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    constexpr std::size_t n = 10000;
    completion_line line;
    std::vector<int> count(n, 0);
    std::vector<std::size_t> order;
    order.reserve(n);
    for (std::size_t i = 0; i < n; ++i)
        port.async_wait(memory_descriptor(line, slot(i % 8), 1 + i), [&, i](error_code ec) {
            BOOST_REQUIRE(ec == asio::error::operation_aborted);
            ++count[i];
            order.push_back(i);
        });
    BOOST_TEST(port.cancel() == n);
    BOOST_TEST(order.empty()); // never inline
    // One drain delivers the whole batch: the final steps run inline on the I/O executor.
    BOOST_TEST(gpu_async::test::run_to_completion(ctx) == 1u);
    BOOST_TEST(order.size() == n);
    for (std::size_t i = 0; i < n; ++i)
        BOOST_TEST_REQUIRE(count[i] == 1);
    // cancel() completes the port's waits oldest first, and the queue keeps that order.
    for (std::size_t k = 0; k < n; ++k)
        BOOST_TEST_REQUIRE(order[k] == k);
}

BOOST_AUTO_TEST_CASE(burst_of_10000_completions_on_two_threads_and_strands_exactly_once) {
    // One store completes 10 000 waits; half of them are bound to one of two strands, the rest
    // run on the two-threaded io_context. Each handler runs exactly once, without error, strand
    // handlers on their strand and never two at once on a strand.
    asio::io_context ctx(2);
    gpu_completion_port port(ctx);
    auto s1 = asio::make_strand(ctx);
    auto s2 = asio::make_strand(ctx);
    constexpr std::size_t n = 10000;
    completion_line line;
    std::vector<std::atomic<int>> count(n);
    std::atomic<int> in_s1{0}, in_s2{0};
    std::atomic<bool> overlap{false}, off_strand{false};
    std::atomic<std::size_t> done{0}, failed{0};
    for (std::size_t i = 0; i < n; ++i) {
        const memory_descriptor d(line, slot(0), 1 + i % 7);
        auto body = [&, i](error_code ec) {
            if (ec) failed.fetch_add(1); // no Boost.Test on the runner threads
            count[i].fetch_add(1);
            done.fetch_add(1);
        };
        if (i % 4 == 0) {
            port.async_wait(d, asio::bind_executor(s1, [&, body](error_code ec) mutable {
                                if (!s1.running_in_this_thread()) off_strand = true;
                                if (in_s1.fetch_add(1) != 0) overlap = true;
                                body(ec);
                                in_s1.fetch_sub(1);
                            }));
        } else if (i % 4 == 1) {
            port.async_wait(d, asio::bind_executor(s2, [&, body](error_code ec) mutable {
                                if (!s2.running_in_this_thread()) off_strand = true;
                                if (in_s2.fetch_add(1) != 0) overlap = true;
                                body(ec);
                                in_s2.fetch_sub(1);
                            }));
        } else {
            port.async_wait(d, body);
        }
    }
    std::thread producer([&] {
        line.words[0].store(7, std::memory_order_release);
        port.bell().ring();
    });
    std::thread runner([&] { ctx.run_for(gpu_async::test::run_bound); });
    gpu_async::test::run_to_completion(ctx);
    producer.join();
    runner.join();
    BOOST_TEST(done.load() == n);
    BOOST_TEST(failed.load() == 0u);
    for (std::size_t i = 0; i < n; ++i)
        BOOST_TEST_REQUIRE(count[i].load() == 1);
    BOOST_TEST(!overlap.load());
    BOOST_TEST(!off_strand.load());
}

BOOST_AUTO_TEST_CASE(a_throwing_handler_does_not_strand_the_rest_of_its_batch) {
    // Run inline by the drain, a handler's exception is Asio's to carry: the rest of the batch
    // runs, each handler once, and run() rethrows once the drain returns.
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line;
    int ran = 0;
    for (std::uint64_t t = 1; t <= 3; ++t)
        port.async_wait(memory_descriptor(line, slot(0), t), [&](error_code) {
            if (++ran == 1) throw std::runtime_error("handler failed");
        });
    BOOST_TEST(port.cancel() == 3u);
    BOOST_CHECK_THROW(ctx.run_for(gpu_async::test::run_bound), std::runtime_error);
    BOOST_TEST(ran == 3);
    ctx.restart();
    BOOST_TEST(gpu_async::test::run_to_completion(ctx) == 0u);
    BOOST_TEST(ran == 3);
}

BOOST_AUTO_TEST_CASE(a_failing_dispatch_leaves_the_rest_of_its_batch_to_the_next_drain) {
    // The first completion's handler executor cannot take it (execute throws): that op is
    // destroyed uninvoked, the exception propagates from run(), and the rest of the batch goes
    // back to the queue and is delivered by the next drain, each handler once.
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    completion_line line;
    const std::atomic<bool> fail{true};
    auto invoked = std::make_shared<std::atomic<int>>(0);
    auto alive = std::make_shared<int>(0);
    port.async_wait(memory_descriptor(line, slot(0), 1),
                    asio::bind_executor(failing_executor(ctx.get_executor(), fail),
                                        counted_handler{invoked, alive}));
    for (std::uint64_t t = 2; t <= 3; ++t)
        port.async_wait(memory_descriptor(line, slot(0), t), counted_handler{invoked, alive});
    BOOST_TEST(port.cancel() == 3u);
    BOOST_CHECK_THROW(ctx.run_for(gpu_async::test::run_bound), std::bad_alloc);
    BOOST_TEST(invoked->load() == 0);
    BOOST_TEST(alive.use_count() == 3); // the first is gone, two are queued
    ctx.restart();
    gpu_async::test::run_to_completion(ctx);
    BOOST_TEST(invoked->load() == 2);
    BOOST_TEST(alive.use_count() == 1);
}

BOOST_AUTO_TEST_SUITE_END()
