// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief Monotonic time points, durations, the clock and timer concepts, and
/// the manual clock that replays every wait on virtual time.
///
/// The core reads time only through a clock and sleeps only through a timer. Time points and
/// durations are whole nanoseconds in 64 bits; arithmetic on them saturates instead of wrapping.
///
/// Standard library only: no threads, no blocking, no real clock.
#ifndef GPU_ASYNC_CORE_TIME_HPP
#define GPU_ASYNC_CORE_TIME_HPP

#include <chrono>
#include <compare>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <type_traits>
#include <utility>

namespace gpu_async {

/// A duration in nanoseconds. Addition and multiplication saturate at the maximum.
struct dur_ns {
    std::uint64_t ns = 0;

    static constexpr dur_ns zero() noexcept { return {0}; }
    static constexpr dur_ns max() noexcept { return {std::numeric_limits<std::uint64_t>::max()}; }
    /// `us` microseconds, saturating at max() on overflow.
    static constexpr dur_ns from_us(std::uint64_t us) noexcept { return dur_ns{us} * 1000; }
    /// `ms` milliseconds, saturating at max() on overflow.
    static constexpr dur_ns from_ms(std::uint64_t ms) noexcept { return dur_ns{ms} * 1000000; }

    constexpr std::uint64_t count() const noexcept { return ns; }

    /// A std::chrono duration in whole nanoseconds (rounded toward zero): negative ones give
    /// zero, ones past max() saturate at max().
    template <class Rep, class Period>
    static constexpr dur_ns from(std::chrono::duration<Rep, Period> d) noexcept {
        if (d <= d.zero()) return zero();
        using big = std::chrono::duration<long double, std::nano>;
        if (std::chrono::duration_cast<big>(d).count() >=
            static_cast<long double>(std::numeric_limits<std::uint64_t>::max()))
            return max();
        if constexpr (std::is_floating_point_v<Rep>)
            return {static_cast<std::uint64_t>(std::chrono::duration_cast<big>(d).count())};
        else
            return {static_cast<std::uint64_t>(
                std::chrono::duration_cast<std::chrono::duration<std::uintmax_t, std::nano>>(d)
                    .count())};
    }
    /// As std::chrono::nanoseconds, saturating at std::chrono::nanoseconds::max().
    constexpr std::chrono::nanoseconds chrono() const noexcept {
        using rep = std::chrono::nanoseconds::rep;
        return std::chrono::nanoseconds(
            ns > static_cast<std::uint64_t>(std::numeric_limits<rep>::max())
                ? std::numeric_limits<rep>::max()
                : static_cast<rep>(ns));
    }
    /// Reads as std::chrono::nanoseconds (`std::chrono::nanoseconds b = port.park_bound();`).
    constexpr operator std::chrono::nanoseconds() const noexcept { return chrono(); }

    friend constexpr dur_ns operator+(dur_ns a, dur_ns b) noexcept {
        return {a.ns > std::numeric_limits<std::uint64_t>::max() - b.ns
                    ? std::numeric_limits<std::uint64_t>::max()
                    : a.ns + b.ns};
    }
    /// `n` times `d`, saturating at max().
    friend constexpr dur_ns operator*(dur_ns d, std::uint64_t n) noexcept {
        return {n != 0 && d.ns > std::numeric_limits<std::uint64_t>::max() / n
                    ? std::numeric_limits<std::uint64_t>::max()
                    : d.ns * n};
    }
    /// Saturates at zero.
    friend constexpr dur_ns operator-(dur_ns a, dur_ns b) noexcept {
        return {a.ns > b.ns ? a.ns - b.ns : 0};
    }
    friend constexpr bool operator==(dur_ns, dur_ns) noexcept = default;
    friend constexpr auto operator<=>(dur_ns, dur_ns) noexcept = default;
};

constexpr dur_ns min(dur_ns a, dur_ns b) noexcept {
    return a < b ? a : b;
}
constexpr dur_ns max(dur_ns a, dur_ns b) noexcept {
    return a < b ? b : a;
}

/// A point on a monotonic clock, in nanoseconds from the clock's own epoch.
struct mono_ns {
    std::uint64_t ns = 0;

    static constexpr mono_ns max() noexcept { return {std::numeric_limits<std::uint64_t>::max()}; }

