// SPDX-License-Identifier: BSL-1.0
//
// bench/gpu_async_bench.cpp: gpu-async-bench, every wait strategy side by side on the simulated
// device.
//
// Workload (one cell = a work duration and a pending count N): N lanes, each a stream of the
// simulated device with one item in flight; the item takes the work duration (uniform jitter of
// +-25 %, so completions come in a shuffled order), records the time just before the stream's
// store, and the lane's handler, on the one io_context thread, records store-to-handler latency
// and launches the lane's next item. So N waits are pending at every moment.
//
// Producers. The simulated device stores each item's word as a GPU stream does. For our
// strategies it also signals the port's doorbell as a GPU line with the doorbell attached does
// (sim_signal::device_store: the doorbell's device word, no ring, no system call): the headline
// store-only case. The -ringing strategies have it ring the doorbell instead, as a host producer.
//
// Strategies (how the handler learns the store happened):
//   ours-service          gpu_completion_port::async_wait(descriptor), io_context::run, the reactor
//                         service's watcher thread (default device poll, 20 us)
//   ours-service+predict  the plan-driven wait, flag plan +predict, io_context::run
//   ours-fill             async_wait(descriptor) under run_fill (no watcher thread)
//   ours-fill+predict     the plan-driven wait under run_fill
//   ours-service-dp10/50/100  ours-service with the device poll knob at 10, 50, 100 us
//   ours-fill-dp5/25/50/100  ours-fill with the device poll knob at 5, 25, 50, 100 us
//   ours-service-dp1ms, ours-fill-dp1ms  the low-CPU end of the knob: device poll 1 ms, with the
//                         park bound (100 us by default, which caps a device poll step) at 1 ms too
//   ours-service-steps    ours-service without the completion rhythm (predicts(false)): the
//                         waiter sleeps in device-poll steps only
//   ours-service-ringing, ours-fill-ringing  the same with a ringing (host) producer
//   callback-post-idealized   the device thread posts the handler itself (no callback thread)
//   callback-thread-post  the device wakes a driver-like callback thread (condition variable)
//                         that runs the function, which posts (the shape of cuLaunchHostFunc)
//   timer-poll-50us       an asio::steady_timer every 50 us scans the pending words (HPX, ad hoc)
//   timer-poll-1ms        the same every 1 ms
//   blocking-cv-thread    a waiter thread blocks (condition variable) on each wait in order and
//                         posts the handler (BlockingSync)
//   spin-poll-thread      a thread spins over the pending words and posts the handlers (stdexec's
//                         stream scheduler)
//   sleep-watcher-20us    a thread that sleeps 20 us between passes over the pending words and
//                         posts the handlers (the naive watcher)
//
// CPU: the whole process's CPU time over the measured window, less the simulated device's
// worker threads (their own CPU clocks), per second of wall time: the cost of waiting plus the
// handlers' own (common) work. The device's CPU is reported separately.
//
// Also: completions per second through one io_context thread with 64, 4096 and 65536 pending
// descriptors (host stores, no device), for the service, run_fill and a plain asio::post loop.
//
// And the executor kinds: one thread waits for one simulated-device item at a time
// with each kind, naive (the std host's blocking wait), gpu-reactor (a FILL wait on std_idle) and
// io-uring (a FILL wait on uring_idle: ring timeouts, futex parks on the doorbell where the
// kernel has them), with the recommended flag plan, without and with a ringing doorbell:
// store-to-wake latency p50/p99/max and the waiting thread's CPU per waited second
// (bench/common/executor_waits.hpp, shared with bench/uring_bench.cpp).
//
#include "common/executor_waits.hpp"
#include "common/stats.hpp"
#include "common/vulkan_waits.hpp"

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/wait_plan.hpp>
#include <gpu_async/device/sim_device.hpp>
#include <gpu_async/gpu_completion_port.hpp>
#include <gpu_async/host/std_host.hpp>
#include <gpu_async/run_fill.hpp>
#include <gpu_async/wait/detail/timer_slack.hpp>
#include <gpu_async/wait/doorbell.hpp>
#include <gpu_async/wait/wordwait.hpp>

#if GPU_ASYNC_HAS_LIBURING
#include <gpu_async/fill/uring_host.hpp>
#endif

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/program_options.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#ifndef GPU_ASYNC_BENCH_PLOT_SCRIPT
#define GPU_ASYNC_BENCH_PLOT_SCRIPT ""
#endif

namespace {

namespace asio = boost::asio;
namespace po = boost::program_options;
using gpu_async::dur_ns;
using gpu_async::bench::now_ns;

// ---------------------------------------------------------------------------------------------
// Strategies: one row of parameters each

class cell_run;
struct lane;

// The plan of the +predict strategies: the recommended flag plan with the README's example
// prediction.
constexpr const char* predict_plan_text =
    "flag:park_us=100,backstop_us=1000+predict:margin_us=150,min_sleep_us=20,max_sleep_us=50000,"
    "window=8";

/// One wait strategy. cell_run reads the fields and calls the row's parts (members of cell_run,
/// null where the strategy has nothing to do there), so a strategy is added by adding a row.
struct strategy_row {
    const char* name;       // printed, matched by --only, written to the CSVs
    bool reference = false; // the row the "vs ours" columns divide by
    // Our port's strategies; the baselines (port false) wait without it.
    bool port = false;                // a gpu_completion_port waits
    bool fill = false;                // the io thread runs run_fill instead of io_context::run
    bool ringing = false;             // the device rings the doorbell instead of store-only
    bool predicts = true;             // the port's completion rhythm
    std::uint64_t device_poll_us = 0; // 0: the port's default
    std::uint64_t park_bound_us = 0;  // 0: the default; a device poll step never outlasts it
    const char* plan = nullptr;       // the plan-driven wait's plan text
    // How the handler learns of the store.
    void (cell_run::*at_store)(lane&) = nullptr;   // on the device thread, at the store
    void (cell_run::*start_wait)(lane&) = nullptr; // on the io thread, after each launch
    void (cell_run::*thread)() = nullptr;          // a waiting thread of the strategy's own
    std::uint64_t poll_timer_us = 0;               // an asio timer scanning the pending words
    std::uint64_t poll_sleep_us = 0;               // the polling thread's sleep (0: it spins)
};

// ---------------------------------------------------------------------------------------------
// One cell

struct cell {
    std::uint64_t work_us;
    std::size_t pending;
    unsigned jitter_pct = 25; // each item takes work_us x (1 +- jitter_pct / 100), uniform
};

struct cell_result {
    const strategy_row* row;
    cell c;
    gpu_async::bench::summary lat;
    std::vector<std::uint64_t> sorted; // samples, sorted (kept for the CDF of every cell)
    double cpu_per_s = 0;              // process less device, per wall second
    double device_cpu_per_s = 0;
    double completions_per_s = 0;
    std::string note;
    std::string kinds; // plan-driven waits: how they ended
};

struct lane {
    gpu_async::sim_stream_handle stream;
    std::atomic<std::uint64_t> store_ns{0};
    std::uint64_t seq = 0;
    std::uint32_t rng = 0;
};

class cell_run {
public:
    cell_run(const strategy_row& s, cell c, double seconds, double warm_seconds)
        : row_(s)
        , cell_(c)
        , seconds_(seconds)
        , warm_seconds_(warm_seconds)
        , lanes_(c.pending)
        , device_(gpu_async::sim_device::options{1, false})
        , timer_(ctx_)
        , end_timer_(ctx_) {
        if (s.plan != nullptr) {
            auto plan = gpu_async::wait_plan::parse(s.plan);
            if (!plan) throw std::runtime_error(plan.error().message());
            plan_ = *plan;
        }
        if (s.port) make_port();
        make_lanes();
        samples_.reserve(1 << 16);
    }

