// SPDX-License-Identifier: BSL-1.0
//
// bench/common/vulkan_waits.hpp: the Vulkan cell of gpu-async-bench. Real compute work on a
// Vulkan device of the bench's own (lavapipe where there is no GPU): one submission at a time of
// the spin shader for `work_us` with the line's store recorded behind it (record_store), the
// submission signalling a timeline semaphore. Each way of waiting hands the completion to a
// handler on the io_context:
//   ours-service      port.async_wait(descriptor) under io_context::run (the reactor's watcher),
//                     the port's doorbell attached to the line (as the README tells users to)
//   ours-fill         the same under run_fill (the io_context's thread parks on the line)
//   ours-service-no-bell  ours-service on a line without the doorbell: the watcher sees the
//                     store at its next scan, within one park bound
//   wait-thread-post  a thread in vkWaitSemaphores, then asio::post to the io_context
//   hybrid-wait-spin  a thread in vkWaitSemaphores until shortly before the completion the last
//                     round predicts, then spinning on vkGetSemaphoreCounterValue, then post
//                     (the shape of llama.cpp's Vulkan wait)
//   busy-poll         the io_context's thread spinning on vkGetSemaphoreCounterValue
// Latency: from just before vkQueueSubmit to the handler (the device's work included, the same
// for every row; the rows differ by how long the wake takes). CPU: the process's CPU seconds per
// waited second, lavapipe's own worker threads (which run the work) included. The rows take
// turns round by round (each row's port, io_context and thread live through the run), so a
// change of the machine's load falls on every row alike.
//
// Stages (--vulkan-stages): a timestamp query written behind the store gives when the store
// landed (at the latest: the queue writes it after the store), on the device's clock (lavapipe's is
// CLOCK_MONOTONIC, the bench's clock: a device whose timestamps are not, or whose period is not 1
// ns, gets no stages); the baselines' thread notes when its wait returned. Each row then splits
// into submit -> store landed -> seen -> handler, over the rounds whose timestamp fell between the
// submit and the handler.
//
#ifndef GPU_ASYNC_BENCH_COMMON_VULKAN_WAITS_HPP
#define GPU_ASYNC_BENCH_COMMON_VULKAN_WAITS_HPP

#include "stats.hpp"
#include "vulkan_spin.hpp"

#include <gpu_async/device/vulkan.hpp>
#include <gpu_async/gpu_completion_port.hpp>
#include <gpu_async/run_fill.hpp>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace gpu_async::bench {

/// One row of the Vulkan cell.
struct vulkan_row {
    std::string name;
    summary lat;
    double cpu_per_s = 0;
    std::string note;
    // Stages (--vulkan-stages), over the rounds whose store timestamp fell between the submit
    // and the handler: submit -> store landed, store -> seen (where the row knows when it saw
    // the completion), seen -> handler, store -> handler.
    summary store, seen, handler, store_to_handler;
};

/// The timestamp entry points (core Vulkan 1.0; not in the library's device_api, which needs no
/// queries), taken with vkGetDeviceProcAddr.
struct vulkan_timestamps {
    struct pool_info {   // VkQueryPoolCreateInfo
        int s_type = 11; // VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO
        const void* next = nullptr;
        vulkan::flags_t flags = 0;
        int query_type = 2; // VK_QUERY_TYPE_TIMESTAMP
        std::uint32_t query_count = 0;
        vulkan::flags_t pipeline_statistics = 0;
    };
    using pool_t = std::uint64_t; // VkQueryPool (a non-dispatchable handle: 64 bits)
    vulkan::result_t (*create_pool)(vulkan::device_t, const pool_info*, const void*,
                                    pool_t*) = nullptr;
    void (*destroy_pool)(vulkan::device_t, pool_t, const void*) = nullptr;
    void (*reset)(vulkan::command_buffer_t, pool_t, std::uint32_t, std::uint32_t) = nullptr;
    void (*write)(vulkan::command_buffer_t, vulkan::flags_t, pool_t, std::uint32_t) = nullptr;
    vulkan::result_t (*results)(vulkan::device_t, pool_t, std::uint32_t, std::uint32_t, std::size_t,
                                void*, std::uint64_t, vulkan::flags_t) = nullptr;
    pool_t pool = 0;
};