    constexpr std::uint64_t count() const noexcept { return ns; }

    /// Time from `earlier` to this point; zero when `earlier` is not earlier (saturating).
    constexpr dur_ns since(mono_ns earlier) const noexcept {
        return {ns > earlier.ns ? ns - earlier.ns : 0};
    }
    /// This point plus `d`, saturating at max().
    constexpr mono_ns after(dur_ns d) const noexcept { return {(dur_ns{ns} + d).ns}; }

    friend constexpr bool operator==(mono_ns, mono_ns) noexcept = default;
    friend constexpr auto operator<=>(mono_ns, mono_ns) noexcept = default;
};

constexpr mono_ns min(mono_ns a, mono_ns b) noexcept {
    return a < b ? a : b;
}
constexpr mono_ns max(mono_ns a, mono_ns b) noexcept {
    return a < b ? b : a;
}

/// A clock: reads the current monotonic time.
template <class C>
concept clock = requires(const C& c) {
    { c.now() } -> std::same_as<mono_ns>;
};

/// A timer: sleeps the caller until a time point of its clock (at once if it has passed).
template <class T>
concept timer = requires(T& t, mono_ns at) {
    t.sleep_until(at);
};

/// A virtual clock for tests and replays. Time moves only when told to; timers scheduled on it
/// fire, earliest first (ties in the order they were scheduled), as time passes their deadline,
/// with `now()` equal to each timer's own deadline while it fires. Not thread-safe.
class manual_clock {
public:
    using timer_id = std::uint64_t;

    explicit manual_clock(mono_ns start = {}) noexcept
        : now_(start) {}
    manual_clock(const manual_clock&) = delete;
    manual_clock& operator=(const manual_clock&) = delete;

    mono_ns now() const noexcept { return now_; }

    /// Moves time forward by `d`, firing each timer that falls due on the way.
    void advance(dur_ns d) { run_to(now_.after(d)); }

    /// Moves time to `t`, firing each timer that falls due on the way. Returns false, and leaves
    /// the clock as it was, when `t` is before now: the clock never goes backwards.
    bool set(mono_ns t) {
        if (t < now_) return false;
        run_to(t);
        return true;
    }

    /// Schedules `fn` to run when time reaches `at`. A deadline that has already passed fires at
    /// the next advance() or set(), even of zero.
    timer_id schedule(mono_ns at, std::function<void()> fn) {
        const timer_id id = next_id_++;
        timers_.emplace(key{at, id}, std::move(fn));
        return id;
    }

    /// Removes a pending timer; false when it already fired or was cancelled.
    bool cancel(timer_id id) {
        for (auto it = timers_.begin(); it != timers_.end(); ++it) {
            if (it->first.id == id) {
                timers_.erase(it);
                return true;
            }
        }
        return false;
    }

    /// Number of timers not yet fired.
    std::size_t pending() const noexcept { return timers_.size(); }

    /// Deadline of the earliest pending timer.
    std::optional<mono_ns> next_deadline() const {
        if (timers_.empty()) return std::nullopt;
        return timers_.begin()->first.at;
    }

private:
    struct key {
        mono_ns at;
        timer_id id;
        friend constexpr auto operator<=>(const key&, const key&) noexcept = default;
    };

    void run_to(mono_ns target) {
        // A timer may schedule further timers; each one due by `target` fires in order.
        while (!timers_.empty() && timers_.begin()->first.at <= target) {
            auto node = timers_.extract(timers_.begin());
            now_ = max(now_, node.key().at);
            node.mapped()();
        }
        now_ = max(now_, target);
    }

    mono_ns now_;
    timer_id next_id_ = 1;
    std::map<key, std::function<void()>> timers_;
};

/// A timer over a manual clock: sleeping sets the clock forward to the deadline.
class manual_timer {
public:
    explicit manual_timer(manual_clock& clock) noexcept
        : clock_(&clock) {}
    void sleep_until(mono_ns at) { clock_->set(max(at, clock_->now())); }
    manual_clock& clock() const noexcept { return *clock_; }

private:
    manual_clock* clock_;
};

static_assert(clock<manual_clock>);
static_assert(timer<manual_timer>);

} // namespace gpu_async

#endif // GPU_ASYNC_CORE_TIME_HPP