    ~cell_run() { teardown(); }

    cell_result run() {
        const std::uint64_t t0 = now_ns();
        warm_at_ = t0 + static_cast<std::uint64_t>(warm_seconds_ * 1e9);
        end_at_ = warm_at_ + static_cast<std::uint64_t>(seconds_ * 1e9);
        if (row_.thread != nullptr) waiter_ = std::thread([this] { (this->*row_.thread)(); });
        asio::post(ctx_, [this] {
            for (auto& l : lanes_)
                launch(l);
            if (row_.poll_timer_us != 0) arm_poll_timer();
        });
        measure_window();
        if (row_.fill) {
            gpu_async::fill_options opts;
            if (row_.park_bound_us != 0)
                opts.park_bound = std::chrono::microseconds(row_.park_bound_us);
            gpu_async::run_fill(ctx_, opts);
        } else
            ctx_.run();
        teardown();
        return result();
    }

    // The strategies' parts, named by their rows.

    // at_store of callback-post-idealized: the device thread posts the handler itself.
    void post_handler(lane& l) {
        lane* lp = &l;
        asio::post(ctx_, [this, lp] { complete(*lp); });
    }

    // at_store of callback-thread-post, the shape of cuLaunchHostFunc: the device wakes the
    // driver's callback thread, which runs the function, which posts.
    void wake_callback_thread(lane& l) {
        {
            std::lock_guard lk(mutex_);
            incoming_.push_back(&l);
        }
        cv_.notify_one();
    }

    // start_wait of our descriptor waits.
    void descriptor_wait(lane& l) {
        lane* lp = &l;
        port_->async_wait(l.stream->descriptor_for(l.seq),
                          [this, lp](boost::system::error_code ec) {
                              if (ec)
                                  ++failures_;
                              else
                                  complete(*lp);
                          });
    }

    // start_wait of the plan-driven waits (the row's plan).
    void plan_wait(lane& l) {
        lane* lp = &l;
        port_->async_wait(*l.stream, plan_, "bench",
                          [this, lp](boost::system::error_code ec, gpu_async::wait_report report) {
                              if (ec) {
                                  ++failures_;
                              } else {
                                  ++kinds_[static_cast<std::size_t>(report.kind) & 3u];
                                  complete(*lp);
                              }
                          });
    }

    // start_wait of the timer pollers: the timer's next scan sees the lane.
    void poll_by_timer(lane& l) { polled_.push_back(&l); }

    // start_wait of the strategies with a waiting thread: hands the lane to it.
    void hand_to_thread(lane& l) {
        std::lock_guard lk(mutex_);
        incoming_.push_back(&l);
        cv_.notify_one();
    }

    // The BlockingSync stand-in: one thread, each wait in order, blocking on the stream
    // (sim_stream::block waits on the device's condition variable).
    void cv_waiter() {
        std::deque<lane*> mine;
        for (;;) {
            {
                std::unique_lock lk(mutex_);
                cv_.wait(lk, [&] { return stopping_.load() || !incoming_.empty(); });
                if (stopping_) return;
                mine.insert(mine.end(), incoming_.begin(), incoming_.end());
                incoming_.clear();
            }
            while (!mine.empty() && !stopping_) {
                lane* l = mine.front();
                mine.pop_front();
                if (l->stream->block()) return; // the device shut down
                asio::post(ctx_, [this, l] { complete(*l); });
            }
        }
    }

    // The driver's callback thread of the realistic callback model: woken by the device (a
    // condition variable), runs each function, which posts the handler.
    void callback_thread() {
        std::vector<lane*> mine;
        for (;;) {
            {
                std::unique_lock lk(mutex_);
                cv_.wait(lk, [&] { return stopping_.load() || !incoming_.empty(); });
                if (stopping_) return;
                mine.swap(incoming_);
            }
            for (lane* l : mine)
                asio::post(ctx_, [this, l] { complete(*l); });
            mine.clear();
        }
    }

    // A thread passing over the pending words and posting the handlers of those done: spinning
    // (the stdexec stand-in) or sleeping the row's poll_sleep_us between passes (the naive
    // watcher; timer slack 1 ns, as our waiter's).
    void poll_thread() {
        if (row_.poll_sleep_us != 0) gpu_async::detail::shorten_timer_slack();
        std::vector<lane*> mine;
        while (!stopping_) {
            poll_pass(mine);
            if (row_.poll_sleep_us != 0)
                std::this_thread::sleep_for(std::chrono::microseconds(row_.poll_sleep_us));
        }
    }

private:
    void make_port() {
        port_.emplace(ctx_);
        if (row_.device_poll_us != 0)
            port_->device_poll(std::chrono::microseconds(row_.device_poll_us));
        if (row_.park_bound_us != 0)
            port_->park_bound(std::chrono::microseconds(row_.park_bound_us));
        if (!row_.predicts) port_->predicts(false);
    }

    void make_lanes() {
        gpu_async::completion_line* line = nullptr;
        for (std::size_t i = 0; i < lanes_.size(); ++i) {
            if (i % gpu_async::line_words == 0) line = &device_.make_line();
            lanes_[i].stream =
                device_.make_stream(*line, *gpu_async::slot_id::at(i % gpu_async::line_words));
            // Store-only (a GPU line with the doorbell attached: its device word, no ring), the
            // headline; the -ringing strategies are the host-producer case.
            if (port_)
                lanes_[i].stream->set_doorbell(port_->shared_bell(),
                                               row_.ringing ? gpu_async::sim_signal::ring
                                                            : gpu_async::sim_signal::device_store);
            lanes_[i].rng = static_cast<std::uint32_t>(i * 2654435761u + 1u);
        }
    }

    // Arms the warm-up's end, which opens the measured window, which closes at end_at_.
    void measure_window() {
        end_timer_.expires_at(std::chrono::steady_clock::time_point(
            std::chrono::nanoseconds(static_cast<std::int64_t>(warm_at_))));
        end_timer_.async_wait([this](boost::system::error_code) {
            // The measured window starts here (on the io thread, between handlers).
            measuring_ = true;
            cpu0_ = gpu_async::bench::process_cpu_ns();
            dev0_ = device_cpu_.total_ns();
            win0_ = now_ns();
            end_timer_.expires_at(std::chrono::steady_clock::time_point(
                std::chrono::nanoseconds(static_cast<std::int64_t>(end_at_))));
            end_timer_.async_wait([this](boost::system::error_code) {
                cpu1_ = gpu_async::bench::process_cpu_ns();
                dev1_ = device_cpu_.total_ns();
                win1_ = now_ns();
                measuring_ = false;
                stopping_ = true;
                ctx_.stop();
            });
        });
    }