/// The device, its spin work, lines, a command buffer and a timeline semaphore: one submission
/// at a time. Line 0 has no doorbell; attach() makes a line with a port's doorbell attached.
/// Throws std::runtime_error naming what failed.
class vulkan_bench_rig {
public:
    explicit vulkan_bench_rig(bool stages = false) {
        auto loader = vulkan_loader::load();
        if (!loader.has_value()) throw std::runtime_error(loader.error().message());
        auto device = vulkan_device::create(*loader.value());
        if (!device.has_value()) throw std::runtime_error(device.error().message());
        device_ = std::move(device).value();
        spin_.emplace(*device_);
        if (auto e = spin_->open()) throw std::runtime_error(e->message());
        add_line();
        const auto& a = device_->api();
        vulkan::command_pool_create_info pool{};
        pool.flags = vulkan::command_pool_create_reset_command_buffer_bit;
        pool.queue_family_index = device_->queue_family();
        check(a.create_command_pool(dev(), &pool, nullptr, &pool_), "vkCreateCommandPool");
        vulkan::command_buffer_allocate_info alloc{};
        alloc.command_pool = pool_;
        alloc.command_buffer_count = 1;
        check(a.allocate_command_buffers(dev(), &alloc, &cb_), "vkAllocateCommandBuffers");
        vulkan::semaphore_type_create_info type{};
        type.semaphore_type = vulkan::semaphore_type_timeline;
        vulkan::semaphore_create_info info{};
        info.next = &type;
        check(a.create_semaphore(dev(), &info, nullptr, &sem_), "vkCreateSemaphore");
        if (stages) open_timestamps();
    }
    vulkan_bench_rig(const vulkan_bench_rig&) = delete;
    vulkan_bench_rig& operator=(const vulkan_bench_rig&) = delete;
    ~vulkan_bench_rig() {
        const auto& a = device_->api();
        static_cast<void>(wait(value_, ~std::uint64_t{0}));
        lines_.clear(); // awaits their stores; the device keeps their memory (stores recorded)
        static_cast<void>(a.device_wait_idle(dev()));
        if (ts_.pool != 0) ts_.destroy_pool(dev(), ts_.pool, nullptr);
        if (sem_ != vulkan::semaphore_t{}) a.destroy_semaphore(dev(), sem_, nullptr);
        if (pool_ != vulkan::command_pool_t{}) a.destroy_command_pool(dev(), pool_, nullptr);
        spin_.reset();
    }

    const std::string& name() const { return device_->name(); }
    const vulkan::device_api& api() const { return device_->api(); }
    vulkan::device_t dev() const { return device_->device(); }
    vulkan::semaphore_t semaphore() const { return sem_; }
    /// Whether submit() writes the store's timestamp (--vulkan-stages on a device that can).
    bool stages() const { return ts_.pool != 0; }

    /// A new line with `bell` attached (as a user attaches a port's shared_bell()); returns its
    /// index for submit().
    std::size_t attach(std::shared_ptr<doorbell> bell) {
        vulkan_line& line = add_line();
        if (auto e = line.attach_doorbell(std::move(bell))) throw std::runtime_error(e->message());
        return lines_.size() - 1;
    }

    /// Waits until the last submission has signalled (its command buffer may be pending a
    /// little after its store landed): before a round's clock starts.
    void settle() const { check(wait(value_, ~std::uint64_t{0}), "vkWaitSemaphores"); }

    /// Submits `work_us` of spin work with line `line`'s store behind it, signalling the
    /// semaphore at the returned value; `desc` is the store's descriptor. Call settle() first.
    std::uint64_t submit(unsigned work_us, std::optional<memory_descriptor>& desc,
                         std::size_t line = 0) {
        const auto& a = device_->api();
        check(a.reset_command_buffer(cb_, 0), "vkResetCommandBuffer");
        vulkan::command_buffer_begin_info begin{};
        begin.flags = vulkan::command_buffer_usage_one_time_submit_bit;
        check(a.begin_command_buffer(cb_, &begin), "vkBeginCommandBuffer");
        if (stages()) ts_.reset(cb_, ts_.pool, 0, 1);
        spin_->record(cb_, work_us);
        auto d = lines_.at(line)->record_store(*slot_id::at(0), cb_);
        if (!d.has_value()) throw std::runtime_error(d.error().message());
        desc = d.value();
        if (stages()) ts_.write(cb_, vulkan::pipeline_stage_bottom_of_pipe_bit, ts_.pool, 0);
        check(a.end_command_buffer(cb_), "vkEndCommandBuffer");
        const std::uint64_t value = value_ + 1;
        vulkan::timeline_semaphore_submit_info timeline{};
        timeline.signal_semaphore_value_count = 1;
        timeline.signal_semaphore_values = &value;
        vulkan::submit_info info{};
        info.next = &timeline;
        info.command_buffer_count = 1;
        info.command_buffers = &cb_;
        info.signal_semaphore_count = 1;
        info.signal_semaphores = &sem_;
        check(device_->submit(1, &info), "vkQueueSubmit");
        value_ = value;
        return value;
    }

