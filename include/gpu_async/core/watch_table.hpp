// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The registry of pending waits by line, slot and target.
///
/// A watch_table holds waits on memory descriptors (line, slot, target) and answers one question
/// at a time: which of them have completed. It is sans-I/O: it reads the watched words (acquire
/// loads), never blocks, never reads a clock (deadlines are compared with the `now` the caller
/// passes) and holds no lock (its owner serializes access).
///
/// The rule. A wait completes when its slot's word has reached its target in wrapping order,
/// `word - target (mod 2^64) < 2^63`, as read at the time of the scan. It holds for any history of
/// stores: steps of any size, jumps near 2^63 and 2^64, words that wrap.
///
/// How. Each watched slot keeps its waits ordered by `target - anchor (mod 2^64)`, where the
/// anchor is the word value the table last read for that slot. Every pending wait has that
/// distance in [1, 2^63]. When a scan reads a new word w, `delta = w - anchor`: for delta up to
/// 2^63 the completed waits are exactly those at distance at most delta (a prefix); for larger
/// delta (the word moved "backwards" in wrapping order), those at distance above delta - 2^63 (a
/// suffix). The waits that stay pending keep their relative order under the new anchor w (their
/// distances shift by one constant without wrapping), so the anchor moves to w at every scan with
/// no re-sorting. A registration reads the word once and uses that one value both to decide
/// whether the wait has already completed and, for an empty slot, as the anchor; when the new
/// target does not fit the slot's order under its anchor (the word moved far since the last
/// scan), the slot is scanned at that same value first. Reading the word twice (once to test,
/// once to anchor) would let a store between the reads misplace the wait, which is why the table
/// never does.
///
/// Order. A scan hands each slot's completed waits to the sink in ascending target order (wrapping
/// order from the anchor): the order the producer finished them. Slots and lines are visited in
/// an unspecified order.
///
/// Cost. Registration and removal are O(log n) in the slot's waits. A scan of every slot reads one
/// word per watched slot (a dense list of lines with waits, a bit mask of slots with waits, the
/// cached anchor beside it) and touches a slot's map only when its word moved. A wait's map
/// node comes from the table's own free list (the nodes of waits that left, up to
/// node_pool::max_free of them), and a line's record (its eight slots) from the records of lines
/// whose last wait left (up to 16 of them), so a steady stream of waits allocates nothing in the
/// table once warm (but for the hash table's own growth).
///
/// Sinks. `collect`, `collect_expired`, `remove_line` and `clear` call `sink(T value, watch_end
/// why)` once for each wait they remove, after it has left the table; a sink must not call back
/// into the table.
#ifndef GPU_ASYNC_CORE_WATCH_TABLE_HPP
#define GPU_ASYNC_CORE_WATCH_TABLE_HPP

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/time.hpp>

#include <array>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace gpu_async {

/// Why a wait left a watch_table through a sink.
enum class watch_end : std::uint8_t {
    reached, ///< its word reached its target
    expired, ///< its deadline passed first
    removed, ///< its line was removed (the line's owner is going away) or the table cleared
    faulted, ///< its slot was removed: the stream storing into it faulted
};

namespace detail {

/// A free list of blocks of one size: the nodes of a watch_table's maps. A block freed is kept
/// (up to max_free of them) for the next node of that size; any other size, an over-aligned
/// type, or an array goes to the heap. Not thread-safe: its table's owner serializes it.
class node_pool {
public:
    /// The most freed blocks kept; past it they go back to the heap.
    static constexpr std::size_t max_free = 4096;

    node_pool() = default;
    node_pool(const node_pool&) = delete;
    node_pool& operator=(const node_pool&) = delete;
    ~node_pool() {
        while (free_ != nullptr)
            ::operator delete(std::exchange(free_, free_->next));
    }

