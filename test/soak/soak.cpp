// SPDX-License-Identifier: BSL-1.0
//
// test/soak/soak.cpp: the reactor's soak program.
//
// Starts a large number of port waits (default 10 000 000) over many completion lines, several
// simulated devices and several io_context threads, while faults are injected from other
// threads, and checks that every wait completed exactly once: nothing lost, nothing twice,
// nothing early. Rounds of eight kinds run concurrently (one round per driver thread):
//
//   plain            waits on the shared device pool (random lines and slots, durations of 0 to
//                    50 us; half the streams ring the reactor's doorbell, half only store), also
//                    on targets already reached and several waits on one target; part of each
//                    round is started from an io_context thread. Every wait must succeed.
//   op_cancel        the same with a cancellation signal per wait, emitted (terminal, partial or
//                    total) from another io_context thread (asio::post), from a plain std::thread,
//                    or from the driver thread, racing the completion; waits on targets that are
//                    never stored must end with operation_aborted.
//   group            make_parallel_group(port.async_wait(d, deferred), timer.async_wait(deferred))
//                    with wait_for_one, the timer due when the device should store (one group
//                    at a time per stream: each group's handler starts the next).
//   port_cancel      a round's own port; port.cancel() from other threads, once while waits are
//                    still being started: the waits aborted must equal the sum of what cancel()
//                    returned.
//   port_teardown    a round's own ports, sometimes moved (constructed or assigned) while their
//                    waits complete, destroyed (on the driver, an io thread or another thread)
//                    with waits pending.
//   device_teardown  a round's own sim_device (lines of its own, sometimes a sticky device fault)
//                    destroyed with waits pending: waits whose item never ran must end with
//                    operation_aborted, or device_fault behind the fault (each item sets a flag
//                    before its store; a wait that succeeds without its flag set counts as early).
//   wrap             caller lines whose words start at 2^64 - k, so the sequence wraps to 0 while
//                    waits are pending; sometimes the device is destroyed and the caller retires
//                    its lines (gpu_async::retire_line) with waits pending.
//   fill             a private io_context run by gpu_async::run_fill on the driver thread
//                    (sometimes also by a second thread: run_fill or run_until), with
//                    per-operation cancellation and port.cancel() from another thread; half the
//                    time the context is destroyed before its device, which keeps working and
//                    ringing the doorbell of the reactor that is gone.
//
// Every handler bumps its wait's counter; at the end every counter must be exactly one. Every
// run is bounded: io_context threads use run_for, a round that does not finish within
// --round-limit seconds, or a program that does not finish within --seconds-limit, ends the
// program with a message and exit status 2. Exit status 1: a discrepancy. 0: all checks held.
//
// The last line of the output is the summary (key=value pairs).
//
#include <gpu_async/asio/detail/reactor_service.hpp>
#include <gpu_async/device/sim_device.hpp>
#include <gpu_async/gpu_completion_port.hpp>
#include <gpu_async/line/detail/line_watchers.hpp>
#include <gpu_async/line/line_health.hpp>
#include <gpu_async/line/line_life.hpp>
#include <gpu_async/run_fill.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace {

namespace asio = boost::asio;
using boost::system::error_code;
using gpu_async::completion_line;
using gpu_async::dur_ns;
using gpu_async::gpu_completion_port;
using gpu_async::memory_descriptor;
using gpu_async::sim_device;
using gpu_async::sim_stream;
using gpu_async::sim_stream_handle;
using gpu_async::slot_id;
using clock_type = std::chrono::steady_clock;

/// How far ahead of a word a target that is never stored lies.
constexpr std::uint64_t never_ahead = std::uint64_t{1} << 40;

/// The descriptor of `target` on `s`, whatever the target: a never-stored target lies past the
/// stream's tail, which sim_stream::descriptor_for refuses.
memory_descriptor descriptor_at(const sim_stream& s, std::uint64_t target) {
    const memory_descriptor tail = s.descriptor();
    return memory_descriptor(tail.line(), tail.slot(), target, tail.generation());
}

// ---------------------------------------------------------------------------------------------
// Options

struct options {
    std::uint64_t waits = 10000000;
    unsigned threads = 4;     // io_context threads
    unsigned lines = 64;      // lines of the shared device pool (eight streams each)
    unsigned devices = 4;     // devices of the shared pool
    unsigned concurrency = 4; // rounds in flight (driver threads)
    double seconds_limit = 3600;
    double round_limit = 120;
    std::uint64_t seed = 1;
    double progress_s = 30; // 0: no progress lines
};

[[noreturn]] void usage(int status) {
    std::fprintf(status == 0 ? stdout : stderr,
                 "usage: gpu_async_soak [--waits N] [--threads T] [--lines L] [--devices D]\n"
                 "                      [--concurrency R] [--seconds-limit S] [--round-limit S]\n"
                 "                      [--seed X] [--progress S]\n"
                 "  --waits N          waits to start in all (default 10000000)\n"
                 "  --threads T        io_context threads (default 4)\n"
                 "  --lines L          lines of the shared device pool, 8 streams each (default "
                 "64)\n"
                 "  --devices D        sim_devices of the shared pool (default 4)\n"
                 "  --concurrency R    rounds in flight, one driver thread each (default 4)\n"
                 "  --seconds-limit S  fail (exit 2) when not done after S seconds (default 3600)\n"
                 "  --round-limit S    fail (exit 2) when one round takes longer (default 120)\n"
                 "  --seed X           seed of the random choices (default 1)\n"
                 "  --progress S       a progress line on stderr every S seconds (0: none; "
                 "default 30)\n");
    std::exit(status);
}

options parse(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--help" || a == "-h") usage(0);
        if (i + 1 >= argc) usage(64);
        const char* v = argv[++i];
        char* end = nullptr;
        errno = 0;
        const double d = std::strtod(v, &end);
        if (end == v || *end != '\0' || errno != 0 || d < 0) {
            std::fprintf(stderr, "gpu_async_soak: bad value '%s' for %s\n", v, argv[i - 1]);
            usage(64);
        }
        auto whole = [&](double lo) {
            if (d < lo || d > 1e15) {
                std::fprintf(stderr, "gpu_async_soak: %s must be at least %g\n", argv[i - 1], lo);
                usage(64);
            }
            return static_cast<std::uint64_t>(d);
        };
        if (a == "--waits")
            o.waits = whole(1);
        else if (a == "--threads")
            o.threads = static_cast<unsigned>(std::min<std::uint64_t>(whole(1), 256));
        else if (a == "--lines")
            o.lines = static_cast<unsigned>(std::min<std::uint64_t>(whole(1), 65536));
        else if (a == "--devices")
            o.devices = static_cast<unsigned>(std::min<std::uint64_t>(whole(1), 64));
        else if (a == "--concurrency")
            o.concurrency = static_cast<unsigned>(std::min<std::uint64_t>(whole(1), 64));
        else if (a == "--seconds-limit")
            o.seconds_limit = d;
        else if (a == "--round-limit")
            o.round_limit = d;
        else if (a == "--seed")
            o.seed = whole(0);
        else if (a == "--progress")
            o.progress_s = d;
        else {
            std::fprintf(stderr, "gpu_async_soak: unknown option %s\n", argv[i - 1]);
            usage(64);
        }
    }
    return o;
}