    cell_result result() {
        cell_result r;
        r.row = &row_;
        r.c = cell_;
        const double wall = static_cast<double>(win1_ - win0_);
        const std::uint64_t dev = dev1_ - dev0_;
        const std::uint64_t proc = cpu1_ - cpu0_;
        r.cpu_per_s = wall > 0 && proc > dev ? static_cast<double>(proc - dev) / wall : 0;
        r.device_cpu_per_s = wall > 0 ? static_cast<double>(dev) / wall : 0;
        r.completions_per_s = wall > 0 ? static_cast<double>(samples_.size()) * 1e9 / wall : 0;
        std::sort(samples_.begin(), samples_.end());
        r.lat = gpu_async::bench::summarize(samples_);
        r.sorted = std::move(samples_);
        r.kinds = kinds_text();
        if (failures_ != 0) r.note = std::to_string(failures_) + " waits failed";
        return r;
    }

    // How the plan-driven waits ended (empty for the others, which count no kinds).
    std::string kinds_text() const {
        const std::uint64_t total = kinds_[0] + kinds_[1] + kinds_[2] + kinds_[3];
        if (total == 0) return {};
        const auto pct = [&](std::size_t k) {
            return 100.0 * static_cast<double>(kinds_[k]) / static_cast<double>(total);
        };
        char b[160];
        std::snprintf(b, sizeof b, "wait kinds: immediate %.0f %%, late %.0f %%, parked %.0f %%",
                      pct(1), pct(2), pct(3));
        return b;
    }

    void teardown() {
        stopping_ = true;
        ctx_.stop();
        {
            std::lock_guard lk(mutex_);
            cv_.notify_all();
        }
        // Fails every stream (queued items dropped), so a blocked waiter returns.
        device_.shutdown(gpu_async::sim_shutdown::cancel);
        if (waiter_.joinable()) waiter_.join();
    }

    std::uint64_t next_duration_ns(lane& l) {
        // xorshift32: uniform in [1 - j, 1 + j] x work, j = jitter_pct / 100.
        l.rng ^= l.rng << 13;
        l.rng ^= l.rng >> 17;
        l.rng ^= l.rng << 5;
        const std::uint64_t w = cell_.work_us * 1000;
        const std::uint64_t j = w * cell_.jitter_pct / 100;
        return w - j + (2 * j) * (l.rng % 1024) / 1024;
    }

    // On the io thread: start lane l's next item and its wait.
    void launch(lane& l) {
        lane* lp = &l;
        const dur_ns d{next_duration_ns(l)};
        l.seq = l.stream->enqueue(
            [this, lp] {
                device_cpu_.add_self();
                lp->store_ns.store(now_ns(), std::memory_order_relaxed);
                if (row_.at_store != nullptr) (this->*row_.at_store)(*lp);
            },
            d);
        if (row_.start_wait != nullptr) (this->*row_.start_wait)(l);
    }

    // On the io thread: the handler of lane l.
    void complete(lane& l) {
        if (stopping_) return;
        const std::uint64_t now = now_ns();
        const std::uint64_t stored = l.store_ns.load(std::memory_order_relaxed);
        if (measuring_) samples_.push_back(now > stored ? now - stored : 0);
        launch(l);
    }

    void arm_poll_timer() {
        timer_.expires_after(std::chrono::microseconds(row_.poll_timer_us));
        timer_.async_wait([this](boost::system::error_code ec) {
            if (ec || stopping_) return;
            // Scan the pending words; complete what is done (the handlers may add lanes).
            ready_.clear();
            for (std::size_t i = 0; i < polled_.size();) {
                lane* l = polled_[i];
                if (l->stream->word() >= l->seq) {
                    ready_.push_back(l);
                    polled_[i] = polled_.back();
                    polled_.pop_back();
                } else {
                    ++i;
                }
            }
            for (lane* l : ready_)
                complete(*l);
            arm_poll_timer();
        });
    }

    // One pass of a polling thread over the pending words: takes the newly launched lanes in,
    // then posts the handlers of those done.
    void poll_pass(std::vector<lane*>& mine) {
        {
            std::lock_guard lk(mutex_);
            mine.insert(mine.end(), incoming_.begin(), incoming_.end());
            incoming_.clear();
        }
        for (std::size_t i = 0; i < mine.size();) {
            lane* l = mine[i];
            if (l->stream->word() >= l->seq) {
                asio::post(ctx_, [this, l] { complete(*l); });
                mine[i] = mine.back();
                mine.pop_back();
            } else {
                ++i;
            }
        }
    }