    /// When the last submission's store landed (its timestamp), after settle(); 0 without
    /// stages.
    std::uint64_t store_ns() const {
        if (!stages()) return 0;
        std::uint64_t t = 0;
        constexpr vulkan::flags_t bits64_wait = 0x1 | 0x2; // VK_QUERY_RESULT_64_BIT | WAIT_BIT
        check(ts_.results(dev(), ts_.pool, 0, 1, sizeof t, &t, sizeof t, bits64_wait),
              "vkGetQueryPoolResults");
        return t;
    }

    /// vkWaitSemaphores for `value`, at most `timeout_ns`.
    vulkan::result_t wait(std::uint64_t value, std::uint64_t timeout_ns) const {
        vulkan::semaphore_wait_info info{};
        info.semaphore_count = 1;
        info.semaphores = &sem_;
        info.values = &value;
        return device_->api().wait_semaphores(dev(), &info, timeout_ns);
    }

    /// vkGetSemaphoreCounterValue.
    std::uint64_t counter() const {
        std::uint64_t v = 0;
        check(device_->api().get_semaphore_counter_value(dev(), sem_, &v),
              "vkGetSemaphoreCounterValue");
        return v;
    }

    static void check(vulkan::result_t r, const char* call) {
        if (r != vulkan::success)
            throw std::runtime_error(std::string(call) + ": " + vulkan_loader::result_name(r));
    }

private:
    vulkan_line& add_line() {
        auto line = vulkan_line::create(*device_);
        if (!line.has_value()) throw std::runtime_error(line.error().message());
        lines_.push_back(std::make_unique<vulkan_line>(std::move(line).value()));
        return *lines_.back();
    }

    // The timestamp entry points and a pool of one query; none where the device has no
    // timestamps on its queue (the stages are then left out).
    void open_timestamps() {
        const auto get = device_->instance_api().get_device_proc_addr;
        const auto take = [&](auto& fn, const char* name) {
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(get(dev(), name));
            return fn != nullptr;
        };
        if (!(take(ts_.create_pool, "vkCreateQueryPool") &&
              take(ts_.destroy_pool, "vkDestroyQueryPool") &&
              take(ts_.reset, "vkCmdResetQueryPool") && take(ts_.write, "vkCmdWriteTimestamp") &&
              take(ts_.results, "vkGetQueryPoolResults")))
            return;
        vulkan_timestamps::pool_info info{};
        info.query_count = 1;
        if (ts_.create_pool(dev(), &info, nullptr, &ts_.pool) != vulkan::success) ts_.pool = 0;
    }

    std::unique_ptr<vulkan_device> device_;
    std::optional<vulkan_spin> spin_;
    std::vector<std::unique_ptr<vulkan_line>> lines_;
    vulkan_timestamps ts_;
    vulkan::command_pool_t pool_{};
    vulkan::command_buffer_t cb_{};
    vulkan::semaphore_t sem_{};
    std::uint64_t value_ = 0;
};

/// A thread that runs the jobs handed to it, one at a time (the baselines' waiting thread).
class waiter_thread {
public:
    waiter_thread()
        : thread_([this] { loop(); }) {}
    ~waiter_thread() {
        {
            std::lock_guard lock(mutex_);
            stop_ = true;
        }
        cv_.notify_one();
        thread_.join();
    }
    void run(std::function<void()> job) {
        {
            std::lock_guard lock(mutex_);
            job_ = std::move(job);
        }
        cv_.notify_one();
    }

private:
    void loop() {
        std::unique_lock lock(mutex_);
        for (;;) {
            cv_.wait(lock, [&] { return stop_ || job_; });
            if (stop_) return;
            auto job = std::move(job_);
            job_ = nullptr;
            lock.unlock();
            job();
            lock.lock();
        }
    }

