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
/// Cost. Registration and removal are O(log n) in the slot's waits (expected: each slot's waits
/// are a treap whose heap order is a hash of each wait's address). A scan of every slot reads one
/// word per watched slot (a dense list of lines with waits, a bit mask of slots with waits, the
/// cached anchor beside it) and touches a slot's waits only when its word moved; taking a reached
/// prefix out costs no rotation. The table links the waits in place (each derives from
/// watch_node): a pending wait costs it no allocation of its own, only its share of its line's
/// record (eight slots) and, with a deadline, a node of the deadline index. Index nodes come from
/// the table's own free list (up to node_pool::max_free of them) and a line's record from the
/// records of lines whose last wait left (up to 16 of them), so a steady stream of waits
/// allocates nothing in the table once warm (but for the hash table's own growth). Only insert()
/// allocates: every way out of the table is noexcept.
///
/// Sinks. `insert`, `collect`, `collect_expired`, `remove_line`, `remove_slot` and `clear` call
/// `sink(T* wait, wait_end why)` once for each wait they remove, after it has left the table; a
/// sink must not throw nor call back into the table.
#ifndef GPU_ASYNC_CORE_WATCH_TABLE_HPP
#define GPU_ASYNC_CORE_WATCH_TABLE_HPP

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/time.hpp>
#include <gpu_async/core/wait_end.hpp>

#include <algorithm>
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

class watch_node;

namespace detail {

/// The deadline index of a watch_table: its nodes come from the table's node_pool.
using deadline_index =
    std::multimap<std::uint64_t, watch_node*, std::less<std::uint64_t>,
                  node_pool_allocator<std::pair<const std::uint64_t, watch_node*>>>;

struct slot_tree;

} // namespace detail

/// The table's part of a wait: its place in its slot's tree and in the deadline index. A wait
/// kept in a watch_table derives from it (so a pending wait costs the table no allocation of its
/// own); the table owns these fields from insert() until the wait leaves it.
class watch_node {
public:
    watch_node() noexcept
        : kept_deadline_(0) {}
    watch_node(const watch_node&) = delete;
    watch_node& operator=(const watch_node&) = delete;

protected:
    ~watch_node() = default;

    /// A deadline (ns) its owner keeps in the node while it is in no table, for insert()'s
    /// caller to pass on: in a table, the index holds it. A wait that leaves a table has it
    /// back (0 when it was inserted with none).
    std::uint64_t kept_deadline() const noexcept { return kept_deadline_; }
    void keep_deadline(std::uint64_t ns) noexcept { kept_deadline_ = ns; }

private:
    template <class>
    friend class watch_table;
    friend struct detail::slot_tree;
    watch_node* left_ = nullptr;
    watch_node* right_ = nullptr;
    watch_node* parent_ = nullptr;
    // One word: the deadline is kept in the node or in the index, never in both.
    union {
        std::uint64_t kept_deadline_;               // in no table (kept_deadline())
        detail::deadline_index::iterator deadline_; // in a table: its index node, or end()
    };
};