    const strategy_row& row_;
    cell cell_;
    double seconds_, warm_seconds_;
    // Declared first: outlive the device (its items point at them).
    std::vector<lane> lanes_;
    gpu_async::bench::thread_cpu_set device_cpu_;
    asio::io_context ctx_{1};
    gpu_async::sim_device device_;
    std::optional<gpu_async::gpu_completion_port> port_;
    gpu_async::wait_plan plan_ = *gpu_async::wait_plan::parse("poll");
    asio::steady_timer timer_, end_timer_;
    std::vector<lane*> polled_, ready_;
    std::mutex mutex_;
    std::condition_variable cv_;
    std::vector<lane*> incoming_;
    std::thread waiter_;
    std::atomic<bool> stopping_{false};
    bool measuring_ = false;
    std::uint64_t warm_at_ = 0, end_at_ = 0;
    std::uint64_t cpu0_ = 0, cpu1_ = 0, dev0_ = 0, dev1_ = 0, win0_ = 0, win1_ = 0;
    std::vector<std::uint64_t> samples_;
    std::uint64_t failures_ = 0;
    std::uint64_t kinds_[4] = {}; // by gpu_async::wait_kind
};

// Every strategy, in the order of the tables. The knob's 1 ms variants raise the park bound with
// the device poll, since a device poll step never outlasts the park bound.
constexpr auto descriptor = &cell_run::descriptor_wait;
const strategy_row strategies[] = {
    {.name = "ours-service", .reference = true, .port = true, .start_wait = descriptor},
    {.name = "ours-service-steps", .port = true, .predicts = false, .start_wait = descriptor},
    {.name = "ours-service+predict",
     .port = true,
     .plan = predict_plan_text,
     .start_wait = &cell_run::plan_wait},
    {.name = "ours-fill", .port = true, .fill = true, .start_wait = descriptor},
    {.name = "ours-fill+predict",
     .port = true,
     .fill = true,
     .plan = predict_plan_text,
     .start_wait = &cell_run::plan_wait},
    {.name = "ours-fill-dp5",
     .port = true,
     .fill = true,
     .device_poll_us = 5,
     .start_wait = descriptor},
    {.name = "ours-fill-dp25",
     .port = true,
     .fill = true,
     .device_poll_us = 25,
     .start_wait = descriptor},
    {.name = "ours-fill-dp50",
     .port = true,
     .fill = true,
     .device_poll_us = 50,
     .start_wait = descriptor},
    {.name = "ours-fill-dp100",
     .port = true,
     .fill = true,
     .device_poll_us = 100,
     .start_wait = descriptor},
    {.name = "ours-fill-dp1ms",
     .port = true,
     .fill = true,
     .device_poll_us = 1000,
     .park_bound_us = 1000,
     .start_wait = descriptor},
    {.name = "ours-service-dp10", .port = true, .device_poll_us = 10, .start_wait = descriptor},
    {.name = "ours-service-dp50", .port = true, .device_poll_us = 50, .start_wait = descriptor},
    {.name = "ours-service-dp100", .port = true, .device_poll_us = 100, .start_wait = descriptor},
    {.name = "ours-service-dp1ms",
     .port = true,
     .device_poll_us = 1000,
     .park_bound_us = 1000,
     .start_wait = descriptor},
    {.name = "ours-service-ringing", .port = true, .ringing = true, .start_wait = descriptor},
    {.name = "ours-fill-ringing",
     .port = true,
     .fill = true,
     .ringing = true,
     .start_wait = descriptor},
    {.name = "callback-post-idealized", .at_store = &cell_run::post_handler},
    {.name = "callback-thread-post",
     .at_store = &cell_run::wake_callback_thread,
     .thread = &cell_run::callback_thread},
    {.name = "timer-poll-50us", .start_wait = &cell_run::poll_by_timer, .poll_timer_us = 50},
    {.name = "timer-poll-1ms", .start_wait = &cell_run::poll_by_timer, .poll_timer_us = 1000},
    {.name = "blocking-cv-thread",
     .start_wait = &cell_run::hand_to_thread,
     .thread = &cell_run::cv_waiter},
    {.name = "spin-poll-thread",
     .start_wait = &cell_run::hand_to_thread,
     .thread = &cell_run::poll_thread},
    {.name = "sleep-watcher-20us",
     .start_wait = &cell_run::hand_to_thread,
     .thread = &cell_run::poll_thread,
     .poll_sleep_us = 20},
};

// ---------------------------------------------------------------------------------------------
// Completions per second through one io_context thread (host stores; no device).

/// One mode of the throughput table: its name (printed, written to the CSV) and how the io
/// thread completes the waits.
struct tp_mode {
    const char* name;
    bool port; // waits through our port; else a bare asio::post loop, the ceiling
    bool fill; // run_fill instead of io_context::run
};

// The bare post loop first: the other rows are read as fractions of it.
constexpr tp_mode tp_modes[] = {
    {"asio-post-only", false, false},
    {"ours-service", true, false},
    {"ours-fill", true, true},
};

struct tp_result {
    const tp_mode* mode;
    std::size_t pending;
    double completions_per_s;
    double cpu_per_s;
};

// N descriptors are pending; each handler re-arms its wait for the next value, then stores
// that value and rings the doorbell, so the reactor (watcher or run_fill) completes it again.
class tp_run {
public:
    tp_run(const tp_mode& mode, std::size_t n)
        : mode_(mode)
        , n_(n)
        , line_(new gpu_async::completion_line[(n + gpu_async::line_words - 1) /
                                               gpu_async::line_words])
        , target_(n, 0) {
        if (mode.port) port_.emplace(ctx_);
    }

    tp_result run(double seconds) {
        asio::post(ctx_, [this, seconds] {
            start();
            open_window(seconds);
        });
        if (mode_.fill)
            gpu_async::run_fill(ctx_);
        else
            ctx_.run();
        port_.reset();
        const double wall = static_cast<double>(t1_ - t0_);
        return {&mode_, n_, wall > 0 ? static_cast<double>(c1_ - c0_) * 1e9 / wall : 0,
                wall > 0 ? static_cast<double>(cpu1_ - cpu0_) / wall : 0};
    }

private:
    struct handler {
        tp_run* self;
        std::size_t i;
        void operator()(boost::system::error_code ec) const { self->on(i, ec); }
    };

    gpu_async::completion_line& line(std::size_t i) { return line_[i / gpu_async::line_words]; }
    static gpu_async::slot_id slot(std::size_t i) {
        return *gpu_async::slot_id::at(i % gpu_async::line_words);
    }

    // Waits for lane i's current target: through the port, or posted at once (the ceiling).
    void wait(std::size_t i) {
        if (port_)
            port_->async_wait(gpu_async::memory_descriptor(line(i), slot(i), target_[i]),
                              handler{this, i});
        else
            asio::post(ctx_, [this, i] { on(i, {}); });
    }

    void on(std::size_t i, boost::system::error_code ec) {
        if (ec || stop_) return;
        ++count_;
        ++target_[i];
        wait(i);
        if (!port_) return;
        line(i).words[slot(i).index()].store(target_[i], std::memory_order_release);
        port_->bell().ring();
    }

    // Every lane's first wait, then every first store.
    void start() {
        for (std::size_t i = 0; i < n_; ++i) {
            ++target_[i];
            wait(i);
        }
        for (std::size_t i = 0; i < n_; ++i)
            line(i).words[slot(i).index()].store(target_[i], std::memory_order_release);
        if (port_) port_->bell().ring();
    }

    void open_window(double seconds) {
        c0_ = count_;
        t0_ = now_ns();
        cpu0_ = gpu_async::bench::process_cpu_ns();
        end_.expires_after(std::chrono::nanoseconds(static_cast<std::int64_t>(seconds * 1e9)));
        end_.async_wait([this](boost::system::error_code) {
            c1_ = count_;
            t1_ = now_ns();
            cpu1_ = gpu_async::bench::process_cpu_ns();
            stop_ = true;
            ctx_.stop();
        });
    }

