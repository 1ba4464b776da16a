// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/line/impl/line_life.ipp: the side table of line generations and faults, and the
// retirements and faults that change it and tell the line watchers.
//
#ifndef GPU_ASYNC_IMPL_LINE_LIFE_IPP
#define GPU_ASYNC_IMPL_LINE_LIFE_IPP

#include <gpu_async/core/detail/scan_engine.hpp>
#include <gpu_async/line/detail/line_watchers.hpp>
#include <gpu_async/line/impl/line_watchers.ipp>
#include <gpu_async/line/line_life.hpp>
#include <gpu_async/wait/detail/ranked_mutex.hpp>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace gpu_async {

namespace detail {

// The side table: a shard lock is a leaf (ranked in <gpu_async/wait/detail/ranked_mutex.hpp>).
struct line_side_table {
    // A line's state in the side table: the generation adopt_line gave it, and each slot's
    // generation (shifted left by one) with the slot's fault in the low bit. Each slot is one
    // atomic so that a status reads a consistent pair.
    struct line_state {
        std::atomic<std::uint64_t> generation{0};
        std::array<std::atomic<std::uint64_t>, line_words> slots{};
        // Per slot, the generation whose give-back (retire_slot) is still being carried to the
        // watchers, else 0: until every watcher has ended that generation's waits, the slot's
        // word holds only what its stream stored, so those waits are read, not judged stale.
        std::array<std::atomic<std::uint64_t>, line_words> retiring{};
        std::uint64_t issued = 0; // the last generation given to the line or a slot (`mutex`)
    };
    struct shard {
        ranked_mutex mutex{lock_rank::line_shard};
        // Written under `mutex`, read without it through state_of's per-thread cache: a node is
        // never erased, so a state's address is the line's for good.
        std::unordered_map<const completion_line*, line_state> states;
    };
    static constexpr std::size_t shards = 64;
    std::array<shard, shards> table;
    // Bumped after any generation or fault bit changes (line_life_epoch): a reactor that judged
    // a descriptor at one epoch need not judge it again while the epoch has not moved.
    // 64 bits: it never comes back to a value a reactor judged at (0 means "not judged").
    std::atomic<std::uint64_t> epoch{1};
    void bump() noexcept { epoch.fetch_add(1, std::memory_order_acq_rel); }

    shard& shard_of(const completion_line* line) noexcept {
        return table[(reinterpret_cast<std::uintptr_t>(line) / sizeof(completion_line)) % shards];
    }
};

GPU_ASYNC_DECL line_side_table& line_table() noexcept {
    // Never destroyed: line owners with static storage may retire lines during exit, and a
    // descriptor of any line ever adopted must find its generation.
    static line_side_table* t = new line_side_table();
    return *t;
}

GPU_ASYNC_DECL std::uint64_t line_life_epoch() noexcept {
    return line_table().epoch.load(std::memory_order_acquire);
}

using line_state = line_side_table::line_state;

// A slot's state word: its generation (below 2^56) shifted left by one, its fault in the low
// bit.
constexpr std::uint64_t slot_word(std::uint64_t generation) noexcept {
    return generation << 1;
}
constexpr std::uint64_t generation_of(std::uint64_t word) noexcept {
    return word >> 1;
}

// The next generation of `st`'s line (its shard's lock held): never 0, and later than any the
// line or a slot was given, so no slot ever takes back a generation its descriptors carried
// (the counter stops at max_generation, which is never live).
inline std::uint64_t issue_generation(line_state& st) noexcept {
    st.issued = next_generation(st.issued);
    return st.issued;
}

// Gives the line and each slot of `st` a new generation with no fault (its shard's lock held).
inline std::uint64_t renew_line(line_state& st) noexcept {
    const std::uint64_t g = issue_generation(st);
    st.generation.store(g, std::memory_order_release);
    for (auto& slot : st.slots)
        slot.store(slot_word(g), std::memory_order_release);
    return g;
}

// Calls f(line_state&) under the shard's lock if `line` was ever adopted.
template <class F>
void update_state(const completion_line& line, F&& f) noexcept {
    auto& sh = line_table().shard_of(&line);
    std::lock_guard lk(sh.mutex);
    const auto it = sh.states.find(&line);
    if (it != sh.states.end()) f(it->second);
}

// The side table's state of `line`, or null when it was never adopted. The lookup is lock-free
// once a thread has seen the line (a small per-thread cache of state addresses, which never
// change); the first look takes the shard's lock.
inline const line_state* state_of(const completion_line& line) noexcept {
    struct cached {
        const completion_line* line;
        const line_state* state;
    };
    constexpr std::size_t ways = 64;
    static thread_local std::array<cached, ways> cache{};
    cached& c = cache[(reinterpret_cast<std::uintptr_t>(&line) / sizeof(completion_line)) % ways];
    if (c.line == &line) return c.state;
    auto& sh = line_table().shard_of(&line);
    std::lock_guard lk(sh.mutex);
    const auto it = sh.states.find(&line);
    if (it == sh.states.end()) return nullptr;
    c = cached{&line, &it->second};
    return c.state;
}

} // namespace detail

