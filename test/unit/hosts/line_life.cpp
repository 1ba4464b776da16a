// SPDX-License-Identifier: BSL-1.0
// A line's life as the std host sees it: the std_watcher and the FILL executor's reactor honour
// retirement and faults, a retirement started from a watcher's callback while another waits for
// that callback completes, and the fd notifier reports stale descriptors and faults.
#include <gpu_async/fill/std_idle.hpp>
#include <gpu_async/host/std_host.hpp>
#include <gpu_async/host/wait_fd.hpp>

#include <gpu_async/core/error.hpp>
#include <gpu_async/device/sim_device.hpp>
#include <gpu_async/fill/fill_executor.hpp>
#include <gpu_async/fill/reactor.hpp>
#include <gpu_async/line/detail/line_watchers.hpp>
#include <gpu_async/line/line_health.hpp>
#include <gpu_async/line/line_life.hpp>

#include "common/eventually.hpp"
#include "common/manual_device.hpp"
#include "common/race_rounds.hpp"

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

namespace unit_hosts_line_life {

using namespace gpu_async;
using gpu_async::test::eventually;
using gpu_async::test::manual;
using namespace std::chrono_literals;

namespace {

// Bound of every wait for something that must happen: only a hang reaches it.
constexpr auto bound = 10s;

} // namespace

BOOST_AUTO_TEST_SUITE(line_life_hosts_suite)

BOOST_AUTO_TEST_CASE(the_watcher_ends_a_retired_lines_registrations_and_never_fires_them) {
    std_watcher w;
    sim_device dev(manual());
    auto first = dev.make_stream();
    const memory_descriptor d = first->descriptor_for(first->enqueue(1us));
    std::promise<std::error_code> ended;
    watch_handle on_end = w.on_end(d, [&](std::error_code ec) { ended.set_value(ec); });
    std::atomic<int> callbacks{0};
    watch_handle on_complete = w.on_complete(d, [&] { ++callbacks; });
    watch_handle future_form = w.watch(d);
    first.reset(); // given back: the line is retired
    auto f = ended.get_future();
    BOOST_TEST_REQUIRE((f.wait_for(bound) == std::future_status::ready));
    BOOST_TEST((f.get() == std::errc::operation_canceled));
    BOOST_TEST_REQUIRE(future_form.wait_for(bound));
    BOOST_TEST((future_form.error() == std::errc::operation_canceled));
    BOOST_TEST_REQUIRE(on_complete.wait_for(bound));
    BOOST_TEST((on_complete.error() == std::errc::operation_canceled));
    // The line's next stream passes the old target: nothing of the old registrations runs.
    auto second = dev.make_stream();
    second->enqueue(1us);
    second->enqueue(1us);
    dev.step_all();
    BOOST_TEST(d.is_complete());
    const watch_handle probe = w.watch(second->descriptor()); // a scan after the store
    BOOST_TEST_REQUIRE(probe.wait_for(bound));
    BOOST_TEST(!probe.error());
    BOOST_TEST(callbacks.load() == 0);
    BOOST_TEST(w.pending() == 0u);
}

// A stream on a shared device line given back retires its slot alone: the watcher ends that
// slot's registrations and keeps the other slots'.
BOOST_AUTO_TEST_CASE(the_watcher_ends_a_retired_slots_registrations_only) {
    std_watcher w;
    sim_device dev(manual());
    completion_line& line = dev.make_line();
    auto gone = dev.make_stream(line, *slot_id::at(1));
    auto stays = dev.make_stream(line, *slot_id::at(6));
    const watch_handle on_gone = w.watch(gone->descriptor_for(gone->enqueue(1us)));
    const watch_handle on_stays = w.watch(stays->descriptor_for(stays->enqueue(1us)));
    gone.reset();
    BOOST_TEST_REQUIRE(on_gone.wait_for(bound));
    BOOST_TEST((on_gone.error() == std::errc::operation_canceled));
    BOOST_TEST(!on_stays.ready());
    dev.step_all();
    BOOST_TEST_REQUIRE(on_stays.wait_for(bound));
    BOOST_TEST(!on_stays.error());
}

BOOST_AUTO_TEST_CASE(the_watcher_ends_stale_and_faulted_descriptors_unread) {
    std_watcher w;
    sim_device dev(manual());
    auto gone = dev.make_stream();
    const memory_descriptor stale = gone->descriptor_for(gone->enqueue(1us));
    gone.reset();
    std::promise<std::error_code> a;
    watch_handle ha = w.on_end(stale, [&](std::error_code ec) { a.set_value(ec); });
    auto fa = a.get_future();
    BOOST_TEST_REQUIRE((fa.wait_for(bound) == std::future_status::ready));
    BOOST_TEST((fa.get() == errc::stale_descriptor));

    auto s = dev.make_stream();
    s->enqueue_fault();
    const memory_descriptor behind = s->descriptor_for(s->enqueue(1us));
    std::promise<std::error_code> pending_at_fault;
    watch_handle hp = w.on_end(behind, [&](std::error_code ec) { pending_at_fault.set_value(ec); });
    dev.step_all(); // the fault: the registration ends, and later ones at once
    auto fp = pending_at_fault.get_future();
    BOOST_TEST_REQUIRE((fp.wait_for(bound) == std::future_status::ready));
    BOOST_TEST((fp.get() == errc::device_fault));
    watch_handle later = w.watch(behind);
    BOOST_TEST_REQUIRE(later.wait_for(bound));
    BOOST_TEST((later.error() == errc::device_fault));
}

// The FILL executor's reactor hears of no retirement or fault (it runs on its caller's thread
// with no lock to take): it judges its waits again at its next fire() once a line's life moved,
// before the scan reads their lines. A retired line and a stale descriptor end its waits, never
// with success; at a fault, what the stream stored before it still completes.
BOOST_AUTO_TEST_CASE(the_fill_reactor_ends_retired_stale_and_faulted_waits) {
    sim_device dev(manual());
    reactor r(library_line_life());
    const mono_ns now{1};
    auto first = dev.make_stream();
    const memory_descriptor old = first->descriptor_for(first->enqueue(1us));
    reactor_waiter retired;
    r.watch(old, std::nullopt, retired);
    BOOST_TEST(r.fire(now) == 0u);
    first.reset(); // the line is retired; the reactor is not told
    auto second = dev.make_stream();
    second->enqueue(1us);
    second->enqueue(1us);
    dev.step_all();
    BOOST_TEST_REQUIRE(old.is_complete()); // the line's next stream passed the old target
    BOOST_TEST(r.fire(now) == 1u);
    BOOST_TEST(r.pop_fired() == &retired);
    BOOST_TEST(!retired.completed);
    BOOST_TEST((retired.end == wait_end::aborted));

    reactor_waiter stale;
    r.watch(old, std::nullopt, stale);
    BOOST_TEST(r.fire(now) == 1u);
    BOOST_TEST(r.pop_fired() == &stale);
    BOOST_TEST(!stale.completed);
    BOOST_TEST((stale.end == wait_end::stale));
    BOOST_TEST(!r.ready(old).await_ready()); // judged before its word is read

    auto s = dev.make_stream();
    const memory_descriptor before = s->descriptor_for(s->enqueue(1us));
    s->enqueue_fault();
    const memory_descriptor behind = s->descriptor_for(s->enqueue(1us));
    reactor_waiter done;
    reactor_waiter faulted;
    r.watch(before, std::nullopt, done);
    r.watch(behind, std::nullopt, faulted);
    BOOST_TEST(r.fire(now) == 0u);
    dev.step_all(); // the first item, then the fault
    BOOST_TEST(r.fire(now) == 2u);
    BOOST_TEST(r.pop_fired() == &done);
    BOOST_TEST(r.pop_fired() == &faulted);
    BOOST_TEST(done.completed);
    BOOST_TEST(!faulted.completed);
    BOOST_TEST((faulted.end == wait_end::faulted));
    BOOST_TEST(r.empty());
}

// The line life is passed in, never installed for the process: a reactor given none judges
// nothing (every descriptor live, as for lines the caller owns); one given the library's, at
// construction or by its idle at a turn, ends a stale descriptor's wait stale.
BOOST_AUTO_TEST_CASE(the_fill_reactor_judges_with_the_line_life_it_is_given) {
    sim_device dev(manual());
    auto first = dev.make_stream();
    const memory_descriptor old = first->descriptor_for(first->enqueue(1us));
    first.reset(); // retired: `old` is stale
    reactor blind;
    BOOST_TEST((blind.read_checked(old) == line_read::pending));
    reactor given(library_line_life());
    BOOST_TEST((given.read_checked(old) == line_read::stale));
    reactor_waiter w;
    given.watch(old, std::nullopt, w);
    BOOST_TEST(given.fire(mono_ns{1}) == 1u);
    BOOST_TEST(given.pop_fired() == &w);
    BOOST_TEST((w.end == wait_end::stale));
    // The idle hands its line life over at the turn: the blind reactor now judges too.
    std_idle idle;
    blind.use_line_life_of(idle);
    BOOST_TEST((blind.read_checked(old) == line_read::stale));
    // And the FILL executor hands it over as it starts to run, before a task registers.
    fill_executor ex(dur_ns::from_us(100));
    bool completed = true;
    ex.spawn([](reactor& re, memory_descriptor d, bool& out) -> fill_task<> {
        const bool ok = co_await re.ready(d, std::nullopt);
        out = ok;
    }(ex.get_reactor(), old, completed));
    BOOST_TEST_REQUIRE(ex.run(idle).has_value());
    BOOST_TEST(!completed);
}

// What the FILL reactor found complete at registration, and what passed its deadline, is not read
// again at fire() once the line was retired: a reused line cannot complete it, and a destroyed
// device's memory is not touched (AddressSanitizer reports any read of it).
BOOST_AUTO_TEST_CASE(the_fill_reactor_reads_no_retired_line_at_fire) {
    reactor r(library_line_life());
    reactor_waiter early;
    reactor_waiter timed;
    {
        sim_device dev(manual());
        auto s = dev.make_stream();
        const memory_descriptor done = s->descriptor_for(s->enqueue(1us));
        const memory_descriptor later = s->descriptor_for(s->enqueue(1us));
        dev.step(*s);                       // `done` is stored, `later` is not
        r.watch(done, std::nullopt, early); // complete at registration: fires at fire()
        r.watch(later, mono_ns{5}, timed);  // registered, with a deadline
        BOOST_TEST_REQUIRE(r.fired_count() == 0u);
    } // the device, its lines and their memory are gone
    BOOST_TEST(r.fire(mono_ns{10}) == 2u);
    BOOST_TEST(r.pop_fired() == &early);
    BOOST_TEST(r.pop_fired() == &timed);
    BOOST_TEST(!early.completed);
    BOOST_TEST((early.end == wait_end::aborted));
    BOOST_TEST(!timed.completed);
    BOOST_TEST((timed.end == wait_end::aborted));

    // The same on a line that a new stream reuses and runs past the old targets.
    sim_device dev(manual());
    auto first = dev.make_stream();
    const memory_descriptor old = first->descriptor_for(first->enqueue(1us));
    reactor_waiter pending;
    r.watch(old, mono_ns{15}, pending);
    first.reset();
    auto second = dev.make_stream();
    second->enqueue(1us);
    second->enqueue(1us);
    dev.step_all();
    BOOST_TEST_REQUIRE(old.is_complete());
    BOOST_TEST(r.fire(mono_ns{20}) == 1u);
    BOOST_TEST(r.pop_fired() == &pending);
    BOOST_TEST(!pending.completed);
    BOOST_TEST((pending.end == wait_end::aborted));
    BOOST_TEST(r.empty());
}

// The FILL executor's flag wait on a stream that faults while it parks: the park ends faulted,
// and the wait asks its source (which reports the fault) instead of parking again, which would
// end at once again, until the plan's backstop.
BOOST_AUTO_TEST_CASE(a_fill_flag_wait_ends_at_a_fault_without_parking_again) {
    sim_device dev(manual());
    auto s = dev.make_stream();
    s->enqueue_fault();
    fill_executor ex(dur_ns::from_ms(1));
    std_clock clk;
    std::optional<wait_result> got;
    const wait_plan plan = wait_plan::flag(100'000, 1'000'000'000).value();
    ex.spawn([](reactor& r, sim_stream& src, wait_plan p, std_clock& c,
                std::optional<wait_result>& out) -> fill_task<> {
        out = co_await fill_wait(r, src, p, std::nullopt, c);
    }(ex.get_reactor(), *s, plan, clk, got));
    ex.spawn([](sim_device& d) -> fill_task<> {
        for (int i = 0; i < 3; ++i)
            co_await yield_now(); // the wait queries, then parks
        d.step_all();
    }(dev));
    std_idle idle;
    const auto stats = ex.run(idle);
    BOOST_TEST_REQUIRE(stats.has_value());
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST_REQUIRE(!got->has_value());
    BOOST_TEST((got->error() == errc::device_fault));
    BOOST_TEST(stats.value().resumptions < 100u); // parking again resumed it ~10^5 times
}

// A line watcher that ends its wait on one line as a host does: it drops the wait's watcher
// registration, which waits for a callback batch that is firing it.
class dropping_watcher final : public detail::line_watcher {
public:
    dropping_watcher(const completion_line& line, watch_handle h)
        : line_(&line)
        , handle_(std::move(h)) {
        detail::add_line_watcher(*this);
    }
    ~dropping_watcher() { detail::remove_line_watcher(*this); }
    std::atomic<bool> asked{false};