    const tp_mode& mode_;
    std::size_t n_;
    // The lines outlive the context and its reactor.
    std::unique_ptr<gpu_async::completion_line[]> line_;
    asio::io_context ctx_{1};
    std::optional<gpu_async::gpu_completion_port> port_;
    std::vector<std::uint64_t> target_;
    asio::steady_timer end_{ctx_};
    std::uint64_t count_ = 0;
    bool stop_ = false;
    std::uint64_t c0_ = 0, c1_ = 0, t0_ = 0, t1_ = 0, cpu0_ = 0, cpu1_ = 0;
};

// The throughput table: every mode at 64, 4096 and 65536 pending (stdout and `tp`), then how
// far each mode's rate moves across those sizes.
void run_throughput(double seconds, std::ostream& tp) {
    std::printf("\n### completions per second through one io_context thread (host stores, "
                "no device)\n\n");
    std::printf("| pending | mode | completions/s | CPU s/s | of a bare post loop |\n"
                "|---:|---|---:|---:|---:|\n");
    constexpr std::size_t modes = std::size(tp_modes);
    double lo[modes] = {}, hi[modes] = {};
    for (const std::size_t n : {std::size_t{64}, std::size_t{4096}, std::size_t{65536}}) {
        double post = 0;
        for (std::size_t m = 0; m < modes; ++m) {
            const tp_result r = tp_run(tp_modes[m], n).run(seconds);
            if (!tp_modes[m].port) post = r.completions_per_s;
            lo[m] = lo[m] == 0 ? r.completions_per_s : std::min(lo[m], r.completions_per_s);
            hi[m] = std::max(hi[m], r.completions_per_s);
            const double frac = post > 0 ? r.completions_per_s / post : 0;
            std::printf("| %zu | %s | %.0f | %.3f | 1/%.1f |\n", n, r.mode->name,
                        r.completions_per_s, r.cpu_per_s, frac > 0 ? 1 / frac : 0);
            tp << n << ',' << r.mode->name << ',' << r.completions_per_s << ',' << r.cpu_per_s
               << ',' << frac << '\n';
        }
    }
    // Our modes first, then the ceiling.
    std::string spread;
    for (const bool port : {true, false})
        for (std::size_t m = 0; m < modes; ++m) {
            if (tp_modes[m].port != port) continue;
            char b[64];
            std::snprintf(b, sizeof b, "%s%s %.2fx", spread.empty() ? "" : ", ", tp_modes[m].name,
                          lo[m] > 0 ? hi[m] / lo[m] : 0);
            spread += b;
        }
    std::printf("\nspread from 64 to 65536 pending (fastest / slowest): %s\n", spread.c_str());
}

// ---------------------------------------------------------------------------------------------
// Executor kinds: one waiting thread, one item at a time.

struct executor_row {
    std::string name;
    bool doorbell = false;
    gpu_async::bench::summary lat;
    double cpu_per_s = 0;
    std::string note;
};

/// Measures each executor kind's row (all but its name), without or with a ringing doorbell, on
/// a stream of the caller's device; holds what the rows share (the plan, the doorbell, the ring).
class executor_cell {
public:
    executor_cell(int rounds, std::uint64_t work_us, const gpu_async::wait_plan& plan,
                  bool with_uring)
        : rounds_(rounds)
        , work_us_(work_us)
        , plan_(plan) {
#if GPU_ASYNC_HAS_LIBURING
        if (!with_uring) return;
        auto made = gpu_async::uring_idle::create();
        if (made.has_value())
            ring_.emplace(std::move(made).value());
        else
            ring_error_ = made.error().message();
#else
        static_cast<void>(with_uring);
#endif
    }

    const std::shared_ptr<gpu_async::doorbell>& bell() const {
        return bell_;
    }

    executor_row naive(gpu_async::sim_stream& st, bool ringing) {
        gpu_async::point_table<int> table;
        auto wait_one = [&](gpu_async::sim_stream& s) {
            return gpu_async::bench::naive_wait_once(s, plan_, table);
        };
        return row(ringing, waits(st, wait_one), "std host blocking wait");
    }

    executor_row gpu_reactor(gpu_async::sim_stream& st, bool ringing) {
        gpu_async::point_table<int> table;
        gpu_async::std_idle idle;
        auto wait_one = [&](gpu_async::sim_stream& s) {
            return gpu_async::bench::fill_wait_once(idle, s, plan_, table);
        };
        return row(ringing, waits(st, wait_one),
                   "FILL on std_idle, parks via " + std::string(idle.name()));
    }

    executor_row io_uring(gpu_async::sim_stream& st, bool ringing) {
#if GPU_ASYNC_HAS_LIBURING
        if (!ring_) return row(ringing, {}, "skipped: " + ring_error_);
        gpu_async::point_table<int> table;
        ring_->set_doorbell(ringing ? bell_.get() : nullptr);
        const std::uint64_t failed = ring_->failed_ops();
        const std::uint64_t futex = ring_->futex_parks();
        const std::string path = ring_->park_path();
        auto wait_one = [&](gpu_async::sim_stream& s) {
            return gpu_async::bench::fill_wait_once(*ring_, s, plan_, table);
        };
        auto w = waits(st, wait_one);
        ring_->set_doorbell(nullptr);
        return row(ringing, std::move(w),
                   "FILL on uring_idle, parks via " + path + "; futex parks " +
                       std::to_string(ring_->futex_parks() - futex) + ", failed ops " +
                       std::to_string(ring_->failed_ops() - failed));
#else
        static_cast<void>(st);
        return row(ringing, {}, "skipped: built without liburing");
#endif
    }

private:
    template <class WaitOne>
    gpu_async::bench::wake_samples waits(gpu_async::sim_stream& st, WaitOne wait_one) const {
        return gpu_async::bench::device_waits(rounds_, work_us_, st, std::move(wait_one));
    }

    static executor_row row(bool ringing, gpu_async::bench::wake_samples w, std::string note) {
        executor_row r;
        r.doorbell = ringing;
        r.lat = gpu_async::bench::summarize(w.latency);
        r.cpu_per_s = w.cpu_per_s();
        r.note = w.note.empty() ? std::move(note) : w.note + (note.empty() ? "" : "; " + note);
        return r;
    }

    int rounds_;
    std::uint64_t work_us_;
    const gpu_async::wait_plan& plan_;
#if GPU_ASYNC_HAS_LIBURING
    std::optional<gpu_async::uring_idle> ring_;
    std::string ring_error_;
#endif
    // Declared after the ring: outlives its futex waits on it.
    std::shared_ptr<gpu_async::doorbell> bell_ = std::make_shared<gpu_async::doorbell>();
};

/// One executor kind: its name (printed, matched by --only, written to the CSV) and its row.
struct executor_kind {
    const char* name;
    executor_row (executor_cell::*measure)(gpu_async::sim_stream&, bool ringing);
};

constexpr executor_kind executor_kinds[] = {
    {"naive", &executor_cell::naive},
    {"gpu-reactor", &executor_cell::gpu_reactor},
    {"io-uring", &executor_cell::io_uring},
};

// Rows for the executor kinds (those whose name contains `only`, when given), without and with
// a ringing doorbell.
std::vector<executor_row> executor_rows(int rounds, std::uint64_t work_us,
                                        const gpu_async::wait_plan& plan, const std::string& only) {
    auto wanted = [&](const char* n) {
        return only.empty() || std::string(n).find(only) != std::string::npos;
    };
    executor_cell cell(rounds, work_us, plan, wanted("io-uring"));
    std::vector<executor_row> rows;
    for (bool ringing : {false, true}) {
        gpu_async::sim_device dev(gpu_async::sim_device::options{1, false});
        std::vector<gpu_async::sim_stream_handle> handles; // the streams live until dev goes
        for (const executor_kind& k : executor_kinds) {
            if (!wanted(k.name)) continue;
            gpu_async::sim_stream& st = *handles.emplace_back(dev.make_stream());
            if (ringing) st.set_doorbell(cell.bell());
            rows.push_back((cell.*k.measure)(st, ringing));
            rows.back().name = k.name;
        }
    }
    return rows;
}

// ---------------------------------------------------------------------------------------------
// Output

// The 1, 5 and 15 minute load averages (other work on the machine skews every figure).
std::string load_average() {
    std::ifstream f("/proc/loadavg");
    std::string a, b, c;
    if (!(f >> a >> b >> c)) return "unknown";
    return a + " " + b + " " + c;
}

std::string us(double ns) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f", ns / 1e3);
    return b;
}

std::string ratio(double v, double ref) {
    if (ref <= 0) return "-";
    char b[32];
    std::snprintf(b, sizeof b, "%.2fx", v / ref);
    return b;
}

// The row the "vs ours" columns divide by (null where --only left it out).
const cell_result* reference(const std::vector<cell_result>& rs) {
    for (const auto& r : rs)
        if (r.row->reference) return &r;
    return nullptr;
}