// ---------------------------------------------------------------------------------------------
// The tally: global counters and one completion counter per wait.

enum class kind : std::uint8_t {
    plain,
    op_cancel,
    group,
    port_cancel,
    port_teardown,
    device_teardown,
    wrap,
    fill,
};
constexpr std::size_t kind_count = 8;
constexpr std::array<const char*, kind_count> kind_names = {
    "plain",         "op_cancel",       "group", "port_cancel",
    "port_teardown", "device_teardown", "wrap",  "fill"};
// Relative weights of the round kinds.
constexpr std::array<unsigned, kind_count> kind_weights = {30, 20, 12, 10, 8, 8, 8, 4};

using counter = std::atomic<std::uint64_t>;

struct tally {
    counter started{0};
    counter ok{0};
    counter aborted{0};
    counter unexpected{0}; // an error other than operation_aborted (or an injected fault's)
    counter faulted{0};    // ended with device_fault behind an injected fault
    counter doubled{0};    // a handler ran for a wait that had already completed
    counter early{0};      // success before the word reached the target
    counter groups{0};
    counter timer_won{0};
    counter device_won{0};
    counter group_bad{0}; // a group outcome that contradicts itself
    counter signals_emitted{0};
    counter port_cancels{0};
    counter port_cancelled{0}; // sum of what port.cancel() returned
    counter ports_torn_down{0};
    counter port_moves{0}; // ports moved (constructed or assigned) with waits pending
    counter devices_torn_down{0};
    counter lines_retired{0};       // caller lines retired with gpu_async::retire_line
    counter device_faults{0};       // sticky sim_stream faults injected
    counter never_waits{0};         // waits on targets never stored (only a fault can end them)
    counter wrapped_slots{0};       // caller slots whose word wrapped past 0 under pending waits
    counter contexts_first{0};      // fill rounds: io_context destroyed before its working device
    counter fill_second_threads{0}; // fill rounds whose context a second thread also ran
    counter round_mismatch{0};
    counter failures{0}; // every discrepancy reported
    std::array<counter, kind_count> rounds{};
};

tally g;
std::unique_ptr<std::atomic<std::uint8_t>[]> hits; // per wait: how many times it completed
std::uint64_t hits_size = 0;
std::atomic<std::uint64_t> next_id{0};

std::mutex report_mutex;

/// Reports a discrepancy (the first 50 are printed).
void fail(const char* fmt, ...) {
    const std::uint64_t n = g.failures.fetch_add(1, std::memory_order_relaxed);
    if (n >= 50) return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    std::lock_guard lk(report_mutex);
    std::fprintf(stderr, "gpu_async_soak: FAIL: %s\n", buf);
}

/// Reserves up to `want` wait ids; returns how many (0: every wait has been started).
std::uint64_t reserve(std::uint64_t want, std::uint64_t& first) {
    const std::uint64_t f = next_id.fetch_add(want, std::memory_order_relaxed);
    if (f >= hits_size) return 0;
    first = f;
    return std::min(want, hits_size - f);
}

std::uint64_t load(const counter& c) {
    return c.load(std::memory_order_relaxed);
}

// ---------------------------------------------------------------------------------------------
// Rounds

/// One round's bookkeeping, shared by its handlers and its fault tasks.
struct round_state {
    /// Waits first .. first + n - 1; `flags`: one item flag per wait.
    round_state(kind k_, std::uint64_t first, std::uint64_t n, bool flags)
        : k(k_)
        , first_id(first)
        , count(n)
        , ran(flags ? new std::atomic<std::uint8_t>[n]() : nullptr) {}

    kind k;
    std::uint64_t first_id = 0; // the round's waits are first_id .. first_id + count - 1
    std::uint64_t count = 0;
    std::atomic<std::int64_t> outstanding{1}; // waits and tasks not done, plus the driver's hold
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
    counter ok{0};
    counter aborted{0};
    std::atomic<bool> fault_injected{false}; // device_teardown: a sticky fault was enqueued
    std::unique_ptr<std::atomic<std::uint8_t>[]> ran; // set by an item before its store
    // fill rounds: called on the handler's thread when the last wait completed
    std::atomic<std::uint64_t> waits_left{0};
    std::function<void()> on_waits_done;

    void hold() { outstanding.fetch_add(1, std::memory_order_relaxed); }
    void release() {
        if (outstanding.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            std::lock_guard lk(mutex);
            done = true;
            cv.notify_all();
        }
    }
    /// The driver drops its hold and waits for the rest; false on time-out.
    bool finish(clock_type::time_point deadline) {
        release();
        std::unique_lock lk(mutex);
        return cv.wait_until(lk, deadline, [&] { return done; });
    }
};

/// What a successful wait must satisfy.
enum class expect : std::uint8_t {
    word,  // the word has reached the target (the line outlives the round)
    flag,  // the item's flag is set (the item ran, so its store was made)
    never, // the target is never stored: success is impossible
};

struct wait_check {
    expect how = expect::word;
    const completion_line* line = nullptr;
    std::uint8_t slot = 0;
    std::uint64_t target = 0;
    std::uint32_t flag = 0;
};

/// Counts the completion of wait `id` once and checks it.
void settle(round_state& r, std::uint64_t id, const wait_check& c, const error_code& ec) {
    const unsigned before = hits[id].fetch_add(1, std::memory_order_relaxed);
    if (before != 0) {
        g.doubled.fetch_add(1, std::memory_order_relaxed);
        fail("wait %llu (%s round) completed %u times", static_cast<unsigned long long>(id),
             kind_names[static_cast<std::size_t>(r.k)], before + 1);
    }
    if (!ec) {
        g.ok.fetch_add(1, std::memory_order_relaxed);
        r.ok.fetch_add(1, std::memory_order_relaxed);
        bool fine = true;
        switch (c.how) {
        case expect::word:
            fine = gpu_async::sequence_reached(
                c.line->words[c.slot].load(std::memory_order_acquire), c.target);
            break;
        case expect::flag:
            fine = r.ran[c.flag].load(std::memory_order_acquire) != 0;
            break;
        case expect::never:
            fine = false;
            break;
        }
        if (!fine) {
            g.early.fetch_add(1, std::memory_order_relaxed);
            fail("wait %llu (%s round) succeeded before its target %llu was stored",
                 static_cast<unsigned long long>(id), kind_names[static_cast<std::size_t>(r.k)],
                 static_cast<unsigned long long>(c.target));
        }
    } else if (ec == asio::error::operation_aborted) {
        g.aborted.fetch_add(1, std::memory_order_relaxed);
        r.aborted.fetch_add(1, std::memory_order_relaxed);
    } else if (ec == gpu_async::errc::device_fault &&
               r.fault_injected.load(std::memory_order_relaxed) &&
               !(c.how == expect::flag && r.ran[c.flag].load(std::memory_order_acquire) != 0)) {
        // Its stream faulted before its item ran: the device ends it (a fault is sticky).
        g.faulted.fetch_add(1, std::memory_order_relaxed);
    } else {
        g.unexpected.fetch_add(1, std::memory_order_relaxed);
        fail("wait %llu (%s round) completed with %s", static_cast<unsigned long long>(id),
             kind_names[static_cast<std::size_t>(r.k)], ec.message().c_str());
    }
    if (r.k == kind::fill && r.waits_left.fetch_sub(1, std::memory_order_acq_rel) == 1 &&
        r.on_waits_done)
        r.on_waits_done();
}

