// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/impl/line_retirement.ipp: the process-wide registry of line watchers, the side
// table of line generations, and the lines' health queries.
//
#ifndef GPU_ASYNC_IMPL_LINE_RETIREMENT_IPP
#define GPU_ASYNC_IMPL_LINE_RETIREMENT_IPP

#include <gpu_async/core/scan_engine.hpp>
#include <gpu_async/host/ranked_mutex.hpp>
#include <gpu_async/line_retirement.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace gpu_async {

namespace detail {

// Locks (ranked in <gpu_async/host/ranked_mutex.hpp>): a watcher's own locks are taken while no
// registry lock is held (the registry pins a watcher and releases its lock before asking it); a
// shard lock is a leaf.
struct line_watcher_registry {
    struct entry {
        line_watcher* watcher;
        std::uint64_t order; // when it was added: `watchers` is sorted by it
        std::size_t pins;    // retirements and faults asking it now
    };
    ranked_mutex mutex{lock_rank::line_registry};
    ranked_condition_variable unpinned;
    // Entries on the heap, in the order they were added: a retirement asks them one by one, each
    // found again by its order after the lock was let go (a pinned entry is never removed).
    std::vector<std::unique_ptr<entry>> watchers;
    std::uint64_t added = 0;

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

    // The health queries (watch_line_health), under `mutex`. Shared: a run holds the entries it
    // is about to ask, so unwatching never frees one a run still reads; `running` (under `mutex`)
    // is what unwatching waits for, `removed` keeps a run from starting an unwatched query.
    struct health_entry {
        const completion_line* line;
        line_health* health;
        bool running = false;
        bool removed = false;
    };
    std::vector<std::shared_ptr<health_entry>> health;
    std::atomic<std::size_t> health_watched{0}; // health.size(), read without the lock
    std::atomic<std::uint64_t> health_last{0};  // the last run's now_ns (0: none yet)
    std::atomic<std::uint64_t> health_backstop{default_fault_backstop.ns};
    std::atomic<bool> health_running{false}; // a run is under way

    shard& shard_of(const completion_line* line) noexcept {
        return table[(reinterpret_cast<std::uintptr_t>(line) / sizeof(completion_line)) % shards];
    }
};

GPU_ASYNC_DECL line_watcher_registry& line_watchers() noexcept {
    // Never destroyed: line owners with static storage may retire lines during exit, and a
    // descriptor of any line ever adopted must find its generation.
    static line_watcher_registry* r = new line_watcher_registry();
    return *r;
}

GPU_ASYNC_DECL void add_line_watcher(line_watcher& w) {
    line_watcher_registry& r = line_watchers();
    auto e = std::make_unique<line_watcher_registry::entry>(line_watcher_registry::entry{&w, 0, 0});
    std::lock_guard lk(r.mutex);
    r.watchers.reserve(r.watchers.size() + 1); // may throw: before the entry's order is taken
    e->order = ++r.added;
    r.watchers.push_back(std::move(e));
}

GPU_ASYNC_DECL std::uint64_t line_life_epoch() noexcept {
    return line_watchers().epoch.load(std::memory_order_acquire);
}

GPU_ASYNC_DECL std::size_t line_watcher_count() noexcept {
    line_watcher_registry& r = line_watchers();
    std::lock_guard lk(r.mutex);
    return r.watchers.size();
}

GPU_ASYNC_DECL void remove_line_watcher(line_watcher& w) noexcept {
    line_watcher_registry& r = line_watchers();
    std::unique_lock lk(r.mutex);
    const auto find = [&] {
        return std::find_if(r.watchers.begin(), r.watchers.end(),
                            [&](const auto& e) { return e->watcher == &w; });
    };
    r.unpinned.wait(lk, [&] {
        const auto it = find();
        return it == r.watchers.end() || (*it)->pins == 0;
    });
    const auto it = find();
    if (it == r.watchers.end()) return;
    std::unique_ptr<line_watcher_registry::entry> gone = std::move(*it);
    r.watchers.erase(it); // the order is kept: ask_line_watchers walks by it
    lk.unlock();          // freed outside the lock
}

// Asks every registered watcher `ask(watcher)`, one at a time, holding no registry lock while
// it does: each is pinned first, so none is removed (and destroyed) while asked, and found by
// its order after the one asked before, so none is missed however the list changed meanwhile.
// Allocates nothing.
template <class Ask>
void ask_line_watchers(Ask&& ask) noexcept {
    expect_no_lock_held(); // a watcher takes its own locks, which may rank above the caller's
    line_watcher_registry& r = line_watchers();
    std::uint64_t after = 0;
    for (;;) {
        line_watcher_registry::entry* e = nullptr;
        {
            std::lock_guard lk(r.mutex);
            const auto it = std::upper_bound(
                r.watchers.begin(), r.watchers.end(), after,
                [](std::uint64_t order, const auto& x) { return order < x->order; });
            if (it == r.watchers.end()) return;
            e = it->get();
            ++e->pins;
            after = e->order;
        }
        ask(*e->watcher);
        {
            std::lock_guard lk(r.mutex);
            --e->pins;
        }
        r.unpinned.notify_all();
    }
}

using line_state = line_watcher_registry::line_state;

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
    auto& sh = line_watchers().shard_of(&line);
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
    auto& sh = line_watchers().shard_of(&line);
    std::lock_guard lk(sh.mutex);
    const auto it = sh.states.find(&line);
    if (it == sh.states.end()) return nullptr;
    c = cached{&line, &it->second};
    return c.state;
}

} // namespace detail

