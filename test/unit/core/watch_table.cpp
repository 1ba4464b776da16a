// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/core/watch_table.hpp>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <utility>
#include <vector>

namespace unit_core_watch_table {

using namespace gpu_async;

namespace {

constexpr std::uint64_t half = std::uint64_t{1} << 63;

memory_descriptor desc(const completion_line& line, std::size_t slot, std::uint64_t target) {
    return memory_descriptor(line, *slot_id::at(slot), target);
}

/// A sink that records what it is handed, in order (the waits' ids).
struct recorder {
    std::vector<std::pair<int, wait_end>> got;
    template <class Wait>
    void operator()(Wait* w, wait_end why) {
        got.emplace_back(w->id, why);
    }
    std::vector<int> values() const {
        std::vector<int> v;
        for (const auto& g : got)
            v.push_back(g.first);
        return v;
    }
};

/// A wait as the table sees it: linked in place, named by an id.
struct item : watch_node {
    item(const memory_descriptor& d, int i) noexcept
        : desc(d)
        , id(i) {}
    const memory_descriptor& descriptor() const noexcept { return desc; }
    memory_descriptor desc;
    int id;
};

/// A watch_table over items it owns (they stay put: a deque never moves its elements), so the
/// cases below read as registrations of ids.
class id_table : public watch_table<item> {
public:
    using handle = item*;
    template <class Sink>
    std::optional<handle> insert(const memory_descriptor& d, int id, Sink&& sink,
                                 std::optional<mono_ns> deadline = std::nullopt) {
        item& w = items_.emplace_back(d, id);
        if (!watch_table<item>::insert(w, sink, deadline)) return std::nullopt;
        return &w;
    }
    void erase(handle h) noexcept { watch_table<item>::erase(*h); }
    template <class Match>
    std::optional<handle> find(const memory_descriptor& d, Match&& match) {
        item* w = watch_table<item>::find(d, [&](const item* i) { return match(i->id); });
        if (w == nullptr) return std::nullopt;
        return w;
    }

private:
    std::deque<item> items_;
};

} // namespace

BOOST_AUTO_TEST_SUITE(watch_table_suite)

BOOST_AUTO_TEST_CASE(a_reached_descriptor_is_not_registered) {
    completion_line line;
    line.words[2].store(5);
    id_table t;
    recorder r;
    BOOST_TEST(!t.insert(desc(line, 2, 5), 1, r).has_value());
    BOOST_TEST(!t.insert(desc(line, 2, 4), 2, r).has_value());
    BOOST_TEST(t.insert(desc(line, 2, 6), 3, r).has_value());
    BOOST_TEST(t.size() == 1u);
    BOOST_TEST(t.lines() == 1u);
    BOOST_TEST(r.got.empty());
}

BOOST_AUTO_TEST_CASE(a_scan_hands_out_reached_waits_in_ascending_target_order) {
    completion_line line;
    id_table t;
    recorder r;
    for (int v : {5, 3, 9, 4, 7})
        BOOST_TEST(t.insert(desc(line, 0, static_cast<std::uint64_t>(v)), v, r).has_value());
    BOOST_TEST(t.collect(r) == 0u);
    line.words[0].store(7);
    BOOST_TEST(t.collect(r) == 4u);
    BOOST_TEST((r.values() == std::vector<int>{3, 4, 5, 7}));
    for (const auto& g : r.got)
        BOOST_TEST((g.second == wait_end::reached));
    BOOST_TEST(t.size() == 1u);
    line.words[0].store(9);
    BOOST_TEST(t.collect(line, *slot_id::at(0), r) == 1u);
    BOOST_TEST(t.empty());
    BOOST_TEST(t.lines() == 0u);
    BOOST_TEST(!t.watches(line));
}

BOOST_AUTO_TEST_CASE(ascending_order_across_a_wrap) {
    completion_line line;
    const std::uint64_t top = ~std::uint64_t{0};
    line.words[1].store(top - 3);
    id_table t;
    recorder r;
    BOOST_TEST(t.insert(desc(line, 1, 1), 4, r).has_value());
    BOOST_TEST(t.insert(desc(line, 1, top), 2, r).has_value());
    BOOST_TEST(t.insert(desc(line, 1, 0), 3, r).has_value());
    BOOST_TEST(t.insert(desc(line, 1, top - 1), 1, r).has_value());
    line.words[1].store(1);
    BOOST_TEST(t.collect(r) == 4u);
    BOOST_TEST((r.values() == std::vector<int>{1, 2, 3, 4}));
}

// A wait registered on a slot whose word moved (and wrapped) since the slot's last scan is
// placed by the value its own registration read, not by a second read (the registration race).
BOOST_AUTO_TEST_CASE(registration_uses_one_read_of_the_word) {
    completion_line line;
    id_table t;
    recorder r;
    BOOST_TEST(t.insert(desc(line, 0, 10), 1, r).has_value()); // anchor 0
    line.words[0].store(20); // not scanned yet: wait 1 has completed
    BOOST_TEST(!t.insert(desc(line, 0, 15), 2, r).has_value()); // reached at this read
    BOOST_TEST(t.insert(desc(line, 0, 30), 3, r).has_value());
    BOOST_TEST(t.collect(r) == 1u);
    BOOST_TEST((r.values() == std::vector<int>{1}));
    line.words[0].store(30);
    BOOST_TEST(t.collect(r) == 1u);
    BOOST_TEST((r.values() == std::vector<int>{1, 3}));
}

// The target of a new wait that lies outside the slot's order under its anchor (the word moved
// by more than 2^63 since the last scan) rebases the slot at that read: what the read reached is
// handed out by the insert itself.
BOOST_AUTO_TEST_CASE(insert_rebases_a_slot_whose_word_moved_far) {
    completion_line line;
    id_table t;
    recorder r;
    BOOST_TEST(t.insert(desc(line, 0, 100), 1, r).has_value());       // anchor 0
    BOOST_TEST(t.insert(desc(line, 0, half - 10), 2, r).has_value()); // distance < 2^63
    line.words[0].store(half + 50);                                   // unscanned
    const std::uint64_t far = half + 60; // distance from anchor 0: > 2^63, pending at the read
    BOOST_TEST(t.insert(desc(line, 0, far), 3, r).has_value());
    // The read (2^63 + 50) reached both earlier waits; they were handed out in order.
    BOOST_TEST((r.values() == std::vector<int>{1, 2}));
    BOOST_TEST(t.size() == 1u);
    line.words[0].store(far);
    BOOST_TEST(t.collect(r) == 1u);
    BOOST_TEST((r.values() == std::vector<int>{1, 2, 3}));
}

// The stale-anchor case: a slot that is never empty while its word advances by more than 2^63
// in steps each below 2^63 still completes every reached wait.
BOOST_AUTO_TEST_CASE(a_slot_never_empty_across_more_than_half_the_ring) {
    completion_line line;
    id_table t;
    recorder r;
    const std::uint64_t step = (half / 4) * 3; // 3 * 2^61, below 2^63
    std::uint64_t word = 0;
    // A wait far ahead keeps the slot non-empty throughout.
    BOOST_TEST(t.insert(desc(line, 0, word + half), 0, r).has_value());
    int next = 1;
    for (int round = 0; round < 8; ++round) {
        const std::uint64_t target = word + step - 1;
        BOOST_TEST(t.insert(desc(line, 0, target), next, r).has_value());
        word += step;
        line.words[0].store(word);
        recorder got;
        t.collect(got);
        // Whatever the table hands out must be reached now, and the new wait must be in it.
        for (const auto& g : got.got)
            BOOST_TEST((g.second == wait_end::reached));
        const std::vector<int> values = got.values();
        BOOST_TEST((std::find(values.begin(), values.end(), next) != values.end()));
        ++next;
        if (t.empty()) BOOST_TEST(t.insert(desc(line, 0, word + half), 100 + round, r).has_value());
    }
}

BOOST_AUTO_TEST_CASE(erase_and_find) {
    completion_line a, b;
    id_table t;
    recorder r;
    auto h1 = t.insert(desc(a, 0, 5), 1, r);
    auto h2 = t.insert(desc(a, 0, 5), 2, r);
    auto h3 = t.insert(desc(b, 7, 9), 3, r);
    BOOST_REQUIRE(h1 && h2 && h3);
    BOOST_TEST(t.lines() == 2u);
    auto f = t.find(desc(a, 0, 5), [](int v) { return v == 2; });
    BOOST_REQUIRE(f.has_value());
    t.erase(*f);
    BOOST_TEST(!t.find(desc(a, 0, 5), [](int v) { return v == 2; }).has_value());
    BOOST_TEST(t.find(desc(a, 0, 5), [](int v) { return v == 1; }).has_value());
    BOOST_TEST(!t.find(desc(a, 1, 5), [](int) { return true; }).has_value());
    BOOST_TEST(!t.find(desc(a, 0, 6), [](int) { return true; }).has_value());
    // A target that cannot be in the slot's order is answered "no" without a lookup.
    BOOST_TEST(!t.find(desc(a, 0, half + 7), [](int) { return true; }).has_value());
    t.erase(*h3);
    BOOST_TEST(t.lines() == 1u);
    BOOST_TEST(!t.watches(b));
    t.erase(*h1);
    BOOST_TEST(t.empty());
    BOOST_TEST(t.lines() == 0u);
    a.words[0].store(5);
    BOOST_TEST(t.collect(r) == 0u);
}

BOOST_AUTO_TEST_CASE(deadlines_expire_earliest_first_and_leave_the_slot) {
    completion_line line;
    id_table t;
    recorder r;
    BOOST_TEST(t.insert(desc(line, 0, 1), 1, r, mono_ns{30}).has_value());
    BOOST_TEST(t.insert(desc(line, 0, 2), 2, r, mono_ns{10}).has_value());
    BOOST_TEST(t.insert(desc(line, 0, 3), 3, r).has_value());
    BOOST_TEST((t.earliest_deadline() == mono_ns{10}));
    BOOST_TEST(t.collect_expired(mono_ns{9}, r) == 0u);
    BOOST_TEST(t.collect_expired(mono_ns{30}, r) == 2u);
    BOOST_TEST((r.values() == std::vector<int>{2, 1}));
    BOOST_TEST((r.got[0].second == wait_end::expired));
    BOOST_TEST(!t.earliest_deadline().has_value());
    line.words[0].store(3);
    recorder r2;
    BOOST_TEST(t.collect(r2) == 1u);
    BOOST_TEST((r2.values() == std::vector<int>{3}));
    // A reached wait with a deadline leaves the deadline list too.
    BOOST_TEST(t.insert(desc(line, 0, 4), 4, r, mono_ns{50}).has_value());
    line.words[0].store(4);
    BOOST_TEST(t.collect(r2) == 1u);
    BOOST_TEST(!t.earliest_deadline().has_value());
}

BOOST_AUTO_TEST_CASE(remove_line_and_clear_hand_out_every_wait) {
    completion_line a, b;
    id_table t;
    recorder r;
    BOOST_TEST(t.insert(desc(a, 0, 1), 1, r, mono_ns{5}).has_value());
    BOOST_TEST(t.insert(desc(a, 3, 1), 2, r).has_value());
    BOOST_TEST(t.insert(desc(b, 0, 1), 3, r).has_value());
    BOOST_TEST(t.remove_line(a, r) == 2u);
    BOOST_TEST(!t.watches(a));
    BOOST_TEST(!t.earliest_deadline().has_value());
    BOOST_TEST(t.remove_line(a, r) == 0u);
    BOOST_TEST(t.clear(r) == 1u);
    BOOST_TEST(t.empty());
    std::vector<int> v = r.values();
    std::sort(v.begin(), v.end());
    BOOST_TEST((v == std::vector<int>{1, 2, 3}));
    for (const auto& g : r.got)
        BOOST_TEST((g.second == wait_end::aborted));
}

// Property: over random store histories (small steps, jumps near 2^63 and 2^64, arbitrary
// values) with random registrations, removals and scans, the table hands out exactly the waits a
// brute-force model finds reached at the time of each scan, each once, and within a slot in
// ascending distance from the word the previous scan (or the registration into an empty slot)
// read.
BOOST_AUTO_TEST_CASE(matches_a_brute_force_model_over_random_histories) {
    std::mt19937_64 rng(20261130);
    auto pick_step = [&]() -> std::uint64_t {
        switch (rng() % 8) {
        case 0:
            return rng() % 4;
        case 1:
            return 1 + rng() % 16;
        case 2:
            return half - 1 - rng() % 4;
        case 3:
            return half + rng() % 4;
        case 4:
            return 0 - (1 + rng() % 4); // near 2^64: a small step backwards
        case 5:
            return rng();
        default:
            return 1 + rng() % 3;
        }
    };
    for (int history = 0; history < 200; ++history) {
        std::array<completion_line, 2> lines;
        const std::uint64_t start = (history % 3 == 0) ? ~std::uint64_t{0} - 5 : rng();
        for (auto& l : lines)
            for (auto& w : l.words)
                w.store(start);
        id_table t;
        struct pending {
            std::size_t line, slot;
            std::uint64_t target;
            id_table::handle h;
        };
        std::map<int, pending> model;
        std::array<std::array<std::uint64_t, line_words>, 2> anchor{};
        int next = 0;
        for (int op = 0; op < 400; ++op) {
            const std::size_t li = rng() % 2;
            const std::size_t s = rng() % 3; // few slots: more waits per slot
            completion_line& line = lines[li];
            const std::uint64_t word = line.words[s].load();
            switch (rng() % 6) {
            case 0:
            case 1: { // register
                std::uint64_t target = 0;
                switch (rng() % 4) {
                case 0:
                    target = word + 1 + rng() % 8;
                    break;
                case 1:
                    target = word + half - rng() % 4;
                    break;
                case 2:
                    target = word - rng() % 4;
                    break;
                default:
                    target = rng();
                }
                const bool slot_was_empty = std::none_of(model.begin(), model.end(), [&](auto& p) {
                    return p.second.line == li && p.second.slot == s;
                });
                recorder r;
                const int id = next++;
                auto h = t.insert(desc(line, s, target), id, r);
                // What the insert handed out (a rebase) must be reached at `word`.
                for (const auto& g : r.got) {
                    BOOST_REQUIRE(model.count(g.first));
                    BOOST_TEST(sequence_reached(word, model[g.first].target));
                    model.erase(g.first);
                }
                BOOST_TEST(h.has_value() == !sequence_reached(word, target));
                if (!r.got.empty() || slot_was_empty) anchor[li][s] = word;
                if (h) model[id] = pending{li, s, target, *h};
                break;
            }
            case 2: { // remove one
                if (model.empty()) break;
                auto it = model.begin();
                std::advance(it, static_cast<long>(rng() % model.size()));
                t.erase(it->second.h);
                model.erase(it);
                break;
            }
            case 3:
            case 4: { // store
                line.words[s].store(word + pick_step());
                // The park predicate agrees with the model on the line just stored to.
                const bool any = std::any_of(model.begin(), model.end(), [&](auto& p) {
                    return p.second.line == li &&
                           sequence_reached(lines[li].words[p.second.slot].load(), p.second.target);
                });
                BOOST_TEST(t.any_reached(line) == any);
                break;
            }
            default: { // scan everything
                std::array<std::array<std::uint64_t, line_words>, 2> before = anchor;
                recorder r;
                t.collect(r);
                std::vector<int> expected;
                for (auto& [id, p] : model)
                    if (sequence_reached(lines[p.line].words[p.slot].load(), p.target))
                        expected.push_back(id);
                std::vector<int> got = r.values();
                // Ascending distance from the previous anchor within each slot.
                std::map<std::pair<std::size_t, std::size_t>, std::uint64_t> last;
                for (int id : got) {
                    BOOST_REQUIRE(model.count(id));
                    const pending& p = model[id];
                    const std::uint64_t dist = p.target - before[p.line][p.slot];
                    auto key = std::make_pair(p.line, p.slot);
                    if (last.count(key)) BOOST_TEST(dist >= last[key]);
                    last[key] = dist;
                }
                std::sort(got.begin(), got.end());
                BOOST_TEST(got == expected, "history " << history << " op " << op);
                for (std::size_t l = 0; l < 2; ++l)
                    BOOST_TEST(!t.any_reached(lines[l])); // all handed out
                for (int id : got)
                    model.erase(id);
                for (std::size_t l = 0; l < 2; ++l)
                    for (std::size_t k = 0; k < line_words; ++k)
                        anchor[l][k] = lines[l].words[k].load();
            }
            }
            BOOST_TEST(t.size() == model.size());
        }
    }
}

BOOST_AUTO_TEST_CASE(a_node_pool_reuses_blocks_of_its_size_and_keeps_at_most_max_free) {
    detail::node_pool pool;
    void* a = pool.allocate(48); // the pool's size from now on
    BOOST_TEST(pool.kept() == 0u);
    pool.deallocate(a, 48);
    BOOST_TEST(pool.kept() == 1u);
    BOOST_TEST(pool.allocate(48) == a); // the freed block, not the heap's
    BOOST_TEST(pool.kept() == 0u);
    void* other = pool.allocate(96); // another size: the heap's, never kept
    pool.deallocate(other, 96);
    BOOST_TEST(pool.kept() == 0u);
    pool.deallocate(a, 48);
    std::vector<void*> blocks;
    for (std::size_t i = 0; i < detail::node_pool::max_free + 10; ++i)
        blocks.push_back(pool.allocate(48));
    BOOST_TEST(pool.kept() == 0u);
    for (void* b : blocks)
        pool.deallocate(b, 48);
    BOOST_TEST(pool.kept() == detail::node_pool::max_free); // the rest went back to the heap
}

BOOST_AUTO_TEST_CASE(waits_that_come_and_go_reuse_their_deadline_nodes) {
    completion_line line;
    id_table t;
    recorder r;
    BOOST_TEST(t.nodes_kept() == 0u);
    // One wait at a time: a wait without a deadline takes no node (it is linked in place); one
    // with a deadline takes the node the last one left.
    for (std::uint64_t target = 1; target <= 100; ++target) {
        const std::optional<mono_ns> deadline =
            target % 2 == 0 ? std::optional<mono_ns>(mono_ns{1000 + target}) : std::nullopt;
        BOOST_TEST_REQUIRE(
            t.insert(desc(line, 1, target), static_cast<int>(target), r, deadline).has_value());
        BOOST_TEST(t.nodes_kept() == (deadline || target < 3 ? 0u : 1u));
        line.words[1].store(target);
        BOOST_TEST_REQUIRE(t.collect(r) == 1u);
        BOOST_TEST(t.nodes_kept() == (target == 1 ? 0u : 1u));
    }
    BOOST_TEST(r.got.size() == 100u);
    // Many at once: their nodes are kept for the next, up to the pool's cap.
    const std::size_t many = detail::node_pool::max_free + 100;
    for (std::size_t i = 0; i < many; ++i)
        BOOST_TEST_REQUIRE(
            t.insert(desc(line, 2, 1 + i), static_cast<int>(i), r, mono_ns{5000}).has_value());
    BOOST_TEST(t.nodes_kept() == 0u);
    line.words[2].store(many);
    BOOST_TEST(t.collect(r) == many);
    BOOST_TEST(t.nodes_kept() == detail::node_pool::max_free);
    BOOST_TEST(!t.earliest_deadline().has_value());
    // Cancellation gives its node back the same way.
    auto h = t.insert(desc(line, 3, 1), 7, r, mono_ns{6000});
    BOOST_TEST_REQUIRE(h.has_value());
    BOOST_TEST(t.nodes_kept() == detail::node_pool::max_free - 1);
    t.erase(*h);
    BOOST_TEST(t.nodes_kept() == detail::node_pool::max_free);
}

// The slot's waits are linked in a tree of their own: targets in descending order (the worst
// order for an unbalanced tree), many waits on one target, and removals from the middle keep
// the hand-out order: ascending targets, one target's waits in registration order.
BOOST_AUTO_TEST_CASE(one_slots_waits_keep_their_order_in_any_registration_order) {
    completion_line line;
    id_table t;
    recorder r;
    constexpr int n = 20000;
    std::vector<id_table::handle> handles;
    for (int i = 0; i < n; ++i) {
        // Targets n/2 .. 1, each twice: ids 2k and 2k+1 share a target.
        const auto target = static_cast<std::uint64_t>(n / 2 - i / 2);
        const auto h = t.insert(desc(line, 4, target), i, r);
        BOOST_TEST_REQUIRE(h.has_value());
        handles.push_back(*h);
    }
    // Every third wait leaves by removal.
    for (int i = 0; i < n; i += 3)
        t.erase(handles[static_cast<std::size_t>(i)]);
    BOOST_TEST(!t.find(desc(line, 4, n / 2), [](int id) { return id == 0; }).has_value());
    BOOST_TEST(t.find(desc(line, 4, n / 2), [](int id) { return id == 1; }).has_value());
    line.words[4].store(n / 4);
    t.collect(r);
    line.words[4].store(n / 2);
    t.collect(r);
    BOOST_TEST(t.empty());
    std::vector<int> expected;
    for (int target = 1; target <= n / 2; ++target)
        for (int id : {n - 2 * target, n - 2 * target + 1})
            if (id % 3 != 0) expected.push_back(id);
    BOOST_TEST(r.values() == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_lines_record_is_kept_for_the_next_line_emptied) {
    std::array<completion_line, 20> lines;
    id_table t;
    recorder r;
    // A line's last wait leaves: its record is kept, and the next line takes it.
    BOOST_TEST_REQUIRE(t.insert(desc(lines[0], 3, 5), 1, r).has_value());
    lines[0].words[3].store(5);
    BOOST_TEST(t.collect(r) == 1u);
    BOOST_TEST(t.lines() == 0u);
    BOOST_TEST(!t.watches(lines[0]));
    BOOST_TEST(t.line_records_kept() == 1u);
    lines[1].words[3].store(100); // the taken record anchors at this line's word, not the old
    BOOST_TEST_REQUIRE(t.insert(desc(lines[1], 3, 101), 2, r).has_value());
    BOOST_TEST(t.line_records_kept() == 0u);
    BOOST_TEST(t.watches(lines[1]));
    BOOST_TEST(!t.watches(lines[0]));
    lines[0].words[3].store(1000); // the old line is not read any more
    BOOST_TEST(t.collect(r) == 0u);
    lines[1].words[3].store(101);
    BOOST_TEST(t.collect(r) == 1u);
    BOOST_TEST((r.values() == std::vector<int>{1, 2}));
    // A line removed with waits in several slots: its record is emptied before it is kept.
    for (std::size_t slot = 0; slot < line_words; ++slot)
        BOOST_TEST_REQUIRE(
            t.insert(desc(lines[2], slot, 1), 10 + static_cast<int>(slot), r, mono_ns{50})
                .has_value());
    BOOST_TEST(t.remove_line(lines[2], r) == line_words);
    BOOST_TEST(t.size() == 0u);
    BOOST_TEST(!t.earliest_deadline().has_value());
    BOOST_TEST(t.line_records_kept() == 1u);
    BOOST_TEST_REQUIRE(t.insert(desc(lines[3], 0, 1), 20, r).has_value());
    BOOST_TEST(t.size() == 1u);
    lines[2].words[0].store(1);
    lines[3].words[0].store(1);
    r.got.clear();
    BOOST_TEST(t.collect(r) == 1u);
    BOOST_TEST((r.values() == std::vector<int>{20}));
    BOOST_TEST(t.collect_expired(mono_ns{100}, r) == 0u);
    // At most 16 are kept.
    for (completion_line& l : lines)
        BOOST_TEST_REQUIRE(t.insert(desc(l, 1, 1), 0, r).has_value());
    BOOST_TEST(t.line_records_kept() == 0u);
    for (completion_line& l : lines)
        l.words[1].store(1);
    BOOST_TEST(t.collect(r) == lines.size());
    BOOST_TEST(t.line_records_kept() == 16u);
    BOOST_TEST(t.lines() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_core_watch_table