    std::mutex mutex_;
    std::condition_variable cv_;
    std::function<void()> job_;
    bool stop_ = false;
    std::thread thread_;
};

/// What a way of waiting gets for one round: the submission's descriptor and semaphore value,
/// and where its handler records the time it ran (t1) and, where the row knows it, when the
/// completion was seen (seen: the baselines' thread after its wait).
struct vulkan_round {
    boost::asio::io_context& ctx;
    gpu_completion_port& port;
    waiter_thread& waiter;
    vulkan_bench_rig& rig;
    const memory_descriptor& desc;
    std::uint64_t value;
    std::uint64_t predicted_ns; // the row's last round's time, for the hybrid
    std::uint64_t& t1;
    std::uint64_t& seen;
};

/// One way of waiting in the Vulkan cell: its name and note (printed, written to the CSV), its
/// wait, which runs the io_context until the handler has set t1, and whether its line has the
/// port's doorbell attached.
struct vulkan_strategy {
    const char* name;
    const char* note;
    void (*wait)(vulkan_round&);
    bool doorbell = false;
};

namespace vulkan_waits {

// How long before the predicted completion the hybrid stops sleeping and spins.
constexpr std::uint64_t spin_margin_ns = 200'000;

// A job for the waiting thread's end: notes when the wait returned, then posts the handler,
// which sets t1; keeps ctx.run() going until then.
inline auto post_done(vulkan_round& r) {
    auto guard = boost::asio::make_work_guard(r.ctx);
    return [&ctx = r.ctx, &t1 = r.t1, &seen = r.seen, guard = std::move(guard)]() mutable {
        seen = now_ns();
        boost::asio::post(ctx, [&t1, g = std::move(guard)]() mutable {
            t1 = now_ns();
            g.reset();
        });
    };
}

inline void port_wait(vulkan_round& r) {
    r.port.async_wait(r.desc, [&t1 = r.t1](boost::system::error_code ec) {
        if (!ec) t1 = now_ns();
    });
}

inline void port_run(vulkan_round& r) {
    port_wait(r);
    r.ctx.run();
}

inline void port_fill(vulkan_round& r) {
    port_wait(r);
    gpu_async::run_fill(r.ctx);
}

inline void thread_wait_post(vulkan_round& r) {
    r.waiter.run([&rig = r.rig, value = r.value, done = post_done(r)]() mutable {
        vulkan_bench_rig::check(rig.wait(value, ~std::uint64_t{0}), "vkWaitSemaphores");
        done();
    });
    r.ctx.run();
}

inline void hybrid_wait_spin(vulkan_round& r) {
    const std::uint64_t sleep =
        r.predicted_ns > spin_margin_ns ? r.predicted_ns - spin_margin_ns : 0;
    r.waiter.run([&rig = r.rig, value = r.value, sleep, done = post_done(r)]() mutable {
        const vulkan::result_t res = rig.wait(value, sleep);
        if (res != vulkan::success && res != vulkan::timeout)
            vulkan_bench_rig::check(res, "vkWaitSemaphores");
        while (rig.counter() < value) {
        }
        done();
    });
    r.ctx.run();
}

inline void busy_poll(vulkan_round& r) {
    boost::asio::post(r.ctx, [&rig = r.rig, value = r.value, &t1 = r.t1, &seen = r.seen] {
        while (rig.counter() < value) {
        }
        t1 = seen = now_ns();
    });
    r.ctx.run();
}

} // namespace vulkan_waits

/// The rows of the Vulkan cell, in the order of its table.
inline constexpr vulkan_strategy vulkan_strategies[] = {
    {"ours-service",
     "port.async_wait under run(): the reactor's watcher thread; the port's doorbell attached to "
     "the line",
     vulkan_waits::port_run, true},
    {"ours-fill",
     "port.async_wait under run_fill(): the io_context thread parks; the port's doorbell "
     "attached to the line",
     vulkan_waits::port_fill, true},
    {"ours-service-no-bell",
     "ours-service on a line WITHOUT the doorbell attached: the store is seen at the next scan "
     "(within one park bound)",
     vulkan_waits::port_run, false},
    {"wait-thread-post", "a thread in vkWaitSemaphores, then asio::post",
     vulkan_waits::thread_wait_post},
    {"hybrid-wait-spin",
     "vkWaitSemaphores until 200 us before the row's last round's time, then spinning on "
     "vkGetSemaphoreCounterValue, then asio::post",
     vulkan_waits::hybrid_wait_spin},
    {"busy-poll", "the io_context thread spinning on vkGetSemaphoreCounterValue",
     vulkan_waits::busy_poll},
};