    /// A block of `size` bytes (aligned for any type of alignment at most
    /// __STDCPP_DEFAULT_NEW_ALIGNMENT__). The first size asked is the pool's: a map whose
    /// allocator allocated anything but its nodes first would pool that instead (correct, but
    /// no saving); libstdc++'s and libc++'s maps allocate only nodes.
    void* allocate(std::size_t size) {
        if (size_ == 0 && size >= sizeof(block)) size_ = size;
        if (size == size_ && free_ != nullptr) {
            --kept_;
            return std::exchange(free_, free_->next);
        }
        return ::operator new(size);
    }
    void deallocate(void* p, std::size_t size) noexcept {
        if (size == size_ && kept_ < max_free) {
            free_ = ::new (p) block{free_};
            ++kept_;
            return;
        }
        ::operator delete(p);
    }
    /// Blocks kept for reuse (for tests).
    std::size_t kept() const noexcept { return kept_; }

private:
    struct block {
        block* next;
    };
    block* free_ = nullptr;
    std::size_t size_ = 0;
    std::size_t kept_ = 0;
};

/// The allocator of a watch_table's maps: single nodes from its node_pool.
template <class T>
class node_pool_allocator {
public:
    using value_type = T;
    explicit node_pool_allocator(node_pool& pool) noexcept
        : pool_(&pool) {}
    template <class U>
    node_pool_allocator(const node_pool_allocator<U>& o) noexcept
        : pool_(o.pool_) {}

    T* allocate(std::size_t n) {
        if constexpr (alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
            if (n == 1) return static_cast<T*>(pool_->allocate(sizeof(T)));
        }
        return std::allocator<T>().allocate(n);
    }
    void deallocate(T* p, std::size_t n) noexcept {
        if constexpr (alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
            if (n == 1) {
                pool_->deallocate(p, sizeof(T));
                return;
            }
        }
        std::allocator<T>().deallocate(p, n);
    }
    template <class U>
    bool operator==(const node_pool_allocator<U>& o) const noexcept {
        return pool_ == o.pool_;
    }

private:
    template <class U>
    friend class node_pool_allocator;
    node_pool* pool_;
};

} // namespace detail

/// The registry of pending waits by (line, slot, target) under the wrapping rule. See the header
/// comment. `T` is the caller's record of a wait (a pointer, an index): copied in, handed back.
///
/// Not thread-safe: one owner serializes every call (the Asio reactor service under its mutex,
/// the FILL executor on its one thread).
template <class T>
requires std::is_nothrow_copy_constructible_v<T> && std::equality_comparable<T>
class watch_table {
    struct line_rec;
    static constexpr std::uint64_t half = std::uint64_t{1} << 63;

    /// Orders targets by their distance from the slot's anchor.
    struct by_distance {
        const std::uint64_t* anchor;
        bool operator()(std::uint64_t a, std::uint64_t b) const noexcept {
            return a - *anchor < b - *anchor;
        }
    };

    struct expiry {
        line_rec* line;
        std::uint8_t slot;
        std::uint64_t target;
        T value;
    };
    using deadline_map =
        std::multimap<std::uint64_t, expiry, std::less<std::uint64_t>,
                      detail::node_pool_allocator<std::pair<const std::uint64_t, expiry>>>;

    struct entry {
        T value;
        std::optional<typename deadline_map::iterator> deadline;
    };
    using slot_map =
        std::multimap<std::uint64_t, entry, by_distance,
                      detail::node_pool_allocator<std::pair<const std::uint64_t, entry>>>;

    struct slot_rec {
        explicit slot_rec(detail::node_pool& pool)
            : waits(by_distance{&anchor}, typename slot_map::allocator_type(pool)) {}
        slot_rec(const slot_rec&) = delete;
        slot_rec& operator=(const slot_rec&) = delete;
        std::uint64_t anchor = 0;
        slot_map waits;
    };

    template <std::size_t... I>
    static std::array<slot_rec, line_words> make_slots(detail::node_pool& pool,
                                                       std::index_sequence<I...>) {
        return {{(static_cast<void>(I), slot_rec(pool))...}};
    }