GPU_ASYNC_DECL std::uint64_t adopt_line(const completion_line& line) {
    auto& sh = detail::line_table().shard_of(&line);
    std::uint64_t g = 0;
    {
        std::lock_guard lk(sh.mutex);
        g = detail::renew_line(sh.states[&line]); // new: generation 1
    }
    detail::line_table().bump();
    return g;
}

GPU_ASYNC_DECL std::uint64_t line_generation(const completion_line& line) noexcept {
    const detail::line_state* st = detail::state_of(line);
    return st == nullptr ? 0 : st->generation.load(std::memory_order_acquire);
}

GPU_ASYNC_DECL std::uint64_t slot_generation(const completion_line& line, slot_id slot) noexcept {
    const detail::line_state* st = detail::state_of(line);
    return st == nullptr
               ? 0
               : detail::generation_of(st->slots[slot.index()].load(std::memory_order_acquire));
}

GPU_ASYNC_DECL line_status descriptor_status(const memory_descriptor& d) noexcept {
    if (d.generation() == 0) return line_status::live;
    const detail::line_state* st = detail::state_of(d.line());
    if (st == nullptr) return line_status::stale; // never adopted: not a line of ours now
    const std::uint64_t v = st->slots[d.slot().index()].load(std::memory_order_acquire);
    // max_generation is where a line that ran out of generations stays: never live.
    if (detail::generation_of(v) != d.generation() || d.generation() == max_generation) {
        // Stored before the new generation was: seen once the new generation is.
        return st->retiring[d.slot().index()].load(std::memory_order_acquire) == d.generation()
                   ? line_status::retiring
                   : line_status::stale;
    }
    if ((v & 1) != 0) return line_status::faulted;
    return line_status::live;
}

namespace detail {

// Ends a retirement's `retiring` marks: every watcher has ended the retired generations' waits,
// so from here they are stale. A later retirement may have put its own generation in already.
inline void end_retiring(std::atomic<std::uint64_t>& retiring, std::uint64_t retired) noexcept {
    retiring.compare_exchange_strong(retired, 0, std::memory_order_release,
                                     std::memory_order_relaxed);
}

} // namespace detail

// Each of these changes the side table first: a registration that a watcher takes in after it
// is asked sees the change and does not read what it ends.
GPU_ASYNC_DECL void retire_line(const completion_line& line) noexcept {
    // As a slot's give-back: while the watchers are asked, the line's memory is valid and its
    // streams store no more, so the retired generations' waits are read, wherever they are (a
    // watcher's queue, a start, a scan between two watchers): what a stream stored before the
    // line went completes.
    detail::line_state* marked = nullptr;
    std::array<std::uint64_t, line_words> retired{};
    detail::update_state(line, [&](detail::line_state& st) {
        for (std::size_t s = 0; s < line_words; ++s) {
            retired[s] = detail::generation_of(st.slots[s].load(std::memory_order_relaxed));
            st.retiring[s].store(retired[s], std::memory_order_relaxed);
        }
        detail::renew_line(st); // releases the marks with the new generations
        marked = &st;
    });
    detail::line_table().bump();
    detail::ask_line_watchers([&](detail::line_watcher& w) { w.retire_line(line); });
    if (marked != nullptr) {
        for (std::size_t s = 0; s < line_words; ++s)
            detail::end_retiring(marked->retiring[s], retired[s]);
        detail::line_table().bump();
    }
}

