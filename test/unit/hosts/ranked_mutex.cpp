// SPDX-License-Identifier: BSL-1.0
//
// The lock hierarchy's check: ranks taken in order pass, a lock taken out of order is reported
// (by the handler, before it blocks), tries are counted as held, and a condition variable's
// wait keeps its lock's rank.
//
#include <gpu_async/wait/detail/ranked_mutex.hpp>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

BOOST_TEST_DONT_PRINT_LOG_VALUE(gpu_async::detail::lock_rank)

namespace unit_hosts_ranked_mutex {

namespace {

using gpu_async::detail::held_ranks;
using gpu_async::detail::lock_rank;
using gpu_async::detail::ranked_condition_variable;
using gpu_async::detail::ranked_mutex;

struct violation {
    lock_rank held;
    lock_rank wanted;
};

std::vector<violation>& seen() {
    static std::vector<violation> v;
    return v;
}

void record(lock_rank held, lock_rank wanted) {
    seen().push_back({held, wanted});
}

/// Records violations instead of aborting, for one test.
struct recording_handler {
    recording_handler() {
        seen().clear();
        previous = gpu_async::detail::set_lock_order_handler(&record);
    }
    ~recording_handler() { gpu_async::detail::set_lock_order_handler(previous); }
    gpu_async::detail::lock_order_handler previous;
};

/// Whether this build checks the order (GPU_ASYNC_CHECK_LOCK_ORDER: debug and sanitizer builds).
boost::test_tools::assertion_result order_checked(boost::unit_test::test_unit_id) {
    boost::test_tools::assertion_result r(GPU_ASYNC_CHECK_LOCK_ORDER != 0);
    r.message() << "this build does not check the lock order (NDEBUG)";
    return r;
}

/// A mutex of its own heap memory: the tests take locks the wrong way round on purpose, and
/// ThreadSanitizer keeps a stack address's lock order across tests (std::mutex is never
/// destroyed to it), while freed heap memory is forgotten.
std::unique_ptr<ranked_mutex> fresh(lock_rank r) {
    return std::make_unique<ranked_mutex>(r);
}

} // namespace

BOOST_AUTO_TEST_SUITE(ranked_mutex_suite)

BOOST_AUTO_TEST_CASE(a_thread_holds_the_highest_rank_it_took_until_it_lets_it_go) {
    held_ranks h;
    BOOST_TEST(h.highest() == 0);
    h.push(lock_rank::reactor);
    h.push(lock_rank::line_shard);
    BOOST_TEST(h.highest() == static_cast<unsigned>(lock_rank::line_shard));
    h.pop(lock_rank::line_shard);
    BOOST_TEST(h.highest() == static_cast<unsigned>(lock_rank::reactor));
    // Let go out of order: the outer first.
    h.push(lock_rank::line_shard);
    h.pop(lock_rank::reactor);
    BOOST_TEST(h.highest() == static_cast<unsigned>(lock_rank::line_shard));
    BOOST_TEST(h.size() == 1u);
    h.pop(lock_rank::line_shard);
    BOOST_TEST(h.size() == 0u);
}

BOOST_AUTO_TEST_CASE(every_rank_has_a_name) {
    for (unsigned r = static_cast<unsigned>(lock_rank::watcher_join);
         r <= static_cast<unsigned>(lock_rank::line_shard); ++r)
        BOOST_TEST(std::string(gpu_async::detail::lock_rank_name(static_cast<lock_rank>(r))) !=
                   "?");
}

BOOST_AUTO_TEST_CASE(locks_taken_outermost_first_pass,
                     *boost::unit_test::precondition(order_checked)) {
    recording_handler rec;
    auto outer_owner = fresh(lock_rank::reactor);
    ranked_mutex& outer = *outer_owner;
    auto inner_owner = fresh(lock_rank::completion_queue);
    ranked_mutex& inner = *inner_owner;
    auto leaf_owner = fresh(lock_rank::line_shard);
    ranked_mutex& leaf = *leaf_owner;
    {
        std::lock_guard a(outer);
        std::lock_guard b(inner);
        std::lock_guard c(leaf);
    }
    {
        std::lock_guard c(leaf); // alone again after all were let go
    }
    BOOST_TEST(seen().empty());
}

BOOST_AUTO_TEST_CASE(a_lock_taken_inside_a_higher_rank_is_reported,
                     *boost::unit_test::precondition(order_checked)) {
    recording_handler rec;
    auto outer_owner = fresh(lock_rank::reactor);
    ranked_mutex& outer = *outer_owner;
    auto inner_owner = fresh(lock_rank::completion_queue);
    ranked_mutex& inner = *inner_owner;
    {
        std::lock_guard b(inner);
        std::lock_guard a(outer); // the wrong way round
    }
    BOOST_TEST_REQUIRE(seen().size() == 1u);
    BOOST_TEST(seen()[0].held == lock_rank::completion_queue);
    BOOST_TEST(seen()[0].wanted == lock_rank::reactor);
}

BOOST_AUTO_TEST_CASE(two_locks_of_one_rank_are_reported,
                     *boost::unit_test::precondition(order_checked)) {
    recording_handler rec;
    auto a_owner = fresh(lock_rank::line_shard);
    ranked_mutex& a = *a_owner;
    auto b_owner = fresh(lock_rank::line_shard);
    ranked_mutex& b = *b_owner;
    {
        std::lock_guard la(a);
        std::lock_guard lb(b);
    }
    BOOST_TEST_REQUIRE(seen().size() == 1u);
    BOOST_TEST(seen()[0].held == lock_rank::line_shard);
}

BOOST_AUTO_TEST_CASE(a_try_is_never_reported_and_counts_as_held,
                     *boost::unit_test::precondition(order_checked)) {
    recording_handler rec;
    auto outer_owner = fresh(lock_rank::reactor);
    ranked_mutex& outer = *outer_owner;
    auto inner_owner = fresh(lock_rank::completion_queue);
    ranked_mutex& inner = *inner_owner;
    std::unique_lock b(inner);
    std::unique_lock a(outer, std::try_to_lock); // cannot deadlock: not reported
    BOOST_TEST(a.owns_lock());
    BOOST_TEST(seen().empty());
    b.unlock();
    std::lock_guard again(inner); // `outer` is still held: in order
    BOOST_TEST(seen().empty());
    a.unlock();
}

BOOST_AUTO_TEST_CASE(each_thread_has_its_own_ranks,
                     *boost::unit_test::precondition(order_checked)) {
    recording_handler rec;
    auto inner_owner = fresh(lock_rank::completion_queue);
    ranked_mutex& inner = *inner_owner;
    auto outer_owner = fresh(lock_rank::reactor);
    ranked_mutex& outer = *outer_owner;
    std::lock_guard b(inner);
    std::thread other([&] { std::lock_guard a(outer); }); // holds nothing: in order
    other.join();
    BOOST_TEST(seen().empty());
}

BOOST_AUTO_TEST_CASE(a_condition_wait_keeps_its_locks_rank,
                     *boost::unit_test::precondition(order_checked)) {
    recording_handler rec;
    auto m_owner = fresh(lock_rank::std_watcher);
    ranked_mutex& m = *m_owner;
    auto outer_owner = fresh(lock_rank::watcher_join);
    ranked_mutex& outer = *outer_owner;
    ranked_condition_variable cv;
    bool ready = false;
    std::thread other([&] {
        {
            std::lock_guard lk(m);
            ready = true;
        }
        cv.notify_all();
    });
    {
        std::unique_lock lk(m);
        BOOST_TEST(cv.wait_for(lk, std::chrono::seconds(30), [&] { return ready; }));
        BOOST_TEST(lk.owns_lock());
        std::lock_guard wrong(outer); // still under `m`: reported
    }
    other.join();
    BOOST_TEST_REQUIRE(seen().size() == 1u);
    BOOST_TEST(seen()[0].held == lock_rank::std_watcher);
    BOOST_TEST(held_ranks::of_this_thread().size() == 0u);
}

BOOST_AUTO_TEST_CASE(a_call_out_with_a_lock_held_is_reported,
                     *boost::unit_test::precondition(order_checked)) {
    recording_handler rec;
    gpu_async::detail::expect_no_lock_held();
    BOOST_TEST(seen().empty());
    auto leaf_owner = fresh(lock_rank::cancel_link);
    ranked_mutex& leaf = *leaf_owner;
    {
        std::lock_guard lk(leaf);
        gpu_async::detail::expect_no_lock_held();
    }
    BOOST_TEST_REQUIRE(seen().size() == 1u);
    BOOST_TEST(seen()[0].held == lock_rank::cancel_link);
    BOOST_TEST(seen()[0].wanted == lock_rank::call_out);
    gpu_async::detail::expect_no_lock_held(); // let go: nothing more
    BOOST_TEST(seen().size() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_hosts_ranked_mutex