    struct line_rec {
        line_rec(const completion_line* l, detail::node_pool& pool)
            : line(l)
            , slots(make_slots(pool, std::make_index_sequence<line_words>{})) {}
        line_rec(const line_rec&) = delete;
        line_rec& operator=(const line_rec&) = delete;
        // Read by every scan, so first and together.
        const completion_line* line;
        std::uint32_t mask = 0; // slots with waits
        std::size_t count = 0;  // waits on this line
        std::size_t active_pos = 0;
        std::array<slot_rec, line_words> slots;
    };
    using line_map = std::unordered_map<const completion_line*, line_rec>;
    /// Emptied line records kept for the next lines.
    static constexpr std::size_t max_spare_lines = 16;

public:
    using value_type = T;

    /// Where a registered wait is: given by insert(), taken by erase(). Valid until the wait
    /// leaves the table (erase, or a sink was handed its value).
    class handle {
    public:
        handle() noexcept = default;

    private:
        friend class watch_table;
        handle(line_rec* l, std::uint8_t s, typename slot_map::iterator it) noexcept
            : line_(l)
            , slot_(s)
            , it_(it) {}
        line_rec* line_ = nullptr;
        std::uint8_t slot_ = 0;
        typename slot_map::iterator it_{};
    };

    watch_table() = default;
    watch_table(const watch_table&) = delete;
    watch_table& operator=(const watch_table&) = delete;

    /// Registers `value` as a wait for `d`, unless `d` has completed: the slot's word is read
    /// once (acquire) and that one value decides. Returns the wait's handle, or none when the
    /// word had reached the target (nothing registered; the caller completes the wait).
    ///
    /// When the slot's word moved far since its last scan, the slot is first scanned at the
    /// value read: waits it completes are handed to `sink` (watch_end::reached) before this
    /// returns. With `deadline`, the wait is also handed out by collect_expired() once the
    /// caller's clock passes it.
    template <class Sink>
    std::optional<handle> insert(const memory_descriptor& d, const T& value, Sink&& sink,
                                 std::optional<mono_ns> deadline = std::nullopt) {
        const completion_line* line = &d.line();
        const std::size_t s = d.slot().index();
        const std::uint64_t word = line->words[s].load(std::memory_order_acquire);
        if (sequence_reached(word, d.target())) return std::nullopt;
        auto [it, fresh] = emplace_line(line);
        line_rec& lr = it->second;
        if (fresh) {
            lr.active_pos = active_.size();
            active_.push_back(&lr);
        }
        slot_rec& sr = lr.slots[s];
        if (sr.waits.empty()) {
            sr.anchor = word;
        } else {
            const std::uint64_t dist = d.target() - sr.anchor;
            if (dist == 0 || dist > half) {
                // The target lies outside the slot's order under its anchor: rebase at `word`
                // (the same read), completing what it has reached. The line's record is kept
                // even if the scan empties it: this wait goes into it next.
                scan_slot(lr, s, word, sink, /*keep_record=*/true);
            }
        }
        typename slot_map::iterator pos;
        try {
            pos = sr.waits.emplace(d.target(), entry{value, std::nullopt});
            if (deadline) {
                try {
                    pos->second.deadline = deadlines_.emplace(
                        deadline->ns, expiry{&lr, static_cast<std::uint8_t>(s), d.target(), value});
                } catch (...) {
                    sr.waits.erase(pos);
                    throw;
                }
            }
        } catch (...) {
            if (lr.count == 0) drop_record(lr); // a record made for this wait alone
            throw;
        }
        lr.mask |= 1u << s;
        ++lr.count;
        ++size_;
        return handle(&lr, static_cast<std::uint8_t>(s), pos);
    }

    /// Removes a registered wait (nothing is handed to a sink).
    void erase(handle h) noexcept { remove(*h.line_, h.slot_, h.it_); }