/// A cancellation signal shared by a wait's handler and whoever emits it, so it lives as long as
/// either.
struct signal_box {
    asio::cancellation_signal signal;
};

/// The handler of one port wait.
struct wait_handler {
    std::shared_ptr<round_state> round;
    std::shared_ptr<signal_box> signal; // keeps the handler's cancellation slot alive
    std::uint64_t id;
    wait_check check;

    void operator()(error_code ec) {
        settle(*round, id, check, ec);
        round->release();
    }
};

/// Runs fault actions at given times on a plain std::thread (not an io_context thread).
class task_thread {
public:
    task_thread()
        : thread_([this] { loop(); }) {}
    task_thread(const task_thread&) = delete;
    task_thread& operator=(const task_thread&) = delete;
    ~task_thread() { stop(); }

    void at(clock_type::time_point due, std::function<void()> fn) {
        {
            std::lock_guard lk(mutex_);
            tasks_.emplace(std::make_pair(due, order_++), std::move(fn));
        }
        cv_.notify_one();
    }

    /// Runs what is queued, then joins.
    void stop() {
        {
            std::lock_guard lk(mutex_);
            stop_ = true;
        }
        cv_.notify_one();
        if (thread_.joinable()) thread_.join();
    }

private:
    void loop() {
        std::unique_lock lk(mutex_);
        for (;;) {
            if (tasks_.empty()) {
                if (stop_) return;
                cv_.wait(lk);
                continue;
            }
            const auto due = tasks_.begin()->first.first;
            if (due > clock_type::now()) {
                cv_.wait_until(lk, due);
                continue;
            }
            std::function<void()> fn = std::move(tasks_.begin()->second);
            tasks_.erase(tasks_.begin());
            lk.unlock();
            try {
                fn();
            } catch (const std::exception& e) {
                fail("a fault task threw: %s", e.what());
            }
            fn = nullptr; // destroyed with no lock held
            lk.lock();
        }
    }

    std::mutex mutex_;
    std::condition_variable cv_;
    std::map<std::pair<clock_type::time_point, std::uint64_t>, std::function<void()>> tasks_;
    std::uint64_t order_ = 0;
    bool stop_ = false;
    std::thread thread_;
};

/// What every round shares.
struct world {
    const options& opt;
    asio::io_context& ioc;
    std::shared_ptr<gpu_async::doorbell> bell; // the main reactor's doorbell
    std::vector<std::unique_ptr<sim_device>> devices;
    std::vector<sim_stream_handle> handles; // the streams below
    std::vector<sim_stream*> streams;
    std::vector<std::unique_ptr<gpu_completion_port>> ports;
    std::vector<std::unique_ptr<task_thread>> tasks;
    clock_type::time_point deadline;
};

[[noreturn]] void give_up(const char* why);

/// One stream's sequence of parallel groups (a port wait racing a timer): each group's handler
/// starts the next, so the stream is idle when its item is enqueued and the timer can be set to
/// when the store is due.
struct group_chain : std::enable_shared_from_this<group_chain> {
    group_chain(world& w_, std::shared_ptr<round_state> r, sim_stream& s,
                std::shared_ptr<counter> next_, std::uint64_t first_, std::uint64_t n_,
                std::uint64_t seed)
        : w(&w_)
        , round(std::move(r))
        , stream(&s)
        , next(std::move(next_))
        , first(first_)
        , n(n_)
        , rng(seed) {}

    world* w;
    std::shared_ptr<round_state> round;
    sim_stream* stream;
    std::shared_ptr<counter> next; // the round's next group, shared by its chains
    std::uint64_t first;
    std::uint64_t n;
    std::mt19937_64 rng; // used by one group at a time

    void launch();
};

/// The handler of one parallel group.
struct group_handler {
    std::shared_ptr<group_chain> chain;
    std::shared_ptr<asio::steady_timer> timer;
    std::uint64_t id;
    wait_check check;

    void operator()(std::array<std::size_t, 2> order, error_code port_ec, error_code timer_ec) {
        round_state& r = *chain->round;
        settle(r, id, check, port_ec);
        g.groups.fetch_add(1, std::memory_order_relaxed);
        const bool device_first = order[0] == 0;
        (device_first ? g.device_won : g.timer_won).fetch_add(1, std::memory_order_relaxed);
        const error_code& first = device_first ? port_ec : timer_ec;
        const bool timer_fine = !timer_ec || timer_ec == asio::error::operation_aborted;
        if (first || !timer_fine || order[0] == order[1]) {
            g.group_bad.fetch_add(1, std::memory_order_relaxed);
            fail("group %llu: order {%zu, %zu}, port %s, timer %s",
                 static_cast<unsigned long long>(id), order[0], order[1], port_ec.message().c_str(),
                 timer_ec.message().c_str());
        }
        timer.reset();
        chain->launch();
        chain->round->release();
    }
};

void group_chain::launch() {
    const std::uint64_t i = next->fetch_add(1, std::memory_order_relaxed);
    if (i >= n) return;
    auto pick = [&](std::uint64_t lo, std::uint64_t hi) {
        return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
    };
    const std::uint64_t d_us = pick(5, 150);
    const std::uint64_t seq = stream->enqueue(dur_ns::from_us(d_us));
    // The store is due d_us from now, plus the device's and the reactor's wake-up latency
    // (tens of microseconds, more under a sanitizer): the spread makes either side win often.
    const auto due = clock_type::now() + std::chrono::microseconds(d_us + pick(0, 200));
    auto timer = std::make_shared<asio::steady_timer>(w->ioc, due);
    gpu_completion_port& port = *w->ports[pick(0, w->ports.size() - 1)];
    const wait_check check{expect::word, &stream->line(),
                           static_cast<std::uint8_t>(stream->slot().index()), seq, 0};
    round->hold();
    g.started.fetch_add(1, std::memory_order_relaxed);
    asio::experimental::make_parallel_group(
        port.async_wait(stream->descriptor_for(seq), asio::deferred),
        timer->async_wait(asio::deferred))
        .async_wait(asio::experimental::wait_for_one(),
                    asio::bind_executor(
                        w->ioc, group_handler{shared_from_this(), timer, first + i, check}));
}

/// Where a fault action runs.
enum class route : std::uint8_t {
    driver, // the round's driver thread, after the delay
    io,     // an io_context thread (posted by a task thread after the delay)
    task,   // a plain std::thread (a task thread), after the delay
};

class driver {
public:
    driver(world& w, unsigned index)
        : w_(w)
        , rng_(w.opt.seed * 0x9E3779B97F4A7C15ull + index + 1) {}