namespace detail {

// Retires `slot` of `line` in the side table, if it is at `expected` (none: whatever it is at),
// then asks every watcher. Returns whether it did.
inline bool retire_slot_at(const completion_line& line, slot_id slot,
                           std::optional<std::uint64_t> expected) noexcept {
    slot_retirement r;
    bool adopted = false;
    std::atomic<std::uint64_t>* retiring = nullptr; // a state never moves (see `shard`)
    {
        auto& sh = line_table().shard_of(&line);
        std::lock_guard lk(sh.mutex);
        const auto it = sh.states.find(&line);
        if (it != sh.states.end()) {
            adopted = true;
            auto& word = it->second.slots[slot.index()];
            r.retired = generation_of(word.load(std::memory_order_relaxed));
            if (expected && *expected != r.retired) return false;
            r.next = issue_generation(it->second);
            // The slot's stream stopped storing before its owner retired it, and no next stream
            // stores until this returns: the retired generation's waits are read until then,
            // wherever they are (a watcher's queue, a start, a scan between two watchers).
            it->second.retiring[slot.index()].store(r.retired, std::memory_order_relaxed);
            word.store(slot_word(r.next), std::memory_order_release);
            retiring = &it->second.retiring[slot.index()];
        }
    }
    if (!adopted && expected && *expected != 0) return false;
    line_table().bump();
    ask_line_watchers([&](line_watcher& w) { w.retire_slot(line, slot, r); });
    if (retiring != nullptr) {
        end_retiring(*retiring, r.retired);
        line_table().bump();
    }
    return true;
}

// Records a fault of `slot` of `line` at `expected` (none: whatever generation it is at), then
// asks every watcher. Returns whether it did.
inline bool fault_slot_at(const completion_line& line, slot_id slot,
                          std::optional<std::uint64_t> expected) noexcept {
    std::uint64_t g = 0;
    bool adopted = false;
    {
        auto& sh = line_table().shard_of(&line);
        std::lock_guard lk(sh.mutex);
        const auto it = sh.states.find(&line);
        if (it != sh.states.end()) {
            adopted = true;
            auto& word = it->second.slots[slot.index()];
            g = generation_of(word.load(std::memory_order_relaxed));
            if (expected && *expected != g) return false;
            word.fetch_or(1, std::memory_order_release);
        }
    }
    if (!adopted && expected && *expected != 0) return false;
    line_table().bump();
    ask_line_watchers([&](line_watcher& w) { w.fault_slot(line, slot, g); });
    return true;
}

} // namespace detail

GPU_ASYNC_DECL void retire_slot(const completion_line& line, slot_id slot) noexcept {
    detail::retire_slot_at(line, slot, std::nullopt);
}

GPU_ASYNC_DECL bool retire_slot(const completion_line& line, slot_id slot,
                                std::uint64_t generation) noexcept {
    return detail::retire_slot_at(line, slot, generation);
}

GPU_ASYNC_DECL void fault_slot(const completion_line& line, slot_id slot) noexcept {
    detail::fault_slot_at(line, slot, std::nullopt);
}

GPU_ASYNC_DECL bool fault_slot(const completion_line& line, slot_id slot,
                               std::uint64_t generation) noexcept {
    return detail::fault_slot_at(line, slot, generation);
}

} // namespace gpu_async

#endif // GPU_ASYNC_IMPL_LINE_LIFE_IPP