void print_cell_table(const std::vector<cell_result>& rs) {
    const cell_result* ref = reference(rs);
    std::printf("\n### work %llu us, %zu pending\n\n",
                static_cast<unsigned long long>(rs.front().c.work_us), rs.front().c.pending);
    std::printf("| strategy | p50 us | p90 us | p99 us | max us | CPU s/s | completions/s | "
                "p50 vs ours | p99 vs ours | CPU vs ours |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const auto& r : rs) {
        std::printf("| %s | %s | %s | %s | %s | %.3f | %.0f | %s | %s | %s |%s%s\n", r.row->name,
                    us(r.lat.p50).c_str(), us(r.lat.p90).c_str(), us(r.lat.p99).c_str(),
                    us(r.lat.max).c_str(), r.cpu_per_s, r.completions_per_s,
                    ref ? ratio(r.lat.p50, ref->lat.p50).c_str() : "-",
                    ref ? ratio(r.lat.p99, ref->lat.p99).c_str() : "-",
                    ref ? ratio(r.cpu_per_s, ref->cpu_per_s).c_str() : "-",
                    r.note.empty() ? "" : " ", r.note.c_str());
    }
    double dev = 0;
    for (const auto& r : rs)
        dev = std::max(dev, r.device_cpu_per_s);
    std::printf("\nsimulated device CPU (not counted above): up to %.3f s/s\n", dev);
    for (const auto& r : rs)
        if (!r.kinds.empty()) std::printf("%s %s\n", r.row->name, r.kinds.c_str());
    std::fflush(stdout);
}

struct config {
    bool quick = false;
    std::string csv;
    std::string plot;
    double seconds = 0;
    std::string only;
    std::string sections = "latency,throughput,executors,vulkan";
    std::string cells;           // work_us:pending,... (default: the standard cells)
    unsigned jitter_pct = 25;    // of every cell's work
    int vulkan_rounds = 0;       // per row (default 400; --quick 40)
    unsigned vulkan_work_us = 0; // per submission (default 1000; --quick 200)
    bool vulkan_stages = false;
    // Settled from the options above by settle().
    std::vector<cell> latency_cells; // from --cells, else the standard ones
    double warm = 0;                 // seconds of warm-up per strategy and cell
    std::filesystem::path csv_path;
    std::string stem; // the CSV path less .csv: the other files' prefix
    bool section(const char* name) const { return sections.find(name) != std::string::npos; }
};

/// The Vulkan cell's table (stdout) and CSV (`path`).
void print_vulkan(const std::string& path, const std::string& device,
                  const std::vector<gpu_async::bench::vulkan_row>& rows, int rounds,
                  unsigned work_us) {
    std::ofstream vk(path);
    vk << "device,strategy,work_us,samples,p50_ns,p99_ns,max_ns,cpu_s_per_s,note\n";
    std::printf("\n### Vulkan: real compute work on %s, submit to handler, one submission at a "
                "time (%d of %u us)\n\n",
                device.c_str(), rounds, work_us);
    std::printf("| strategy | p50 us | p99 us | max us | CPU s/s | note |\n"
                "|---|---:|---:|---:|---:|---|\n");
    for (const auto& r : rows) {
        std::printf("| %s | %s | %s | %s | %.3f | %s |\n", r.name.c_str(), us(r.lat.p50).c_str(),
                    us(r.lat.p99).c_str(), us(r.lat.max).c_str(), r.cpu_per_s, r.note.c_str());
        vk << '"' << device << "\"," << r.name << ',' << work_us << ',' << r.lat.count << ','
           << r.lat.p50 << ',' << r.lat.p99 << ',' << r.lat.max << ',' << r.cpu_per_s << ",\""
           << r.note << "\"\n";
    }
    std::printf("\nCPU: the process's CPU seconds per waited second, the device's (lavapipe's "
                "worker threads running the work) included. The rows take turns round by "
                "round.\n");
    if (rows.empty() || rows.front().store.count == 0) return;
    std::printf("\nStages, p50 / p99 us: store: a timestamp query behind the store (an upper "
                "bound: the device's queue writes it after the store; rounds: those whose "
                "timestamp fell between the submit and the handler, so a port's fastest rounds "
                "are left out); seen: where the row knows when it saw the completion.\n\n"
                "| strategy | rounds | submit->store | store->seen | seen->handler | "
                "store->handler |\n|---|---:|---:|---:|---:|---:|\n");
    const auto pair = [](const gpu_async::bench::summary& s) {
        return s.count == 0 ? std::string("-") : us(s.p50) + " / " + us(s.p99);
    };
    for (const auto& r : rows)
        std::printf("| %s | %zu | %s | %s | %s | %s |\n", r.name.c_str(), r.store.count,
                    pair(r.store).c_str(), pair(r.seen).c_str(), pair(r.handler).c_str(),
                    pair(r.store_to_handler).c_str());
}