    void run() {
        unsigned total = 0;
        for (unsigned wt : kind_weights)
            total += wt;
        for (;;) {
            unsigned pick = static_cast<unsigned>(uniform(0, total - 1));
            std::size_t k = 0;
            while (pick >= kind_weights[k]) {
                pick -= kind_weights[k];
                ++k;
            }
            if (!run_round(static_cast<kind>(k))) return;
            g.rounds[k].fetch_add(1, std::memory_order_relaxed);
        }
    }

private:
    std::uint64_t uniform(std::uint64_t lo, std::uint64_t hi) {
        return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng_);
    }
    bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
    static dur_ns us(std::uint64_t n) { return dur_ns::from_us(n); }
    asio::cancellation_type pick_type() {
        switch (uniform(0, 2)) {
        case 0:
            return asio::cancellation_type::terminal;
        case 1:
            return asio::cancellation_type::partial;
        default:
            return asio::cancellation_type::total;
        }
    }
    task_thread& some_task_thread() { return *w_.tasks[uniform(0, w_.tasks.size() - 1)]; }
    sim_stream& pool_stream() { return *w_.streams[uniform(0, w_.streams.size() - 1)]; }
    gpu_completion_port& pool_port() { return *w_.ports[uniform(0, w_.ports.size() - 1)]; }

    /// Runs `fn` for round `r` on `how`, `delay_us` from now; the round waits for it.
    void elsewhere(const std::shared_ptr<round_state>& r, route how, std::uint64_t delay_us,
                   std::function<void()> fn) {
        const auto due = clock_type::now() + std::chrono::microseconds(delay_us);
        switch (how) {
        case route::driver:
            std::this_thread::sleep_until(due);
            fn();
            return;
        case route::io:
            r->hold();
            some_task_thread().at(due, [&ioc = w_.ioc, fn = std::move(fn), r] {
                asio::post(ioc, [fn, r] {
                    fn();
                    r->release();
                });
            });
            return;
        case route::task:
            r->hold();
            some_task_thread().at(due, [fn = std::move(fn), r] {
                fn();
                r->release();
            });
            return;
        }
    }
    route pick_route() { return static_cast<route>(uniform(0, 2)); }

    /// Starts wait `id` on `port`, with `sig`'s slot when given.
    template <class Port>
    static void start_wait(Port& port, const std::shared_ptr<round_state>& r, std::uint64_t id,
                           const memory_descriptor& d, const wait_check& c,
                           std::shared_ptr<signal_box> sig = nullptr) {
        r->hold();
        g.started.fetch_add(1, std::memory_order_relaxed);
        if (c.how == expect::never) g.never_waits.fetch_add(1, std::memory_order_relaxed);
        if (sig) {
            auto slot = sig->signal.slot();
            port.async_wait(
                d, asio::bind_cancellation_slot(slot, wait_handler{r, std::move(sig), id, c}));
        } else {
            port.async_wait(d, wait_handler{r, nullptr, id, c});
        }
    }

    static wait_check word_check(const sim_stream& s, std::uint64_t target) {
        return wait_check{expect::word, &s.line(), static_cast<std::uint8_t>(s.slot().index()),
                          target, 0};
    }
    static wait_check never_check(const sim_stream& s, std::uint64_t target) {
        wait_check c = word_check(s, target);
        c.how = expect::never;
        return c;
    }
    static wait_check flag_check(const sim_stream& s, std::uint64_t target, std::uint32_t flag) {
        wait_check c = word_check(s, target);
        c.how = expect::flag;
        c.flag = flag;
        return c;
    }

    /// Enqueues an item on `s` that sets `r`'s flag `flag` before its store.
    static std::uint64_t enqueue_flagged(sim_stream& s, round_state& r, std::uint32_t flag,
                                         dur_ns d) {
        round_state* rp = &r; // the round outlives the device's items (the driver holds it)
        return s.enqueue([rp, flag] { rp->ran[flag].store(1, std::memory_order_release); }, d);
    }

    clock_type::time_point round_deadline() const {
        const auto own = clock_type::now() + std::chrono::duration_cast<clock_type::duration>(
                                                 std::chrono::duration<double>(w_.opt.round_limit));
        return std::min(own, w_.deadline);
    }

    void finish(round_state& r, const char* what) {
        if (!r.finish(round_deadline())) {
            std::uint64_t shown = 0;
            for (std::uint64_t id = r.first_id; id < r.first_id + r.count && shown < 10; ++id) {
                if (hits[id].load(std::memory_order_relaxed) == 0) {
                    ++shown;
                    fail("%s round: wait %llu has not completed", what,
                         static_cast<unsigned long long>(id));
                }
            }
            char why[200];
            std::snprintf(why, sizeof why,
                          "a %s round did not finish in time (%lld waits or tasks left)", what,
                          static_cast<long long>(r.outstanding.load()));
            give_up(why);
        }
    }

    bool run_round(kind k) {
        switch (k) {
        case kind::plain:
            return plain_round();
        case kind::op_cancel:
            return op_cancel_round();
        case kind::group:
            return group_round();
        case kind::port_cancel:
            return port_cancel_round();
        case kind::port_teardown:
            return port_teardown_round();
        case kind::device_teardown:
            return device_teardown_round();
        case kind::wrap:
            return wrap_round();
        case kind::fill:
            return fill_round();
        }
        return false;
    }

    // (a) Plain waits on the pool; part of them started from an io_context thread.
    static void issue_plain(world& w, const std::shared_ptr<round_state>& r, std::uint64_t first,
                            std::uint64_t n, std::uint64_t seed) {
        std::mt19937_64 rng(seed);
        auto pick = [&](std::uint64_t lo, std::uint64_t hi) {
            return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
        };
        for (std::uint64_t i = 0; i < n; ++i) {
            sim_stream& s = *w.streams[pick(0, w.streams.size() - 1)];
            gpu_completion_port& port = *w.ports[pick(0, w.ports.size() - 1)];
            const std::uint64_t x = pick(0, 99);
            std::uint64_t target;
            if (x < 80)
                target = s.enqueue(dur_ns::from_us(pick(0, 50)));
            else if (x < 90)
                target = s.word() - pick(0, 3); // already reached: completes through post
            else
                target = s.tail(); // the stream's last item: often a second wait on one target
            start_wait(port, r, first + i, descriptor_at(s, target), word_check(s, target));
        }
    }

    bool plain_round() {
        std::uint64_t first = 0;
        const std::uint64_t n = reserve(uniform(500, 4000), first);
        if (n == 0) return false;
        auto r = std::make_shared<round_state>(kind::plain, first, n, false);
        std::uint64_t here = n;
        if (n > 1 && chance(0.5)) {
            here = n / 2;
            r->hold();
            asio::post(w_.ioc, [&w = w_, r, first, here, n, seed = rng_()] {
                issue_plain(w, r, first + here, n - here, seed);
                r->release();
            });
        }
        issue_plain(w_, r, first, here, rng_());
        finish(*r, "plain");
        if (r->aborted.load() != 0) {
            g.round_mismatch.fetch_add(1, std::memory_order_relaxed);
            fail("plain round: %llu waits aborted, none was cancelled",
                 static_cast<unsigned long long>(r->aborted.load()));
        }
        return true;
    }

    // (b) Per-operation cancellation from other threads, racing the completion.
    bool op_cancel_round() {
        std::uint64_t first = 0;
        const std::uint64_t n = reserve(uniform(300, 3000), first);
        if (n == 0) return false;
        auto r = std::make_shared<round_state>(kind::op_cancel, first, n, false);
        for (std::uint64_t i = 0; i < n; ++i) {
            sim_stream& s = pool_stream();
            auto sig = std::make_shared<signal_box>();
            const bool never = chance(0.1);
            const std::uint64_t d_us = uniform(0, 80);
            const std::uint64_t target = never ? s.tail() + never_ahead : s.enqueue(us(d_us));
            start_wait(pool_port(), r, first + i, descriptor_at(s, target),
                       never ? never_check(s, target) : word_check(s, target), sig);
            if (!never && !chance(0.7)) continue;
            const asio::cancellation_type type = pick_type();
            std::function<void()> emit = [sig, type] {
                sig->signal.emit(type);
                g.signals_emitted.fetch_add(1, std::memory_order_relaxed);
            };
            switch (uniform(0, 3)) {
            case 0: // straight to another io_context thread
                r->hold();
                asio::post(w_.ioc, [emit, r] {
                    emit();
                    r->release();
                });
                break;
            case 1:
                elsewhere(r, route::task, uniform(0, d_us + 20), std::move(emit));
                break;
            case 2:
                elsewhere(r, route::io, uniform(0, d_us + 20), std::move(emit));
                break;
            default:
                emit(); // the driver thread, racing the watcher
                break;
            }
        }
        finish(*r, "op_cancel");
        return true;
    }

    // (c) Parallel groups: a port wait racing a timer due at about the same time.
    bool group_round() {
        std::uint64_t first = 0;
        const std::uint64_t n = reserve(uniform(200, 1500), first);
        if (n == 0) return false;
        auto r = std::make_shared<round_state>(kind::group, first, n, false);
        auto dev = std::make_unique<sim_device>(sim_device::options{2, false});
        std::vector<sim_stream_handle> handles;
        auto next = std::make_shared<counter>(0);
        std::vector<std::shared_ptr<group_chain>> chains;
        const std::uint64_t lines = uniform(2, 4);
        for (std::uint64_t l = 0; l < lines; ++l) {
            completion_line& line = dev->make_line();
            for (std::size_t s = 0; s < gpu_async::line_words; ++s) {
                sim_stream& st = *handles.emplace_back(dev->make_stream(line, *slot_id::at(s)));
                if (s % 2 == 0) st.set_doorbell(w_.bell);
                chains.push_back(std::make_shared<group_chain>(w_, r, st, next, first, n, rng_()));
            }
        }
        for (auto& c : chains)
            c->launch();
        chains.clear();
        finish(*r, "group");
        dev.reset();
        return true;
    }

    // (d) port.cancel() from other threads; the aborted waits must match what cancel() returned.
    bool port_cancel_round() {
        std::uint64_t first = 0;
        const std::uint64_t n = reserve(uniform(300, 3000), first);
        if (n == 0) return false;
        auto r = std::make_shared<round_state>(kind::port_cancel, first, n, false);
        auto port = std::make_shared<gpu_completion_port>(w_.ioc);
        auto cancelled = std::make_shared<counter>(0);
        auto do_cancel = [port, cancelled] {
            const std::size_t c = port->cancel();
            cancelled->fetch_add(c, std::memory_order_relaxed);
            g.port_cancels.fetch_add(1, std::memory_order_relaxed);
            g.port_cancelled.fetch_add(c, std::memory_order_relaxed);
        };
        const std::uint64_t racing = uniform(0, n - 1);
        for (std::uint64_t i = 0; i < n; ++i) {
            if (i == racing) // while waits are still being started
                elsewhere(r, chance(0.5) ? route::task : route::io, 0, do_cancel);
            sim_stream& s = pool_stream();
            const bool never = chance(0.3);
            const std::uint64_t target =
                never ? s.tail() + never_ahead : s.enqueue(us(uniform(0, 200)));
            start_wait(*port, r, first + i, descriptor_at(s, target),
                       never ? never_check(s, target) : word_check(s, target));
        }
        const std::uint64_t later = uniform(1, 3);
        for (std::uint64_t c = 0; c < later; ++c)
            elsewhere(r, pick_route(), uniform(0, 300), do_cancel);
        finish(*r, "port_cancel");
        if (r->aborted.load() != cancelled->load()) {
            g.round_mismatch.fetch_add(1, std::memory_order_relaxed);
            fail("port_cancel round: %llu waits aborted, port.cancel() returned %llu in all",
                 static_cast<unsigned long long>(r->aborted.load()),
                 static_cast<unsigned long long>(cancelled->load()));
        }
        return true;
    }

    // (e) A port destroyed with waits pending.
    bool port_teardown_round() {
        std::uint64_t first = 0;
        const std::uint64_t n = reserve(uniform(300, 2500), first);
        if (n == 0) return false;
        auto r = std::make_shared<round_state>(kind::port_teardown, first, n, false);
        struct holder {
            std::unique_ptr<gpu_completion_port> port;
            std::unique_ptr<gpu_completion_port> other;
        };
        auto h = std::make_shared<holder>();
        h->port = std::make_unique<gpu_completion_port>(w_.ioc);
        h->other = std::make_unique<gpu_completion_port>(w_.ioc);
        for (std::uint64_t i = 0; i < n; ++i) {
            sim_stream& s = pool_stream();
            const bool never = chance(0.2);
            const std::uint64_t target =
                never ? s.tail() + never_ahead : s.enqueue(us(uniform(0, 300)));
            start_wait(chance(0.5) ? *h->port : *h->other, r, first + i, descriptor_at(s, target),
                       never ? never_check(s, target) : word_check(s, target));
        }
        // Moved while its waits complete on other threads: the waits move with the port.
        switch (uniform(0, 2)) {
        case 1: // cancels the target's waits, takes over the source's
            *h->port = std::move(*h->other);
            g.port_moves.fetch_add(1, std::memory_order_relaxed);
            break;
        case 2:
            h->port = std::make_unique<gpu_completion_port>(std::move(*h->port));
            g.port_moves.fetch_add(1, std::memory_order_relaxed);
            break;
        default:
            break;
        }
        elsewhere(r, pick_route(), uniform(0, 300), [h] {
            h->port.reset();
            h->other.reset();
            g.ports_torn_down.fetch_add(1, std::memory_order_relaxed);
        });
        finish(*r, "port_teardown");
        return true;
    }

    // (e) A device destroyed with waits pending on its lines, sometimes after a sticky fault.
    bool device_teardown_round() {
        std::uint64_t first = 0;
        const std::uint64_t n = reserve(uniform(300, 2500), first);
        if (n == 0) return false;
        auto r = std::make_shared<round_state>(kind::device_teardown, first, n, true);
        struct holder {
            std::vector<sim_stream_handle> handles; // outlive dev: dropping them is a no-op
            std::unique_ptr<sim_device> dev;
        };
        auto h = std::make_shared<holder>();
        h->dev = std::make_unique<sim_device>(sim_device::options{uniform(1, 2), false});
        std::vector<sim_stream*> streams;
        const std::uint64_t lines = uniform(1, 4);
        for (std::uint64_t l = 0; l < lines; ++l) {
            completion_line& line = h->dev->make_line();
            for (std::size_t s = 0; s < gpu_async::line_words; ++s)
                streams.push_back(
                    h->handles.emplace_back(h->dev->make_stream(line, *slot_id::at(s))).get());
        }
        const std::uint64_t own = uniform(0, 4);
        for (std::uint64_t l = 0; l < own; ++l)
            streams.push_back(h->handles.emplace_back(h->dev->make_stream()).get());
        for (std::size_t i = 0; i < streams.size(); ++i)
            if (i % 2 == 1) streams[i]->set_doorbell(w_.bell);
        const bool fault = chance(0.3);
        const std::uint64_t fault_at = uniform(0, n - 1);
        for (std::uint64_t i = 0; i < n; ++i) {
            sim_stream& s = *streams[uniform(0, streams.size() - 1)];
            if (fault && i == fault_at) {
                r->fault_injected.store(true, std::memory_order_relaxed);
                s.enqueue_fault(gpu_async::errc::device_fault, us(uniform(0, 100)));
                g.device_faults.fetch_add(1, std::memory_order_relaxed);
            }
            const auto flag = static_cast<std::uint32_t>(i);
            if (chance(0.08)) {
                const std::uint64_t target = s.tail() + never_ahead;
                start_wait(pool_port(), r, first + i, descriptor_at(s, target),
                           never_check(s, target));
            } else {
                const std::uint64_t seq = enqueue_flagged(s, *r, flag, us(uniform(0, 100)));
                start_wait(pool_port(), r, first + i, s.descriptor_for(seq),
                           flag_check(s, seq, flag));
            }
        }
        elsewhere(r, pick_route(), uniform(0, 2000), [h] {
            h->dev.reset(); // ends the waits on its lines (operation_aborted)
            g.devices_torn_down.fetch_add(1, std::memory_order_relaxed);
        });
        finish(*r, "device_teardown");
        return true;
    }

    // (g) Caller lines near 2^64: the words wrap to 0 while waits are pending.
    bool wrap_round() {
        struct planned {
            sim_stream* s;
            std::uint64_t start;
            std::uint64_t items;
        };
        struct holder {
            std::vector<sim_stream_handle> handles; // may outlive dev: dropping them is a no-op
            std::unique_ptr<sim_device> dev;
            std::vector<std::unique_ptr<completion_line>> lines;
        };
        auto h = std::make_shared<holder>();
        h->dev = std::make_unique<sim_device>(sim_device::options{1, false});
        const bool teardown = chance(0.35);
        std::vector<planned> plan;
        std::uint64_t want = 0;
        const std::uint64_t nlines = uniform(1, 2);
        for (std::uint64_t l = 0; l < nlines; ++l) {
            h->lines.push_back(std::make_unique<completion_line>());
            completion_line& line = *h->lines.back();
            for (std::size_t s = 0; s < gpu_async::line_words; ++s) {
                const std::uint64_t k = uniform(1, 200);
                const std::uint64_t start = std::uint64_t{0} - k;
                line.words[s].store(start, std::memory_order_relaxed);
                sim_stream& st = *h->handles.emplace_back(
                    h->dev->make_stream(line, *slot_id::at(s))); // tail from the word
                if (s % 2 == 0) st.set_doorbell(w_.bell);
                const std::uint64_t items = k + uniform(1, 40);
                plan.push_back({&st, start, items});
                want += items + (teardown ? 1 : 0);
            }
        }
        std::uint64_t first = 0;
        const std::uint64_t n = reserve(want, first);
        if (n == 0) return false;
        auto r = std::make_shared<round_state>(kind::wrap, first, n, true);
        std::uint64_t issued = 0;
        for (planned& p : plan) {
            sim_stream& s = *p.s;
            if (s.tail() != p.start) {
                fail("wrap: a stream on a caller line started at %llu, not at its word %llu",
                     static_cast<unsigned long long>(s.tail()),
                     static_cast<unsigned long long>(p.start));
            }
            std::uint64_t done = 0;
            for (; done < p.items && issued < n; ++done, ++issued) {
                const auto flag = static_cast<std::uint32_t>(issued);
                // The first item holds the others back, so every wait is registered before the
                // word moves, most of them across the wrap.
                const dur_ns d = us(done == 0 ? uniform(100, 400) : uniform(0, 10));
                const std::uint64_t seq = enqueue_flagged(s, *r, flag, d);
                start_wait(pool_port(), r, first + issued, s.descriptor_for(seq),
                           flag_check(s, seq, flag));
            }
            p.items = done;
            if (teardown && issued < n) {
                const std::uint64_t target = p.start + never_ahead;
                start_wait(pool_port(), r, first + issued++, descriptor_at(s, target),
                           never_check(s, target));
            }
        }
        if (teardown) {
            elsewhere(r, pick_route(), uniform(0, 1000), [h] {
                h->dev.reset(); // a caller's lines are the caller's to retire
                g.devices_torn_down.fetch_add(1, std::memory_order_relaxed);
                for (const auto& line : h->lines) {
                    gpu_async::retire_line(*line);
                    g.lines_retired.fetch_add(1, std::memory_order_relaxed);
                }
            });
        }
        finish(*r, "wrap");
        if (!teardown) {
            for (const planned& p : plan) {
                const std::uint64_t end = p.start + p.items;
                if (p.s->word() != end) {
                    g.round_mismatch.fetch_add(1, std::memory_order_relaxed);
                    fail("wrap: slot ended at %llu, expected %llu",
                         static_cast<unsigned long long>(p.s->word()),
                         static_cast<unsigned long long>(end));
                } else if (end < p.start) {
                    g.wrapped_slots.fetch_add(1, std::memory_order_relaxed);
                }
            }
            if (r->aborted.load() != 0) {
                g.round_mismatch.fetch_add(1, std::memory_order_relaxed);
                fail("wrap round: %llu waits aborted, none was cancelled",
                     static_cast<unsigned long long>(r->aborted.load()));
            }
        }
        h->dev.reset();
        for (const auto& line : h->lines)
            gpu_async::retire_line(*line); // nothing pending: a no-op before the memory goes
        h->lines.clear();
        return true;
    }

    // (f) A private io_context driven by run_fill on this thread.
    bool fill_round() {
        std::uint64_t first = 0;
        const std::uint64_t n = reserve(uniform(300, 2000), first);
        if (n == 0) return false;
        auto r = std::make_shared<round_state>(kind::fill, first, n, false);
        r->waits_left.store(n);
        auto ctx_owner = std::make_unique<asio::io_context>();
        asio::io_context& ctx = *ctx_owner;
        auto dev = std::make_unique<sim_device>(sim_device::options{1, false});
        auto port = std::make_unique<gpu_completion_port>(ctx);
        std::vector<sim_stream_handle> handles;
        std::vector<sim_stream*> streams;
        for (int l = 0; l < 2; ++l) {
            completion_line& line = dev->make_line();
            for (std::size_t s = 0; s < gpu_async::line_words; ++s) {
                sim_stream& st = *handles.emplace_back(dev->make_stream(line, *slot_id::at(s)));
                if (s % 2 == 0) st.set_doorbell(port->shared_bell());
                streams.push_back(&st);
            }
        }
        bool timed_out = false;
        auto guard = std::make_unique<asio::steady_timer>(ctx, round_deadline());
        guard->async_wait([&](error_code ec) {
            if (ec) return;
            timed_out = true;
            ctx.stop();
        });
        r->on_waits_done = [t = guard.get()] { t->cancel(); };
        auto issue = [&](std::uint64_t from, std::uint64_t count, std::uint64_t seed) {
            std::mt19937_64 rng(seed);
            auto pick = [&](std::uint64_t lo, std::uint64_t hi) {
                return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
            };
            for (std::uint64_t i = from; i < from + count; ++i) {
                sim_stream& s = *streams[pick(0, streams.size() - 1)];
                const bool never = pick(0, 99) < 5;
                const std::uint64_t d_us = pick(0, 50);
                const std::uint64_t target = never ? s.tail() + never_ahead : s.enqueue(us(d_us));
                std::shared_ptr<signal_box> sig;
                if (never || pick(0, 99) < 30) sig = std::make_shared<signal_box>();
                start_wait(*port, r, first + i, descriptor_at(s, target),
                           never ? never_check(s, target) : word_check(s, target), sig);
                if (!sig) continue;
                const asio::cancellation_type type = pick_type_with(rng);
                const auto due = clock_type::now() + std::chrono::microseconds(pick(0, d_us + 20));
                r->hold();
                if (pick(0, 1) == 0) {
                    some_task_thread_with(rng).at(due, [sig, type, r] {
                        sig->signal.emit(type);
                        g.signals_emitted.fetch_add(1, std::memory_order_relaxed);
                        r->release();
                    });
                } else {
                    // The context keeps work while the task may still post to it.
                    auto tracked =
                        asio::prefer(ctx.get_executor(), asio::execution::outstanding_work.tracked);
                    some_task_thread_with(rng).at(due, [sig, type, r, tracked] {
                        asio::post(tracked, [sig, type, r] {
                            sig->signal.emit(type);
                            g.signals_emitted.fetch_add(1, std::memory_order_relaxed);
                            r->release();
                        });
                    });
                }
            }
        };
        const std::uint64_t here = n / 2;
        issue(0, here, rng_());
        // The rest is started from inside run_fill.
        asio::post(ctx, [&issue, here, n, seed = rng_()] { issue(here, n - here, seed); });
        if (chance(0.5)) {
            r->hold();
            gpu_completion_port* p = port.get();
            some_task_thread().at(clock_type::now() + std::chrono::microseconds(uniform(0, 300)),
                                  [p, r] {
                                      const std::size_t c = p->cancel();
                                      g.port_cancels.fetch_add(1, std::memory_order_relaxed);
                                      g.port_cancelled.fetch_add(c, std::memory_order_relaxed);
                                      r->release();
                                  });
        }
        // Sometimes a second thread runs the context too: run_fill, or run_for.
        std::thread second;
        switch (uniform(0, 3)) {
        case 1:
            second = std::thread([&ctx] { gpu_async::run_fill(ctx); });
            g.fill_second_threads.fetch_add(1, std::memory_order_relaxed);
            break;
        case 2:
            second = std::thread([&ctx, limit = round_deadline()] { ctx.run_until(limit); });
            g.fill_second_threads.fetch_add(1, std::memory_order_relaxed);
            break;
        default:
            break;
        }
        gpu_async::run_fill(ctx);
        if (second.joinable()) second.join();
        if (timed_out) give_up("a fill round did not finish in time (run_fill was stopped)");
        finish(*r, "fill");
        r->on_waits_done = nullptr;
        guard.reset();
        port.reset();
        if (chance(0.5)) {
            // The context goes first while the device still works: its streams keep ringing the
            // doorbell of a reactor that is gone (they share the doorbell's ownership).
            for (int k = 0; k < 8; ++k)
                streams[uniform(0, streams.size() - 1)]->enqueue(us(uniform(0, 200)));
            ctx_owner.reset();
            g.contexts_first.fetch_add(1, std::memory_order_relaxed);
        }
        dev.reset();
        ctx_owner.reset();
        return true;
    }

    asio::cancellation_type pick_type_with(std::mt19937_64& rng) {
        switch (std::uniform_int_distribution<int>(0, 2)(rng)) {
        case 0:
            return asio::cancellation_type::terminal;
        case 1:
            return asio::cancellation_type::partial;
        default:
            return asio::cancellation_type::total;
        }
    }
    task_thread& some_task_thread_with(std::mt19937_64& rng) {
        return *w_.tasks[std::uniform_int_distribution<std::size_t>(0, w_.tasks.size() - 1)(rng)];
    }

    world& w_;
    std::mt19937_64 rng_;
};