    /// The handle of a registered wait for `d` whose value satisfies `match`, or none. No word
    /// is read and no value is dereferenced before it is found registered.
    template <class Match>
    std::optional<handle> find(const memory_descriptor& d, Match&& match) {
        const auto it = lines_.find(&d.line());
        if (it == lines_.end()) return std::nullopt;
        line_rec& lr = it->second;
        const std::size_t s = d.slot().index();
        if ((lr.mask & (1u << s)) == 0) return std::nullopt;
        slot_map& m = lr.slots[s].waits;
        // Every registered target is at distance [1, 2^63] from the anchor; any other cannot be
        // in the map (and must not be looked up with this comparator).
        const std::uint64_t dist = d.target() - lr.slots[s].anchor;
        if (dist == 0 || dist > half) return std::nullopt;
        auto [first, last] = m.equal_range(d.target());
        for (; first != last; ++first)
            if (match(first->second.value)) return handle(&lr, static_cast<std::uint8_t>(s), first);
        return std::nullopt;
    }

    /// Scans every watched slot once (one acquire load each) and hands every completed wait to
    /// `sink` (watch_end::reached), ascending target order within a slot. Returns how many.
    template <class Sink>
    std::size_t collect(Sink&& sink) {
        std::size_t n = 0;
        // Backwards: removing the last wait of a line swaps the last active line into its
        // place, which has been visited already.
        for (std::size_t i = active_.size(); i-- > 0;) {
            line_rec* lr = active_[i];
            std::uint32_t mask = lr->mask;
            while (mask != 0) {
                const auto s = static_cast<std::size_t>(std::countr_zero(mask));
                mask &= mask - 1;
                const std::uint64_t word = lr->line->words[s].load(std::memory_order_acquire);
                if (word == lr->slots[s].anchor) continue; // the common case: one load
                const std::size_t before = lr->count;
                const std::size_t k = scan_slot(*lr, s, word, sink);
                n += k;
                if (k == before) break; // the line's last waits: its record is gone
            }
        }
        return n;
    }

    /// Scans one slot of one line (one acquire load) as collect() does. Returns how many.
    template <class Sink>
    std::size_t collect(const completion_line& line, slot_id slot, Sink&& sink) {
        const auto it = lines_.find(&line);
        if (it == lines_.end()) return 0;
        line_rec& lr = it->second;
        const std::size_t s = slot.index();
        if ((lr.mask & (1u << s)) == 0) return 0;
        const std::uint64_t word = line.words[s].load(std::memory_order_acquire);
        return scan_slot(lr, s, word, sink);
    }

    /// Hands every wait whose deadline is at or before `now` to `sink` (watch_end::expired),
    /// earliest first. Returns how many.
    template <class Sink>
    std::size_t collect_expired(mono_ns now, Sink&& sink) {
        std::size_t n = 0;
        while (!deadlines_.empty() && deadlines_.begin()->first <= now.ns) {
            const expiry e = deadlines_.begin()->second;
            slot_map& m = e.line->slots[e.slot].waits;
            auto [first, last] = m.equal_range(e.target);
            while (first != last && !(first->second.value == e.value))
                ++first;
            // Registered with a deadline, so found; a miss would be a broken invariant.
            remove(*e.line, e.slot, first);
            sink(T(e.value), watch_end::expired);
            ++n;
        }
        return n;
    }

    /// True when a scan of `line` now would hand out a wait (one acquire load per watched slot;
    /// nothing changes). The predicate of a park on the line.
    bool any_reached(const completion_line& line) const {
        const auto it = lines_.find(&line);
        if (it == lines_.end()) return false;
        const line_rec& lr = it->second;
        for (std::uint32_t mask = lr.mask; mask != 0; mask &= mask - 1) {
            const auto s = static_cast<std::size_t>(std::countr_zero(mask));
            const slot_rec& sr = lr.slots[s];
            const std::uint64_t word = line.words[s].load(std::memory_order_acquire);
            const std::uint64_t delta = word - sr.anchor;
            if (delta == 0) continue;
            const std::uint64_t first = sr.waits.begin()->first - sr.anchor;
            const std::uint64_t last = std::prev(sr.waits.end())->first - sr.anchor;
            // A prefix (distance at most delta) or a suffix (distance above delta - 2^63).
            if (delta <= half ? first <= delta : last > delta - half) return true;
        }
        return false;
    }

