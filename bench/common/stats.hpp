// SPDX-License-Identifier: BSL-1.0
//
// bench/common/stats.hpp: latency samples, percentiles and CPU time for the benchmarks and the
// demo. Not part of the library.
//
#ifndef GPU_ASYNC_BENCH_COMMON_STATS_HPP
#define GPU_ASYNC_BENCH_COMMON_STATS_HPP

#include <gpu_async/wait/detail/mono_clock.hpp>

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

namespace gpu_async::bench {

/// Monotonic nanoseconds: the library's clock (steady_clock), so a benchmark's times and the
/// library's deadlines are one time line.
inline std::uint64_t now_ns() noexcept {
    return gpu_async::detail::mono_now().ns;
}

/// CPU time of the whole process (all threads), in nanoseconds.
inline std::uint64_t process_cpu_ns() noexcept {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
           static_cast<std::uint64_t>(ts.tv_nsec);
}

/// CPU time of the calling thread, in nanoseconds.
inline std::uint64_t thread_cpu_ns() noexcept {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
           static_cast<std::uint64_t>(ts.tv_nsec);
}

/// CPU time of the clock `id` (a thread's CPU clock from pthread_getcpuclockid), in nanoseconds;
/// 0 when it cannot be read.
inline std::uint64_t clock_cpu_ns(clockid_t id) noexcept {
    timespec ts{};
    if (clock_gettime(id, &ts) != 0) return 0;
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
           static_cast<std::uint64_t>(ts.tv_nsec);
}

/// The CPU clocks of a set of threads (e.g. a simulated device's workers), each added from the
/// thread itself; total_ns() sums them. Read it only while those threads live.
class thread_cpu_set {
public:
    /// Adds the calling thread once (cheap after the first call from a thread).
    void add_self() {
        thread_local const thread_cpu_set* last = nullptr;
        if (last == this) return;
        clockid_t id{};
        if (pthread_getcpuclockid(pthread_self(), &id) != 0) return;
        std::lock_guard lk(mutex_);
        for (const auto& e : entries_)
            if (pthread_equal(e.thread, pthread_self())) {
                last = this;
                return;
            }
        entries_.push_back({pthread_self(), id});
        last = this;
    }

    /// The sum of the threads' CPU times, in nanoseconds.
    std::uint64_t total_ns() const {
        std::lock_guard lk(mutex_);
        std::uint64_t sum = 0;
        for (const auto& e : entries_)
            sum += clock_cpu_ns(e.id);
        return sum;
    }

    std::size_t size() const {
        std::lock_guard lk(mutex_);
        return entries_.size();
    }

private:
    struct entry {
        pthread_t thread;
        clockid_t id;
    };
    mutable std::mutex mutex_;
    std::vector<entry> entries_;
};

/// Percentiles of a set of nanosecond samples (nearest-rank).
struct summary {
    std::size_t count = 0;
    double p50 = 0, p90 = 0, p99 = 0, max = 0, mean = 0;
};

inline double percentile_sorted(const std::vector<std::uint64_t>& sorted, double p) {
    if (sorted.empty()) return 0;
    const auto rank =
        static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
    const std::size_t i = rank == 0 ? 0 : std::min(rank - 1, sorted.size() - 1);
    return static_cast<double>(sorted[i]);
}

inline summary summarize(std::vector<std::uint64_t> samples) {
    summary s;
    s.count = samples.size();
    if (samples.empty()) return s;
    std::sort(samples.begin(), samples.end());
    s.p50 = percentile_sorted(samples, 50);
    s.p90 = percentile_sorted(samples, 90);
    s.p99 = percentile_sorted(samples, 99);
    s.max = static_cast<double>(samples.back());
    double sum = 0;
    for (auto v : samples)
        sum += static_cast<double>(v);
    s.mean = sum / static_cast<double>(samples.size());
    return s;
}

/// "12.3 us" style text for a nanosecond value.
inline std::string format_ns(double ns) {
    char buf[32];
    if (ns < 1e3)
        std::snprintf(buf, sizeof buf, "%.0f ns", ns);
    else if (ns < 1e6)
        std::snprintf(buf, sizeof buf, "%.1f us", ns / 1e3);
    else
        std::snprintf(buf, sizeof buf, "%.2f ms", ns / 1e6);
    return buf;
}

} // namespace gpu_async::bench

#endif // GPU_ASYNC_BENCH_COMMON_STATS_HPP