// ---------------------------------------------------------------------------------------------
// Summary

const options* summary_options = nullptr;
clock_type::time_point started_at;

double elapsed_s() {
    return std::chrono::duration<double>(clock_type::now() - started_at).count();
}

void print_summary(const char* result, std::uint64_t lost) {
    const double wall = elapsed_s();
    const options& o = *summary_options;
    std::uint64_t rounds = 0;
    for (const counter& c : g.rounds)
        rounds += load(c);
    std::string per_kind;
    for (std::size_t k = 0; k < kind_count; ++k) {
        per_kind += ' ';
        per_kind += kind_names[k];
        per_kind += '=';
        per_kind += std::to_string(load(g.rounds[k]));
    }
    std::lock_guard lk(report_mutex);
    std::printf("gpu_async_soak: rounds %llu:%s\n", static_cast<unsigned long long>(rounds),
                per_kind.c_str());
    std::printf(
        "gpu_async_soak: result=%s waits=%llu started=%llu ok=%llu aborted=%llu lost=%llu "
        "doubled=%llu early=%llu unexpected=%llu groups=%llu timer_won=%llu device_won=%llu "
        "group_bad=%llu signals_emitted=%llu port_cancels=%llu port_cancelled=%llu "
        "ports_torn_down=%llu port_moves=%llu devices_torn_down=%llu lines_retired=%llu "
        "device_faults=%llu faulted=%llu "
        "never_waits=%llu wrapped_slots=%llu contexts_first=%llu fill_second_threads=%llu "
        "round_mismatch=%llu failures=%llu "
        "threads=%u "
        "lines=%u devices=%u concurrency=%u seed=%llu wall_s=%.1f waits_per_s=%.0f\n",
        result, static_cast<unsigned long long>(o.waits),
        static_cast<unsigned long long>(load(g.started)),
        static_cast<unsigned long long>(load(g.ok)),
        static_cast<unsigned long long>(load(g.aborted)), static_cast<unsigned long long>(lost),
        static_cast<unsigned long long>(load(g.doubled)),
        static_cast<unsigned long long>(load(g.early)),
        static_cast<unsigned long long>(load(g.unexpected)),
        static_cast<unsigned long long>(load(g.groups)),
        static_cast<unsigned long long>(load(g.timer_won)),
        static_cast<unsigned long long>(load(g.device_won)),
        static_cast<unsigned long long>(load(g.group_bad)),
        static_cast<unsigned long long>(load(g.signals_emitted)),
        static_cast<unsigned long long>(load(g.port_cancels)),
        static_cast<unsigned long long>(load(g.port_cancelled)),
        static_cast<unsigned long long>(load(g.ports_torn_down)),
        static_cast<unsigned long long>(load(g.port_moves)),
        static_cast<unsigned long long>(load(g.devices_torn_down)),
        static_cast<unsigned long long>(load(g.lines_retired)),
        static_cast<unsigned long long>(load(g.device_faults)),
        static_cast<unsigned long long>(load(g.faulted)),
        static_cast<unsigned long long>(load(g.never_waits)),
        static_cast<unsigned long long>(load(g.wrapped_slots)),
        static_cast<unsigned long long>(load(g.contexts_first)),
        static_cast<unsigned long long>(load(g.fill_second_threads)),
        static_cast<unsigned long long>(load(g.round_mismatch)),
        static_cast<unsigned long long>(load(g.failures)), o.threads, o.lines, o.devices,
        o.concurrency, static_cast<unsigned long long>(o.seed), wall,
        wall > 0 ? static_cast<double>(load(g.started)) / wall : 0.0);
    std::fflush(stdout);
}