    void retire_line(const completion_line& line) noexcept override {
        if (&line != line_) return;
        asked = true;
        handle_.reset(); // one retirement of the line: nothing else touches the handle
    }
    void fault_slot(const completion_line&, slot_id, std::uint64_t) noexcept override {}
    void retire_slot(const completion_line&, slot_id, detail::slot_retirement) noexcept override {}

private:
    const completion_line* line_;
    watch_handle handle_;
};

// A retirement asks a watcher that drops its registration and so waits for the std_watcher's
// batch that is firing it; a callback of that batch gives back another stream, which retires
// its line. Each step is allowed; with the registry's lock held across the first retirement,
// the second one blocked on it forever.
BOOST_AUTO_TEST_CASE(a_retirement_from_a_callback_while_another_waits_for_it_completes) {
    auto run = std::make_shared<std::promise<void>>();
    auto finished = run->get_future();
    std::thread scenario([run] {
        std_watcher w;
        sim_device dev(manual());
        auto first = dev.make_stream(); // line L1: the dropping watcher and a callback watch it
        auto other = dev.make_stream(); // line L3: given back from the callback
        const memory_descriptor d = first->descriptor_for(first->enqueue(1us));
        std::atomic<bool> in_batch{false};
        std::atomic<bool> saw_ask{false};
        std::atomic<bool> callback_done{false};
        std::optional<dropping_watcher> dropper;
        // Registered first: fired first in the batch, before the dropping watcher's.
        watch_handle cb = w.on_complete(d, [&] {
            in_batch = true;
            // The retirement of L1 asks the dropping watcher, which then waits for this batch.
            saw_ask = eventually([&] { return dropper->asked.load(); });
            other.reset(); // retires L3 from the watcher thread
            callback_done = true;
        });
        dropper.emplace(d.line(), w.on_complete(d, [] {}));
        dev.step_all(); // both complete in one scan: one batch
        BOOST_TEST_REQUIRE(eventually([&] { return in_batch.load(); }));
        first.reset(); // retires L1: asks the dropping watcher, which waits for the batch
        BOOST_TEST(saw_ask.load());
        BOOST_TEST(callback_done.load());
        dropper.reset();
        run->set_value();
    });
    if (finished.wait_for(bound) != std::future_status::ready) {
        scenario.detach(); // deadlocked: leave it, report
        BOOST_FAIL("the two retirements deadlocked");
    }
    scenario.join();
}

#if GPU_ASYNC_HAS_WAIT_FD

BOOST_AUTO_TEST_CASE(the_fd_notifier_reports_stale_descriptors_and_faults) {
    std_watcher w;
    sim_device dev(manual());
    fd_notifier notifier(w);
    auto gone = dev.make_stream();
    const memory_descriptor stale = gone->descriptor_for(gone->enqueue(1us));
    gone.reset();
    notifier.watch(stale, 1);
    auto s = dev.make_stream();
    s->enqueue_fault();
    notifier.watch(s->descriptor_for(s->enqueue(1us)), 2);
    dev.step_all();
    std::vector<fd_notifier::entry> got;
    BOOST_TEST_REQUIRE(eventually([&] {
        for (auto& e : notifier.drain())
            got.push_back(e);
        return got.size() >= 2;
    }));
    BOOST_TEST_REQUIRE(got.size() == 2u);
    for (const auto& e : got) {
        if (e.cookie == 1)
            BOOST_TEST((e.error == errc::stale_descriptor));
        else
            BOOST_TEST((e.error == errc::device_fault));
    }
}

// A stream with its own line given back keeps what it stored before it went, as a slot's
// give-back does: the watcher's registrations and the notifier's waits on a stored target
// complete, those on a target never stored end operation_canceled. The store rings nothing:
// only the retirement can see it (the rounds race the watcher thread's take-in).
BOOST_AUTO_TEST_CASE(an_own_lines_give_back_completes_what_its_stream_stored) {
    std_watcher w;
    sim_device dev(manual());
    fd_notifier notifier(w);
    constexpr std::uint64_t rounds = 50;
    std::vector<watch_handle> stored;
    std::vector<watch_handle> never;
    for (std::uint64_t i = 0; i < rounds; ++i) {
        auto s = dev.make_stream();
        const memory_descriptor done = s->descriptor_for(s->enqueue(1us));
        const memory_descriptor not_run = s->descriptor_for(s->enqueue(1us));
        stored.push_back(w.watch(done));
        never.push_back(w.watch(not_run));
        notifier.watch(done, 2 * i);
        notifier.watch(not_run, 2 * i + 1);
        BOOST_TEST_REQUIRE(dev.step(*s)); // the first item stored
        s.reset();                        // then given back
    }
    for (watch_handle& h : stored) {
        BOOST_TEST_REQUIRE(h.wait_for(bound));
        BOOST_TEST(!h.error(), h.error().message());
    }
    for (watch_handle& h : never) {
        BOOST_TEST_REQUIRE(h.wait_for(bound));
        BOOST_TEST((h.error() == std::errc::operation_canceled), h.error().message());
    }
    std::vector<fd_notifier::entry> got;
    BOOST_TEST_REQUIRE(eventually([&] {
        for (auto& e : notifier.drain())
            got.push_back(e);
        return got.size() >= 2 * rounds;
    }));
    BOOST_TEST_REQUIRE(got.size() == 2 * rounds);
    for (const auto& e : got) {
        if (e.cookie % 2 == 0)
            BOOST_TEST(!e.error, e.error.message());
        else
            BOOST_TEST((e.error == std::errc::operation_canceled), e.error.message());
    }
}

// The notifier's waits found complete as they registered, not yet queued by the watcher thread
// when their line is retired, are queued by the retirement before those it ends: in the order
// the waits ended. The watcher thread is held in another wait's callback meanwhile, so it queues
// none of them itself.
BOOST_AUTO_TEST_CASE(a_retirement_queues_the_waits_that_ended_before_it_first) {
    std_watcher w;
    sim_device dev(manual());
    fd_notifier notifier(w);
    auto blocker = dev.make_stream();
    const memory_descriptor held = blocker->descriptor_for(blocker->enqueue(1us));
    BOOST_TEST_REQUIRE(dev.step(*blocker));
    std::promise<void> entered;
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    watch_handle holding = w.on_complete(held, [&entered, released] {
        entered.set_value();
        (void)released.wait_for(bound);
    });
    BOOST_TEST_REQUIRE((entered.get_future().wait_for(bound) == std::future_status::ready));

    auto s = dev.make_stream();
    const memory_descriptor one = s->descriptor_for(s->enqueue(1us));
    const memory_descriptor two = s->descriptor_for(s->enqueue(1us));
    const memory_descriptor three = s->descriptor_for(s->enqueue(1us));
    BOOST_TEST_REQUIRE(dev.step(*s));
    BOOST_TEST_REQUIRE(dev.step(*s));
    notifier.watch(one, 1);
    notifier.watch(two, 2);
    notifier.watch(three, 3);
    s.reset(); // three was never stored; the entries are queued before this returns
    const std::vector<fd_notifier::entry> got = notifier.drain();
    release.set_value();
    BOOST_TEST_REQUIRE(got.size() == 3u);
    BOOST_TEST(got[0].cookie == 1u);
    BOOST_TEST(!got[0].error);
    BOOST_TEST(got[1].cookie == 2u);
    BOOST_TEST(!got[1].error);
    BOOST_TEST(got[2].cookie == 3u);
    BOOST_TEST((got[2].error == std::errc::operation_canceled), got[2].error.message());
    BOOST_TEST_REQUIRE(holding.wait_for(bound));
}

// Waits started on a stored target while another thread gives the stream back end with success
// or stale_descriptor (they began no earlier than the give-back), never operation_canceled,
// which would say the target was never stored. Looped: the race is narrow.
BOOST_AUTO_TEST_CASE(a_registration_overlapping_a_give_back_ends_success_or_stale) {
    std_watcher w;
    sim_device dev(manual());
    fd_notifier notifier(w);
    completion_line& line = dev.make_line();
    const auto rounds = static_cast<std::size_t>(gpu_async::test::race_rounds(300));
    std::size_t success = 0;
    std::size_t stale = 0;
    std::size_t other = 0;
    std::size_t cookies = 0;
    for (std::size_t i = 0; i < rounds; ++i) {
        auto s = i % 2 == 0 ? dev.make_stream() : dev.make_stream(line, *slot_id::at(i % 8));
        const memory_descriptor d = s->descriptor_for(s->enqueue(1us));
        BOOST_TEST_REQUIRE(dev.step(*s));
        std::vector<watch_handle> handles;
        std::atomic<bool> gone{false};
        std::atomic<bool> go{false};
        std::thread starter([&] {
            go = true;
            for (int after = 0; after < 4;) {
                handles.push_back(w.watch(d));
                notifier.watch(d, cookies++);
                if (gone.load()) ++after;
            }
        });
        while (!go.load())
            std::this_thread::yield();
        s.reset();
        gone = true;
        starter.join();
        for (watch_handle& h : handles) {
            BOOST_TEST_REQUIRE(h.wait_for(bound));
            const std::error_code ec = h.error();
            ++(!ec ? success : ec == errc::stale_descriptor ? stale : other);
        }
    }
    std::size_t drained = 0;
    BOOST_TEST_REQUIRE(eventually([&] {
        for (auto& e : notifier.drain()) {
            ++drained;
            ++(!e.error ? success : e.error == errc::stale_descriptor ? stale : other);
        }
        return drained >= cookies;
    }));
    BOOST_TEST(other == 0u, other << " of " << 2 * cookies);
    BOOST_TEST_MESSAGE(success << " succeeded, " << stale << " stale");
}

#endif

// An owner that decided under its own lock to fault or retire a stream's slot, and acts after
// letting the lock go, names the generation it decided on: a slot given back and made anew
// meanwhile is not faulted or retired in its old stream's place.
BOOST_AUTO_TEST_CASE(a_fault_or_retirement_of_an_old_generation_leaves_the_new_stream_alone) {
    completion_line line;
    const slot_id slot = *slot_id::at(4);
    const std::uint64_t first = adopt_line(line);
    BOOST_TEST(slot_generation(line, slot) == first);
    retire_slot(line, slot); // the old stream given back, a new one made
    const std::uint64_t next = slot_generation(line, slot);
    BOOST_TEST(next > first);
    const memory_descriptor fresh(line, slot, 1, next);
    BOOST_TEST(!fault_slot(line, slot, first)); // the old stream's late fault
    BOOST_TEST((descriptor_status(fresh) == line_status::live));
    BOOST_TEST(!retire_slot(line, slot, first)); // the old stream's late retirement
    BOOST_TEST(slot_generation(line, slot) == next);
    BOOST_TEST((descriptor_status(fresh) == line_status::live));
    // At the slot's own generation they act.
    BOOST_TEST(fault_slot(line, slot, next));
    BOOST_TEST((descriptor_status(fresh) == line_status::faulted));
    BOOST_TEST(retire_slot(line, slot, next));
    BOOST_TEST((descriptor_status(fresh) == line_status::stale));
    // A line never adopted is at generation 0.
    completion_line yours;
    BOOST_TEST(!retire_slot(yours, slot, 1));
    BOOST_TEST(retire_slot(yours, slot, 0));
    retire_line(line);
}

// Generations only move forward, past 32 bits too (the counter is 64-bit per line and stops at
// max_generation, which is never live), so an old descriptor never becomes live again.
BOOST_AUTO_TEST_CASE(generations_only_move_forward) {
    completion_line line;
    std::uint64_t last = adopt_line(line);
    const memory_descriptor oldest(line, *slot_id::at(0), 1, last);
    for (int i = 0; i < 1000; ++i) {
        retire_slot(line, *slot_id::at(i % 8));
        retire_line(line);
        const std::uint64_t g = adopt_line(line);
        BOOST_TEST_REQUIRE(g > last);
        last = g;
    }
    BOOST_TEST((descriptor_status(oldest) == line_status::stale));
    BOOST_TEST((descriptor_status(memory_descriptor(line, *slot_id::at(0), 1, max_generation)) ==
                line_status::stale));
    retire_line(line);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_hosts_line_life
