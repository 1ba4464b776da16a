// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The deadline estimator.
///
/// Each readback point (a call site, a caller-chosen key) keeps the last `window` samples in a
/// ring of at most window_max (16). The prediction is the minimum of those samples. An exact
/// outcome pushes its residual; a late outcome pushes min(woke, prediction) / 2, and woke / 2 on
/// a cold point (one with no sample yet: as if its prediction were unbounded), so a late wake
/// never raises the prediction and a run of them halves it each time. The sleep is none for a
/// cold point; else s = prediction - margin (saturating at 0); none if s < min_sleep; else
/// min(s, max_sleep).
///
/// The window is read from the deadline_plan given to each call, clamped to 1..window_max (a
/// plan from wait_plan::parse is always in range): observe() keeps the last `window` samples,
/// and sleep_ns() reads at most the last `window`. Everything is integer arithmetic on
/// nanoseconds, reproducible to the nanosecond.
///
/// Standard library only.
#ifndef GPU_ASYNC_CORE_ESTIMATOR_HPP
#define GPU_ASYNC_CORE_ESTIMATOR_HPP

#include <gpu_async/core/wait_plan.hpp>

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <type_traits>
#include <unordered_map>

namespace gpu_async {

/// What one wait taught the estimator about its readback point.
class outcome {
public:
    enum class kind_type : std::uint8_t {
        exact, ///< the wait saw the work pending, then saw it finish `ns` after the wait started
        late,  ///< the first query after a sleep found the work done `ns` after the start
               ///< (an upper bound: censored)
    };

    static constexpr outcome exact(std::uint64_t residual_ns) noexcept {
        return outcome(kind_type::exact, residual_ns);
    }
    static constexpr outcome late(std::uint64_t woke_ns) noexcept {
        return outcome(kind_type::late, woke_ns);
    }

    constexpr kind_type kind() const noexcept { return kind_; }
    constexpr bool is_exact() const noexcept { return kind_ == kind_type::exact; }
    constexpr bool is_late() const noexcept { return kind_ == kind_type::late; }
    constexpr std::uint64_t ns() const noexcept { return ns_; }

    friend constexpr bool operator==(const outcome&, const outcome&) = default;

private:
    constexpr outcome(kind_type k, std::uint64_t ns) noexcept
        : kind_(k)
        , ns_(ns) {}
    kind_type kind_;
    std::uint64_t ns_;
};

/// The estimate of one readback point: a ring of the last samples (at most window_max).
class point_estimate {
public:
    /// The window a deadline plan asks for, clamped to 1..window_max.
    static constexpr std::size_t window_of(const deadline_plan& plan) noexcept {
        return std::clamp<std::size_t>(plan.window, 1, window_max);
    }

    /// The minimum of the last `window` samples, or none for a cold point.
    constexpr std::optional<std::uint64_t> prediction_ns(std::size_t window) const noexcept {
        const std::size_t n = std::min(count_, std::clamp<std::size_t>(window, 1, window_max));
        if (n == 0) return std::nullopt;
        std::uint64_t m = std::numeric_limits<std::uint64_t>::max();
        for (std::size_t i = 0; i < n; ++i)
            m = std::min(m, ring_[(next_ + window_max - 1 - i) % window_max]);
        return m;
    }

    /// The sleep before parking, or none: none for a cold point; else s = prediction - margin
    /// (saturating at 0); none if s < min_sleep; else min(s, max_sleep).
    constexpr std::optional<std::uint64_t> sleep_ns(const deadline_plan& plan) const noexcept {
        const std::optional<std::uint64_t> p = prediction_ns(window_of(plan));
        if (!p) return std::nullopt;
        const std::uint64_t s = *p > plan.margin_ns ? *p - plan.margin_ns : 0;
        if (s < plan.min_sleep_ns) return std::nullopt;
        return std::min(s, plan.max_sleep_ns);
    }