namespace detail {

/// The waits of one slot: an intrusive treap ordered by a key the caller computes (the distance
/// from the slot's anchor), equal keys in insertion order. The heap order is a hash of each
/// node's address, which no caller chooses: the expected depth is O(log n) for any order of
/// targets, and no field is spent on it.
struct slot_tree {
    static std::uint64_t priority(const watch_node* n) noexcept {
        auto x = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(n));
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
        return x ^ (x >> 31);
    }
    static watch_node* first(watch_node* n) noexcept {
        if (n != nullptr)
            while (n->left_ != nullptr)
                n = n->left_;
        return n;
    }
    static watch_node* last(watch_node* n) noexcept {
        if (n != nullptr)
            while (n->right_ != nullptr)
                n = n->right_;
        return n;
    }
    static watch_node* next(watch_node* n) noexcept {
        if (n->right_ != nullptr) return first(n->right_);
        while (n->parent_ != nullptr && n == n->parent_->right_)
            n = n->parent_;
        return n->parent_;
    }
    /// The first node whose key is at least `k`.
    template <class Key>
    static watch_node* lower_bound(watch_node* n, std::uint64_t k, const Key& key) noexcept {
        watch_node* found = nullptr;
        while (n != nullptr) {
            if (key(n) >= k) {
                found = n;
                n = n->left_;
            } else {
                n = n->right_;
            }
        }
        return found;
    }
    /// Inserts `n` (key `k`) after the nodes of equal key.
    template <class Key>
    static void insert(watch_node*& root, watch_node* n, std::uint64_t k, const Key& key) noexcept {
        n->left_ = n->right_ = nullptr;
        watch_node* parent = nullptr;
        watch_node** at = &root;
        while (*at != nullptr) {
            parent = *at;
            at = k < key(parent) ? &parent->left_ : &parent->right_;
        }
        n->parent_ = parent;
        *at = n;
        const std::uint64_t p = priority(n);
        while (n->parent_ != nullptr && priority(n->parent_) < p)
            rotate_up(root, n);
    }
    static void erase(watch_node*& root, watch_node* n) noexcept {
        while (n->left_ != nullptr && n->right_ != nullptr)
            rotate_up(root, priority(n->left_) > priority(n->right_) ? n->left_ : n->right_);
        splice(root, n, n->left_ != nullptr ? n->left_ : n->right_);
    }
    /// Takes the first node out (it has no left child: no rotation) and returns the next one.
    static watch_node* pop_first(watch_node*& root, watch_node* n) noexcept {
        watch_node* after = n->right_ != nullptr ? first(n->right_) : n->parent_;
        splice(root, n, n->right_);
        return after;
    }
    /// Takes the last node out (it has no right child) and returns the one before it.
    static watch_node* pop_last(watch_node*& root, watch_node* n) noexcept {
        watch_node* before = n->left_ != nullptr ? last(n->left_) : n->parent_;
        splice(root, n, n->left_);
        return before;
    }

private:
    // Puts `by` (a child of `old`, or none) in `old`'s place.
    static void splice(watch_node*& root, watch_node* old, watch_node* by) noexcept {
        if (by != nullptr) by->parent_ = old->parent_;
        replace(root, old, by);
        old->left_ = old->right_ = old->parent_ = nullptr;
    }
    static void replace(watch_node*& root, watch_node* old, watch_node* by) noexcept {
        watch_node* p = old->parent_;
        if (p == nullptr)
            root = by;
        else if (p->left_ == old)
            p->left_ = by;
        else
            p->right_ = by;
    }
    // Rotates `n` above its parent; the in-order sequence is unchanged.
    static void rotate_up(watch_node*& root, watch_node* n) noexcept {
        watch_node* p = n->parent_;
        if (p->left_ == n) {
            p->left_ = n->right_;
            if (n->right_ != nullptr) n->right_->parent_ = p;
            n->right_ = p;
        } else {
            p->right_ = n->left_;
            if (n->left_ != nullptr) n->left_->parent_ = p;
            n->left_ = p;
        }
        n->parent_ = p->parent_;
        replace(root, p, n);
        p->parent_ = n;
    }
};

} // namespace detail

/// The registry of pending waits by (line, slot, target) under the wrapping rule. See the header
/// comment. `T` is the caller's record of a wait: it derives from watch_node and names its
/// descriptor (`descriptor()`, unchanged while it is in the table); the table links it in place,
/// so it must stay put from insert() until it leaves. Sinks are handed a `T*`.
///
/// Not thread-safe: one owner serializes every call (its scan engine's host).
template <class T>
class watch_table {
    static_assert(std::is_base_of_v<watch_node, T>, "a watched wait derives from watch_node");
    static constexpr std::uint64_t half = std::uint64_t{1} << 63;

    struct slot_rec {
        std::uint64_t anchor = 0;
        watch_node* root = nullptr; // the slot's waits (detail::slot_tree)
    };
    struct line_rec {
        explicit line_rec(const completion_line* l) noexcept
            : line(l) {}
        line_rec(const line_rec&) = delete;
        line_rec& operator=(const line_rec&) = delete;
        // Read by every scan, so first and together.
        const completion_line* line;
        std::uint32_t mask = 0; // slots with waits
        std::size_t count = 0;  // waits on this line
        std::size_t active_pos = 0;
        std::array<slot_rec, line_words> slots{};
    };
    using line_map = std::unordered_map<const completion_line*, line_rec>;
    /// Emptied line records kept for the next lines.
    static constexpr std::size_t max_spare_lines = 16;