/// What one row keeps through a run: its io_context, port and waiting thread (so a port's
/// rhythm carries from round to round, as in a program), its line and its samples.
struct vulkan_row_state {
    const vulkan_strategy* s;
    boost::asio::io_context ctx{1};
    gpu_completion_port port{ctx};
    waiter_thread waiter;
    std::size_t line = 0;
    std::uint64_t predicted_ns = 0;
    std::vector<std::uint64_t> lat, store, seen, handler, store_to_handler;
    std::uint64_t waited = 0, cpu = 0;

    vulkan_row_state(const vulkan_strategy& strategy, vulkan_bench_rig& rig, unsigned work_us)
        : s(&strategy)
        , predicted_ns(static_cast<std::uint64_t>(work_us) * 1000) {
        if (strategy.doorbell) line = rig.attach(port.shared_bell());
    }

    /// One round: submit, wait as the row does, record. `measured`: past the warm-up.
    void round(vulkan_bench_rig& rig, unsigned work_us, bool measured) {
        std::optional<memory_descriptor> desc;
        rig.settle();
        const std::uint64_t cpu0 = process_cpu_ns();
        const std::uint64_t t0 = now_ns();
        const std::uint64_t value = rig.submit(work_us, desc, line);
        std::uint64_t t1 = 0, t_seen = 0;
        ctx.restart();
        vulkan_round args{ctx, port, waiter, rig, *desc, value, predicted_ns, t1, t_seen};
        s->wait(args);
        const std::uint64_t t2 = now_ns();
        const std::uint64_t cpu1 = process_cpu_ns();
        if (t1 == 0) throw std::runtime_error(std::string(s->name) + ": no completion");
        predicted_ns = t1 - t0;
        if (!measured) return;
        lat.push_back(t1 - t0);
        waited += t2 - t0;
        cpu += cpu1 - cpu0;
        if (!rig.stages()) return;
        rig.settle();
        const std::uint64_t ts = rig.store_ns();
        if (ts < t0 || ts > t1) return; // not on the bench's clock
        store.push_back(ts - t0);
        store_to_handler.push_back(t1 - ts);
        if (t_seen >= ts && t_seen <= t1) {
            seen.push_back(t_seen - ts);
            handler.push_back(t1 - t_seen);
        }
    }

    vulkan_row result() const {
        vulkan_row r;
        r.name = s->name;
        r.lat = summarize(lat);
        r.cpu_per_s = waited > 0 ? static_cast<double>(cpu) / static_cast<double>(waited) : 0;
        r.note = s->note;
        r.store = summarize(store);
        r.seen = summarize(seen);
        r.handler = summarize(handler);
        r.store_to_handler = summarize(store_to_handler);
        return r;
    }
};

/// The Vulkan cell: `rounds` submissions of `work_us` per row (after a few unmeasured ones),
/// the rows taking turns round by round, the first row of each turn rotating; `device` gets the
/// device's name; `stages`: time the stages too (vulkan_row). Throws std::runtime_error where
/// no Vulkan device works.
inline std::vector<vulkan_row> vulkan_rows(int rounds, unsigned work_us, std::string& device,
                                           bool stages = false) {
    vulkan_bench_rig rig(stages);
    device = rig.name();
    std::vector<std::unique_ptr<vulkan_row_state>> states;
    for (const vulkan_strategy& s : vulkan_strategies)
        states.push_back(std::make_unique<vulkan_row_state>(s, rig, work_us));
    const std::size_t n = states.size();
    for (int i = -3; i < rounds; ++i)
        for (std::size_t k = 0; k < n; ++k)
            states[(static_cast<std::size_t>(i + 3) + k) % n]->round(rig, work_us, i >= 0);
    std::vector<vulkan_row> rows;
    for (const auto& st : states)
        rows.push_back(st->result());
    return rows;
}

} // namespace gpu_async::bench

#endif // GPU_ASYNC_BENCH_COMMON_VULKAN_WAITS_HPP
