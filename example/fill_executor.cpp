// SPDX-License-Identifier: BSL-1.0
//
// example/fill_executor.cpp: the FILL executor on real time, without a GPU.
//
// A "device" thread stores sequence numbers into three slots of one completion line at 2, 4 and
// 6 ms; three tasks each await one slot; a fourth task does CPU work in slices, yielding between
// them. The executor runs the work while the waits are pending and idles (sleeps, or parks on
// the line with the word wait) only when no task is ready. Prints each slot's completion time
// and the run statistics.
//
// The clock and the idle here are small local stand-ins for the std host.
//
#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/time.hpp>
#include <gpu_async/fill/fill_executor.hpp>
#include <gpu_async/fill/reactor.hpp>
#include <gpu_async/wait/wordwait.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <thread>

namespace {

using gpu_async::dur_ns;
using gpu_async::mono_ns;

// A clock: std::chrono::steady_clock in nanoseconds from the program's start.
class steady_ns_clock {
public:
    steady_ns_clock()
        : epoch_(std::chrono::steady_clock::now()) {}

    mono_ns now() const noexcept {
        const auto d = std::chrono::steady_clock::now() - epoch_;
        return mono_ns{static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(d).count())};
    }

    std::chrono::steady_clock::time_point to_time_point(mono_ns t) const noexcept {
        return epoch_ + std::chrono::nanoseconds(static_cast<std::int64_t>(t.count()));
    }

private:
    std::chrono::steady_clock::time_point epoch_;
};

// An idle on real time: sleeps the thread; parks on the line with the probed word wait.
class real_idle {
public:
    explicit real_idle(const steady_ns_clock& clock)
        : clock_(&clock) {}

    mono_ns now() const noexcept { return clock_->now(); }

    void sleep_until(mono_ns at) { std::this_thread::sleep_until(clock_->to_time_point(at)); }

    template <class Pred>
    bool park_line(const gpu_async::completion_line& line, Pred pred, dur_ns bound) {
        return gpu_async::word_wait::probe().park(line, pred, bound);
    }

private:
    const steady_ns_clock* clock_;
};

static_assert(gpu_async::reactor_idle<real_idle>);

double ms(mono_ns t) {
    return static_cast<double>(t.count()) / 1e6;
}

gpu_async::fill_task<> await_slot(gpu_async::reactor& r, gpu_async::memory_descriptor d,
                                  mono_ns until, const steady_ns_clock& clock,
                                  std::optional<mono_ns>& done) {
    // Bound to a variable first: g++ 12 miscompiles `if (co_await ...)` (the body never runs).
    const bool completed = co_await r.ready(d, until);
    if (completed) done = clock.now();
}

gpu_async::fill_task<> cpu_work(const steady_ns_clock& clock, int slices, dur_ns slice,
                                std::uint64_t& checksum) {
    for (int i = 0; i < slices; ++i) {
        const mono_ns end = clock.now().after(slice);
        std::uint64_t x = checksum + 1;
        while (clock.now() < end)
            for (int k = 0; k < 64; ++k)
                x = x * 6364136223846793005ull + 1442695040888963407ull;
        checksum = x;
        co_await gpu_async::yield_now();
    }
}

} // namespace

int main() {
    const steady_ns_clock clock;
    real_idle idle(clock);
    gpu_async::completion_line line;
    gpu_async::fill_executor ex(dur_ns::from_us(100));

    std::array<std::optional<mono_ns>, 3> done;
    const mono_ns give_up = clock.now().after(dur_ns::from_ms(1000)); // a generous safety bound
    for (std::size_t i = 0; i < done.size(); ++i)
        ex.spawn(await_slot(ex.get_reactor(),
                            gpu_async::memory_descriptor(line, *gpu_async::slot_id::at(i), 1),
                            give_up, clock, done[i]));
    std::uint64_t checksum = 0;
    ex.spawn(cpu_work(clock, 10, dur_ns::from_us(200), checksum));

    // The device: stores behind its "work" at 2, 4 and 6 ms.
    const mono_ns start = clock.now();
    std::thread device([&] {
        for (std::size_t i = 0; i < done.size(); ++i) {
            std::this_thread::sleep_until(
                clock.to_time_point(start.after(dur_ns::from_ms(2 * (i + 1)))));
            line.words[i].store(1, std::memory_order_release);
        }
    });

    const auto stats = ex.run(idle);
    device.join();
    if (!stats.has_value()) {
        std::printf("run failed: %s\n", stats.error().message().c_str());
        return 1;
    }

    std::printf("word wait: %.*s\n", static_cast<int>(gpu_async::word_wait::probe().name().size()),
                gpu_async::word_wait::probe().name().data());
    bool ok = true;
    for (std::size_t i = 0; i < done.size(); ++i) {
        if (done[i]) {
            std::printf("slot %zu: completed at %.3f ms (store at %zu ms)\n", i,
                        ms(mono_ns{done[i]->since(start).count()}), 2 * (i + 1));
        } else {
            std::printf("slot %zu: did not complete\n", i);
            ok = false;
        }
    }
    const auto& s = stats.value();
    std::printf("cpu work: 10 slices of 200 us (checksum %llu)\n",
                static_cast<unsigned long long>(checksum & 0xffff));
    std::printf("stats: resumptions %llu, woke without idling %llu, sleeps %llu, parks %llu, "
                "idle %.3f ms\n",
                static_cast<unsigned long long>(s.resumptions),
                static_cast<unsigned long long>(s.woke), static_cast<unsigned long long>(s.sleeps),
                static_cast<unsigned long long>(s.parks), ms(mono_ns{s.idle_time.count()}));
    return ok ? 0 : 1;
}
