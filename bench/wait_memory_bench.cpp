// SPDX-License-Identifier: BSL-1.0
// wait-memory-bench: the heap a pending descriptor wait costs (its op and its place in the
// reactor's table), and the time cancel() takes, at 1 000 to 1 000 000 pending waits on one port:
// eight waits to a line (one per slot), and one wait to a line (each line's record is then the
// wait's alone). Side by side: a steady_timer wait, Asio's own operation with the same small
// handler.
//
//   wait-memory-bench [--max N]        (default 1000000)
//
// Bytes are malloc's bytes in use (mallinfo2) after the waits are started, less before, per wait;
// the lines are allocated before. glibc only.
#include <gpu_async/gpu_completion_port.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <malloc.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

namespace {

// The bytes malloc has handed out and not taken back: every allocation of the program, whatever
// the allocator (Asio's recycling allocator takes its blocks from aligned_alloc, not new).
long long heap_in_use() {
    return static_cast<long long>(mallinfo2().uordblks);
}

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) {
    return std::chrono::duration<double>(clock_type::now() - t).count();
}

struct row {
    std::size_t pending;
    double port_bytes, own_line_bytes, timer_bytes, port_cancel_s, timer_cancel_s;
};

// Starts n waits on one port, each `per_line` to a line (one per slot, from slot 0), and returns
// the heap bytes per wait; `cancel_s`, if given, gets the time of port.cancel().
double measure_port(std::size_t n, std::size_t per_line, double* cancel_s) {
    namespace asio = boost::asio;
    const std::size_t lines = (n + per_line - 1) / per_line;
    std::unique_ptr<gpu_async::completion_line[]> line(new gpu_async::completion_line[lines]);
    const auto at = [&](std::size_t i) {
        return gpu_async::memory_descriptor(line[i / per_line],
                                            *gpu_async::slot_id::at(i % per_line), 1);
    };
    asio::io_context ctx{1};
    gpu_async::gpu_completion_port port(ctx);
    std::size_t ended = 0;
    // A first wait makes the service, its thread and its table before the count starts.
    port.async_wait(at(0), [&](gpu_async::error_code) { ++ended; });
    ctx.poll();
    const long long before = heap_in_use();
    for (std::size_t i = 1; i < n; ++i)
        port.async_wait(at(i), [&](gpu_async::error_code) { ++ended; });
    // Let the watcher take them into its table: registrations are queued first (and pending()
    // counts them there), then taken in at its next pass, which makes the lines' records.
    // Measured once the heap has not moved for 20 ms.
    const auto deadline = clock_type::now() + std::chrono::seconds(60);
    while (port.pending() != n && clock_type::now() < deadline)
        ctx.poll();
    for (long long last = -1; clock_type::now() < deadline;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        const long long now = heap_in_use();
        if (now == last) break;
        last = now;
    }
    const double bytes =
        static_cast<double>(heap_in_use() - before) / static_cast<double>(n > 1 ? n - 1 : 1);
    const auto t = clock_type::now();
    port.cancel();
    if (cancel_s != nullptr) *cancel_s = seconds_since(t);
    ctx.run_for(std::chrono::seconds(60));
    if (ended != n) std::fprintf(stderr, "port: %zu of %zu waits ended\n", ended, n);
    return bytes;
}

row measure(std::size_t n) {
    row r{n, 0, 0, 0, 0, 0};
    namespace asio = boost::asio;
    r.port_bytes = measure_port(n, gpu_async::line_words, &r.port_cancel_s);
    r.own_line_bytes = measure_port(n, 1, nullptr);
    {
        asio::io_context ctx{1};
        std::vector<std::unique_ptr<asio::steady_timer>> timers;
        timers.reserve(n);
        for (std::size_t i = 0; i < n; ++i)
            timers.push_back(std::make_unique<asio::steady_timer>(ctx, std::chrono::hours(1)));
        std::size_t ended = 0;
        const long long before = heap_in_use();
        for (auto& t : timers)
            t->async_wait([&](boost::system::error_code) { ++ended; });
        r.timer_bytes = static_cast<double>(heap_in_use() - before) / static_cast<double>(n);
        const auto t = clock_type::now();
        for (auto& tm : timers)
            tm->cancel();
        r.timer_cancel_s = seconds_since(t);
        ctx.run_for(std::chrono::seconds(60));
        if (ended != n) std::fprintf(stderr, "timer: %zu of %zu waits ended\n", ended, n);
    }
    return r;
}

} // namespace

int main(int argc, char** argv) {
    std::size_t max = 1'000'000;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--max") == 0 && i + 1 < argc) {
            max = std::strtoull(argv[++i], nullptr, 10);
        } else {
            std::fprintf(stderr, "usage: wait-memory-bench [--max N]\n");
            return 2;
        }
    }
    std::printf("| pending | port: heap bytes per wait | port, a line per wait | "
                "steady_timer: heap bytes per wait | port cancel() s | timers cancel s |\n"
                "|---:|---:|---:|---:|---:|---:|\n");
    for (std::size_t n = 1000; n <= max; n *= 10) {
        const row r = measure(n);
        std::printf("| %zu | %.0f | %.0f | %.0f | %.3f | %.3f |\n", r.pending, r.port_bytes,
                    r.own_line_bytes, r.timer_bytes, r.port_cancel_s, r.timer_cancel_s);
        std::fflush(stdout);
    }
}
