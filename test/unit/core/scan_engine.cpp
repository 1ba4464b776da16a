// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/core/detail/scan_engine.hpp>
#include <gpu_async/core/wait_end.hpp>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

namespace unit_core_scan_engine {

using namespace gpu_async;
using gpu_async::detail::engine_batch;
using gpu_async::detail::engine_list;
using gpu_async::detail::engine_wait;
using gpu_async::detail::scan_engine;

namespace {

constexpr std::uint64_t half = std::uint64_t{1} << 63;

memory_descriptor desc(const completion_line& line, std::size_t slot, std::uint64_t target,
                       std::uint64_t generation = 0) {
    return memory_descriptor(line, *slot_id::at(slot), target, generation);
}

struct wait : engine_wait {
    wait(const memory_descriptor& d, int id_)
        : engine_wait(d)
        , id(id_) {}
    int id;
};

/// A host in miniature: registrations queued as another thread would queue them, handed in
/// by swapping batches, and what leaves recorded in order.
struct host {
    scan_engine engine;
    engine_batch incoming = engine.make_batch();
    engine_batch taking = engine.make_batch();
    std::deque<std::unique_ptr<wait>> waits;
    std::vector<int> kept; // what take-ins kept (found in the table after theirs), in order
    std::vector<std::pair<int, wait_end>> ended;

    explicit host(scan_engine::status_fn status = nullptr, scan_engine::epoch_fn epoch = nullptr)
        : engine(status, epoch) {}