    /// Removes every wait on `line` (its owner is about to free it) and hands each to `sink`
    /// (watch_end::removed). After this returns the table no longer reads the line.
    template <class Sink>
    std::size_t remove_line(const completion_line& line, Sink&& sink) {
        const auto it = lines_.find(&line);
        if (it == lines_.end()) return 0;
        return drop_line(it->second, sink);
    }

    /// Removes every wait on `slot` of `line` (the stream storing into it faulted and will store
    /// no more) and hands each to `sink` (watch_end::faulted), in ascending target order, each
    /// once it has left the table. Allocates nothing; `sink` must not call back into the table.
    template <class Sink>
    std::size_t remove_slot(const completion_line& line, slot_id slot, Sink&& sink) {
        const auto found = lines_.find(&line);
        if (found == lines_.end()) return 0;
        line_rec& lr = found->second;
        const std::size_t s = slot.index();
        // The map is ordered by distance from the anchor: ascending targets, as a scan's. The
        // last removal may drop the line's record: nothing of it is read after that.
        const std::size_t n = lr.slots[s].waits.size();
        for (std::size_t i = 0; i < n; ++i) {
            const auto it = lr.slots[s].waits.begin();
            T value = it->second.value;
            remove(lr, s, it);
            sink(std::move(value), watch_end::faulted);
        }
        return n;
    }

    /// Removes every wait and hands each to `sink` (watch_end::removed).
    template <class Sink>
    std::size_t clear(Sink&& sink) {
        std::size_t n = 0;
        while (!active_.empty())
            n += drop_line(*active_.back(), sink);
        return n;
    }

    /// The earliest deadline of a registered wait, if any.
    std::optional<mono_ns> earliest_deadline() const noexcept {
        if (deadlines_.empty()) return std::nullopt;
        return mono_ns{deadlines_.begin()->first};
    }

    /// Calls `f(value)` for every registered wait, in an unspecified order, reading no word.
    /// O(size()); `f` must not call back into the table.
    template <class F>
    void for_each(F&& f) const {
        for (const line_rec* lr : active_)
            for (std::uint32_t mask = lr->mask; mask != 0; mask &= mask - 1)
                for (const auto& [target, e] : lr->slots[std::countr_zero(mask)].waits)
                    f(e.value);
    }

    /// Registered waits.
    std::size_t size() const noexcept { return size_; }
    bool empty() const noexcept { return size_ == 0; }
    /// Lines with at least one registered wait.
    std::size_t lines() const noexcept { return active_.size(); }
    /// Map nodes kept for the next waits (for tests): at most 2 * detail::node_pool::max_free.
    std::size_t nodes_kept() const noexcept { return slot_nodes_.kept() + deadline_nodes_.kept(); }
    /// Records of lines that had their last wait leave, kept for the next lines (for tests): at
    /// most 16.
    std::size_t line_records_kept() const noexcept { return spare_count_; }
    /// Whether `line` has a registered wait.
    bool watches(const completion_line& line) const { return lines_.contains(&line); }

private:
    // Completes what `word` reached in slot `s` and moves its anchor to `word`. Returns how many.
    // May erase `lr` (when it held the line's last waits).
    template <class Sink>
    std::size_t scan_slot(line_rec& lr, std::size_t s, std::uint64_t word, Sink& sink,
                          bool keep_record = false) {
        slot_rec& sr = lr.slots[s];
        const std::uint64_t delta = word - sr.anchor;
        if (delta == 0) return 0;
        slot_map& m = sr.waits;
        typename slot_map::iterator first;
        typename slot_map::iterator last;
        if (delta <= half) {
            first = m.begin(); // distance <= delta: a prefix
            last = m.upper_bound(word);
        } else {
            first = m.upper_bound(word - half); // distance > delta - 2^63: a suffix
            last = m.end();
        }
        if (first == last) {
            sr.anchor = word; // the pending waits keep their order under the new anchor
            return 0;
        }
        // Take the values out first (the only step that may throw, before any change): the sink
        // runs once the waits have left the table.
        std::vector<T>& out = scratch_;
        out.clear();
        out.reserve(static_cast<std::size_t>(std::distance(first, last)));
        for (auto it = first; it != last; ++it) {
            out.push_back(it->second.value);
            if (it->second.deadline) deadlines_.erase(*it->second.deadline);
        }
        const std::size_t n = out.size();
        m.erase(first, last);
        sr.anchor = word;
        size_ -= n;
        lr.count -= n;
        if (m.empty()) lr.mask &= ~(1u << s);
        if (lr.count == 0 && !keep_record) drop_record(lr);
        for (const T& v : out)
            sink(T(v), watch_end::reached);
        return n;
    }