/// Ends the program when something did not finish: pending waits would refer to freed memory if
/// it unwound.
[[noreturn]] void give_up(const char* why) {
    static std::atomic<bool> once{false};
    if (once.exchange(true)) // another thread is already ending the program
        for (;;)
            std::this_thread::sleep_for(std::chrono::hours(1));
    {
        std::lock_guard lk(report_mutex);
        std::fprintf(stderr, "gpu_async_soak: TIMEOUT: %s\n", why);
        std::fflush(stderr);
    }
    const std::uint64_t started = load(g.started);
    const std::uint64_t settled =
        load(g.ok) + load(g.aborted) + load(g.faulted) + load(g.unexpected);
    print_summary("TIMEOUT", started > settled ? started - settled : 0);
    std::fflush(nullptr);
    std::_Exit(2);
}

} // namespace

int main(int argc, char** argv) {
    const options opt = parse(argc, argv);
    summary_options = &opt;
    started_at = clock_type::now();
    hits_size = opt.waits;
    hits.reset(new std::atomic<std::uint8_t>[hits_size]());

    asio::io_context ioc(static_cast<int>(opt.threads));
    auto work = asio::make_work_guard(ioc);
    std::atomic<bool> io_stop{false};
    std::vector<std::thread> io_threads;
    for (unsigned i = 0; i < opt.threads; ++i) {
        io_threads.emplace_back([&] {
            while (!io_stop.load(std::memory_order_acquire)) {
                try {
                    ioc.run_for(std::chrono::milliseconds(100));
                } catch (const std::exception& e) {
                    fail("a handler threw: %s", e.what());
                }
            }
        });
    }

    world w{opt, ioc, nullptr, {}, {}, {}, {}, {}, {}};
    w.deadline = started_at + std::chrono::duration_cast<clock_type::duration>(
                                  std::chrono::duration<double>(opt.seconds_limit));
    for (int i = 0; i < 4; ++i)
        w.ports.push_back(std::make_unique<gpu_completion_port>(ioc));
    w.bell = w.ports.front()->shared_bell();
    for (unsigned d = 0; d < opt.devices; ++d)
        w.devices.push_back(std::make_unique<sim_device>(sim_device::options{1, false}));
    for (unsigned l = 0; l < opt.lines; ++l) {
        sim_device& dev = *w.devices[l % w.devices.size()];
        completion_line& line = dev.make_line();
        for (std::size_t s = 0; s < gpu_async::line_words; ++s) {
            sim_stream& st = *w.handles.emplace_back(dev.make_stream(line, *slot_id::at(s)));
            if ((l + s) % 2 == 0) st.set_doorbell(w.bell); // the others only store
            w.streams.push_back(&st);
        }
    }
    for (int i = 0; i < 2; ++i)
        w.tasks.push_back(std::make_unique<task_thread>());

    std::atomic<unsigned> running{opt.concurrency};
    std::mutex done_mutex;
    std::condition_variable done_cv;
    std::vector<std::thread> drivers;
    for (unsigned i = 0; i < opt.concurrency; ++i) {
        drivers.emplace_back([&, i] {
            try {
                driver(w, i).run();
            } catch (const std::exception& e) {
                fail("driver %u: %s", i, e.what());
                give_up("a driver failed to start a wait");
            }
            if (running.fetch_sub(1) == 1) {
                std::lock_guard lk(done_mutex);
                done_cv.notify_all();
            }
        });
    }

    // The watchdog: progress lines, and the program's time limit.
    {
        std::unique_lock lk(done_mutex);
        auto next_progress = clock_type::now();
        const auto every = std::chrono::duration_cast<clock_type::duration>(
            std::chrono::duration<double>(opt.progress_s > 0 ? opt.progress_s : 1e9));
        next_progress += every;
        while (running.load() != 0) {
            const auto wake = std::min(w.deadline, next_progress);
            done_cv.wait_until(lk, wake, [&] { return running.load() == 0; });
            if (running.load() == 0) break;
            const auto now = clock_type::now();
            if (now >= w.deadline) give_up("--seconds-limit reached");
            if (now >= next_progress) {
                next_progress += every;
                std::lock_guard rl(report_mutex);
                std::fprintf(stderr,
                             "gpu_async_soak: %.0f s: started %llu of %llu (%.1f%%), ok %llu, "
                             "aborted %llu, %.0f waits/s\n",
                             elapsed_s(), static_cast<unsigned long long>(load(g.started)),
                             static_cast<unsigned long long>(opt.waits),
                             100.0 * static_cast<double>(load(g.started)) /
                                 static_cast<double>(opt.waits),
                             static_cast<unsigned long long>(load(g.ok)),
                             static_cast<unsigned long long>(load(g.aborted)),
                             static_cast<double>(load(g.started)) / elapsed_s());
            }
        }
    }
    for (std::thread& t : drivers)
        t.join();
    for (auto& t : w.tasks)
        t->stop();

    const std::size_t still = boost::asio::use_service<gpu_async::detail::reactor_service>(
                                  gpu_async::detail::context_of(w.ports.front()->get_executor()))
                                  .pending();
    if (still != 0) fail("the reactor still has %zu waits registered after every round", still);
    w.ports.clear();
    w.streams.clear();
    w.devices.clear();
    work.reset();
    io_stop.store(true, std::memory_order_release);
    for (std::thread& t : io_threads)
        t.join();

    // Every wait exactly once.
    std::uint64_t lost = 0;
    std::uint64_t twice = 0;
    for (std::uint64_t i = 0; i < hits_size; ++i) {
        const unsigned h = hits[i].load(std::memory_order_relaxed);
        if (h == 0) {
            if (lost++ < 10) fail("wait %llu never completed", static_cast<unsigned long long>(i));
        } else if (h > 1) {
            ++twice;
        }
    }
    const std::uint64_t started = load(g.started);
    const std::uint64_t settled =
        load(g.ok) + load(g.aborted) + load(g.faulted) + load(g.unexpected);
    if (started != opt.waits)
        fail("started %llu waits, not %llu", static_cast<unsigned long long>(started),
             static_cast<unsigned long long>(opt.waits));
    if (settled != started + load(g.doubled))
        fail("%llu completions for %llu waits", static_cast<unsigned long long>(settled),
             static_cast<unsigned long long>(started));
    if (twice != 0 && load(g.doubled) == 0)
        fail("%llu waits completed twice", static_cast<unsigned long long>(twice));
    if (load(g.groups) != load(g.timer_won) + load(g.device_won))
        fail("group outcomes do not add up");
    const bool pass = load(g.failures) == 0;
    print_summary(pass ? "PASS" : "FAIL", lost);
    return pass ? 0 : 1;
}