    /// Learns from one wait: pushes the sample the outcome gives, and keeps the last `window`.
    constexpr void observe(const deadline_plan& plan, outcome o) noexcept {
        const std::size_t window = window_of(plan);
        std::uint64_t sample = o.ns();
        if (o.is_late()) {
            const std::optional<std::uint64_t> p = prediction_ns(window);
            sample = (p ? std::min(o.ns(), *p) : o.ns()) / 2;
        }
        ring_[next_] = sample;
        next_ = (next_ + 1) % window_max;
        count_ = std::min(count_ + 1, window);
    }

    /// How many samples the point holds (at most the last window given to observe()).
    constexpr std::size_t samples() const noexcept { return count_; }

    /// The sample `age` observations ago (0: the newest); `age` < samples().
    constexpr std::uint64_t sample(std::size_t age) const noexcept {
        return ring_[(next_ + window_max - 1 - age % window_max) % window_max];
    }

private:
    std::array<std::uint64_t, window_max> ring_{};
    std::size_t next_ = 0;  // where the next sample goes
    std::size_t count_ = 0; // samples held, newest first from next_ - 1
};

/// A key std::unordered_map can hold: std::hash<Key> is enabled and keys compare equal.
template <class Key>
concept hashable_point_key = std::equality_comparable<Key> && requires(const Key& k) {
    { std::hash<Key>{}(k) } -> std::convertible_to<std::size_t>;
};

/// A key std::map can hold: keys are ordered by operator<.
template <class Key>
concept ordered_point_key = requires(const Key& a, const Key& b) {
    { a < b } -> std::convertible_to<bool>;
};

/// A key of a point table: hashable or ordered.
template <class Key>
concept point_key = hashable_point_key<Key> || ordered_point_key<Key>;

namespace detail {
template <class Key>
struct point_map {
    using type = std::map<Key, point_estimate>;
};
template <class Key>
requires hashable_point_key<Key>
struct point_map<Key> {
    using type = std::unordered_map<Key, point_estimate>;
};
} // namespace detail

/// The estimates of every readback point, by caller-chosen key. A hashable key is held in a
/// std::unordered_map, any other ordered key in a std::map. Not synchronised: one table per
/// thread or per executor, or the caller's own lock.
template <point_key Key>
class point_table {
public:
    /// The map type in use (std::unordered_map for hashable keys, else std::map).
    using map_type = typename detail::point_map<Key>::type;

    /// The sleep before parking at `key`, or none (an unknown key gives none and creates no
    /// entry).
    std::optional<std::uint64_t> sleep_ns(const Key& key, const deadline_plan& plan) const {
        const auto it = points_.find(key);
        if (it == points_.end()) return std::nullopt;
        return it->second.sleep_ns(plan);
    }

    /// The prediction at `key` (minimum of its last `plan.window` samples), or none.
    std::optional<std::uint64_t> prediction_ns(const Key& key, const deadline_plan& plan) const {
        const auto it = points_.find(key);
        if (it == points_.end()) return std::nullopt;
        return it->second.prediction_ns(point_estimate::window_of(plan));
    }

    /// Learns from one wait at `key` (creating the point on first use).
    void observe(const Key& key, const deadline_plan& plan, outcome o) {
        points_[key].observe(plan, o);
    }

    /// The point at `key`, or nullptr.
    const point_estimate* find(const Key& key) const {
        const auto it = points_.find(key);
        return it == points_.end() ? nullptr : &it->second;
    }

    /// Forgets `key`; true when it was known.
    bool erase(const Key& key) { return points_.erase(key) != 0; }
    void clear() noexcept { points_.clear(); }

    std::size_t size() const noexcept { return points_.size(); }
    bool empty() const noexcept { return points_.empty(); }

private:
    map_type points_;
};

} // namespace gpu_async

#endif // GPU_ASYNC_CORE_ESTIMATOR_HPP
