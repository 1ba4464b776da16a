// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/host/wait_fd.hpp>

#if GPU_ASYNC_HAS_WAIT_FD

#include <gpu_async/core/error.hpp>
#include <gpu_async/device/sim_device.hpp>
#include <gpu_async/host/std_host.hpp>
#include <gpu_async/line/detail/line_watchers.hpp>
#include <gpu_async/line/line_health.hpp>
#include <gpu_async/line/line_life.hpp>

#include "common/eventually.hpp"
#include "common/slots.hpp"

#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace unit_hosts_wait_fd {

using namespace gpu_async;
using gpu_async::test::eventually;
using gpu_async::test::slot;

namespace {

// Bound of every wait for something that must happen: far beyond any scan; only a hang reaches
// it. A check that something does not happen polls for `quiet` after the watcher has had many
// scans' time (its park bound is 100 us).
constexpr auto long_wait = std::chrono::seconds(10);
constexpr auto quiet = std::chrono::milliseconds(20);

// poll(2) for readability, bounded.
bool readable(int fd, std::chrono::milliseconds timeout) {
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(timeout.count()));
    return r == 1 && (p.revents & POLLIN) != 0;
}

bool readable_now(int fd) {
    return readable(fd, std::chrono::milliseconds(0));
}

// Drains `n` until it has `count` entries, polling the fd (bounded) between drains.
std::vector<fd_notifier::entry> collect(fd_notifier& n, std::size_t count) {
    std::vector<fd_notifier::entry> out;
    const auto end = std::chrono::steady_clock::now() + long_wait;
    while (out.size() < count && std::chrono::steady_clock::now() < end) {
        if (!readable(n.fd(), std::chrono::duration_cast<std::chrono::milliseconds>(long_wait)))
            break;
        n.drain(out);
    }
    return out;
}

const std::error_code canceled = std::make_error_code(std::errc::operation_canceled);

} // namespace

BOOST_AUTO_TEST_SUITE(wait_fd_tests)