/// "work_us:pending,..." as cells; throws po::error on a malformed or empty list.
std::vector<cell> parse_cells(const std::string& text) {
    std::vector<cell> out;
    std::size_t pos = 0;
    while (pos <= text.size()) {
        const std::size_t comma = std::min(text.find(',', pos), text.size());
        const std::string item = text.substr(pos, comma - pos);
        const std::size_t colon = item.find(':');
        unsigned long long w = 0;
        unsigned long long n = 0;
        const auto digits = [](const std::string& t) {
            return !t.empty() && t.size() <= 9 &&
                   t.find_first_not_of("0123456789") == std::string::npos;
        };
        if (colon == std::string::npos || !digits(item.substr(0, colon)) ||
            !digits(item.substr(colon + 1)))
            throw po::error("--cells: '" + item + "' is not work_us:pending");
        w = std::stoull(item.substr(0, colon));
        n = std::stoull(item.substr(colon + 1));
        if (w == 0 || n == 0 || n > 65536)
            throw po::error("--cells: '" + item + "': work_us >= 1, pending in 1..65536");
        out.push_back({w, static_cast<std::size_t>(n)});
        pos = comma + 1;
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// The run: options, then each section, then the plot

void add_options(po::options_description& desc, config& cfg) {
    // clang-format off
    desc.add_options()
        ("help,h", "print this help and exit")
        ("quick", po::bool_switch(&cfg.quick), "a few seconds (CI): two cells, short runs")
        ("seconds", po::value(&cfg.seconds), "measured seconds per strategy and cell "
                                             "(default 1.6; --quick 0.15)")
        ("csv", po::value(&cfg.csv), "summary CSV path (default: results/gpu-async-bench.csv next "
                                     "to the executable); -cdf.csv and -throughput.csv beside it")
        ("plot", po::value(&cfg.plot), "PNG path (default: the CSV path with .png); "
                                       "'none' to skip; drawn with gnuplot when installed")
        ("only", po::value(&cfg.only), "run only the strategies whose name contains this text")
        ("sections", po::value(&cfg.sections), "which tables to measure, comma-separated: latency, "
                                               "throughput, executors, vulkan (real compute work "
                                               "on a Vulkan device; default: all four)")
        ("cells", po::value(&cfg.cells), "the latency cells, as work_us:pending,... (default "
                                         "10:64,100:64,1000:64,10000:64,1000:4096,1000:65536)")
        ("jitter", po::value(&cfg.jitter_pct), "each item's work varies uniformly by this many "
                                               "percent either way (default 25; at most 90)")
        ("vulkan-rounds", po::value(&cfg.vulkan_rounds), "submissions per row of the Vulkan cell "
                                                         "(default 400; --quick 40)")
        ("vulkan-work", po::value(&cfg.vulkan_work_us), "us of spin work per submission of the "
                                                        "Vulkan cell (default 1000; --quick 200)")
        ("vulkan-stages", po::bool_switch(&cfg.vulkan_stages), "split the Vulkan cell's rows into "
                                                               "submit -> store -> seen -> handler "
                                                               "(a timestamp query behind each "
                                                               "store)");
    // clang-format on
}

// Reads the command line into `cfg`. Returns the exit status where the program ends here: 0
// after --help, 2 with the usage after a bad option.
std::optional<int> parse_options(int argc, char** argv, config& cfg) {
    po::options_description desc("gpu-async-bench options");
    add_options(desc, cfg);
    try {
        po::variables_map vm;
        const po::positional_options_description none; // no positional arguments
        po::store(po::command_line_parser(argc, argv).options(desc).positional(none).run(), vm);
        po::notify(vm);
        if (vm.count("help") != 0) {
            std::cout << "usage: gpu-async-bench [options]\n" << desc << '\n';
            return 0;
        }
        if (vm.count("seconds") != 0 && !(cfg.seconds > 0 && cfg.seconds <= 60))
            throw po::error("--seconds must be in (0, 60]");
        if (cfg.jitter_pct > 90) throw po::error("--jitter must be at most 90");
        if (vm.count("vulkan-rounds") != 0 &&
            !(cfg.vulkan_rounds >= 1 && cfg.vulkan_rounds <= 1000000))
            throw po::error("--vulkan-rounds must be in 1..1000000");
        if (vm.count("vulkan-work") != 0 &&
            !(cfg.vulkan_work_us >= 1 && cfg.vulkan_work_us <= 1000000))
            throw po::error("--vulkan-work must be in 1..1000000");
        if (!cfg.cells.empty()) cfg.latency_cells = parse_cells(cfg.cells);
    } catch (const std::exception& e) {
        std::cerr << "gpu-async-bench: " << e.what() << "\n\nusage: gpu-async-bench [options]\n"
                  << desc << '\n';
        return 2;
    }
    return std::nullopt;
}

// The defaults that follow from other options; creates the CSV's folder.
void settle(config& cfg) {
    namespace fs = std::filesystem;
    if (cfg.seconds == 0) cfg.seconds = cfg.quick ? 0.15 : 1.6;
    cfg.warm = cfg.quick ? 0.05 : 0.25;
    if (cfg.csv.empty()) {
        std::error_code ec;
        const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
        cfg.csv =
            ((ec ? fs::current_path() : exe.parent_path()) / "results" / "gpu-async-bench.csv")
                .string();
    }
    cfg.csv_path = cfg.csv;
    if (cfg.csv_path.has_parent_path()) fs::create_directories(cfg.csv_path.parent_path());
    cfg.stem = (cfg.csv_path.parent_path() / cfg.csv_path.stem()).string();
    if (cfg.plot.empty()) cfg.plot = cfg.stem + ".png";
    if (cfg.latency_cells.empty())
        cfg.latency_cells = cfg.quick ? std::vector<cell>{{100, 64}, {1000, 4096}}
                                      : std::vector<cell>{{10, 64},    {100, 64},    {1000, 64},
                                                          {10000, 64}, {1000, 4096}, {1000, 65536}};
    for (cell& c : cfg.latency_cells)
        c.jitter_pct = cfg.jitter_pct;
    if (!cfg.section("latency")) cfg.latency_cells.clear();
}

// The run's settings and the machine's load; returns the load average at the start.
std::string print_header(const config& cfg) {
    const auto& ww = gpu_async::word_wait::probe();
    std::printf("# gpu-async-bench%s: simulated device (1 worker thread), one io_context "
                "thread\n",
                cfg.quick ? " --quick" : "");
    std::printf("word wait path: %.*s; %.2f s measured per strategy and cell (after %.2f s "
                "warm-up); CPU = process less the device's worker threads, per wall second\n",
                static_cast<int>(ww.name().size()), ww.name().data(), cfg.seconds, cfg.warm);
    std::printf("+predict plan: %s\n", predict_plan_text);
    std::printf("work jitter: +-%u %% (uniform)\n", cfg.jitter_pct);
    const std::string load_start = load_average();
    std::printf("load average at start: %s (cores: %u)\n", load_start.c_str(),
                std::thread::hardware_concurrency());
    return load_start;
}

// The strategies whose name contains `only` (all without it), in the order of the table.
std::vector<const strategy_row*> chosen_strategies(const std::string& only) {
    std::vector<const strategy_row*> out;
    for (const strategy_row& s : strategies)
        if (only.empty() || std::string(s.name).find(only) != std::string::npos) out.push_back(&s);
    return out;
}

// Runs each strategy on cell `c`, with a progress line where stderr is a terminal.
std::vector<cell_result> run_cell(const config& cfg, const cell& c,
                                  const std::vector<const strategy_row*>& rows, bool tty) {
    std::vector<cell_result> rs;
    for (const strategy_row* s : rows) {
        if (tty)
            std::fprintf(stderr, "  %-22s work %6llu us, %6zu pending ...\r", s->name,
                         static_cast<unsigned long long>(c.work_us), c.pending);
        cell_run run(*s, c, cfg.seconds, cfg.warm);
        rs.push_back(run.run());
    }
    if (tty) std::fprintf(stderr, "%70s\r", "");
    return rs;
}

// The cell's rows in the summary CSV, and each row's latency CDF (401 points) in the CDF CSV.
void write_cell_csv(const std::vector<cell_result>& rs, std::ostream& csv, std::ostream& cdf) {
    const cell_result* ref = reference(rs);
    for (const auto& r : rs) {
        const cell& c = r.c;
        csv << c.work_us << ',' << c.pending << ',' << r.row->name << ',' << r.lat.count << ','
            << r.lat.p50 << ',' << r.lat.p90 << ',' << r.lat.p99 << ',' << r.lat.max << ','
            << r.lat.mean << ',' << r.cpu_per_s << ',' << r.device_cpu_per_s << ','
            << r.completions_per_s << ','
            << (ref && ref->lat.p50 > 0 ? r.lat.p50 / ref->lat.p50 : 0) << ','
            << (ref && ref->lat.p99 > 0 ? r.lat.p99 / ref->lat.p99 : 0) << ','
            << (ref && ref->cpu_per_s > 0 ? r.cpu_per_s / ref->cpu_per_s : 0) << '\n';
        if (r.sorted.empty()) continue;
        const std::size_t points = 400;
        for (std::size_t k = 0; k <= points; ++k) {
            const double f = static_cast<double>(k) / points;
            const std::size_t i =
                std::min(r.sorted.size() - 1,
                         static_cast<std::size_t>(f * static_cast<double>(r.sorted.size())));
            cdf << c.work_us << ',' << c.pending << ',' << r.row->name << ',' << f << ','
                << static_cast<double>(r.sorted[i]) / 1e3 << '\n';
        }
    }
}

// The latency section: each cell's table and CSV rows. Returns the cells measured, as
// "work_us:pending ...", for the plot.
std::string run_latency(const config& cfg, std::ostream& csv, std::ostream& cdf) {
    const std::vector<const strategy_row*> rows = chosen_strategies(cfg.only);
    const bool tty = isatty(STDERR_FILENO) != 0;
    std::string plotted;
    for (const cell& c : cfg.latency_cells) {
        const std::vector<cell_result> rs = run_cell(cfg, c, rows, tty);
        if (rs.empty()) continue;
        print_cell_table(rs);
        plotted += (plotted.empty() ? "" : " ") + std::to_string(c.work_us) + ":" +
                   std::to_string(c.pending);
        for (const auto& r : rs)
            if (r.lat.count == 0)
                std::fprintf(stderr,
                             "gpu-async-bench: note: %s got no completion in the measured "
                             "window (work %llu us, %zu pending)\n",
                             r.row->name, static_cast<unsigned long long>(c.work_us), c.pending);
        write_cell_csv(rs, csv, cdf);
    }
    return plotted;
}

// The simulated device's sections, latency then throughput. Their CSVs are written, with their
// headers, even where a section does not run. Returns the cells measured, for the plot.
std::string run_device_sections(const config& cfg) {
    std::ofstream csv(cfg.csv_path);
    csv << "work_us,pending,strategy,samples,p50_ns,p90_ns,p99_ns,max_ns,mean_ns,cpu_s_per_s,"
           "device_cpu_s_per_s,completions_per_s,p50_vs_ours,p99_vs_ours,cpu_vs_ours\n";
    std::ofstream cdf(cfg.stem + "-cdf.csv");
    cdf << "work_us,pending,strategy,fraction,latency_us\n";
    std::string plotted = run_latency(cfg, csv, cdf);
    std::ofstream tp(cfg.stem + "-throughput.csv");
    tp << "pending,mode,completions_per_s,cpu_s_per_s,fraction_of_post_loop\n";
    if (cfg.section("throughput")) run_throughput(cfg.quick ? 0.1 : 1.0, tp);
    return plotted;
}

// The executor kinds' table (stdout) and CSV.
void run_executors(const config& cfg) {
    const int rounds = cfg.quick ? 40 : 300;
    const std::uint64_t work_us = cfg.quick ? 200 : 1000;
    const gpu_async::wait_plan plan = gpu_async::wait_plan::recommended();
    const auto rows = executor_rows(rounds, work_us, plan, cfg.only);
    std::ofstream ex(cfg.stem + "-executors.csv");
    ex << "executor,doorbell,samples,p50_ns,p99_ns,max_ns,cpu_s_per_s,note\n";
    if (rows.empty()) return;
    std::printf("\n### executor kinds: store-to-wake latency, one waiting thread, one "
                "item at a time (%d waits of %llu us, plan %s)\n\n",
                rounds, static_cast<unsigned long long>(work_us), plan.label().c_str());
    std::printf("| executor | doorbell | p50 us | p99 us | max us | CPU s/s | "
                "note |\n|---|---|---:|---:|---:|---:|---|\n");
    for (const auto& r : rows) {
        std::printf("| %s | %s | %s | %s | %s | %.3f | %s |\n", r.name.c_str(),
                    r.doorbell ? "ringing" : "none", us(r.lat.p50).c_str(), us(r.lat.p99).c_str(),
                    us(r.lat.max).c_str(), r.cpu_per_s, r.note.c_str());
        ex << r.name << ',' << (r.doorbell ? "ringing" : "none") << ',' << r.lat.count << ','
           << r.lat.p50 << ',' << r.lat.p99 << ',' << r.lat.max << ',' << r.cpu_per_s << ",\""
           << r.note << "\"\n";
    }
    std::printf("\nCPU: the waiting thread's CPU seconds per waited second (from "
                "each enqueue to the waiter's return).\n");
}

// The Vulkan cell, or a line saying why it was skipped.
void run_vulkan(const config& cfg) {
    const int rounds = cfg.vulkan_rounds != 0 ? cfg.vulkan_rounds : cfg.quick ? 40 : 400;
    const unsigned work_us = cfg.vulkan_work_us != 0 ? cfg.vulkan_work_us : cfg.quick ? 200 : 1000;
    std::string device;
    std::vector<gpu_async::bench::vulkan_row> rows;
    try {
        rows = gpu_async::bench::vulkan_rows(rounds, work_us, device, cfg.vulkan_stages);
    } catch (const std::exception& e) {
        // No CSV: scripts/perf-report.sh then refuses the run rather than drop the cell.
        std::printf("\n### Vulkan: skipped (%s; Debian: apt-get install "
                    "mesa-vulkan-drivers)\n",
                    e.what());
    }
    if (!rows.empty()) print_vulkan(cfg.stem + "-vulkan.csv", device, rows, rounds, work_us);
}

void print_footer(const config& cfg, const std::string& load_end) {
    std::printf("\nload average at the end: %s\n", load_end.c_str());
    const char* stem = cfg.stem.c_str();
    std::printf("\nCSV: %s (CDF: %s-cdf.csv, throughput: %s-throughput.csv, executor kinds: "
                "%s-executors.csv, Vulkan: %s-vulkan.csv)\n",
                cfg.csv_path.string().c_str(), stem, stem, stem, stem);
}

// The PNG from the CSVs with gnuplot (bench/plot.gp), where both are there.
void draw_plot(const config& cfg, const std::string& plotted, const std::string& load_start,
               const std::string& load_end) {
    const std::string script = GPU_ASYNC_BENCH_PLOT_SCRIPT;
    if (script.empty() || !std::filesystem::exists(script) ||
        std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
        std::printf("plot: skipped (needs gnuplot: apt-get install -y gnuplot-nox)\n");
        return;
    }
    const std::string load = "start " + load_start + ", end " + load_end + " (" +
                             std::to_string(std::thread::hardware_concurrency()) + " cores)";
    const std::string cmd = "gnuplot -e \"stem='" + cfg.stem + "'; out='" + cfg.plot +
                            "'; cells='" + plotted + "'; load='" + load + "'\" '" + script + "'";
    if (std::system(cmd.c_str()) == 0)
        std::printf("plot: %s\n", cfg.plot.c_str());
    else
        std::printf("plot: gnuplot failed (%s)\n", cmd.c_str());
}

} // namespace

int main(int argc, char** argv) {
    config cfg;
    if (const std::optional<int> status = parse_options(argc, argv, cfg)) return *status;
    try {
        settle(cfg);
        const std::string load_start = print_header(cfg);
        const std::string plotted = run_device_sections(cfg);
        if (cfg.section("executors")) run_executors(cfg);
        if (cfg.section("vulkan")) run_vulkan(cfg);
        const std::string load_end = load_average();
        print_footer(cfg, load_end);
        if (cfg.plot != "none") draw_plot(cfg, plotted, load_start, load_end);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "gpu-async-bench: %s\n", e.what());
        return 1;
    }
}
