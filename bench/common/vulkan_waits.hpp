// SPDX-License-Identifier: BSL-1.0
//
// bench/common/vulkan_waits.hpp: the Vulkan cell of gpu-async-bench. Real compute work on a
// Vulkan device of the bench's own (lavapipe where there is no GPU): one submission at a time of
// the spin shader for `work_us` with the line's store recorded behind it (record_store), the
// submission signalling a timeline semaphore. Each way of waiting hands the completion to a
// handler on the io_context:
//   ours-service      port.async_wait(descriptor) under io_context::run (the reactor's watcher)
//   ours-fill         the same under run_fill (the io_context's thread parks on the line)
//   wait-thread-post  a thread in vkWaitSemaphores, then asio::post to the io_context
//   hybrid-wait-spin  a thread in vkWaitSemaphores until shortly before the completion the last
//                     round predicts, then spinning on vkGetSemaphoreCounterValue, then post
//                     (the shape of llama.cpp's Vulkan wait)
//   busy-poll         the io_context's thread spinning on vkGetSemaphoreCounterValue
// Latency: from just before vkQueueSubmit to the handler (the device's work included, the same
// for every row; the rows differ by how long the wake takes). CPU: the process's CPU seconds per
// waited second, lavapipe's own worker threads (which run the work) included.
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
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace gpu_async::bench {

/// One row of the Vulkan cell.
struct vulkan_row {
    std::string name;
    summary lat;
    double cpu_per_s = 0;
    std::string note;
};

/// The device, its spin work, a line, a command buffer and a timeline semaphore: one submission
/// at a time. Throws std::runtime_error naming what failed.
class vulkan_bench_rig {
public:
    vulkan_bench_rig() {
        auto loader = vulkan_loader::load();
        if (!loader.has_value()) throw std::runtime_error(loader.error().message());
        auto device = vulkan_device::create(*loader.value());
        if (!device.has_value()) throw std::runtime_error(device.error().message());
        device_ = std::move(device).value();
        spin_.emplace(*device_);
        if (auto e = spin_->open()) throw std::runtime_error(e->message());
        auto line = vulkan_line::create(*device_);
        if (!line.has_value()) throw std::runtime_error(line.error().message());
        line_.emplace(std::move(line).value());
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
    }
    vulkan_bench_rig(const vulkan_bench_rig&) = delete;
    vulkan_bench_rig& operator=(const vulkan_bench_rig&) = delete;
    ~vulkan_bench_rig() {
        const auto& a = device_->api();
        static_cast<void>(wait(value_, ~std::uint64_t{0}));
        line_.reset(); // awaits its stores; the device keeps its memory (stores were recorded)
        static_cast<void>(a.device_wait_idle(dev()));
        if (sem_ != vulkan::semaphore_t{}) a.destroy_semaphore(dev(), sem_, nullptr);
        if (pool_ != vulkan::command_pool_t{}) a.destroy_command_pool(dev(), pool_, nullptr);
        spin_.reset();
    }

    const std::string& name() const { return device_->name(); }
    const vulkan::device_api& api() const { return device_->api(); }
    vulkan::device_t dev() const { return device_->device(); }
    vulkan::semaphore_t semaphore() const { return sem_; }

    /// Waits until the last submission has signalled (its command buffer may be pending a
    /// little after its store landed): before a round's clock starts.
    void settle() const { check(wait(value_, ~std::uint64_t{0}), "vkWaitSemaphores"); }

    /// Submits `work_us` of spin work with the line's store behind it, signalling the semaphore
    /// at the returned value; `desc` is the store's descriptor. Call settle() first.
    std::uint64_t submit(unsigned work_us, std::optional<memory_descriptor>& desc) {
        const auto& a = device_->api();
        check(a.reset_command_buffer(cb_, 0), "vkResetCommandBuffer");
        vulkan::command_buffer_begin_info begin{};
        begin.flags = vulkan::command_buffer_usage_one_time_submit_bit;
        check(a.begin_command_buffer(cb_, &begin), "vkBeginCommandBuffer");
        spin_->record(cb_, work_us);
        auto d = line_->record_store(*slot_id::at(0), cb_);
        if (!d.has_value()) throw std::runtime_error(d.error().message());
        desc = d.value();
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
    std::unique_ptr<vulkan_device> device_;
    std::optional<vulkan_spin> spin_;
    std::optional<vulkan_line> line_;
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
/// and where its handler records the time it ran (t1).
struct vulkan_round {
    boost::asio::io_context& ctx;
    gpu_completion_port& port;
    waiter_thread& waiter;
    vulkan_bench_rig& rig;
    const memory_descriptor& desc;
    std::uint64_t value;
    std::uint64_t predicted_ns; // the last round's time, for the hybrid
    std::uint64_t& t1;
};

/// One way of waiting in the Vulkan cell: its name and note (printed, written to the CSV) and
/// its wait, which runs the io_context until the handler has set t1.
struct vulkan_strategy {
    const char* name;
    const char* note;
    void (*wait)(vulkan_round&);
};

namespace vulkan_waits {

// How long before the predicted completion the hybrid stops sleeping and spins.
constexpr std::uint64_t spin_margin_ns = 200'000;

// A job for the waiting thread's end: posts the handler, which sets t1; keeps ctx.run() going
// until then.
inline auto post_done(vulkan_round& r) {
    auto guard = boost::asio::make_work_guard(r.ctx);
    return [&ctx = r.ctx, &t1 = r.t1, guard = std::move(guard)]() mutable {
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
    boost::asio::post(r.ctx, [&rig = r.rig, value = r.value, &t1 = r.t1] {
        while (rig.counter() < value) {
        }
        t1 = now_ns();
    });
    r.ctx.run();
}

} // namespace vulkan_waits

/// The rows of the Vulkan cell, in the order of its table.
inline constexpr vulkan_strategy vulkan_strategies[] = {
    {"ours-service", "port.async_wait under run(): the reactor's watcher thread",
     vulkan_waits::port_run},
    {"ours-fill", "port.async_wait under run_fill(): the io_context thread parks",
     vulkan_waits::port_fill},
    {"wait-thread-post", "a thread in vkWaitSemaphores, then asio::post",
     vulkan_waits::thread_wait_post},
    {"hybrid-wait-spin",
     "vkWaitSemaphores until 200 us before the last round's time, then spinning on "
     "vkGetSemaphoreCounterValue, then asio::post",
     vulkan_waits::hybrid_wait_spin},
    {"busy-poll", "the io_context thread spinning on vkGetSemaphoreCounterValue",
     vulkan_waits::busy_poll},
};

/// `rounds` submissions of `work_us` waited for with `s` (after a few unmeasured ones);
/// `predicted_ns` is carried from round to round (and row to row) for the hybrid.
inline vulkan_row measure_vulkan(vulkan_bench_rig& rig, const vulkan_strategy& s, int rounds,
                                 unsigned work_us, std::uint64_t& predicted_ns) {
    boost::asio::io_context ctx(1);
    gpu_completion_port port(ctx);
    waiter_thread waiter;
    std::vector<std::uint64_t> lat;
    std::uint64_t waited = 0, cpu = 0;
    for (int i = -3; i < rounds; ++i) {
        std::optional<memory_descriptor> desc;
        rig.settle();
        const std::uint64_t cpu0 = process_cpu_ns();
        const std::uint64_t t0 = now_ns();
        const std::uint64_t value = rig.submit(work_us, desc);
        std::uint64_t t1 = 0;
        ctx.restart();
        vulkan_round args{ctx, port, waiter, rig, *desc, value, predicted_ns, t1};
        s.wait(args);
        const std::uint64_t t2 = now_ns();
        if (t1 == 0) throw std::runtime_error(std::string(s.name) + ": no completion");
        predicted_ns = t1 - t0;
        if (i < 0) continue;
        lat.push_back(t1 - t0);
        waited += t2 - t0;
        cpu += process_cpu_ns() - cpu0;
    }
    return {s.name, summarize(lat),
            waited > 0 ? static_cast<double>(cpu) / static_cast<double>(waited) : 0, s.note};
}

/// The Vulkan cell: `rounds` submissions of `work_us` per row (after a few unmeasured ones);
/// `device` gets the device's name. Throws std::runtime_error where no Vulkan device works.
inline std::vector<vulkan_row> vulkan_rows(int rounds, unsigned work_us, std::string& device) {
    vulkan_bench_rig rig;
    device = rig.name();
    std::vector<vulkan_row> rows;
    std::uint64_t predicted_ns = static_cast<std::uint64_t>(work_us) * 1000;
    for (const vulkan_strategy& s : vulkan_strategies)
        rows.push_back(measure_vulkan(rig, s, rounds, work_us, predicted_ns));
    return rows;
}

} // namespace gpu_async::bench

#endif // GPU_ASYNC_BENCH_COMMON_VULKAN_WAITS_HPP