GPU_ASYNC_DECL std::uint64_t adopt_line(const completion_line& line) {
    // From now on a descriptor may go stale: scan engines without a status function of their
    // own (the FILL executor's reactor) judge with this layer's.
    static const bool installed =
        (install_line_life({&descriptor_status, &detail::line_life_epoch}), true);
    (void)installed;
    auto& sh = detail::line_watchers().shard_of(&line);
    std::uint64_t g = 0;
    {
        std::lock_guard lk(sh.mutex);
        g = detail::renew_line(sh.states[&line]); // new: generation 1
    }
    detail::line_watchers().bump();
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

// Each of these changes the side table first: a registration that a watcher takes in after it
// is asked sees the change and does not read what it ends.
GPU_ASYNC_DECL void retire_line(const completion_line& line) noexcept {
    detail::update_state(line, [](detail::line_state& st) { detail::renew_line(st); });
    detail::line_watchers().bump();
    detail::ask_line_watchers([&](detail::line_watcher& w) { w.retire_line(line); });
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
        auto& sh = line_watchers().shard_of(&line);
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
    line_watchers().bump();
    ask_line_watchers([&](line_watcher& w) { w.retire_slot(line, slot, r); });
    if (retiring != nullptr) {
        // Every watcher ended the retired generation's waits: from here they are stale. A later
        // retirement of the slot may have put its own generation in already.
        std::uint64_t expect = r.retired;
        retiring->compare_exchange_strong(expect, 0, std::memory_order_release,
                                          std::memory_order_relaxed);
        line_watchers().bump();
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
        auto& sh = line_watchers().shard_of(&line);
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
    line_watchers().bump();
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

GPU_ASYNC_DECL void watch_line_health(const completion_line& line, line_health& h) {
    detail::line_watcher_registry& r = detail::line_watchers();
    auto e = std::make_shared<detail::line_watcher_registry::health_entry>(
        detail::line_watcher_registry::health_entry{&line, &h});
    std::lock_guard lk(r.mutex);
    r.health.push_back(std::move(e));
    r.health_watched.store(r.health.size(), std::memory_order_release);
}

GPU_ASYNC_DECL void unwatch_line_health(const completion_line& line) noexcept {
    detail::line_watcher_registry& r = detail::line_watchers();
    std::unique_lock lk(r.mutex);
    for (;;) {
        const auto it = std::find_if(r.health.begin(), r.health.end(),
                                     [&](const auto& e) { return e->line == &line; });
        if (it == r.health.end()) return;
        // Swapped with the last (order is not kept: every query runs, in any order).
        std::swap(*it, r.health.back());
        std::shared_ptr<detail::line_watcher_registry::health_entry> gone =
            std::move(r.health.back());
        r.health.pop_back();
        r.health_watched.store(r.health.size(), std::memory_order_release);
        gone->removed = true; // no run starts it from here on
        r.unpinned.wait(lk, [&] { return !gone->running; });
        lk.unlock();
        gone.reset(); // freed outside the lock (or by the run that still holds it)
        lk.lock();
    }
}

GPU_ASYNC_DECL void set_fault_backstop(dur_ns backstop) noexcept {
    detail::line_watchers().health_backstop.store(backstop.ns, std::memory_order_relaxed);
}

GPU_ASYNC_DECL dur_ns fault_backstop() noexcept {
    return dur_ns{detail::line_watchers().health_backstop.load(std::memory_order_relaxed)};
}

namespace detail {

GPU_ASYNC_DECL bool line_health_watched() noexcept {
    return line_watchers().health_watched.load(std::memory_order_acquire) != 0;
}

GPU_ASYNC_DECL bool query_line_health() noexcept {
    if (!line_health_watched()) return false;
    return query_line_health(
        static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                       std::chrono::steady_clock::now().time_since_epoch())
                                       .count()));
}

GPU_ASYNC_DECL bool query_line_health(std::uint64_t now_ns) noexcept {
    line_watcher_registry& r = line_watchers();
    if (r.health_watched.load(std::memory_order_acquire) == 0) return false;
    expect_no_lock_held(); // the queries call their drivers
    const std::uint64_t backstop = r.health_backstop.load(std::memory_order_relaxed);
    if (backstop == dur_ns::max().ns) return false;
    // Due: no run yet, or one backstop away from the last run (either side).
    const auto due = [&] {
        const std::uint64_t last = r.health_last.load(std::memory_order_relaxed);
        return last == 0 || (now_ns > last ? now_ns - last : last - now_ns) >= backstop;
    };
    if (!due()) return false;
    // One run at a time, and only the caller that holds the run claims the turn (health_last is
    // written under health_running alone): one that finds a run under way leaves the turn due
    // for the first call after that run. (Claiming it and then skipping it put the next run a
    // whole backstop later.)
    if (r.health_running.load(std::memory_order_relaxed) ||
        r.health_running.exchange(true, std::memory_order_acquire))
        return false;
    if (!due()) { // a run took the turn between the look and the exchange
        r.health_running.store(false, std::memory_order_release);
        return false;
    }
    r.health_last.store(now_ns != 0 ? now_ns : 1, std::memory_order_relaxed);
    std::vector<std::shared_ptr<line_watcher_registry::health_entry>> asked;
    {
        std::lock_guard lk(r.mutex);
        try {
            asked = r.health;
        } catch (...) {
            // No memory for the list: no run this turn; the next one tries again.
            r.health_running.store(false, std::memory_order_release);
            return false;
        }
    }
    for (const auto& e : asked) {
        {
            std::lock_guard lk(r.mutex);
            if (e->removed) continue;
            e->running = true;
        }
        e->health->query(*e->line);
        {
            std::lock_guard lk(r.mutex);
            e->running = false;
        }
        r.unpinned.notify_all();
    }
    asked.clear(); // the entries unwatched meanwhile go here, outside the lock
    r.health_running.store(false, std::memory_order_release);
    return true;
}

} // namespace detail

} // namespace gpu_async

#endif // GPU_ASYNC_IMPL_LINE_RETIREMENT_IPP