BOOST_AUTO_TEST_CASE(readable_only_once_the_word_reaches_the_target) {
    std_watcher w;
    fd_notifier n(w);
    completion_line line;
    BOOST_TEST_REQUIRE(n.fd() >= 0);
    BOOST_TEST(!n.error());
    n.watch(memory_descriptor(line, slot(2), 5), 7);
    BOOST_TEST(n.pending() == 1u);
    BOOST_TEST(w.pending() == 1u);
    BOOST_TEST(!readable(n.fd(), quiet));
    line.words[2].store(4, std::memory_order_release); // not yet
    BOOST_TEST(!readable(n.fd(), quiet));
    BOOST_TEST(n.ready() == 0u);
    line.words[2].store(5, std::memory_order_release);
    BOOST_TEST_REQUIRE(readable(n.fd(), long_wait));
    BOOST_TEST(n.ready() == 1u);
    BOOST_TEST(n.pending() == 0u);
    const std::vector<fd_notifier::entry> got = n.drain();
    BOOST_TEST_REQUIRE(got.size() == 1u);
    BOOST_TEST(got[0].cookie == 7u);
    BOOST_TEST(!got[0].error);
    // Drained: no longer readable, nothing left anywhere.
    BOOST_TEST(!readable_now(n.fd()));
    BOOST_TEST(n.drain().empty());
    BOOST_TEST(w.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(a_wait_already_complete_ends_at_the_next_scan) {
    std_watcher w;
    fd_notifier n(w);
    completion_line line;
    line.words[0].store(9);
    n.watch(memory_descriptor(line, slot(0), 3), 1);
    n.watch(memory_descriptor(line, slot(0), 9), 2);
    const auto got = collect(n, 2);
    BOOST_TEST_REQUIRE(got.size() == 2u);
    std::set<std::uint64_t> cookies;
    for (const auto& e : got) {
        BOOST_TEST(!e.error);
        cookies.insert(e.cookie);
    }
    BOOST_TEST((cookies == std::set<std::uint64_t>{1, 2}));
}

// The waits of one slot that one store completes end in ascending target order; a burst of
// entries is one write of the eventfd (its counter is 1), drained in parts.
BOOST_AUTO_TEST_CASE(one_store_ends_waits_in_target_order_with_one_wakeup) {
    std_watcher w;
    fd_notifier n(w);
    completion_line line;
    for (std::uint64_t t : {30u, 10u, 20u, 50u})
        n.watch(memory_descriptor(line, slot(1), t), t);
    line.words[1].store(30, std::memory_order_release);
    BOOST_TEST_REQUIRE(readable(n.fd(), long_wait));
    // The three entries come from one scan; wait until all are queued.
    BOOST_TEST_REQUIRE(eventually([&] { return n.ready() >= 3u; }, long_wait));
    BOOST_TEST_REQUIRE(n.ready() == 3u);
    std::vector<fd_notifier::entry> got;
    BOOST_TEST(n.drain(got, 2) == 2u);
    BOOST_TEST(readable_now(n.fd())); // one left: still readable
    BOOST_TEST(n.drain(got, 5) == 1u);
    BOOST_TEST(!readable_now(n.fd()));
    BOOST_TEST_REQUIRE(got.size() == 3u);
    BOOST_TEST(got[0].cookie == 10u);
    BOOST_TEST(got[1].cookie == 20u);
    BOOST_TEST(got[2].cookie == 30u);
    BOOST_TEST(n.pending() == 1u);
    // The eventfd itself: written once for a burst (read here directly, then the queue is empty).
    line.words[1].store(60, std::memory_order_release);
    n.watch(memory_descriptor(line, slot(2), 1), 1);
    n.watch(memory_descriptor(line, slot(2), 2), 2);
    line.words[2].store(2, std::memory_order_release);
    BOOST_TEST_REQUIRE(eventually([&] { return n.ready() >= 3u; }, long_wait));
    BOOST_TEST_REQUIRE(n.ready() == 3u);
    std::uint64_t counter = 0;
    BOOST_TEST(::read(n.fd(), &counter, sizeof counter) == static_cast<ssize_t>(sizeof counter));
    BOOST_TEST(counter == 1u);
    BOOST_TEST(n.drain().size() == 3u);
}

BOOST_AUTO_TEST_CASE(many_waits_on_one_fd) {
    std_watcher w;
    fd_notifier n(w);
    std::deque<completion_line> lines(3);
    std::map<std::uint64_t, std::uint64_t> expected; // cookie -> target
    std::uint64_t cookie = 0;
    for (auto& line : lines)
        for (std::size_t s = 0; s < line_words; ++s)
            for (std::uint64_t t = 1; t <= 5; ++t) {
                n.watch(memory_descriptor(line, slot(s), t), cookie);
                expected[cookie++] = t;
            }
    BOOST_TEST(n.pending() == expected.size());
    BOOST_TEST(!readable(n.fd(), quiet));
    // Targets up to 3 complete first, then the rest.
    for (auto& line : lines)
        for (std::size_t s = 0; s < line_words; ++s)
            line.words[s].store(3, std::memory_order_release);
    auto got = collect(n, expected.size() * 3 / 5);
    BOOST_TEST_REQUIRE(got.size() == expected.size() * 3 / 5);
    for (const auto& e : got) {
        BOOST_TEST(!e.error);
        BOOST_TEST(expected.at(e.cookie) <= 3u);
    }
    BOOST_TEST(!readable(n.fd(), quiet));
    for (auto& line : lines)
        for (std::size_t s = 0; s < line_words; ++s)
            line.words[s].store(5, std::memory_order_release);
    auto rest = collect(n, expected.size() * 2 / 5);
    got.insert(got.end(), rest.begin(), rest.end());
    BOOST_TEST_REQUIRE(got.size() == expected.size());
    std::set<std::uint64_t> seen;
    for (const auto& e : got)
        seen.insert(e.cookie);
    BOOST_TEST(seen.size() == expected.size()); // each exactly once
    BOOST_TEST(n.pending() == 0u);
    BOOST_TEST(w.pending() == 0u);
}

// Many fds (one wait each) in one epoll set: each becomes readable when, and only when, its own
// word arrives.
BOOST_AUTO_TEST_CASE(many_fds_in_one_epoll_set) {
    std_watcher w;
    constexpr std::size_t count = 64;
    std::deque<completion_line> lines(count / line_words);
    std::vector<std::unique_ptr<wait_fd>> fds;
    const int ep = ::epoll_create1(EPOLL_CLOEXEC);
    BOOST_TEST_REQUIRE(ep >= 0);
    for (std::size_t i = 0; i < count; ++i) {
        completion_line& line = lines[i / line_words];
        fds.push_back(std::make_unique<wait_fd>(
            w, memory_descriptor(line, slot(i % line_words), std::uint64_t{1})));
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.u64 = i;
        BOOST_TEST_REQUIRE(::epoll_ctl(ep, EPOLL_CTL_ADD, fds.back()->fd(), &ev) == 0);
    }
    // Complete the even ones, in a random order.
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < count; i += 2)
        order.push_back(i);
    std::shuffle(order.begin(), order.end(), std::mt19937_64(17));
    for (std::size_t i : order)
        lines[i / line_words].words[i % line_words].store(1, std::memory_order_release);
    std::set<std::size_t> done;
    const auto end = std::chrono::steady_clock::now() + long_wait;
    while (done.size() < order.size() && std::chrono::steady_clock::now() < end) {
        epoll_event evs[16];
        const int k = ::epoll_wait(ep, evs, 16, 1000);
        for (int j = 0; j < k; ++j) {
            const std::size_t i = evs[j].data.u64;
            BOOST_TEST(i % 2 == 0u);
            const std::optional<std::error_code> r = fds[i]->result();
            BOOST_TEST_REQUIRE(r.has_value());
            BOOST_TEST(!*r);
            BOOST_TEST(done.insert(i).second);
            BOOST_TEST(!readable_now(fds[i]->fd())); // result() consumed the readiness
            BOOST_TEST((fds[i]->result() == r));     // and is kept
        }
    }
    BOOST_TEST(done.size() == order.size());
    epoll_event evs[16];
    BOOST_TEST(::epoll_wait(ep, evs, 16, static_cast<int>(quiet.count())) == 0);
    for (std::size_t i = 1; i < count; i += 2)
        BOOST_TEST(!fds[i]->result().has_value());
    ::close(ep);
    fds.clear();
    BOOST_TEST(w.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(cancel_ends_the_waits_of_a_cookie) {
    std_watcher w;
    fd_notifier n(w);
    completion_line line;
    n.watch(memory_descriptor(line, slot(0), 1), 1);
    n.watch(memory_descriptor(line, slot(1), 1), 1);
    n.watch(memory_descriptor(line, slot(2), 1), 2);
    BOOST_TEST(w.pending() == 3u);
    BOOST_TEST(n.cancel(1) == 2u);
    BOOST_TEST(n.cancel(1) == 0u);
    BOOST_TEST(n.cancel(99) == 0u);
    BOOST_TEST(w.pending() == 1u); // the registrations left the watcher
    BOOST_TEST(readable_now(n.fd()));
    auto got = n.drain();
    BOOST_TEST_REQUIRE(got.size() == 2u);
    for (const auto& e : got) {
        BOOST_TEST(e.cookie == 1u);
        BOOST_TEST((e.error == canceled));
    }
    // The cancelled words arriving later end nothing; the other wait completes.
    for (std::size_t s = 0; s < 3; ++s)
        line.words[s].store(1, std::memory_order_release);
    got = collect(n, 1);
    BOOST_TEST_REQUIRE(got.size() == 1u);
    BOOST_TEST(got[0].cookie == 2u);
    BOOST_TEST(!got[0].error);
    BOOST_TEST(!readable(n.fd(), quiet));
    // A wait that ended already (its entry queued, not drained) is not cancelled again.
    n.watch(memory_descriptor(line, slot(3), 0), 3);
    BOOST_TEST_REQUIRE(readable(n.fd(), long_wait));
    BOOST_TEST(n.cancel(3) == 0u);
    got = n.drain();
    BOOST_TEST_REQUIRE(got.size() == 1u);
    BOOST_TEST(!got[0].error);
}

BOOST_AUTO_TEST_CASE(wait_fd_cancel_and_result) {
    std_watcher w;
    completion_line line;
    wait_fd f(w, memory_descriptor(line, slot(0), 1));
    BOOST_TEST(!f.result().has_value());
    BOOST_TEST(!readable(f.fd(), quiet));
    BOOST_TEST(f.cancel());
    BOOST_TEST(!f.cancel());
    BOOST_TEST(readable_now(f.fd()));
    const auto r = f.result();
    BOOST_TEST_REQUIRE(r.has_value());
    BOOST_TEST((*r == canceled));
    BOOST_TEST(!readable_now(f.fd()));
    line.words[0].store(1);
    BOOST_TEST(!readable(f.fd(), quiet));
    BOOST_TEST((f.result() == r));
    f.close();
    BOOST_TEST(f.fd() == -1);
    BOOST_TEST((f.result() == r));
}

BOOST_AUTO_TEST_CASE(close_ends_every_wait_and_the_fd) {
    std_watcher w;
    completion_line line;
    fd_notifier n(w);
    for (std::uint64_t t = 1; t <= 10; ++t)
        n.watch(memory_descriptor(line, slot(t % line_words), t), t);
    line.words[0].store(8, std::memory_order_release); // ends target 8 ...
    BOOST_TEST_REQUIRE(readable(n.fd(), long_wait));   // ... queued, not drained
    BOOST_TEST(w.pending() == 9u);
    const int fd = n.fd();
    n.close();
    BOOST_TEST(n.fd() == -1);
    BOOST_TEST(n.pending() == 0u);
    BOOST_TEST(n.ready() == 0u);
    BOOST_TEST(n.drain().empty());
    BOOST_TEST(n.cancel(1) == 0u);
    BOOST_TEST((n.error() == std::errc::bad_file_descriptor));
    BOOST_TEST(w.pending() == 0u); // every registration left the watcher
    // The descriptor is closed.
    BOOST_TEST(::fcntl(fd, F_GETFD) == -1);
    BOOST_TEST(errno == EBADF);
    try {
        n.watch(memory_descriptor(line, slot(0), 100), 1);
        BOOST_FAIL("watch on a closed notifier must throw");
    } catch (const std::system_error& e) {
        BOOST_TEST((e.code() == std::errc::bad_file_descriptor));
    }
    n.close(); // idempotent
    // Words arriving after the close end nothing (the watcher would have nothing to scan).
    for (std::size_t s = 0; s < line_words; ++s)
        line.words[s].store(100, std::memory_order_release);
    BOOST_TEST(w.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(move_transfers_the_notifier) {
    std_watcher w;
    completion_line line;
    fd_notifier a(w);
    const int fd = a.fd();
    a.watch(memory_descriptor(line, slot(0), 1), 5);
    fd_notifier b(std::move(a));
    BOOST_TEST(a.fd() == -1);
    BOOST_TEST(a.pending() == 0u);
    BOOST_TEST((a.error() == std::errc::bad_file_descriptor));
    BOOST_CHECK_THROW(a.watch(memory_descriptor(line, slot(0), 1), 1), std::system_error);
    a.close(); // harmless
    BOOST_TEST(b.fd() == fd);
    fd_notifier c(w);
    c.watch(memory_descriptor(line, slot(1), 1), 6);
    c = std::move(b); // c's own wait ends without an entry; it holds b's now
    BOOST_TEST(c.fd() == fd);
    BOOST_TEST(c.pending() == 1u);
    BOOST_TEST(w.pending() == 1u);
    line.words[0].store(1);
    const auto got = collect(c, 1);
    BOOST_TEST_REQUIRE(got.size() == 1u);
    BOOST_TEST(got[0].cookie == 5u);
}

// Teardown: the watcher stops with waits pending. Each ends with errc::shut_down, the fd is
// readable when shutdown() returns and stays readable; a later watch() ends at once.
BOOST_AUTO_TEST_CASE(watcher_shutdown_makes_the_fd_readable_with_an_error) {
    auto w = std::make_unique<std_watcher>();
    completion_line line;
    fd_notifier n(*w);
    wait_fd single(*w, memory_descriptor(line, slot(7), 1));
    for (std::uint64_t c = 1; c <= 3; ++c)
        n.watch(memory_descriptor(line, slot(c), 1), c);
    BOOST_TEST(!readable(n.fd(), quiet));
    w->shutdown();
    BOOST_TEST(readable_now(n.fd()));
    BOOST_TEST((n.error() == errc::shut_down));
    BOOST_TEST(n.pending() == 0u);
    auto got = n.drain();
    BOOST_TEST_REQUIRE(got.size() == 3u);
    for (const auto& e : got)
        BOOST_TEST((e.error == errc::shut_down));
    BOOST_TEST(readable_now(n.fd())); // for good, like end of file
    BOOST_TEST(readable_now(n.fd()));
    const auto r = single.result();
    BOOST_TEST_REQUIRE(r.has_value());
    BOOST_TEST((*r == errc::shut_down));
    BOOST_TEST(readable_now(single.fd()));
    // The watcher may go now: the notifier holds nothing of it.
    w.reset();
    n.watch(memory_descriptor(line, slot(0), 1), 9);
    got = n.drain();
    BOOST_TEST_REQUIRE(got.size() == 1u);
    BOOST_TEST(got[0].cookie == 9u);
    BOOST_TEST((got[0].error == errc::shut_down));
    BOOST_TEST(n.cancel(9) == 0u);
    n.close();
    single.close();
}

// With nothing pending, a stop still makes the fd readable, with error() saying why.
BOOST_AUTO_TEST_CASE(watcher_destroyed_with_nothing_pending) {
    auto w = std::make_unique<std_watcher>();
    fd_notifier n(*w);
    BOOST_TEST(!readable(n.fd(), quiet));
    w.reset(); // the destructor stops as shutdown() does
    BOOST_TEST(readable_now(n.fd()));
    BOOST_TEST((n.error() == errc::shut_down));
    BOOST_TEST(n.drain().empty());
    BOOST_TEST(readable_now(n.fd()));
}

BOOST_AUTO_TEST_CASE(a_notifier_of_a_stopped_watcher_is_shut_down_from_the_start) {
    std_watcher w;
    w.shutdown();
    fd_notifier n(w);
    BOOST_TEST(readable_now(n.fd()));
    BOOST_TEST((n.error() == errc::shut_down));
    completion_line line;
    n.watch(memory_descriptor(line, slot(0), 1), 4);
    const auto got = n.drain();
    BOOST_TEST_REQUIRE(got.size() == 1u);
    BOOST_TEST((got[0].error == errc::shut_down));
    BOOST_TEST(w.pending() == 0u);
    wait_fd f(w, memory_descriptor(line, slot(0), 1));
    BOOST_TEST((f.result() == std::optional<std::error_code>(make_error_code(errc::shut_down))));
}

// Targets near 2^64 under the wrapping rule.
BOOST_AUTO_TEST_CASE(wrap_around_targets) {
    std_watcher w;
    fd_notifier n(w);
    completion_line line;
    constexpr std::uint64_t top = ~std::uint64_t{0};
    line.words[0].store(top - 2);
    n.watch(memory_descriptor(line, slot(0), top - 3), 1); // behind: complete
    n.watch(memory_descriptor(line, slot(0), top), 2);     // ahead, before the wrap
    n.watch(memory_descriptor(line, slot(0), 0), 3);       // ahead, the wrap itself
    n.watch(memory_descriptor(line, slot(0), 2), 4);       // ahead, after the wrap
    auto got = collect(n, 1);
    BOOST_TEST_REQUIRE(got.size() == 1u);
    BOOST_TEST(got[0].cookie == 1u);
    BOOST_TEST(!readable(n.fd(), quiet));
    line.words[0].store(top, std::memory_order_release);
    got = collect(n, 1);
    BOOST_TEST_REQUIRE(got.size() == 1u);
    BOOST_TEST(got[0].cookie == 2u);
    BOOST_TEST(!readable(n.fd(), quiet));
    line.words[0].store(1, std::memory_order_release); // wrapped past 0, not yet 2
    got = collect(n, 1);
    BOOST_TEST_REQUIRE(got.size() == 1u);
    BOOST_TEST(got[0].cookie == 3u);
    BOOST_TEST(!readable(n.fd(), quiet));
    line.words[0].store(2, std::memory_order_release);
    got = collect(n, 1);
    BOOST_TEST_REQUIRE(got.size() == 1u);
    BOOST_TEST(got[0].cookie == 4u);
    for (const auto& e : got)
        BOOST_TEST(!e.error);
    BOOST_TEST(n.pending() == 0u);
}

// Line retirement ends the waits on the line (operation_canceled), as a simulated stream that is
// given back retires its own line; waits on other lines go on.
BOOST_AUTO_TEST_CASE(retired_lines_end_their_waits) {
    std_watcher w;
    fd_notifier n(w);
    completion_line mine;
    completion_line other;
    n.watch(memory_descriptor(mine, slot(0), 1), 1);
    n.watch(memory_descriptor(mine, slot(5), 1), 2);
    n.watch(memory_descriptor(other, slot(0), 1), 3);
    retire_line(mine);
    BOOST_TEST(readable_now(n.fd()));
    BOOST_TEST(w.pending() == 1u);
    auto got = n.drain();
    BOOST_TEST_REQUIRE(got.size() == 2u);
    for (const auto& e : got)
        BOOST_TEST((e.error == canceled));
    other.words[0].store(1);
    got = collect(n, 1);
    BOOST_TEST_REQUIRE(got.size() == 1u);
    BOOST_TEST(got[0].cookie == 3u);
    BOOST_TEST(!got[0].error);

    sim_device dev;
    auto stream = dev.make_stream();
    const std::uint64_t seq = stream->enqueue(std::chrono::seconds(30));
    n.watch(stream->descriptor_for(seq), 4);
    stream.reset(); // gives the stream back: its line is retired
    BOOST_TEST(readable_now(n.fd()));
    got = n.drain();
    BOOST_TEST_REQUIRE(got.size() == 1u);
    BOOST_TEST(got[0].cookie == 4u);
    BOOST_TEST((got[0].error == canceled));
    BOOST_TEST(w.pending() == 0u);
}

// The notifier is the sink of its waits, which live in the watcher's engine: a slot's fault, a
// slot's give-back and a line's retirement each queue their entry on the calling thread, before
// the call returns, and the fd is readable then.
BOOST_AUTO_TEST_CASE(faults_give_backs_and_retirements_queue_entries_before_they_return) {
    std_watcher w;
    fd_notifier n(w);
    completion_line line;
    const std::uint64_t g = adopt_line(line);
    n.watch(memory_descriptor(line, slot(0), 9, g), 1);
    n.watch(memory_descriptor(line, slot(1), 9, g), 2);
    n.watch(memory_descriptor(line, slot(2), 3, g), 3);
    BOOST_TEST(n.pending() == 3u);

    fault_slot(line, slot(0));
    BOOST_TEST(readable_now(n.fd()));
    auto got = n.drain();
    BOOST_TEST_REQUIRE(got.size() == 1u);
    BOOST_TEST(got[0].cookie == 1u);
    BOOST_TEST((got[0].error == errc::device_fault));

    retire_slot(line, slot(1));
    got = n.drain();
    BOOST_TEST_REQUIRE(got.size() == 1u);
    BOOST_TEST(got[0].cookie == 2u);
    BOOST_TEST((got[0].error == canceled));

    retire_line(line);
    got = n.drain();
    BOOST_TEST_REQUIRE(got.size() == 1u);
    BOOST_TEST(got[0].cookie == 3u);
    BOOST_TEST((got[0].error == canceled));
    BOOST_TEST(n.pending() == 0u);
    BOOST_TEST(w.pending() == 0u);
    BOOST_TEST(!readable_now(n.fd()));
}

// Work on the simulated device, through the fd.
BOOST_AUTO_TEST_CASE(awaits_simulated_device_work) {
    std_watcher w;
    sim_device dev({.workers = 2});
    fd_notifier n(w);
    std::vector<sim_stream_handle> streams;
    for (std::uint64_t i = 0; i < 12; ++i) {
        streams.push_back(dev.make_stream());
        const std::uint64_t seq = streams.back()->enqueue(std::chrono::microseconds(200 + 100 * i));
        n.watch(streams.back()->descriptor_for(seq), i);
    }
    const auto got = collect(n, 12);
    BOOST_TEST_REQUIRE(got.size() == 12u);
    for (const auto& e : got) {
        BOOST_TEST(!e.error);
        BOOST_TEST(sequence_reached(streams[e.cookie]->word(), streams[e.cookie]->tail()));
    }
}

// Cancel racing the completion, from two threads: each wait ends exactly once, either way.
BOOST_AUTO_TEST_CASE(cancel_races_completion) {
    std_watcher w;
    fd_notifier n(w);
    constexpr std::uint64_t rounds = 400;
    std::deque<completion_line> lines(rounds);
    for (std::uint64_t i = 0; i < rounds; ++i)
        n.watch(memory_descriptor(lines[i], slot(0), 1), i);
    std::thread producer([&] {
        for (auto& line : lines)
            line.words[0].store(1, std::memory_order_release);
    });
    std::size_t cancelled = 0;
    for (std::uint64_t i = 0; i < rounds; ++i)
        cancelled += n.cancel(i);
    producer.join();
    const auto got = collect(n, rounds);
    BOOST_TEST_REQUIRE(got.size() == rounds);
    std::set<std::uint64_t> seen;
    std::size_t aborted = 0;
    for (const auto& e : got) {
        BOOST_TEST(seen.insert(e.cookie).second);
        if (e.error) {
            BOOST_TEST((e.error == canceled));
            ++aborted;
        }
    }
    BOOST_TEST(aborted == cancelled);
    BOOST_TEST(!readable(n.fd(), quiet)); // nothing more arrives
    BOOST_TEST(w.pending() == 0u);
}

// A retirement ends the waits on its own thread (the notifier is their sink) while another
// thread cancels some or closes the notifier: each wait ends once (one entry, or none after the
// close), and nothing is left registered with the watcher.
BOOST_AUTO_TEST_CASE(a_retirement_racing_cancel_or_close_ends_each_wait_once) {
    std_watcher w;
    constexpr int rounds = 200;
    constexpr std::uint64_t waits = 8;
    for (int round = 0; round < rounds; ++round) {
        const bool closing = round % 2 == 1;
        fd_notifier n(w);
        auto line = std::make_unique<completion_line>();
        const std::uint64_t g = adopt_line(*line);
        for (std::uint64_t i = 0; i < waits; ++i)
            n.watch(memory_descriptor(*line, slot(i % 4), 100, g), i % 2);
        std::atomic<bool> go{false};
        std::size_t cancelled = 0;
        std::thread other([&] {
            while (!go.load())
                std::this_thread::yield();
            if (closing)
                n.close();
            else
                cancelled = n.cancel(0);
        });
        go = true;
        retire_line(*line);
        other.join();
        BOOST_TEST(n.pending() == 0u);
        BOOST_TEST(w.pending() == 0u);
        if (closing) {
            BOOST_TEST(n.fd() == -1);
            BOOST_TEST(n.ready() == 0u);
            continue;
        }
        const auto got = n.drain();
        BOOST_TEST_REQUIRE(got.size() == waits);
        std::map<std::uint64_t, std::size_t> per_cookie;
        for (const auto& e : got) {
            BOOST_TEST((e.error == canceled));
            ++per_cookie[e.cookie];
        }
        BOOST_TEST(per_cookie[0] == waits / 2);
        BOOST_TEST(per_cookie[1] == waits / 2);
        BOOST_TEST(cancelled <= waits / 2);
    }
}

// A retirement ends the notifier's waits on its own thread while another thread shuts the
// watcher down: each wait ends once, by whichever came first (operation_canceled from the
// retirement, shut_down from the stop), and nothing is left registered.
BOOST_AUTO_TEST_CASE(a_retirement_racing_the_watchers_shutdown_ends_each_wait_once) {
    constexpr int rounds = 100;
    constexpr std::uint64_t waits = 8;
    int by_retirement = 0, by_shutdown = 0;
    for (int round = 0; round < rounds; ++round) {
        std_watcher w;
        fd_notifier n(w);
        auto line = std::make_unique<completion_line>();
        const std::uint64_t g = adopt_line(*line);
        for (std::uint64_t i = 0; i < waits; ++i)
            n.watch(memory_descriptor(*line, slot(i % 4), 100, g), i);
        // Both threads meet before they act; which acts on which thread alternates.
        std::atomic<int> arrived{0};
        auto meet = [&] {
            ++arrived;
            while (arrived.load() < 2)
                std::this_thread::yield();
        };
        const bool retire_here = round % 2 == 0;
        std::thread other([&] {
            meet();
            retire_here ? w.shutdown() : retire_line(*line);
        });
        meet();
        retire_here ? retire_line(*line) : w.shutdown();
        other.join();
        BOOST_TEST(n.pending() == 0u);
        BOOST_TEST(w.pending() == 0u);
        const auto got = n.drain();
        BOOST_TEST_REQUIRE(got.size() == waits);
        std::set<std::uint64_t> seen;
        for (const auto& e : got) {
            BOOST_TEST(seen.insert(e.cookie).second);
            BOOST_TEST((e.error == canceled || e.error == errc::shut_down));
            (e.error == canceled ? by_retirement : by_shutdown) += 1;
        }
    }
    BOOST_TEST(by_retirement + by_shutdown == rounds * static_cast<int>(waits));
    BOOST_TEST_MESSAGE("ended by the retirement: " << by_retirement
                                                   << ", by the shutdown: " << by_shutdown);
}

// A wait found complete as it registers is queued by the watcher thread at its next pass, or,
// when a retirement of its line comes first, by the retirement before it returns: either way
// once, with its success.
BOOST_AUTO_TEST_CASE(a_wait_complete_before_its_line_is_retired_keeps_its_success) {
    std_watcher w;
    fd_notifier n(w);
    for (int round = 0; round < 200; ++round) {
        auto line = std::make_unique<completion_line>();
        const std::uint64_t g = adopt_line(*line);
        line->words[1].store(3);
        n.watch(memory_descriptor(*line, slot(1), 3, g), static_cast<std::uint64_t>(round));
        retire_line(*line);
        const auto got = collect(n, 1);
        BOOST_TEST_REQUIRE(got.size() == 1u);
        BOOST_TEST(got[0].cookie == static_cast<std::uint64_t>(round));
        BOOST_TEST(!got[0].error);
        BOOST_TEST(n.pending() == 0u);
    }
    BOOST_TEST(!readable(n.fd(), quiet)); // nothing more arrives
}

// watch, cancel, drain and close from several threads at once, racing completions.
BOOST_AUTO_TEST_CASE(concurrent_use) {
    std_watcher w;
    constexpr std::size_t threads = 4;
    constexpr std::uint64_t per_thread = 200;
    std::deque<completion_line> lines(threads);
    fd_notifier n(w);
    std::vector<std::thread> ts;
    for (std::size_t t = 0; t < threads; ++t)
        ts.emplace_back([&, t] {
            for (std::uint64_t k = 1; k <= per_thread; ++k) {
                const std::uint64_t cookie = t * per_thread + k;
                n.watch(memory_descriptor(lines[t], slot(0), k), cookie);
                lines[t].words[0].store(k, std::memory_order_release);
                if (k % 3 == 0) n.cancel(cookie);
            }
        });
    std::set<std::uint64_t> seen;
    std::vector<fd_notifier::entry> got;
    const auto end = std::chrono::steady_clock::now() + long_wait;
    while (seen.size() < threads * per_thread && std::chrono::steady_clock::now() < end) {
        if (!readable(n.fd(), std::chrono::milliseconds(1000))) continue;
        got.clear();
        n.drain(got);
        for (const auto& e : got)
            BOOST_TEST(seen.insert(e.cookie).second);
    }
    for (auto& t : ts)
        t.join();
    BOOST_TEST(seen.size() == threads * per_thread);
    BOOST_TEST(n.pending() == 0u);
}

// Closing (and destroying) notifiers while the watcher is completing their waits: no entry is
// lost to a freed notifier, no fd is written after it closed, nothing stays registered.
BOOST_AUTO_TEST_CASE(close_races_completion) {
    std_watcher w;
    for (int round = 0; round < 200; ++round) {
        completion_line line;
        auto n = std::make_unique<fd_notifier>(w);
        for (std::uint64_t t = 1; t <= 4; ++t)
            n->watch(memory_descriptor(line, slot(t), 1), t);
        std::thread producer([&] {
            for (std::size_t s = 1; s <= 4; ++s)
                line.words[s].store(1, std::memory_order_release);
        });
        if (round % 2 == 0)
            n->close();
        else
            n.reset();
        producer.join();
        BOOST_TEST_REQUIRE(w.pending() == 0u);
    }
}

// A notifier closed from the watcher thread itself (inside another registration's callback),
// with a wait of its own completing in the same scan.
BOOST_AUTO_TEST_CASE(close_from_the_watcher_thread) {
    std_watcher w;
    completion_line line;
    auto n = std::make_unique<fd_notifier>(w);
    n->watch(memory_descriptor(line, slot(1), 1), 1);
    std::atomic<bool> closed{false};
    watch_handle h = w.on_complete(memory_descriptor(line, slot(0), 1), [&] {
        n->close();
        closed = true;
    });
    line.words[1].store(1, std::memory_order_release);
    line.words[0].store(1, std::memory_order_release);
    BOOST_TEST_REQUIRE(h.wait_for(long_wait));
    BOOST_TEST(closed.load());
    BOOST_TEST(n->fd() == -1);
    BOOST_TEST(w.pending() == 0u);
    n.reset();
}

// The eventfd cannot be made (the process is out of descriptors): the constructor throws
// errno's code and leaves nothing registered with the watcher.
BOOST_AUTO_TEST_CASE(eventfd_failure_throws) {
    std_watcher w;
    rlimit old{};
    BOOST_TEST_REQUIRE(::getrlimit(RLIMIT_NOFILE, &old) == 0);
    const int lowest = ::open("/dev/null", O_RDONLY | O_CLOEXEC); // every one below is open
    BOOST_TEST_REQUIRE(lowest >= 0);
    ::close(lowest);
    rlimit tight = old;
    tight.rlim_cur = static_cast<rlim_t>(lowest);
    BOOST_TEST_REQUIRE(::setrlimit(RLIMIT_NOFILE, &tight) == 0);
    std::error_code code;
    try {
        fd_notifier n(w);
    } catch (const std::system_error& e) {
        code = e.code();
    }
    BOOST_TEST_REQUIRE(::setrlimit(RLIMIT_NOFILE, &old) == 0);
    BOOST_TEST((code == std::errc::too_many_files_open));
    fd_notifier after(w); // and works again
    BOOST_TEST(after.fd() >= 0);
    BOOST_TEST(w.pending() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_hosts_wait_fd

#endif // GPU_ASYNC_HAS_WAIT_FD