    static T* wait_of(watch_node* n) noexcept { return static_cast<T*>(n); }
    static std::uint64_t target_of(const watch_node* n) noexcept {
        return static_cast<const T*>(n)->descriptor().target();
    }
    /// A wait's key in its slot's tree: its distance from the slot's anchor.
    struct distance {
        std::uint64_t anchor;
        std::uint64_t operator()(const watch_node* n) const noexcept {
            return target_of(n) - anchor;
        }
    };

public:
    watch_table() = default;
    watch_table(const watch_table&) = delete;
    watch_table& operator=(const watch_table&) = delete;

    /// Registers `w` as a wait for its descriptor, unless it has completed: the slot's word is
    /// read once (acquire) and that one value decides. Returns whether `w` was registered (when
    /// not, the word had reached the target and the caller completes the wait).
    ///
    /// When the slot's word moved far since its last scan, the slot is first scanned at the
    /// value read: waits it completes are handed to `sink` (wait_end::reached) before this
    /// returns. With `deadline`, the wait is also handed out by collect_expired() once the
    /// caller's clock passes it. Throws std::bad_alloc (nothing registered) when a line's
    /// record or a deadline's node cannot be made.
    template <class Sink>
    bool insert(T& w, Sink&& sink, std::optional<mono_ns> deadline = std::nullopt) {
        const memory_descriptor& d = w.descriptor();
        const completion_line* line = &d.line();
        const std::size_t s = d.slot().index();
        const std::uint64_t word = line->words[s].load(std::memory_order_acquire);
        if (sequence_reached(word, d.target())) return false;
        auto [it, fresh] = emplace_line(line);
        line_rec& lr = it->second;
        if (fresh) {
            lr.active_pos = active_.size();
            active_.push_back(&lr); // room was reserved by emplace_line
        }
        slot_rec& sr = lr.slots[s];
        if (sr.root == nullptr) {
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
        auto indexed = deadlines_.end();
        if (deadline) {
            try {
                indexed = deadlines_.emplace(deadline->ns, &w);
            } catch (...) {
                if (lr.count == 0) drop_record(lr); // a record made for this wait alone
                throw;
            }
        }
        w.deadline_ = indexed; // in place of its kept deadline: the index holds it now
        detail::slot_tree::insert(sr.root, &w, d.target() - sr.anchor, distance{sr.anchor});
        lr.mask |= 1u << s;
        ++lr.count;
        ++size_;
        return true;
    }

    /// Removes a registered wait (nothing is handed to a sink).
    void erase(T& w) noexcept {
        const memory_descriptor& d = w.descriptor();
        remove(lines_.find(&d.line())->second, d.slot().index(), &w);
    }

    /// A registered wait for `d` that satisfies `match(const T*)`, or nullptr. No word is read
    /// and no wait's record but its target is read before it is found registered.
    template <class Match>
    T* find(const memory_descriptor& d, Match&& match) {
        const auto it = lines_.find(&d.line());
        if (it == lines_.end()) return nullptr;
        line_rec& lr = it->second;
        const std::size_t s = d.slot().index();
        if ((lr.mask & (1u << s)) == 0) return nullptr;
        const slot_rec& sr = lr.slots[s];
        // Every registered target is at distance [1, 2^63] from the anchor; any other cannot be
        // registered.
        const std::uint64_t dist = d.target() - sr.anchor;
        if (dist == 0 || dist > half) return nullptr;
        const distance key{sr.anchor};
        for (watch_node* n = detail::slot_tree::lower_bound(sr.root, dist, key);
             n != nullptr && key(n) == dist; n = detail::slot_tree::next(n))
            if (match(static_cast<const T*>(wait_of(n)))) return wait_of(n);
        return nullptr;
    }

    /// Scans every watched slot once (one acquire load each) and hands every completed wait to
    /// `sink` (wait_end::reached), ascending target order within a slot. Returns how many.
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

    /// Hands every wait whose deadline is at or before `now` to `sink` (wait_end::expired),
    /// earliest first. Returns how many.
    template <class Sink>
    std::size_t collect_expired(mono_ns now, Sink&& sink) {
        std::size_t n = 0;
        while (!deadlines_.empty() && deadlines_.begin()->first <= now.ns) {
            T* w = wait_of(deadlines_.begin()->second);
            erase(*w);
            sink(w, wait_end::expired);
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
            const distance key{sr.anchor};
            // A prefix (distance at most delta) or a suffix (distance above delta - 2^63).
            if (delta <= half ? key(detail::slot_tree::first(sr.root)) <= delta
                              : key(detail::slot_tree::last(sr.root)) > delta - half)
                return true;
        }
        return false;
    }

    /// Removes every wait on `line` (its owner is about to free it) and hands each to `sink`
    /// (wait_end::aborted). After this returns the table no longer reads the line.
    template <class Sink>
    std::size_t remove_line(const completion_line& line, Sink&& sink) noexcept {
        const auto it = lines_.find(&line);
        if (it == lines_.end()) return 0;
        return drop_line(it->second, sink);
    }

    /// Removes every wait on `slot` of `line` (the stream storing into it faulted, or went, and
    /// will store no more) and hands each to `sink` with `why` (wait_end::faulted or
    /// wait_end::aborted), in ascending target order, each once it has left the table. `sink`
    /// must not call back into the table.
    template <class Sink>
    std::size_t remove_slot(const completion_line& line, slot_id slot, Sink&& sink,
                            wait_end why = wait_end::faulted) noexcept {
        const auto found = lines_.find(&line);
        if (found == lines_.end()) return 0;
        line_rec& lr = found->second;
        const std::size_t s = slot.index();
        std::size_t n = 0;
        watch_node* taken = take_first(lr.slots[s], ~std::uint64_t{0}, n);
        settle(lr, s, n, false);
        return hand_out(taken, sink, why);
    }

    /// Removes every wait and hands each to `sink` (wait_end::aborted).
    template <class Sink>
    std::size_t clear(Sink&& sink) noexcept {
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

    /// Calls `f(const T*)` for every registered wait, in an unspecified order, reading no word.
    /// O(size()); `f` must not call back into the table.
    template <class F>
    void for_each(F&& f) const {
        for (const line_rec* lr : active_)
            for (std::uint32_t mask = lr->mask; mask != 0; mask &= mask - 1)
                for (watch_node* n =
                         detail::slot_tree::first(lr->slots[std::countr_zero(mask)].root);
                     n != nullptr; n = detail::slot_tree::next(n))
                    f(static_cast<const T*>(wait_of(n)));
    }

    /// Registered waits.
    std::size_t size() const noexcept { return size_; }
    bool empty() const noexcept { return size_ == 0; }
    /// Lines with at least one registered wait.
    std::size_t lines() const noexcept { return active_.size(); }
    /// Deadline nodes kept for the next waits with a deadline (for tests): at most
    /// detail::node_pool::max_free.
    std::size_t nodes_kept() const noexcept { return deadline_nodes_.kept(); }
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
                          bool keep_record = false) noexcept {
        slot_rec& sr = lr.slots[s];
        const std::uint64_t delta = word - sr.anchor;
        if (delta == 0) return 0;
        std::size_t n = 0;
        // Distance at most delta: a prefix; else (the word moved "backwards") above
        // delta - 2^63: a suffix.
        watch_node* taken =
            delta <= half ? take_first(sr, delta, n) : take_last(sr, delta - half, n);
        // The pending waits keep their order under the new anchor.
        sr.anchor = word;
        settle(lr, s, n, keep_record);
        return hand_out(taken, sink, wait_end::reached);
    }

    // Takes out of `sr`, in ascending order, its first waits at distance at most `upto`, with
    // their deadlines; returns them linked through left_, and adds their count to `n`.
    watch_node* take_first(slot_rec& sr, std::uint64_t upto, std::size_t& n) noexcept {
        const distance key{sr.anchor};
        watch_node* head = nullptr;
        watch_node** tail = &head;
        for (watch_node* w = detail::slot_tree::first(sr.root); w != nullptr && key(w) <= upto;) {
            watch_node* after = detail::slot_tree::pop_first(sr.root, w);
            unindex(w);
            *tail = w;
            tail = &w->left_;
            ++n;
            w = after;
        }
        return head;
    }
    // The same from the end: its last waits at distance above `above`, in ascending order.
    watch_node* take_last(slot_rec& sr, std::uint64_t above, std::size_t& n) noexcept {
        const distance key{sr.anchor};
        watch_node* head = nullptr;
        for (watch_node* w = detail::slot_tree::last(sr.root); w != nullptr && key(w) > above;) {
            watch_node* before = detail::slot_tree::pop_last(sr.root, w);
            unindex(w);
            w->left_ = head;
            head = w;
            ++n;
            w = before;
        }
        return head;
    }
    // Out of the index, and the node keeps its deadline again (watch_node::kept_deadline).
    void unindex(watch_node* w) noexcept {
        std::uint64_t kept = 0;
        if (w->deadline_ != deadlines_.end()) {
            kept = w->deadline_->first;
            deadlines_.erase(w->deadline_);
        }
        w->kept_deadline_ = kept;
    }
    // `n` waits left slot `s`: the counts follow (and the record goes, when it was the last).
    void settle(line_rec& lr, std::size_t s, std::size_t n, bool keep_record) noexcept {
        size_ -= n;
        lr.count -= n;
        if (lr.slots[s].root == nullptr) lr.mask &= ~(1u << s);
        if (lr.count == 0 && !keep_record) drop_record(lr);
    }
    // Hands the waits linked through left_ to `sink`, in order, once each has left the table.
    template <class Sink>
    static std::size_t hand_out(watch_node* list, Sink& sink, wait_end why) noexcept {
        std::size_t n = 0;
        while (list != nullptr) {
            watch_node* w = std::exchange(list, list->left_);
            w->left_ = nullptr;
            sink(wait_of(w), why);
            ++n;
        }
        return n;
    }

    void remove(line_rec& lr, std::size_t s, watch_node* w) noexcept {
        unindex(w);
        detail::slot_tree::erase(lr.slots[s].root, w);
        settle(lr, s, 1, false);
    }

    template <class Sink>
    std::size_t drop_line(line_rec& lr, Sink& sink) noexcept {
        std::array<watch_node*, line_words> taken{};
        std::size_t n = 0;
        for (std::uint32_t mask = lr.mask; mask != 0; mask &= mask - 1) {
            const auto s = static_cast<std::size_t>(std::countr_zero(mask));
            taken[s] = take_first(lr.slots[s], ~std::uint64_t{0}, n);
        }
        size_ -= n;
        lr.count = 0;
        lr.mask = 0;
        drop_record(lr);
        for (watch_node* list : taken)
            hand_out(list, sink, wait_end::aborted);
        return n;
    }

    // The record of `line`, made (or a spare one taken) when it has none; room for it in
    // active_ is made first.
    std::pair<typename line_map::iterator, bool> emplace_line(const completion_line* line) {
        if (const auto it = lines_.find(line); it != lines_.end()) return {it, false};
        if (active_.size() == active_.capacity())
            active_.reserve(std::max<std::size_t>(16, 2 * active_.capacity()));
        if (spare_count_ == 0) return lines_.try_emplace(line, line);
        typename line_map::node_type& node = spare_lines_[spare_count_ - 1];
        node.key() = line;
        node.mapped().line = line;
        // Unchanged if it throws (a rehash without memory): the spare stays a spare.
        auto r = lines_.insert(std::move(node));
        --spare_count_;
        return {r.position, true};
    }

    // Erases the line's record; it must hold no wait. The record is kept as a spare for the next
    // line (up to max_spare_lines of them).
    void drop_record(line_rec& lr) noexcept {
        line_rec* last = active_.back();
        active_[lr.active_pos] = last;
        last->active_pos = lr.active_pos;
        active_.pop_back();
        typename line_map::node_type node = lines_.extract(lr.line);
        if (spare_count_ == max_spare_lines) return; // freed with `node`
        spare_lines_[spare_count_++] = std::move(node);
    }

    // First: the index gives its nodes back to it when it is destroyed.
    detail::node_pool deadline_nodes_;
    line_map lines_;
    std::array<typename line_map::node_type, max_spare_lines> spare_lines_{};
    std::size_t spare_count_ = 0;
    std::vector<line_rec*> active_;
    detail::deadline_index deadlines_{detail::deadline_index::allocator_type(deadline_nodes_)};
    std::size_t size_ = 0;
};

} // namespace gpu_async

#endif // GPU_ASYNC_CORE_WATCH_TABLE_HPP