    wait& queue(const memory_descriptor& d) {
        waits.push_back(std::make_unique<wait>(d, static_cast<int>(waits.size())));
        incoming.push(waits.back().get());
        return *waits.back();
    }
    /// Hands the queued registrations to `step` (a take-in of the engine), then notes which of
    /// them it kept.
    template <class Step>
    void hand_in(Step&& step) {
        std::vector<wait*> handed;
        incoming.for_each([&](const engine_wait* w) {
            handed.push_back(static_cast<wait*>(const_cast<engine_wait*>(w)));
        });
        std::sort(handed.begin(), handed.end(), [](wait* a, wait* b) { return a->id < b->id; });
        std::swap(incoming, taking);
        step(taking);
        BOOST_TEST(taking.empty());
        for (wait* w : handed)
            if (w->registered()) kept.push_back(w->id);
    }
    void record(engine_list& out) {
        while (engine_wait* w = out.pop())
            ended.emplace_back(static_cast<wait*>(w)->id, w->end());
    }
    void take_in(engine_list& out) {
        hand_in([&](engine_batch& b) { engine.take_in(b, out); });
    }
    void take_in() {
        engine_list out;
        take_in(out);
        record(out);
    }
    /// A scan in its steps, with what was queued meanwhile handed in between them.
    void scan_steps(std::uint64_t now, engine_list& out) {
        engine.begin_scan(out);
        while (engine.wants_late_batch())
            hand_in([&](engine_batch& b) { engine.take_in_late(b, out); });
        engine.end_scan(mono_ns{now}, out);
    }
    void scan(std::uint64_t now = 0) {
        engine_list out;
        take_in(out);
        scan_steps(now, out);
        record(out);
    }
    std::vector<int> ids() const {
        std::vector<int> v;
        for (const auto& e : ended)
            v.push_back(e.first);
        return v;
    }
};

line_status status_of_generation_3(const memory_descriptor& d) noexcept {
    if (d.generation() == 0) return line_status::live;
    if (d.generation() != 3) return line_status::stale;
    return d.slot().index() == 5 ? line_status::faulted : line_status::live;
}

// Slot 0 retired from generation 3 to 5 (slot 1 too); other slots at 3.
line_status status_of_generation_5(const memory_descriptor& d) noexcept {
    if (d.generation() == 0) return line_status::live;
    const std::uint64_t now = d.slot().index() <= 1 ? 5 : 3;
    return d.generation() == now ? line_status::live : line_status::stale;
}

// Slot 0 given back from generation 3 (now 5) while its retirement is still on its way to the
// hosts: generation 3 is retiring there; other slots at 3.
line_status status_while_slot_0_is_given_back(const memory_descriptor& d) noexcept {
    if (d.generation() == 0) return line_status::live;
    if (d.slot().index() != 0) return d.generation() == 3 ? line_status::live : line_status::stale;
    if (d.generation() == 5) return line_status::live;
    return d.generation() == 3 ? line_status::retiring : line_status::stale;
}

// Generation 3 everywhere, until slot 0 is given back (`slot_0_given_back`): then retiring.
bool slot_0_given_back = false;
line_status status_with_give_back(const memory_descriptor& d) noexcept {
    if (d.generation() == 0) return line_status::live;
    if (slot_0_given_back && d.slot().index() == 0)
        return d.generation() == 3 ? line_status::retiring : line_status::stale;
    return d.generation() == 3 ? line_status::live : line_status::stale;
}

// Generation 3's slot 0 is retiring for the first `retiring_looks` judgements, then stale: a
// give-back whose retirement finishes while a registration reads the word.
int retiring_looks = 0;
line_status status_retired_across_the_read(const memory_descriptor& d) noexcept {
    if (d.generation() == 0) return line_status::live;
    if (d.generation() != 3) return line_status::stale;
    if (d.slot().index() != 0) return line_status::live;
    return retiring_looks-- > 0 ? line_status::retiring : line_status::stale;
}

// Generation 3's slot 0 is live at the first judgement; at the second its stream has stored
// `given_back_store` into `given_back_line` and been given back (retiring from then on).
completion_line* given_back_line = nullptr;
std::uint64_t given_back_store = 0;
int given_back_looks = 0;
line_status status_given_back_after_a_store(const memory_descriptor& d) noexcept {
    if (d.generation() != 3) return line_status::stale;
    if (given_back_looks++ == 0) return line_status::live;
    if (given_back_looks == 2) given_back_line->words[0].store(given_back_store);
    return line_status::retiring;
}

std::uint64_t test_epoch = 7;
int judged = 0;
std::uint64_t epoch_now() noexcept {
    return test_epoch;
}
line_status counting_status(const memory_descriptor& d) noexcept {
    ++judged;
    return status_of_generation_3(d);
}

} // namespace

BOOST_AUTO_TEST_SUITE(scan_engine_suite)

// A host's sink list gives up one wait (a cancellation before delivery) wherever it sits, and
// stays a FIFO after it.
BOOST_AUTO_TEST_CASE(an_engine_list_erases_one_wait_wherever_it_sits) {
    completion_line line;
    std::vector<std::unique_ptr<wait>> w;
    for (int i = 0; i < 5; ++i)
        w.push_back(std::make_unique<wait>(desc(line, 0, 1), i));
    engine_list list;
    for (int i = 0; i < 4; ++i)
        list.push(w[static_cast<std::size_t>(i)].get());
    BOOST_TEST(!list.erase(w[4].get())); // not on it
    BOOST_TEST(list.count == 4u);
    BOOST_TEST(list.erase(w[0].get())); // the head
    BOOST_TEST(list.erase(w[2].get())); // the middle
    BOOST_TEST(list.erase(w[3].get())); // the tail
    BOOST_TEST(!list.erase(w[3].get()));
    BOOST_TEST(list.count == 1u);
    list.push(w[4].get()); // after the tail it had before the last erase
    std::vector<int> order;
    while (engine_wait* e = list.pop())
        order.push_back(static_cast<wait*>(e)->id);
    BOOST_TEST(order == (std::vector<int>{1, 4}), boost::test_tools::per_element());
    BOOST_TEST(list.empty());
    BOOST_TEST(list.tail == nullptr);
    BOOST_TEST(!list.erase(w[1].get()));
}

BOOST_AUTO_TEST_CASE(a_take_in_judges_again_only_when_the_epoch_moved) {
    completion_line line;
    judged = 0;
    test_epoch = 7;
    host h(&counting_status, &epoch_now);
    wait& a = h.queue(desc(line, 0, 1, 3));
    a.judged_at(7); // judged live by the host at epoch 7
    wait& b = h.queue(desc(line, 1, 1, 3));
    b.judged_at(0); // never judged
    h.take_in();
    BOOST_TEST(judged == 1); // b only
    BOOST_TEST(h.kept.size() == 2u);
    // The epoch moved (a retirement): a wait judged before it is judged again, and found stale.
    wait& c = h.queue(desc(line, 2, 1, 2));
    c.judged_at(7);
    test_epoch = 8;
    h.take_in();
    BOOST_TEST(judged == 2);
    BOOST_REQUIRE(h.ended.size() == 1u);
    // The host judged it live as it registered, but every retirement takes the host's queued
    // registrations in as it passes: one found stale at a later take-in was queued after the
    // retirement had passed, so it was never watched, and the word is not read: stale.
    BOOST_TEST((h.ended[0].second == wait_end::stale));
}

// The epoch a host judged a wait at shares its word with the take-in's number: a wait taken in
// again while pending (the FILL reactor's early waits) is judged whatever that word holds.
BOOST_AUTO_TEST_CASE(a_take_in_while_pending_judges_again_whatever_the_wait_was_judged_at) {
    completion_line line;
    judged = 0;
    test_epoch = 1; // the first take-in is numbered 1 as well
    scan_engine engine(&counting_status, &epoch_now);
    wait w(desc(line, 0, 5, 3), 0);
    w.judged_at(1);
    engine_list out;
    engine.take_in_one(w, out);
    BOOST_TEST(judged == 0); // judged by its host at this epoch
    BOOST_REQUIRE(w.registered());
    engine.remove(w, out);
    BOOST_REQUIRE(out.pop() == &w);
    engine.take_in_one(w, out, judgement::while_pending);
    BOOST_TEST(judged == 1);
    BOOST_TEST(w.registered());
    engine.clear(out);
}

// A host's look before it registers a wait (the service's start, without its lock): judged,
// read, judged again by the engine's line life, the epoch recorded first.
BOOST_AUTO_TEST_CASE(the_look_before_registration_judges_reads_and_records_the_epoch) {
    completion_line line;
    line.words[0].store(4);
    test_epoch = 9;
    const scan_engine engine(&status_of_generation_3, &epoch_now);
    wait done(desc(line, 0, 4, 3), 0);
    wait pending(desc(line, 0, 5, 3), 1);
    wait stale(desc(line, 0, 1, 2), 2);
    wait faulted(desc(line, 5, 1, 3), 3);
    BOOST_TEST((engine.end_before_registration(done) == std::optional(wait_end::reached)));
    BOOST_TEST(!engine.end_before_registration(pending).has_value());
    BOOST_TEST((engine.end_before_registration(stale) == std::optional(wait_end::stale)));
    BOOST_TEST((engine.end_before_registration(faulted) == std::optional(wait_end::faulted)));
    for (const wait* w : {&done, &pending, &stale, &faulted})
        BOOST_TEST(w->judged_at() == 9u);
    // With no line life: every descriptor is live, and the read alone decides.
    const scan_engine bare;
    wait other(desc(line, 0, 5, 2), 4);
    BOOST_TEST(!bare.end_before_registration(other).has_value());
    line.words[0].store(5);
    BOOST_TEST((bare.end_before_registration(other) == std::optional(wait_end::reached)));
    BOOST_TEST(other.judged_at() == 0u);
}

BOOST_AUTO_TEST_CASE(a_stale_descriptor_ends_stale_only_at_its_registration) {
    completion_line line;
    scan_engine engine(&status_of_generation_3);
    // Taken in as it registers (a std_watcher's add): its line was retired before it began.
    wait first(desc(line, 0, 1, 2), 0);
    engine_list out;
    engine.take_in_one(first, out);
    BOOST_REQUIRE(out.count == 1u);
    BOOST_TEST((out.pop()->end() == wait_end::stale));
    // Taken in again by a host that had registered it (the FILL reactor's early waits): the
    // retirement came while it was pending.
    wait again(desc(line, 0, 1, 2), 1);
    engine.take_in_one(again, out, judgement::while_pending);
    BOOST_REQUIRE(out.count == 1u);
    BOOST_TEST((out.pop()->end() == wait_end::aborted));
    // A live one is kept either way; the next registration is judged at registration again.
    wait live(desc(line, 1, 1, 3), 2);
    engine.take_in_one(live, out, judgement::while_pending);
    BOOST_TEST(out.count == 0u);
    BOOST_TEST(live.registered());
    wait later(desc(line, 2, 1, 2), 3);
    engine.take_in_one(later, out);
    BOOST_REQUIRE(out.count == 1u);
    BOOST_TEST((out.pop()->end() == wait_end::stale));
    engine_list cleared;
    engine.remove(live, cleared);
}

BOOST_AUTO_TEST_CASE(a_take_in_keeps_pending_waits_and_hands_out_the_complete_in_target_order) {
    completion_line line;
    line.words[0].store(5);
    host h;
    h.queue(desc(line, 0, 9));
    h.queue(desc(line, 0, 4));
    h.queue(desc(line, 0, 2));
    h.queue(desc(line, 0, 5));
    h.take_in();
    BOOST_TEST(h.kept == (std::vector<int>{0}));
    BOOST_TEST(h.ids() == (std::vector<int>{2, 1, 3})); // ascending targets
    for (const auto& e : h.ended)
        BOOST_TEST((e.second == wait_end::reached));
    BOOST_TEST(h.engine.size() == 1u);
    BOOST_TEST(h.incoming.empty());
}

BOOST_AUTO_TEST_CASE(a_scan_hands_out_in_ascending_target_order_then_registration_order) {
    completion_line line;
    host h;
    h.queue(desc(line, 1, 3));
    h.queue(desc(line, 1, 2));
    h.queue(desc(line, 1, 3));
    h.queue(desc(line, 1, 7));
    h.take_in();
    BOOST_TEST(h.engine.size() == 4u);
    line.words[1].store(3);
    h.scan();
    BOOST_TEST(h.ids() == (std::vector<int>{1, 0, 2}));
    BOOST_TEST(h.engine.size() == 1u);
    line.words[1].store(7);
    h.scan();
    BOOST_TEST(h.ids() == (std::vector<int>{1, 0, 2, 3}));
    BOOST_TEST(h.engine.empty());
}

BOOST_AUTO_TEST_CASE(the_wrapping_rule_holds_across_the_top_of_the_word) {
    completion_line line;
    line.words[2].store(~std::uint64_t{0} - 1);
    host h;
    h.queue(desc(line, 2, 1));                      // past the wrap
    h.queue(desc(line, 2, ~std::uint64_t{0}));      // just before it
    h.queue(desc(line, 2, ~std::uint64_t{0} - 10)); // reached
    h.take_in();
    BOOST_TEST(h.ids() == (std::vector<int>{2}));
    line.words[2].store(1);
    h.scan();
    BOOST_TEST(h.ids() == (std::vector<int>{2, 1, 0}));
    // A word half the range away is behind every target: nothing completes.
    h.queue(desc(line, 2, 2));
    h.take_in();
    line.words[2].store(2 + half);
    h.scan();
    BOOST_TEST(h.engine.size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_registration_queued_after_a_scan_read_leaves_with_that_scan) {
    completion_line line;
    host h;
    h.queue(desc(line, 0, 2));
    h.take_in();
    line.words[0].store(4);
    // Queued before the scan's take-in of late registrations: it leaves with this scan, in
    // target order with the table's wait.
    h.queue(desc(line, 0, 1));
    engine_list out;
    h.scan_steps(0, out);
    h.record(out);
    BOOST_TEST(h.ids() == (std::vector<int>{1, 0}));
}

BOOST_AUTO_TEST_CASE(a_scan_wants_a_second_late_batch_only_after_the_first_completed_waits) {
    completion_line line;
    host h;
    h.queue(desc(line, 0, 9));
    h.take_in();
    engine_list out;
    // Nothing came in meanwhile: one late take-in, with an empty batch, and the scan ends.
    h.engine.begin_scan(out);
    BOOST_TEST(h.engine.wants_late_batch());
    h.hand_in([&](engine_batch& b) { h.engine.take_in_late(b, out); });
    BOOST_TEST(!h.engine.wants_late_batch());
    h.engine.end_scan(mono_ns{0}, out);
    BOOST_TEST(out.empty());
    // One came in complete (a store the table's loads did not see): a second take-in is
    // wanted, for waits registered before that store; then none.
    h.engine.begin_scan(out);
    line.words[0].store(3);
    h.queue(desc(line, 0, 3));
    h.hand_in([&](engine_batch& b) { h.engine.take_in_late(b, out); });
    BOOST_TEST(h.engine.wants_late_batch());
    h.queue(desc(line, 0, 2));
    h.hand_in([&](engine_batch& b) { h.engine.take_in_late(b, out); });
    BOOST_TEST(!h.engine.wants_late_batch());
    h.engine.end_scan(mono_ns{0}, out);
    h.record(out);
    BOOST_TEST(h.ids() == (std::vector<int>{2, 1}));
    BOOST_TEST(h.engine.size() == 1u);
    // A host whose registrations come under its own lock scans in one call, with no late take-in.
    line.words[0].store(9);
    engine_list last;
    h.engine.scan(mono_ns{0}, last);
    h.record(last);
    BOOST_TEST(h.ids() == (std::vector<int>{2, 1, 0}));
}

BOOST_AUTO_TEST_CASE(a_group_holds_its_waits_while_they_are_in_the_table) {
    completion_line line;
    line.words[0].store(1);
    host h;
    detail::engine_group g;
    for (std::uint64_t t = 1; t <= 5; ++t)
        h.queue(desc(line, 0, t)).group = &g; // the first is complete at its take-in
    h.queue(desc(line, 0, 4));                // no group
    h.take_in();
    BOOST_TEST(h.ended.size() == 1u);
    BOOST_TEST(g.size() == 4u);                // kept: 1 to 4
    BOOST_TEST(g.front() == h.waits[4].get()); // the newest first
    // Leaving the table by a scan, or by a cancellation of its own, it leaves the group.
    line.words[0].store(2);
    h.scan();
    BOOST_TEST(g.size() == 3u);
    wait& middle = *h.waits[3];
    engine_list out;
    h.engine.remove(middle, out);
    h.record(out);
    BOOST_TEST(g.size() == 2u);
    // The group's remaining waits leave together, aborted; the wait outside it stays.
    engine_list group_out;
    // One by one from the front, as a port's cancel() ends its waits.
    const auto remove_all = [&] {
        std::size_t n = 0;
        for (; g.front() != nullptr; ++n)
            h.engine.remove(*g.front(), group_out);
        return n;
    };
    BOOST_TEST(remove_all() == 2u);
    h.record(group_out);
    BOOST_TEST(g.empty());
    BOOST_TEST(g.size() == 0u);
    BOOST_TEST(g.front() == nullptr);
    BOOST_REQUIRE(h.ended.size() == 5u);
    std::vector<int> removed{h.ended[3].first, h.ended[4].first};
    std::sort(removed.begin(), removed.end());
    BOOST_TEST(removed == (std::vector<int>{2, 4}));
    BOOST_TEST((h.ended[3].second == wait_end::aborted));
    BOOST_TEST((h.ended[4].second == wait_end::aborted));
    BOOST_TEST(h.engine.size() == 1u);
    BOOST_TEST(h.waits[5]->registered());
    BOOST_TEST(remove_all() == 0u);
    // A retirement ends a group's waits too, and leaves the group empty.
    h.queue(desc(line, 1, 7)).group = &g;
    h.queue(desc(line, 2, 7)).group = &g;
    h.take_in();
    BOOST_TEST(g.size() == 2u);
    engine_list retired;
    h.engine.retire_line(line, retired);
    h.record(retired);
    BOOST_TEST(g.empty());
    BOOST_TEST(h.engine.empty());
}

BOOST_AUTO_TEST_CASE(deadlines_expire_at_the_hosts_now_and_bound_the_park) {
    completion_line line;
    host h;
    wait& w = h.queue(desc(line, 0, 1));
    w.deadline(mono_ns{1000});
    wait& b = h.queue(desc(line, 1, 1));
    b.park_bound = dur_ns{50};
    h.take_in();
    BOOST_TEST(h.engine.bound(mono_ns{900}, dur_ns{100}).ns == 50u);
    BOOST_TEST(h.engine.bound(mono_ns{980}, dur_ns{100}).ns == 20u);
    h.scan(999);
    BOOST_TEST(h.ended.empty());
    h.scan(1000);
    BOOST_TEST(h.ended.size() == 1u);
    BOOST_TEST((h.ended[0] == std::pair<int, wait_end>{0, wait_end::expired}));
    // The bound goes with its wait.
    engine_list out;
    h.engine.remove(b, out);
    h.record(out);
    BOOST_TEST(h.engine.bound(mono_ns{0}, dur_ns{100}).ns == 100u);
    BOOST_TEST((h.ended[1] == std::pair<int, wait_end>{1, wait_end::aborted}));
}

// The deadline shares its word with the wait's place in the deadline index: it is the wait's
// again once it leaves, for a host that takes it in again (the FILL reactor's early waits).
BOOST_AUTO_TEST_CASE(a_wait_keeps_its_deadline_across_its_time_in_the_table) {
    completion_line line;
    scan_engine engine;
    wait w(desc(line, 0, 5), 0);
    w.deadline(mono_ns{1000});
    wait none(desc(line, 1, 5), 1);
    engine_list out;
    engine.take_in_one(w, out);
    engine.take_in_one(none, out);
    BOOST_REQUIRE(w.registered());
    BOOST_TEST((engine.earliest_deadline() == std::optional(mono_ns{1000})));
    line.words[0].store(5);
    line.words[1].store(5);
    engine.scan(mono_ns{0}, out);
    BOOST_REQUIRE(out.count == 2u);
    out = engine_list{};
    BOOST_TEST((w.deadline() == std::optional(mono_ns{1000})));
    BOOST_TEST(!none.deadline().has_value());
    // Its word set back: taken in again, it waits, and expires at the same deadline.
    line.words[0].store(3);
    engine.take_in_one(w, out, judgement::while_pending);
    BOOST_REQUIRE(w.registered());
    engine.scan(mono_ns{999}, out);
    BOOST_TEST(out.empty());
    engine.scan(mono_ns{1000}, out);
    BOOST_REQUIRE(out.count == 1u);
    BOOST_TEST((out.pop()->end() == wait_end::expired));
    BOOST_TEST((w.deadline() == std::optional(mono_ns{1000})));
}

BOOST_AUTO_TEST_CASE(status_is_asked_before_the_line_is_read) {
    completion_line line;
    line.words[5].store(10);
    host h(&status_of_generation_3);
    h.queue(desc(line, 0, 1, 2));  // stale
    h.queue(desc(line, 5, 20, 3)); // faulted, not reached
    h.queue(desc(line, 5, 10, 3)); // faulted, reached before the fault: completes
    h.queue(desc(line, 1, 1, 3));  // live
    h.queue(desc(line, 1, 1));     // never checked
    h.take_in();
    BOOST_TEST(h.kept == (std::vector<int>{3, 4}));
    BOOST_TEST(h.ended.size() == 3u);
    // By slot, the reached first: the stale registration was queued after its retirement passed.
    BOOST_TEST((h.ended[0] == std::pair<int, wait_end>{0, wait_end::stale}));
    BOOST_TEST((h.ended[1] == std::pair<int, wait_end>{2, wait_end::reached}));
    BOOST_TEST((h.ended[2] == std::pair<int, wait_end>{1, wait_end::faulted}));
}

BOOST_AUTO_TEST_CASE(retiring_a_line_aborts_its_waits_and_reads_it_no_more) {
    completion_line a;
    completion_line b;
    host h;
    h.queue(desc(a, 0, 1));
    h.queue(desc(a, 3, 1));
    h.queue(desc(b, 0, 1));
    h.take_in();
    engine_list out;
    h.engine.retire_line(a, out);
    h.record(out);
    BOOST_TEST(h.ended.size() == 2u);
    for (const auto& e : h.ended)
        BOOST_TEST((e.second == wait_end::aborted));
    BOOST_TEST(h.engine.lines() == 1u); // b's record only: a's was dropped
}

BOOST_AUTO_TEST_CASE(a_fault_completes_what_was_stored_and_faults_the_rest_in_target_order) {
    completion_line line;
    host h;
    h.queue(desc(line, 4, 3));
    h.queue(desc(line, 4, 1));
    h.queue(desc(line, 4, 9));
    h.queue(desc(line, 4, 2));
    h.queue(desc(line, 6, 2)); // another slot: untouched
    h.take_in();
    line.words[4].store(2);
    engine_list out;
    h.engine.fault_slot(line, *slot_id::at(4), out);
    h.record(out);
    BOOST_TEST(h.ids() == (std::vector<int>{1, 3, 0, 2}));
    BOOST_TEST((h.ended[0].second == wait_end::reached));
    BOOST_TEST((h.ended[1].second == wait_end::reached));
    BOOST_TEST((h.ended[2].second == wait_end::faulted));
    BOOST_TEST((h.ended[3].second == wait_end::faulted));
    BOOST_TEST(h.engine.size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_slot_retirement_completes_what_was_stored_and_aborts_the_rest) {
    completion_line line;
    host h;
    h.queue(desc(line, 2, 5));
    h.queue(desc(line, 2, 1));
    h.queue(desc(line, 2, 3));
    h.queue(desc(line, 7, 1)); // another slot: untouched
    h.take_in();
    line.words[2].store(3); // stored before the stream went, not yet scanned
    line.words[7].store(1);
    engine_list out;
    h.engine.retire_slot(line, *slot_id::at(2), out);
    h.record(out);
    BOOST_TEST(h.ids() == (std::vector<int>{1, 2, 0}));
    BOOST_TEST((h.ended[0].second == wait_end::reached));
    BOOST_TEST((h.ended[1].second == wait_end::reached));
    BOOST_TEST((h.ended[2].second == wait_end::aborted));
    BOOST_TEST(h.engine.size() == 1u);
    BOOST_TEST(h.engine.lines() == 1u);
}

BOOST_AUTO_TEST_CASE(cancel_by_key_finds_only_a_registered_wait) {
    completion_line line;
    host h;
    wait& w = h.queue(desc(line, 0, 5));
    wait& v = h.queue(desc(line, 0, 5));
    h.take_in();
    const auto is = [](const wait* target) {
        return [target](const engine_wait* c) { return c == target; };
    };
    engine_wait* found = h.engine.find(desc(line, 0, 5), is(&v));
    BOOST_REQUIRE(found == &v);
    engine_list out;
    h.engine.remove(*found, out);
    h.record(out);
    BOOST_TEST(!v.registered());
    BOOST_TEST(h.engine.find(desc(line, 0, 5), is(&v)) == nullptr); // gone: not found twice
    BOOST_TEST(h.engine.find(desc(line, 0, 6), is(&w)) == nullptr); // another target
    BOOST_TEST(w.registered());
}

BOOST_AUTO_TEST_CASE(a_take_in_settled_takes_the_same_stores_table_waits_along) {
    completion_line line;
    host h;
    h.queue(desc(line, 0, 2));
    h.take_in();
    line.words[0].store(3);
    h.queue(desc(line, 0, 3)); // found complete at its take-in
    engine_list out;
    h.hand_in([&](engine_batch& b) { h.engine.take_in_settled(b, out); });
    h.record(out);
    BOOST_TEST(h.ids() == (std::vector<int>{0, 1})); // the lower target first
}

BOOST_AUTO_TEST_CASE(a_batch_past_its_room_keeps_registration_order) {
    completion_line line;
    host h;
    const std::size_t n = scan_engine::initial_batch + 10;
    for (std::size_t i = 0; i < n; ++i)
        h.queue(desc(line, 0, 1));
    BOOST_TEST(h.incoming.overflow != nullptr);
    h.take_in();
    BOOST_REQUIRE(h.kept.size() == n);
    for (std::size_t i = 0; i < n; ++i)
        BOOST_TEST(h.kept[i] == static_cast<int>(i));
    line.words[0].store(1);
    h.scan();
    BOOST_REQUIRE(h.ended.size() == n);
    for (std::size_t i = 0; i < n; ++i)
        BOOST_TEST(h.ended[i].first == static_cast<int>(i));
}

BOOST_AUTO_TEST_CASE(clear_aborts_every_wait_once) {
    completion_line line;
    host h;
    for (int i = 0; i < 5; ++i)
        h.queue(desc(line, static_cast<std::size_t>(i), 1));
    h.take_in();
    engine_list out;
    h.engine.clear(out);
    h.record(out);
    BOOST_TEST(h.ended.size() == 5u);
    BOOST_TEST(h.engine.empty());
    line.words[0].store(1);
    h.scan();
    BOOST_TEST(h.ended.size() == 5u);
}

BOOST_AUTO_TEST_CASE(a_slot_retirement_reads_the_waits_it_finds_not_yet_taken_in) {
    // Registrations queued before slot 0's retirement (generation 3 -> 5) and taken in by it:
    // their word is read, not their status believed (stale only because of this retirement),
    // so what the stream stored before it went completes and the rest are the slot's to end.
    // Other slots' and older generations' stale registrations still end unread.
    completion_line line;
    line.words[0].store(4);
    line.words[1].store(9);
    host h(&status_of_generation_5);
    h.queue(desc(line, 0, 4, 3)); // stored before the stream went
    h.queue(desc(line, 0, 6, 3)); // never stored
    h.queue(desc(line, 0, 2, 1)); // an older stream's: ends unread
    h.queue(desc(line, 1, 9, 3)); // another slot's, stale there too: ends unread
    engine_list out;
    h.hand_in(
        [&](engine_batch& b) { h.engine.take_in_retiring(b, out, line, *slot_id::at(0), 3); });
    h.record(out);
    BOOST_TEST(h.kept == (std::vector<int>{1}));
    BOOST_REQUIRE(h.ended.size() == 3u);
    BOOST_TEST(h.ended[0].first == 0); // slot 0's reached one first, then slot 0's others
    BOOST_TEST((h.ended[0].second == wait_end::reached));
    BOOST_TEST(h.ended[1].first == 2);
    BOOST_TEST((h.ended[1].second == wait_end::stale));
    BOOST_TEST(h.ended[2].first == 3);
    BOOST_TEST((h.ended[2].second == wait_end::stale));
    // The retirement then ends the slot's pending wait; later take-ins judge as before.
    engine_list rest;
    h.engine.retire_slot(line, *slot_id::at(0), rest);
    h.record(rest);
    BOOST_REQUIRE(h.ended.size() == 4u);
    BOOST_TEST(h.ended[3].first == 1);
    BOOST_TEST((h.ended[3].second == wait_end::aborted));
    h.queue(desc(line, 0, 4, 3));
    h.take_in();
    BOOST_REQUIRE(h.ended.size() == 5u);
    BOOST_TEST((h.ended[4].second == wait_end::stale)); // queued after the retirement passed
}

BOOST_AUTO_TEST_CASE(a_take_in_during_a_give_back_reads_the_given_back_generation) {
    // A host's own take-in that comes between a slot's give-back and the retirement's visit to
    // it (the side table says retiring): the given-back generation's registrations are read,
    // never ended as stale unread: stored before the give-back, they complete; the rest end
    // aborted, as the retirement would end them. None stays in the table.
    completion_line line;
    line.words[0].store(4);
    host h(&status_while_slot_0_is_given_back);
    h.queue(desc(line, 0, 4, 3)); // stored before the stream went
    h.queue(desc(line, 0, 6, 3)); // never stored
    h.queue(desc(line, 0, 2, 1)); // an older stream's: ends unread
    h.queue(desc(line, 0, 5, 5)); // the next stream's: waits
    h.take_in();
    BOOST_TEST(h.kept == (std::vector<int>{3}));
    BOOST_REQUIRE(h.ended.size() == 3u);
    BOOST_TEST(h.ended[0].first == 0); // the reached first: the slot's order
    BOOST_TEST((h.ended[0].second == wait_end::reached));
    BOOST_TEST(h.ended[1].first == 1);
    BOOST_TEST((h.ended[1].second == wait_end::aborted));
    BOOST_TEST(h.ended[2].first == 2);
    BOOST_TEST((h.ended[2].second == wait_end::stale));
    BOOST_TEST(h.engine.size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_reactor_that_judges_its_waits_again_reads_a_given_back_slot) {
    // judge_pending (a host no retirement reaches): a registered wait of a slot being given
    // back stays while its word holds the target (the scan completes it), and ends aborted (not
    // faulted) otherwise.
    completion_line line;
    line.words[0].store(1);
    host h(&status_with_give_back, &epoch_now);
    h.queue(desc(line, 0, 4, 3));
    h.queue(desc(line, 0, 6, 3));
    h.take_in();
    BOOST_TEST(h.kept == (std::vector<int>{0, 1}));
    line.words[0].store(4); // stored, then the stream is given back
    slot_0_given_back = true;
    ++test_epoch;
    engine_list out;
    h.engine.judge_pending(out);
    h.record(out);
    BOOST_REQUIRE(h.ended.size() == 1u);
    BOOST_TEST(h.ended[0].first == 1);
    BOOST_TEST((h.ended[0].second == wait_end::aborted));
    h.scan();
    BOOST_REQUIRE(h.ended.size() == 2u);
    BOOST_TEST(h.ended[1].first == 0);
    BOOST_TEST((h.ended[1].second == wait_end::reached));
    slot_0_given_back = false;
}

// Waits of one slot that a take-in ends run the reached first, in target order, whatever the
// order they were queued in and whether the host had taken them in before: a give-back (the
// slot's status retiring) and a fault, each with the unreached wait queued first.
BOOST_AUTO_TEST_CASE(a_take_in_hands_a_slots_reached_waits_out_before_the_ended) {
    completion_line line;
    line.words[0].store(1);
    line.words[5].store(1);
    {
        host h(&status_while_slot_0_is_given_back);
        h.queue(desc(line, 0, 3, 3)); // never stored: the give-back ends it
        h.queue(desc(line, 0, 1, 3)); // stored before the give-back
        h.take_in();
        BOOST_TEST(h.ids() == (std::vector<int>{1, 0}));
        BOOST_REQUIRE(h.ended.size() == 2u);
        BOOST_TEST((h.ended[0].second == wait_end::reached));
        BOOST_TEST((h.ended[1].second == wait_end::aborted));
    }
    {
        host h(&status_of_generation_3); // slot 5 faulted
        h.queue(desc(line, 5, 3, 3));    // never stored: the fault ends it
        h.queue(desc(line, 5, 2, 3));    // never stored either
        h.queue(desc(line, 5, 1, 3));    // stored before the fault
        h.queue(desc(line, 5, 1, 3));
        h.take_in();
        BOOST_TEST(h.ids() == (std::vector<int>{2, 3, 0, 1}));
        BOOST_REQUIRE(h.ended.size() == 4u);
        BOOST_TEST((h.ended[0].second == wait_end::reached));
        BOOST_TEST((h.ended[1].second == wait_end::reached));
        BOOST_TEST((h.ended[2].second == wait_end::faulted));
        BOOST_TEST((h.ended[3].second == wait_end::faulted));
    }
    // One taken in before, one queued: the same order.
    {
        host h(&status_of_generation_3);
        line.words[4].store(0);
        h.queue(desc(line, 4, 3, 3));
        h.take_in();
        h.queue(desc(line, 4, 1, 3));
        line.words[4].store(1);
        engine_list out;
        h.hand_in([&](engine_batch& b) { h.engine.take_in_settled(b, out); });
        h.engine.fault_slot(line, *slot_id::at(4), out);
        h.record(out);
        BOOST_TEST(h.ids() == (std::vector<int>{1, 0}));
    }
}

// A registration that reads the word of a slot being given back while the give-back's
// retirement finishes: the read counts for nothing (a next stream may have stored it), and the
// wait ends stale, never aborted (which would say the target was not stored) nor reached.
BOOST_AUTO_TEST_CASE(a_registration_overtaken_by_its_retirement_ends_stale) {
    completion_line line;
    line.words[0].store(4);
    const scan_engine engine(&status_retired_across_the_read, &epoch_now);
    wait at_target(desc(line, 0, 4, 3), 0);
    wait below(desc(line, 0, 6, 3), 1);
    retiring_looks = 1; // retiring before the read, stale after it
    BOOST_TEST((engine.end_before_registration(at_target) == std::optional(wait_end::stale)));
    retiring_looks = 1;
    BOOST_TEST((engine.end_before_registration(below) == std::optional(wait_end::stale)));
    retiring_looks = 2; // retiring across the read: it decides
    BOOST_TEST((engine.end_before_registration(at_target) == std::optional(wait_end::reached)));
    retiring_looks = 2;
    BOOST_TEST((engine.end_before_registration(below) == std::optional(wait_end::aborted)));

    // The same in a take-in: judged retiring, read, then found stale.
    host h(&status_retired_across_the_read);
    h.queue(desc(line, 0, 4, 3));
    retiring_looks = 2; // the take-in's judgement and the read's first
    h.take_in();
    BOOST_REQUIRE(h.ended.size() == 1u);
    BOOST_TEST((h.ended[0].second == wait_end::stale));
    retiring_looks = 0;
}

// A give-back seen after the read: the stream may have stored the target between the read and
// its give-back, so the word is read once more (it holds only that stream's stores now).
BOOST_AUTO_TEST_CASE(a_give_back_seen_after_the_read_reads_the_word_again) {
    completion_line line;
    line.words[0].store(4);
    given_back_line = &line;
    given_back_store = 5;
    given_back_looks = 0;
    BOOST_TEST((read_checked(desc(line, 0, 5, 3), &status_given_back_after_a_store) ==
                line_read::reached));
    given_back_store = 5; // stored 5 only: a wait on 6 was given back unstored
    given_back_looks = 0;
    line.words[0].store(4);
    BOOST_TEST((read_checked(desc(line, 0, 6, 3), &status_given_back_after_a_store) ==
                line_read::given_back));
    given_back_line = nullptr;
}

// A line's retirement reads the line before it goes (its memory is valid during the call):
// per slot, what the stream stored completes, in target order, and the rest is aborted.
BOOST_AUTO_TEST_CASE(retiring_a_line_completes_what_was_stored_and_aborts_the_rest) {
    completion_line a;
    completion_line b;
    host h;
    h.queue(desc(a, 0, 2));
    h.queue(desc(a, 0, 1));
    h.queue(desc(a, 3, 5));
    h.queue(desc(a, 3, 4));
    h.queue(desc(b, 0, 1));
    h.take_in();
    a.words[0].store(1);
    a.words[3].store(5);
    b.words[0].store(1); // another line: left to its scan
    engine_list out;
    h.engine.retire_line(a, out);
    h.record(out);
    BOOST_TEST(h.ids() == (std::vector<int>{1, 0, 3, 2}));
    BOOST_REQUIRE(h.ended.size() == 4u);
    BOOST_TEST((h.ended[0].second == wait_end::reached));
    BOOST_TEST((h.ended[1].second == wait_end::aborted));
    BOOST_TEST((h.ended[2].second == wait_end::reached));
    BOOST_TEST((h.ended[3].second == wait_end::reached));
    BOOST_TEST(h.engine.lines() == 1u); // b's record only: a's was dropped
    BOOST_TEST(h.engine.size() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()

// How a wait ended, mapped once (<gpu_async/core/wait_end.hpp>).
BOOST_AUTO_TEST_SUITE(wait_end_suite)

BOOST_AUTO_TEST_CASE(a_checked_read_decides_one_ending) {
    const auto both = [](line_read r) {
        return std::pair(ending_of(r, judgement::at_registration),
                         ending_of(r, judgement::while_pending));
    };
    BOOST_TEST((both(line_read::pending) ==
                std::pair<std::optional<wait_end>, std::optional<wait_end>>()));
    BOOST_TEST((both(line_read::reached) ==
                std::pair(std::optional(wait_end::reached), std::optional(wait_end::reached))));
    BOOST_TEST((both(line_read::faulted) ==
                std::pair(std::optional(wait_end::faulted), std::optional(wait_end::faulted))));
    // Stale: never began at its registration; retired while pending later.
    BOOST_TEST((both(line_read::stale) ==
                std::pair(std::optional(wait_end::stale), std::optional(wait_end::aborted))));
    // A read its line's retirement overtook counts for nothing: at registration the wait began
    // no earlier than the retirement (stale, never aborted: nothing says the target was not
    // stored); pending, it ends as the retirement ends its others.
    BOOST_TEST((both(line_read::retired) ==
                std::pair(std::optional(wait_end::stale), std::optional(wait_end::aborted))));
    BOOST_TEST((both(line_read::given_back) ==
                std::pair(std::optional(wait_end::aborted), std::optional(wait_end::aborted))));
}

BOOST_AUTO_TEST_CASE(each_ending_has_one_code) {
    const generic_codes<std::error_code>& g = std_codes();
    BOOST_TEST(!to_error_code(wait_end::reached, g));
    BOOST_TEST((to_error_code(wait_end::expired, g) == std::errc::timed_out));
    BOOST_TEST((to_error_code(wait_end::aborted, g) == std::errc::operation_canceled));
    BOOST_TEST((to_error_code(wait_end::faulted, g) == errc::device_fault));
    BOOST_TEST((to_error_code(wait_end::stale, g) == errc::stale_descriptor));
    BOOST_TEST((to_error_code(wait_end::no_memory, g) == std::errc::not_enough_memory));
    // A host's own codes are used as given.
    const generic_codes<std::error_code> mine{std::error_code(1, std::generic_category()),
                                              std::error_code(2, std::generic_category()),
                                              std::error_code(3, std::generic_category())};
    BOOST_TEST(to_error_code(wait_end::aborted, mine).value() == 1);
    BOOST_TEST(to_error_code(wait_end::expired, mine).value() == 2);
    BOOST_TEST(to_error_code(wait_end::no_memory, mine).value() == 3);
    BOOST_TEST((to_error_code(wait_end::faulted, mine) == errc::device_fault));
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_core_scan_engine
