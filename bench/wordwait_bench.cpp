// SPDX-License-Identifier: BSL-1.0
//
// bench/wordwait_bench.cpp: store-to-wake latency of every park path this machine has.
//
// A producer thread stores a word (after a pause long enough for the waiter to be parked for
// real: spun out, yielding or asleep), recording the time just before its store; the waiter
// parks until it sees the word and records the time it woke. Reported per path: the store-to-
// wake latency (p50, p99, max) and the waiter's CPU time per second it spent parked (thread CPU
// clock). Paths: the probed word wait (umwait / monitorx / wfet / wfe where the CPU has one),
// the portable fallback (pause-spin, then yield), the doorbell (spin, then shared futex; the
// producer rings), the raw LDXR + WFE loop on aarch64 when the kernel runs the event stream,
// and a busy poll (no park at all) as the floor. Under qemu-user the aarch64 numbers are not
// timings of any hardware.
//
//   wordwait_bench [--rounds N] [--gap-us G]      (defaults: 2000 rounds, 50 us gap)
//
#include <gpu_async/wait/doorbell.hpp>
#include <gpu_async/wait/wordwait.hpp>

#include "common/stats.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

namespace ga = gpu_async;
namespace gb = gpu_async::bench;

namespace {

struct config {
    std::size_t rounds = 2000;
    std::uint64_t gap_us = 50;
};

struct row {
    std::string path;
    gb::summary latency;
    double cpu_per_waited_s = 0; // CPU seconds per second spent parked
};

using park_fn =
    std::function<bool(const ga::completion_line&, const std::function<bool()>&, ga::dur_ns)>;

// One run: `park` waits, the producer stores then calls `announce`.
row measure(const std::string& name, const config& cfg, ga::completion_line& line,
            const park_fn& park, const std::function<void()>& announce) {
    auto& word = line.words[2];
    word.store(0);
    std::atomic<std::uint64_t> ack{0};
    std::atomic<std::uint64_t> stored_at{0};
    std::thread producer([&] {
        for (std::uint64_t i = 1; i <= cfg.rounds; ++i) {
            while (ack.load(std::memory_order_acquire) != i - 1)
                std::this_thread::yield();
            std::this_thread::sleep_for(std::chrono::microseconds(cfg.gap_us));
            stored_at.store(gb::now_ns(), std::memory_order_relaxed);
            word.store(i, std::memory_order_release);
            announce();
        }
    });
    std::vector<std::uint64_t> samples;
    samples.reserve(cfg.rounds);
    std::uint64_t waited_ns = 0;
    const std::uint64_t cpu0 = gb::thread_cpu_ns();
    for (std::uint64_t i = 1; i <= cfg.rounds; ++i) {
        const std::uint64_t t0 = gb::now_ns();
        while (!park(
            line, [&] { return word.load(std::memory_order_acquire) >= i; },
            ga::dur_ns::from_ms(1000))) {
        }
        const std::uint64_t woke = gb::now_ns();
        const std::uint64_t at = stored_at.load(std::memory_order_relaxed);
        samples.push_back(woke > at ? woke - at : 0);
        waited_ns += woke - t0;
        ack.store(i, std::memory_order_release);
    }
    const std::uint64_t cpu = gb::thread_cpu_ns() - cpu0;
    producer.join();
    row r;
    r.path = name;
    r.latency = gb::summarize(std::move(samples));
    r.cpu_per_waited_s =
        waited_ns == 0 ? 0 : static_cast<double>(cpu) / static_cast<double>(waited_ns);
    return r;
}

} // namespace

int main(int argc, char** argv) {
    config cfg;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            cfg.rounds = std::strtoull(argv[++i], nullptr, 10);
        else if (std::strcmp(argv[i], "--gap-us") == 0 && i + 1 < argc)
            cfg.gap_us = std::strtoull(argv[++i], nullptr, 10);
        else {
            std::fprintf(stderr, "usage: %s [--rounds N] [--gap-us G]\n", argv[0]);
            return 2;
        }
    }
    if (cfg.rounds == 0) cfg.rounds = 1;

    const ga::word_wait& ww = ga::word_wait::probe();
    std::printf("word wait probe: running %s\n%s", std::string(ww.name()).c_str(),
                ww.describe().c_str());
    std::printf("rounds %zu, producer gap %llu us\n\n", cfg.rounds,
                static_cast<unsigned long long>(cfg.gap_us));

    std::vector<row> rows;
    ga::completion_line line;
    auto nothing = [] {};
    if (ww.path() != ga::word_wait_path::fallback) {
        rows.push_back(measure(
            std::string("word_wait ") + std::string(ga::to_string(ww.path())), cfg, line,
            [&](const ga::completion_line& l, const std::function<bool()>& p, ga::dur_ns b) {
                return ww.park(l, p, b);
            },
            nothing));
    }
    const ga::word_wait& portable = ga::word_wait::portable();
    rows.push_back(measure(
        "word_wait fallback", cfg, line,
        [&](const ga::completion_line& l, const std::function<bool()>& p, ga::dur_ns b) {
            return portable.park(l, p, b);
        },
        nothing));
#if defined(__aarch64__)
    if (ww.report(ga::word_wait_path::wfe).available && ww.path() != ga::word_wait_path::wfe) {
        rows.push_back(measure(
            "ldxr+wfe loop", cfg, line,
            [&](const ga::completion_line& l, const std::function<bool()>& p, ga::dur_ns b) {
                auto pred = p;
                return ga::detail::arm::park_wfe(l, pred, ga::detail::mono_now().after(b));
            },
            nothing));
    }
#endif
    ga::doorbell bell;
    rows.push_back(measure(
        "doorbell futex ring", cfg, bell.line(),
        [&](const ga::completion_line&, const std::function<bool()>& p, ga::dur_ns b) {
            return bell.wait(p, b);
        },
        [&] { bell.ring(); }));
    rows.push_back(measure(
        "busy poll (floor)", cfg, line,
        [&](const ga::completion_line&, const std::function<bool()>& p, ga::dur_ns) {
            while (!p()) {
            }
            return true;
        },
        nothing));

    std::printf("%-22s %8s %10s %10s %10s %16s\n", "path", "rounds", "p50", "p99", "max",
                "cpu per waited s");
    for (const row& r : rows) {
        std::printf("%-22s %8zu %10s %10s %10s %15.1f%%\n", r.path.c_str(), r.latency.count,
                    gb::format_ns(r.latency.p50).c_str(), gb::format_ns(r.latency.p99).c_str(),
                    gb::format_ns(r.latency.max).c_str(), r.cpu_per_waited_s * 100.0);
    }
    return 0;
}