    void remove(line_rec& lr, std::size_t s, typename slot_map::iterator it) noexcept {
        if (it->second.deadline) deadlines_.erase(*it->second.deadline);
        slot_map& m = lr.slots[s].waits;
        m.erase(it);
        --size_;
        if (m.empty()) lr.mask &= ~(1u << s);
        if (--lr.count == 0) drop_record(lr);
    }

    template <class Sink>
    std::size_t drop_line(line_rec& lr, Sink& sink) {
        std::vector<T> out;
        out.reserve(lr.count);
        for (slot_rec& sr : lr.slots) {
            for (auto& [target, e] : sr.waits) {
                out.push_back(e.value);
                if (e.deadline) deadlines_.erase(*e.deadline);
            }
        }
        size_ -= out.size();
        drop_record(lr);
        for (const T& v : out)
            sink(T(v), watch_end::removed);
        return out.size();
    }

    // The record of `line`, made (or a spare one taken) when it has none.
    std::pair<typename line_map::iterator, bool> emplace_line(const completion_line* line) {
        if (spare_count_ == 0 || lines_.contains(line))
            return lines_.try_emplace(line, line, slot_nodes_);
        typename line_map::node_type& node = spare_lines_[spare_count_ - 1];
        node.key() = line;
        node.mapped().line = line;
        // Unchanged if it throws (a rehash without memory): the spare stays a spare.
        auto r = lines_.insert(std::move(node));
        --spare_count_;
        return {r.position, true};
    }

    // Erases the line's record (its waits, if any, are dropped without a sink). The record is
    // kept as a spare for the next line (up to max_spare_lines of them), emptied.
    void drop_record(line_rec& lr) noexcept {
        line_rec* last = active_.back();
        active_[lr.active_pos] = last;
        last->active_pos = lr.active_pos;
        active_.pop_back();
        typename line_map::node_type node = lines_.extract(lr.line);
        if (spare_count_ == max_spare_lines) return; // freed with `node`
        line_rec& rec = node.mapped();
        for (std::uint32_t mask = rec.mask; mask != 0; mask &= mask - 1)
            rec.slots[std::countr_zero(mask)].waits.clear();
        rec.mask = 0;
        rec.count = 0;
        spare_lines_[spare_count_++] = std::move(node);
    }

    // First: the maps below give their nodes back to them when they are destroyed.
    detail::node_pool slot_nodes_;
    detail::node_pool deadline_nodes_;
    line_map lines_;
    std::array<typename line_map::node_type, max_spare_lines> spare_lines_{};
    std::size_t spare_count_ = 0;
    std::vector<line_rec*> active_;
    deadline_map deadlines_{typename deadline_map::allocator_type(deadline_nodes_)};
    std::vector<T> scratch_;
    std::size_t size_ = 0;
};

} // namespace gpu_async

#endif // GPU_ASYNC_CORE_WATCH_TABLE_HPP
