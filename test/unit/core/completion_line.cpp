// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/core/completion_line.hpp>

#include <boost/test/unit_test.hpp>

#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <thread>
#include <type_traits>

namespace unit_core_completion_line {

using namespace gpu_async;

namespace {
constexpr std::uint64_t max64 = std::numeric_limits<std::uint64_t>::max();

// A line owner in miniature for read_checked: its slot is at `generation`, and the status
// function, when `retire_on_judge` is set, retires and reuses the slot right after it judged
// (between a reader's judgement and its read): a new stream stores `store` into the word.
struct racing_owner {
    std::uint64_t generation = 1;
    bool faulted = false;
    int judgements = 0;
    bool retire_on_judge = false;
    bool fault_on_judge = false;
    std::uint64_t retiring = 0;      // the generation being given back (0: none)
    bool give_back_on_judge = false; // the slot's stream is given back right after a judgement
    bool finish_on_judge = false;    // the give-back ends and a next stream stores `store`
    completion_line* line = nullptr;
    std::uint64_t store = 0;
};
racing_owner owner;

line_status owner_status(const memory_descriptor& d) noexcept {
    ++owner.judgements;
    const line_status st = d.generation() == owner.generation
                               ? (owner.faulted ? line_status::faulted : line_status::live)
                           : d.generation() == owner.retiring ? line_status::retiring
                                                              : line_status::stale;
    if (owner.give_back_on_judge) {
        owner.give_back_on_judge = false;
        owner.retiring = owner.generation++; // the word still holds what its stream stored
    }
    if (owner.finish_on_judge) {
        owner.finish_on_judge = false;
        owner.retiring = 0;
        ++owner.generation; // a next stream, which stores at once
        owner.line->words[0].store(owner.store, std::memory_order_release);
    }
    if (owner.retire_on_judge) {
        owner.retire_on_judge = false;
        owner.generation += 2; // given back, and a stream made on the slot
        owner.line->words[0].store(owner.store, std::memory_order_release);
    }
    if (owner.fault_on_judge) {
        owner.fault_on_judge = false;
        owner.line->words[0].store(owner.store, std::memory_order_release); // its last store
        owner.faulted = true;
    }
    return st;
}
} // namespace

BOOST_AUTO_TEST_SUITE(completion_line_suite)

BOOST_AUTO_TEST_CASE(layout) {
    static_assert(line_words == 8);
    static_assert(sizeof(completion_line) == 64);
    static_assert(alignof(completion_line) == 64);
    static_assert(!std::is_copy_constructible_v<completion_line>);
    static_assert(std::is_same_v<decltype(completion_line::words),
                                 std::array<std::atomic<std::uint64_t>, 8>>);
    BOOST_TEST(sizeof(completion_line) == 64u);
}

BOOST_AUTO_TEST_CASE(all_zero_when_made) {
    // Dirty the storage first so a zero cannot come from a fresh page by luck.
    alignas(64) unsigned char storage[sizeof(completion_line)];
    std::fill(std::begin(storage), std::end(storage), static_cast<unsigned char>(0xAB));
    auto* line = new (storage) completion_line;
    for (std::size_t i = 0; i < line_words; ++i)
        BOOST_TEST(line->words[i].load() == 0u);
    line->~completion_line();

    auto heap = std::make_unique<completion_line>();
    BOOST_TEST(reinterpret_cast<std::uintptr_t>(heap.get()) % 64 == 0u);
    for (auto& w : heap->words)
        BOOST_TEST(w.load() == 0u);
}

BOOST_AUTO_TEST_CASE(slot_bounds) {
    for (std::size_t i = 0; i < 8; ++i) {
        auto s = slot_id::at(i);
        BOOST_TEST_REQUIRE(s.has_value());
        BOOST_TEST(s->index() == i);
    }
    BOOST_TEST(!slot_id::at(8).has_value());
    BOOST_TEST(!slot_id::at(9).has_value());
    BOOST_TEST(!slot_id::at(64).has_value());
    BOOST_TEST(!slot_id::at(std::numeric_limits<std::size_t>::max()).has_value());
    static_assert(slot_id::at(7).has_value() && !slot_id::at(8).has_value());
    static_assert(!std::is_default_constructible_v<slot_id>);
    static_assert(!std::is_constructible_v<slot_id, std::size_t>);
    BOOST_TEST((slot_id::at(3) == slot_id::at(3)));
    BOOST_TEST((slot_id::at(3) != slot_id::at(4)));
}

BOOST_AUTO_TEST_CASE(sequence_vectors) {
    // The wrapping order: reached when word - target (mod 2^64) is below 2^63.
    static_assert(!sequence_reached(0, 5));
    static_assert(!sequence_reached(4, 5));
    static_assert(sequence_reached(5, 5));
    static_assert(sequence_reached(6, 5));
    static_assert(sequence_reached(1, max64));
    static_assert(!sequence_reached(max64, 1));
    // The half-range boundary and wrap in both directions.
    BOOST_TEST(sequence_reached(0, 0));
    BOOST_TEST(sequence_reached(0, max64));
    BOOST_TEST(!sequence_reached(max64, 0));
    BOOST_TEST(sequence_reached((std::uint64_t{1} << 63) - 1, 0));
    BOOST_TEST(!sequence_reached(std::uint64_t{1} << 63, 0));
    BOOST_TEST(sequence_reached(5 + (std::uint64_t{1} << 63) - 1, 5));
    BOOST_TEST(!sequence_reached(5 + (std::uint64_t{1} << 63), 5));
    BOOST_TEST(sequence_reached(max64 - 2, max64 - 3));
    BOOST_TEST(!sequence_reached(max64 - 3, max64 - 2));
    BOOST_TEST(sequence_reached(100, max64 - 100));
}

BOOST_AUTO_TEST_CASE(descriptor_accessors_and_completion) {
    completion_line line;
    const auto s = *slot_id::at(6);
    memory_descriptor d(line, s, 5);
    BOOST_TEST(&d.line() == &line);
    BOOST_TEST((d.slot() == s));
    BOOST_TEST(d.target() == 5u);
    BOOST_TEST(&d.word() == &line.words[6]);

    BOOST_TEST(!d.is_complete());
    line.words[6].store(4);
    BOOST_TEST(!d.is_complete());
    line.words[5].store(100); // another slot of the same line does not complete it
    BOOST_TEST(!d.is_complete());
    line.words[6].store(5);
    BOOST_TEST(d.is_complete());
    // A later store that lands before anyone looks still completes it.
    memory_descriptor d2(line, s, 7);
    line.words[6].store(9);
    BOOST_TEST(d2.is_complete());
    BOOST_TEST(reached(line, s, 9));
    BOOST_TEST(!reached(line, s, 10));

    // Wrap-around: a descriptor targeting past 2^64-1 completes once the word wraps.
    memory_descriptor wrap(line, s, 1);
    line.words[6].store(max64);
    BOOST_TEST(!wrap.is_complete());
    line.words[6].store(1);
    BOOST_TEST(wrap.is_complete());
    memory_descriptor near_top(line, s, max64);
    BOOST_TEST(near_top.is_complete()); // word 1 follows 2^64-1 after the wrap

    BOOST_TEST((d == memory_descriptor(line, s, 5)));
    BOOST_TEST(!(d == memory_descriptor(line, s, 6)));
}

BOOST_AUTO_TEST_CASE(acquire_makes_payload_visible) {
    // The producer writes a payload, then release-stores the sequence; once the consumer sees
    // the descriptor complete (acquire), it must see the payload. Repeated to give a weak
    // ordering a chance to show; ThreadSanitizer checks the same edge in CI.
    constexpr int rounds = 2000;
    completion_line line;
    const auto s = *slot_id::at(2);
    std::array<std::uint64_t, 16> payload{};
    std::atomic<int> bad{0};
    std::atomic<int> ack{0};

    std::thread consumer([&] {
        for (int r = 1; r <= rounds; ++r) {
            memory_descriptor d(line, s, static_cast<std::uint64_t>(r));
            while (!d.is_complete())
                std::this_thread::yield();
            for (auto v : payload)
                if (v != static_cast<std::uint64_t>(r)) bad.fetch_add(1);
            ack.store(r, std::memory_order_release);
        }
    });
    for (int r = 1; r <= rounds; ++r) {
        for (auto& v : payload)
            v = static_cast<std::uint64_t>(r);
        line.words[2].store(static_cast<std::uint64_t>(r), std::memory_order_release);
        // Wait for the consumer to check round r before overwriting the payload.
        while (ack.load(std::memory_order_acquire) != r)
            std::this_thread::yield();
    }
    consumer.join();
    BOOST_TEST(bad.load() == 0);
}

BOOST_AUTO_TEST_CASE(a_read_across_a_slots_reuse_never_counts) {
    // Judged live, then the slot is given back and a new stream stores the old descriptor's
    // target before the word is read: the read must not complete the old descriptor.
    completion_line line;
    owner = racing_owner{};
    owner.line = &line;
    owner.store = 7;
    owner.retire_on_judge = true;
    const memory_descriptor old(line, *slot_id::at(0), 7, 1);
    BOOST_TEST((read_checked(old, &owner_status) == line_read::retired));
    BOOST_TEST(old.is_complete()); // the word is there: only the judgement after the read knew
    // Stale before the read: the line is not read at all.
    owner.judgements = 0;
    BOOST_TEST((read_checked(old, &owner_status) == line_read::stale));
    BOOST_TEST(owner.judgements == 1);
    // The new stream's own descriptor completes.
    BOOST_TEST((read_checked(memory_descriptor(line, *slot_id::at(0), 7, 3), &owner_status) ==
                line_read::reached));
}

BOOST_AUTO_TEST_CASE(a_fault_seen_across_a_read_still_completes_what_was_stored) {
    // The stream stores the target and then faults between the judgement and the read of a
    // reader that read too early: what it stored before the fault completes.
    completion_line line;
    owner = racing_owner{};
    owner.line = &line;
    owner.store = 4;
    const memory_descriptor d(line, *slot_id::at(0), 4, 1);
    owner.fault_on_judge = true;
    BOOST_TEST((read_checked(d, &owner_status) == line_read::reached));
    const memory_descriptor later(line, *slot_id::at(0), 5, 1);
    BOOST_TEST((read_checked(later, &owner_status) == line_read::faulted));
    // Without a status function, or a generation, every descriptor is live.
    BOOST_TEST((read_checked(later, nullptr) == line_read::pending));
    BOOST_TEST((read_checked(memory_descriptor(line, *slot_id::at(0), 4), &owner_status) ==
                line_read::reached));
}

BOOST_AUTO_TEST_CASE(a_read_while_a_slot_is_given_back_decides_what_its_stream_stored) {
    // Between a give-back and the end of its retirement the slot's word holds only what the
    // given-back stream stored: a read then counts, stored or not.
    completion_line line;
    owner = racing_owner{};
    owner.line = &line;
    line.words[0].store(5);
    owner.generation = 2;
    owner.retiring = 1;
    BOOST_TEST((read_checked(memory_descriptor(line, *slot_id::at(0), 5, 1), &owner_status) ==
                line_read::reached));
    BOOST_TEST((read_checked(memory_descriptor(line, *slot_id::at(0), 6, 1), &owner_status) ==
                line_read::given_back));
    // A give-back between the judgement and the read: the read was still the stream's.
    owner = racing_owner{};
    owner.line = &line;
    owner.give_back_on_judge = true;
    BOOST_TEST((read_checked(memory_descriptor(line, *slot_id::at(0), 5, 1), &owner_status) ==
                line_read::reached));
    owner.generation = 1;
    owner.retiring = 0;
    owner.give_back_on_judge = true;
    BOOST_TEST((read_checked(memory_descriptor(line, *slot_id::at(0), 6, 1), &owner_status) ==
                line_read::given_back));
    // The retirement ends and a next stream stores between the judgement and the read: what was
    // read (the next stream's number) does not count.
    owner = racing_owner{};
    owner.line = &line;
    owner.generation = 2;
    owner.retiring = 1;
    owner.store = 6;
    owner.finish_on_judge = true;
    BOOST_TEST((read_checked(memory_descriptor(line, *slot_id::at(0), 6, 1), &owner_status) ==
                line_read::retired));
    BOOST_TEST(line.words[0].load() == 6u);
}

BOOST_AUTO_TEST_CASE(generations_never_come_back) {
    // A descriptor keeps a generation far past 32 bits; a line owner's counter stops at
    // max_generation, which is never handed out live, rather than wrap to an old generation.
    completion_line line;
    const std::uint64_t past32 = (std::uint64_t{1} << 32) + 5;
    const memory_descriptor d(line, *slot_id::at(7), 9, past32);
    BOOST_TEST(d.generation() == past32);
    BOOST_TEST(d.slot().index() == 7u);
    BOOST_TEST(d.target() == 9u);
    BOOST_TEST(memory_descriptor(line, *slot_id::at(3), 1, max_generation).generation() ==
               max_generation);
    BOOST_TEST(detail::next_generation(0) == 1u);
    BOOST_TEST(detail::next_generation(0xffffffffu) == std::uint64_t{1} << 32);
    BOOST_TEST(detail::next_generation(max_generation - 1) == max_generation);
    BOOST_TEST(detail::next_generation(max_generation) == max_generation);
    static_assert(max_generation >= (std::uint64_t{1} << 55));
    BOOST_TEST(!(memory_descriptor(line, *slot_id::at(0), 1, past32) ==
                 memory_descriptor(line, *slot_id::at(0), 1, 5)));
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_core_completion_line
