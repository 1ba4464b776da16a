// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/device/vulkan.hpp>

#include <gpu_async/asio/error.hpp>
#include <gpu_async/asio/plan_wait.hpp>
#include <gpu_async/gpu_completion_port.hpp>
#include <gpu_async/host/std_host.hpp>
#include <gpu_async/host/wait_fd.hpp>
#include <gpu_async/line/detail/line_watchers.hpp>
#include <gpu_async/line/line_health.hpp>
#include <gpu_async/line/line_life.hpp>
#include <gpu_async/run_fill.hpp>

#include "common/eventually.hpp"
#include "common/io_context_fixture.hpp"
#include "common/run_fill_bounded.hpp"
#include "common/slots.hpp"
#include "common/vulkan_work.hpp"

#include "common/asio.hpp"
#include <boost/test/unit_test.hpp>

#include <poll.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <future>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace unit_devices_vulkan {

// The Vulkan backend on a real driver: Mesa's lavapipe on CI (a CPU device, no GPU needed),
// whatever device a developer's machine has elsewhere. The device work is the spin shader
// (bench/common/vulkan_spin.comp): it runs for a number of iterations, and a gated submission
// waits until the test opens its gate, so a wait is certainly pending while the test looks. Without
// a device the device suite is reported as skipped, except under CI (CI=true), where it fails.

using namespace gpu_async;
using gpu_async::test::error_of;
using gpu_async::test::eventually;
using gpu_async::test::run_bound;
using gpu_async::test::run_to_completion;
using gpu_async::test::slot;
using gpu_async::test::spin_work;

namespace {

/// The entry point a fake resolver hands out for vkCreateInstance (never called).
vulkan::result_t refuse_instance(const vulkan::instance_create_info*, const void*,
                                 vulkan::instance_t*) {
    return vulkan::error_incompatible_driver;
}

/// A Vulkan 1.0 loader: vkCreateInstance only (no vkEnumerateInstanceVersion).
vulkan::void_function_t loader_1_0(vulkan::instance_t, const char* name) {
    if (std::strcmp(name, "vkCreateInstance") == 0)
        return reinterpret_cast<vulkan::void_function_t>(&refuse_instance);
    return nullptr;
}

vulkan::void_function_t loader_without_anything(vulkan::instance_t, const char*) {
    return nullptr;
}

/// A device, its spin work and a line: what most cases start from.
struct rig {
    std::unique_ptr<vulkan_device> device = gpu_async::test::make_vulkan_device();
    spin_work work{*device};
    vulkan_line line = make_line(*device);

    rig() { BOOST_TEST_REQUIRE(work.ok(), work.error()); }

    static vulkan_line make_line(vulkan_device& d, vulkan_line_options options = {}) {
        auto made = vulkan_line::create(d, options);
        BOOST_TEST_REQUIRE(made.has_value(), error_of(made));
        return std::move(made).value();
    }

    /// Submits `iterations` of spin work with the store recorded behind it on `s`; held back
    /// until work.open() when `gated`.
    memory_descriptor spin_then_record(slot_id s, std::uint32_t iterations, bool gated = false) {
        auto cb = work.begin();
        work.spin(cb, iterations);
        auto stored = line.record_store(s, cb);
        BOOST_TEST_REQUIRE(stored.has_value(), error_of(stored));
        if (gated)
            work.submit_gated(cb);
        else
            work.submit(cb);
        return stored.value();
    }
};

} // namespace

// --- the loader (no device needed) -------------------------------------------------------------

BOOST_AUTO_TEST_SUITE(vulkan_loader_suite)

BOOST_AUTO_TEST_CASE(a_missing_library_is_unavailable) {
    auto l = vulkan_loader::load_library("libgpu_async_no_such_loader.so.1");
    BOOST_TEST_REQUIRE(!l.has_value());
    BOOST_TEST(l.error().code() == errc::unavailable);
    BOOST_TEST(l.error().message().find("libgpu_async_no_such_loader.so.1") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_library_without_get_instance_proc_addr_is_unavailable) {
    auto l = vulkan_loader::load_library("libm.so.6");
    BOOST_TEST_REQUIRE(!l.has_value());
    BOOST_TEST(l.error().code() == errc::unavailable);
    BOOST_TEST(l.error().message().find("vkGetInstanceProcAddr") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_resolver_without_create_instance_is_unavailable) {
    auto none = vulkan_loader::from_resolver(nullptr);
    BOOST_TEST_REQUIRE(!none.has_value());
    BOOST_TEST(none.error().code() == errc::unavailable);
    auto empty = vulkan_loader::from_resolver(&loader_without_anything);
    BOOST_TEST_REQUIRE(!empty.has_value());
    BOOST_TEST(empty.error().code() == errc::unavailable);
    BOOST_TEST(empty.error().message().find("vkCreateInstance") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_vulkan_1_0_loader_makes_no_device) {
    auto l = vulkan_loader::from_resolver(&loader_1_0);
    BOOST_TEST_REQUIRE(l.has_value());
    BOOST_TEST(l.value()->version() == (1u << 22));
    auto d = vulkan_device::create(*l.value());
    BOOST_TEST_REQUIRE(!d.has_value());
    BOOST_TEST(d.error().code() == errc::unavailable);
    BOOST_TEST(d.error().message().find("needs 1.2") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(result_names) {
    BOOST_TEST(vulkan_loader::result_name(vulkan::error_device_lost) == "VK_ERROR_DEVICE_LOST");
    BOOST_TEST(vulkan_loader::result_name(12345) == "VK_RESULT_12345");
    const coded_error e = vulkan_loader::error("vkQueueSubmit", vulkan::error_device_lost);
    BOOST_TEST(e.code() == errc::driver_status);
    BOOST_TEST(
        (e.args() == std::vector<std::string>{"vkQueueSubmit", "VK_ERROR_DEVICE_LOST", "-4"}));
}

// Where there is a loader but no device, the load and the device's refusal are coded; under CI
// the device suite below must run, so a missing device is named here too.
BOOST_AUTO_TEST_CASE(the_machine_has_a_device_or_says_why) {
    const std::string& why = gpu_async::test::vulkan_missing();
    if (!why.empty()) BOOST_TEST_MESSAGE("no Vulkan device here: " << why);
    BOOST_TEST((why.empty() || !gpu_async::test::under_ci()),
               "CI=true and no Vulkan device (install mesa-vulkan-drivers): " << why);
}

BOOST_AUTO_TEST_SUITE_END()

// --- a real device -----------------------------------------------------------------------------

BOOST_AUTO_TEST_SUITE(vulkan_suite,
                      *boost::unit_test::precondition(gpu_async::test::vulkan_device_here))

BOOST_AUTO_TEST_CASE(a_device_of_its_own_meets_the_requirements) {
    auto device = gpu_async::test::make_vulkan_device();
    BOOST_TEST(device->owns_device());
    BOOST_TEST(!device->name().empty());
    BOOST_TEST(device->queue() != nullptr);
    BOOST_TEST(device->loader().version() >= vulkan::api_version_1_2);
    BOOST_TEST_MESSAGE("Vulkan device: " << device->name());
    auto line = vulkan_line::create(*device);
    BOOST_TEST_REQUIRE(line.has_value(), error_of(line));
    BOOST_TEST(line.value().is_open());
    BOOST_TEST(line.value().generation() != 0u);
    BOOST_TEST(line_generation(line.value().line()) == line.value().generation());
    BOOST_TEST(reinterpret_cast<std::uintptr_t>(&line.value().line()) % line_bytes == 0u);
    BOOST_TEST(device->open_lines() == 1u);
    BOOST_TEST(!line.value().close().has_value());
    BOOST_TEST(device->open_lines() == 0u);
    BOOST_TEST(device->kept_lines() == 0u); // no store was recorded: all of it went
    BOOST_TEST(!line.value().leaked());
}

BOOST_AUTO_TEST_CASE(adopting_a_device_works_with_its_handles_and_destroys_nothing) {
    auto owner = gpu_async::test::make_vulkan_device();
    const vulkan_handles handles{owner->instance(), owner->physical_device(), owner->device(),
                                 owner->queue(), owner->queue_family()};
    auto null = vulkan_device::adopt(owner->loader(), vulkan_handles{});
    BOOST_TEST_REQUIRE(!null.has_value());
    BOOST_TEST(null.error().code() == errc::backend);
    vulkan_handles bad_family = handles;
    bad_family.queue_family = 1000;
    auto refused = vulkan_device::adopt(owner->loader(), bad_family);
    BOOST_TEST_REQUIRE(!refused.has_value());
    BOOST_TEST(refused.error().code() == errc::unavailable);
    BOOST_TEST(refused.error().message().find("queue family 1000") != std::string::npos);
    {
        auto adopted = vulkan_device::adopt(owner->loader(), handles);
        BOOST_TEST_REQUIRE(adopted.has_value(), error_of(adopted));
        BOOST_TEST(!adopted.value()->owns_device());
        BOOST_TEST(adopted.value()->name() == owner->name());
        spin_work work(*adopted.value());
        BOOST_TEST_REQUIRE(work.ok(), work.error());
        auto line = vulkan_line::create(*adopted.value());
        BOOST_TEST_REQUIRE(line.has_value());
        auto cb = work.begin();
        work.spin(cb, 1000);
        auto done = line.value().record_store(slot(0), cb);
        BOOST_TEST_REQUIRE(done.has_value());
        work.submit(cb);
        BOOST_TEST(eventually([&] { return done.value().is_complete(); }));
    }
    // The owner's device is still whole: it makes and stores through a line of its own.
    spin_work work(*owner);
    BOOST_TEST_REQUIRE(work.ok(), work.error());
    auto line = vulkan_line::create(*owner);
    BOOST_TEST_REQUIRE(line.has_value());
    auto cb = work.begin();
    auto done = line.value().record_store(slot(0), cb);
    work.submit(cb);
    BOOST_TEST(eventually([&] { return done.value().is_complete(); }));
}

// Record the store into the caller's command buffer behind real work; a callback wait completes
// after the work, whose writes are visible to the handler.
BOOST_FIXTURE_TEST_CASE(a_recorded_store_completes_a_callback_after_the_work, rig) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    const auto start = std::chrono::steady_clock::now();
    const memory_descriptor done = spin_then_record(slot(0), 50000);
    BOOST_TEST(done.target() == 1u);
    BOOST_TEST(done.generation() == line.generation());
    std::optional<gpu_async::error_code> got;
    std::uint32_t runs = 0, spins = 0;
    port.async_wait(done, [&](gpu_async::error_code ec) {
        got = ec;
        runs = work.runs();
        spins = work.spins();
    });
    run_to_completion(ctx);
    BOOST_TEST_MESSAGE("50000 spins and a recorded store, awaited in "
                       << std::chrono::duration_cast<std::chrono::microseconds>(
                              std::chrono::steady_clock::now() - start)
                              .count()
                       << " us");
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(!*got);
    BOOST_TEST(runs == 1u);
    BOOST_TEST(spins == 50000u);
    BOOST_TEST(line.line().words[0].load() == 1u);
    BOOST_TEST(line.sequence(slot(0)) == 1u);
}

// await_semaphore: the caller's submission signals a timeline value behind its work; the
// line's batch waits for it and stores. Awaited with use_future while a thread runs the context.
BOOST_FIXTURE_TEST_CASE(an_awaited_semaphore_completes_a_future, rig) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    const vulkan::semaphore_t timeline = work.make_timeline();
    auto cb = work.begin();
    work.spin(cb, 50000);
    work.submit(cb, timeline, 1);
    auto done = line.await_semaphore(slot(1), timeline, 1);
    BOOST_TEST_REQUIRE(done.has_value(), error_of(done));
    BOOST_TEST(done.value().target() == 1u);
    BOOST_TEST(line.submitted() == 1u);
    std::future<void> f = port.async_wait(done.value(), asio::use_future);
    std::thread runner([&] { ctx.run_for(run_bound); });
    BOOST_TEST((f.wait_for(run_bound) == std::future_status::ready));
    BOOST_CHECK_NO_THROW(f.get());
    runner.join();
    BOOST_TEST(work.runs() == 1u);
    BOOST_TEST(line.line().words[1].load() == 1u);
}

namespace {

/// Throws unless `ok`: for code on a context's threads, where Boost.Test's assertions are not
/// to be used; the coroutine's completion hands the exception to the test's thread.
void require(bool ok, const std::string& what) {
    if (!ok) throw std::runtime_error(what);
}

/// `steps` steps of spin work, each awaited with use_awaitable before the next: odd steps
/// behind a recorded store, even ones behind a timeline value.
asio::awaitable<void> steps(gpu_completion_port& port, spin_work& work, vulkan_line& line,
                            vulkan::semaphore_t timeline, int steps, int& done) {
    for (int i = 0; i < steps; ++i) {
        auto cb = work.begin();
        work.spin(cb, 20000);
        memory_descriptor d = line.last(slot(0));
        if (i % 2 == 1) {
            auto stored = line.record_store(slot(0), cb);
            require(stored.has_value(), "record_store failed");
            d = stored.value();
            work.submit(cb);
        } else {
            const auto value = static_cast<std::uint64_t>(i + 1);
            work.submit(cb, timeline, value);
            auto stored = line.await_semaphore(slot(1), timeline, value);
            require(stored.has_value(), "await_semaphore failed");
            d = stored.value();
        }
        co_await port.async_wait(d, asio::use_awaitable);
        require(work.runs() == static_cast<std::uint32_t>(i + 1),
                "the work had not run when its wait completed");
        ++done;
    }
}

/// Four coroutines, each with its own work and line on one device, run by `run`.
template <class Run>
void four_coroutines(Run run) {
    auto device = gpu_async::test::make_vulkan_device();
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    constexpr int coroutines = 4, each = 6;
    std::vector<std::unique_ptr<spin_work>> works;
    std::vector<vulkan_line> lines;
    int done[coroutines] = {};
    std::exception_ptr failed[coroutines] = {};
    for (int c = 0; c < coroutines; ++c) {
        works.push_back(std::make_unique<spin_work>(*device));
        BOOST_TEST_REQUIRE(works.back()->ok(), works.back()->error());
        lines.push_back(rig::make_line(*device));
    }
    for (int c = 0; c < coroutines; ++c)
        asio::co_spawn(ctx,
                       steps(port, *works[c], lines[static_cast<std::size_t>(c)],
                             works[c]->make_timeline(), each, done[c]),
                       [&failed, c](std::exception_ptr e) { failed[c] = e; });
    run(ctx);
    for (int c = 0; c < coroutines; ++c) {
        BOOST_TEST(done[c] == each);
        if (failed[c]) std::rethrow_exception(failed[c]);
    }
    lines.clear(); // before the work whose semaphores their batches waited on
}

} // namespace

BOOST_AUTO_TEST_CASE(use_awaitable_under_run_on_four_threads) {
    four_coroutines([](asio::io_context& ctx) {
        std::vector<std::thread> threads;
        for (int t = 0; t < 4; ++t)
            threads.emplace_back([&] { ctx.run_for(run_bound); });
        for (auto& t : threads)
            t.join();
        BOOST_TEST(ctx.stopped());
    });
}

BOOST_AUTO_TEST_CASE(use_awaitable_under_run_fill) {
    four_coroutines([](asio::io_context& ctx) { gpu_async::test::run_fill_bounded(ctx); });
}

// Real work awaited through an fd_notifier (a program with no io_context): each wait's entry
// arrives once, with success, and the fd is readable until they are drained.
BOOST_FIXTURE_TEST_CASE(waits_through_an_fd_notifier, rig) {
    std_watcher watcher;
    fd_notifier notifier(watcher);
    constexpr std::uint64_t waits = 4;
    for (std::uint64_t i = 0; i < waits; ++i)
        notifier.watch(spin_then_record(slot(static_cast<std::size_t>(i)), 20000), i);
    std::vector<fd_notifier::entry> got;
    const auto end = std::chrono::steady_clock::now() + run_bound;
    while (got.size() < waits && std::chrono::steady_clock::now() < end) {
        pollfd p{notifier.fd(), POLLIN, 0};
        if (::poll(&p, 1, 1000) == 1) notifier.drain(got);
    }
    BOOST_TEST_REQUIRE(got.size() == waits);
    std::sort(got.begin(), got.end(),
              [](const auto& a, const auto& b) { return a.cookie < b.cookie; });
    for (std::uint64_t i = 0; i < waits; ++i) {
        BOOST_TEST(got[i].cookie == i);
        BOOST_TEST(!got[i].error, got[i].error.message());
    }
    BOOST_TEST(work.runs() == static_cast<std::uint32_t>(waits));
    BOOST_TEST(notifier.drain().empty());
}

// Submissions in flight on several queues at once, all awaited on one port: a device each
// (lavapipe offers one queue a device), each with its own work and line.
BOOST_AUTO_TEST_CASE(many_submissions_on_several_queues) {
    constexpr int queues = 3, each = 24;
    std::vector<std::unique_ptr<rig>> rigs;
    for (int q = 0; q < queues; ++q)
        rigs.push_back(std::make_unique<rig>());
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    int ok = 0, calls = 0;
    for (int i = 0; i < each; ++i)
        for (auto& r : rigs)
            port.async_wait(r->spin_then_record(slot(static_cast<std::size_t>(i % 8)), 2000),
                            [&](gpu_async::error_code ec) {
                                ++calls;
                                if (!ec) ++ok;
                            });
    run_to_completion(ctx);
    BOOST_TEST(calls == queues * each);
    BOOST_TEST(ok == queues * each);
    for (auto& r : rigs)
        BOOST_TEST(r->work.runs() == static_cast<std::uint32_t>(each));
}

// Many stores in flight at once, both ways: each wait completes once, with success.
BOOST_FIXTURE_TEST_CASE(many_submissions_in_flight, rig) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    constexpr int recorded = 64, awaited = 64;
    int ok = 0, calls = 0;
    auto count = [&](gpu_async::error_code ec) {
        ++calls;
        if (!ec) ++ok;
    };
    for (int i = 0; i < recorded; ++i)
        port.async_wait(spin_then_record(slot(static_cast<std::size_t>(i % 4)), 2000), count);
    const vulkan::semaphore_t timeline = work.make_timeline();
    for (int i = 0; i < awaited; ++i) {
        auto cb = work.begin();
        work.spin(cb, 2000);
        work.submit(cb, timeline, static_cast<std::uint64_t>(i + 1));
        auto d = line.await_semaphore(slot(4 + static_cast<std::size_t>(i % 4)), timeline,
                                      static_cast<std::uint64_t>(i + 1));
        BOOST_TEST_REQUIRE(d.has_value(), error_of(d));
        port.async_wait(d.value(), count);
    }
    BOOST_TEST(line.submitted() == static_cast<std::uint64_t>(awaited));
    run_to_completion(ctx);
    BOOST_TEST(calls == recorded + awaited);
    BOOST_TEST(ok == recorded + awaited);
    BOOST_TEST(work.runs() == static_cast<std::uint32_t>(recorded + awaited));
    for (std::size_t s = 0; s < line_words; ++s)
        BOOST_TEST(line.line().words[s].load() == 16u);

    // The line's batches' command buffers are reused once done: more batches run as well,
    // behind values the host signals (once the work's signals are known to be done).
    BOOST_TEST(work.wait_idle());
    for (int i = 0; i < 8; ++i) {
        work.signal(timeline, static_cast<std::uint64_t>(awaited + i + 1));
        auto d =
            line.await_semaphore(slot(4), timeline, static_cast<std::uint64_t>(awaited + i + 1));
        BOOST_TEST_REQUIRE(d.has_value(), error_of(d));
        port.async_wait(d.value(), count);
    }
    ctx.restart();
    run_to_completion(ctx);
    BOOST_TEST(ok == recorded + awaited + 8);
}

// A wait cancelled while its work runs ends with operation_aborted at once; the work and its
// store still run, and the line closes cleanly after them.
BOOST_FIXTURE_TEST_CASE(a_wait_cancelled_while_the_work_runs, rig) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    const memory_descriptor done = spin_then_record(slot(2), 1000, true);
    asio::cancellation_signal sig;
    std::optional<gpu_async::error_code> got;
    port.async_wait(done, asio::bind_cancellation_slot(
                              sig.slot(), [&](gpu_async::error_code ec) { got = ec; }));
    ctx.poll();
    BOOST_TEST(!got.has_value());
    sig.emit(asio::cancellation_type::terminal);
    run_to_completion(ctx);
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(*got == asio::error::operation_aborted);
    BOOST_TEST(work.runs() == 0u); // still held behind the gate
    BOOST_TEST(!done.is_complete());
    work.open();
    BOOST_TEST(eventually([&] { return done.is_complete(); }));
    BOOST_TEST(!line.close().has_value());
    BOOST_TEST(!line.leaked());
}

// Closing the line with waits pending on both ways: they end with operation_aborted at once,
// while close() waits for the stores still to land (the gate) before it frees the memory.
BOOST_FIXTURE_TEST_CASE(closing_the_line_with_waits_pending_aborts_them, rig) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    const vulkan::semaphore_t timeline = work.make_timeline();
    auto cb = work.begin();
    work.spin(cb, 1000);
    auto recorded = line.record_store(slot(0), cb);
    BOOST_TEST_REQUIRE(recorded.has_value());
    work.submit_gated(cb, timeline, 1);
    auto awaited = line.await_semaphore(slot(1), timeline, 1);
    BOOST_TEST_REQUIRE(awaited.has_value());
    std::optional<gpu_async::error_code> a, b;
    port.async_wait(recorded.value(), [&](gpu_async::error_code ec) { a = ec; });
    port.async_wait(awaited.value(), [&](gpu_async::error_code ec) { b = ec; });
    ctx.poll();
    std::atomic<bool> closed{false};
    std::optional<coded_error> close_error;
    std::thread closer([&] {
        close_error = line.close();
        closed = true;
    });
    run_to_completion(ctx); // the retirement ends both waits
    BOOST_TEST_REQUIRE(a.has_value());
    BOOST_TEST_REQUIRE(b.has_value());
    BOOST_TEST(*a == asio::error::operation_aborted);
    BOOST_TEST(*b == asio::error::operation_aborted);
    BOOST_TEST(!closed.load()); // still settling: the stores wait behind the gate
    BOOST_TEST(work.runs() == 0u);
    work.open();
    closer.join();
    BOOST_TEST(!close_error.has_value());
    BOOST_TEST(!line.leaked());
    BOOST_TEST(!line.is_open());
    BOOST_TEST(work.runs() == 1u);
    BOOST_TEST(device->open_lines() == 0u);
    // A store was recorded for it: its memory stays with the device until the caller's command
    // buffers are known to be done.
    BOOST_TEST(device->kept_lines() == 1u);
    BOOST_TEST(work.wait_idle());
    device->release_closed_lines();
    BOOST_TEST(device->kept_lines() == 0u);
    // Its descriptors are stale from then on: a later wait ends so without reading the line.
    std::optional<gpu_async::error_code> late;
    port.async_wait(recorded.value(), [&](gpu_async::error_code ec) { late = ec; });
    ctx.restart();
    run_to_completion(ctx);
    BOOST_TEST_REQUIRE(late.has_value());
    BOOST_TEST(*late == errc::stale_descriptor);
}

// close() waits for a store recorded into a command buffer that is submitted only later.
BOOST_FIXTURE_TEST_CASE(close_waits_for_a_recorded_store_submitted_later, rig) {
    auto cb = work.begin();
    auto stored = line.record_store(slot(5), cb);
    BOOST_TEST_REQUIRE(stored.has_value());
    std::atomic<bool> closed{false};
    std::optional<coded_error> close_error;
    std::thread closer([&] {
        close_error = line.close();
        closed = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    BOOST_TEST(!closed.load());
    work.submit(cb);
    closer.join();
    BOOST_TEST(!close_error.has_value());
    BOOST_TEST(!line.leaked());
}

// The wrapper of your device destroyed with waits pending: they end with operation_aborted, its
// line is closed (its stores awaited), and your device lives on.
BOOST_AUTO_TEST_CASE(destroying_an_adopted_device_with_waits_pending_aborts_them) {
    auto owner = gpu_async::test::make_vulkan_device();
    spin_work work(*owner);
    BOOST_TEST_REQUIRE(work.ok(), work.error());
    auto adopted = vulkan_device::adopt(owner->loader(),
                                        {owner->instance(), owner->physical_device(),
                                         owner->device(), owner->queue(), owner->queue_family()});
    BOOST_TEST_REQUIRE(adopted.has_value(), error_of(adopted));
    std::unique_ptr<vulkan_device> device = std::move(adopted).value();
    vulkan_line line = rig::make_line(*device);
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    auto cb = work.begin();
    work.spin(cb, 1000);
    auto done = line.record_store(slot(0), cb);
    BOOST_TEST_REQUIRE(done.has_value());
    work.submit_gated(cb);
    std::optional<gpu_async::error_code> got;
    port.async_wait(done.value(), [&](gpu_async::error_code ec) { got = ec; });
    ctx.poll();
    std::thread destroyer([&] { device.reset(); });
    run_to_completion(ctx);
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(*got == asio::error::operation_aborted);
    work.open();
    destroyer.join();
    BOOST_TEST(!line.is_open());
    BOOST_TEST(!line.leaked());
    BOOST_TEST(!line.close().has_value()); // closed by the device: nothing more
    BOOST_TEST(work.wait_idle());
}

// A device of the backend's own destroyed with waits pending: the same, and then the device
// goes. The store is held behind a second line's own timeline semaphore (signalled by the test
// from the host), so that nothing of the test's own is on the device when it is destroyed: the
// device closes its lines newest first, so the holding line outlives the held one's settle.
BOOST_AUTO_TEST_CASE(destroying_an_own_device_with_waits_pending_aborts_them) {
    auto device = gpu_async::test::make_vulkan_device();
    vulkan_line holder = rig::make_line(*device);
    vulkan_line line = rig::make_line(*device);
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    auto done = line.await_semaphore(slot(3), holder.timeline(), 1);
    BOOST_TEST_REQUIRE(done.has_value());
    std::optional<gpu_async::error_code> got;
    port.async_wait(done.value(), [&](gpu_async::error_code ec) { got = ec; });
    ctx.poll();
    const vulkan::device_api api = device->api();
    const vulkan::device_t dev = device->device();
    const vulkan::semaphore_t hold = holder.timeline();
    std::thread destroyer([&] { device.reset(); });
    run_to_completion(ctx);
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(*got == asio::error::operation_aborted);
    vulkan::semaphore_signal_info release{};
    release.semaphore = hold;
    release.value = 1;
    BOOST_TEST(api.signal_semaphore(dev, &release) == vulkan::success);
    destroyer.join();
    BOOST_TEST(!line.is_open());
    BOOST_TEST(!holder.is_open());
    BOOST_TEST(!line.leaked());
    BOOST_TEST(line.device() == nullptr);
    BOOST_TEST(!line.close().has_value());
}

// A plan-driven wait over a vulkan_source: flag (query, arm, park, query), poll and block.
BOOST_FIXTURE_TEST_CASE(a_plan_wait_over_a_vulkan_source, rig) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    const vulkan::semaphore_t timeline = work.make_timeline();
    auto made = vulkan_source::create(line, slot(6), timeline);
    BOOST_TEST_REQUIRE(made.has_value());
    vulkan_source& source = made.value();
    BOOST_TEST((source.query() == query_result::done())); // target 0: nothing to wait for
    source.set_target(1);
    BOOST_TEST((source.query() == query_result::pending()));

    auto cb = work.begin();
    work.spin(cb, 1000);
    work.submit_gated(cb, timeline, 1);
    std::optional<gpu_async::error_code> got;
    wait_report report;
    port.async_wait(source, wait_plan::recommended(), "vulkan",
                    [&](gpu_async::error_code ec, wait_report r) {
                        got = ec;
                        report = r;
                    });
    std::thread opener([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        work.open();
    });
    run_to_completion(ctx);
    opener.join();
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(!*got);
    BOOST_TEST(source.descriptor().target() == 1u); // the plan armed one store
    BOOST_TEST(line.submitted() == 1u);
    BOOST_TEST(eventually([&] { return source.descriptor().is_complete(); }));

    for (const char* plan : {"poll", "block"}) {
        BOOST_TEST_CONTEXT(plan) {
            const std::uint64_t next = source.target() + 1;
            source.set_target(next);
            auto more = work.begin();
            work.spin(more, 20000);
            work.submit(more, timeline, next);
            std::optional<gpu_async::error_code> ended;
            port.async_wait(source, wait_plan::parse(plan).value(), "vulkan",
                            [&](gpu_async::error_code ec, wait_report) { ended = ec; });
            ctx.restart();
            run_to_completion(ctx);
            BOOST_TEST_REQUIRE(ended.has_value());
            BOOST_TEST(!*ended);
            BOOST_TEST((source.query() == query_result::done()));
        }
    }
    BOOST_TEST(!source.block());
    BOOST_TEST(!source.last_error().has_value());
}

// A slot's store made the other way is refused until the slot's last store has landed.
BOOST_FIXTURE_TEST_CASE(a_slot_keeps_one_order_of_stores, rig) {
    const vulkan::semaphore_t timeline = work.make_timeline();
    auto cb = work.begin();
    auto recorded = line.record_store(slot(3), cb);
    BOOST_TEST_REQUIRE(recorded.has_value());
    auto refused = line.await_semaphore(slot(3), timeline, 1);
    BOOST_TEST_REQUIRE(!refused.has_value());
    BOOST_TEST(refused.error().code() == errc::backend);
    BOOST_TEST(line.submitted() == 0u);
    BOOST_TEST(line.sequence(slot(3)) == 1u);
    work.submit(cb);
    BOOST_TEST(eventually([&] { return recorded.value().is_complete(); }));
    auto now = line.await_semaphore(slot(3), timeline, 1);
    BOOST_TEST_REQUIRE(now.has_value(), error_of(now));
    BOOST_TEST(now.value().target() == 2u);
    auto other_slot = line.await_semaphore(slot(4), timeline, 1);
    BOOST_TEST_REQUIRE(other_slot.has_value());
    work.signal(timeline, 1);
    BOOST_TEST(eventually([&] { return now.value().is_complete(); }));
    BOOST_TEST(eventually([&] { return other_slot.value().is_complete(); }));
    auto none = line.record_store(slot(0), nullptr);
    BOOST_TEST_REQUIRE(!none.has_value());
    BOOST_TEST(none.error().code() == errc::backend);
}

// Sequence numbers wrap: a slot started near 2^64 stores past it in wrapping order.
BOOST_AUTO_TEST_CASE(sequence_numbers_wrap) {
    auto device = gpu_async::test::make_vulkan_device();
    spin_work work(*device);
    BOOST_TEST_REQUIRE(work.ok(), work.error());
    vulkan_line_options options;
    options.initial_sequence = std::numeric_limits<std::uint64_t>::max() - 1;
    vulkan_line line = rig::make_line(*device, options);
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    int ok = 0;
    for (int i = 0; i < 3; ++i) {
        auto cb = work.begin();
        auto d = line.record_store(slot(7), cb);
        BOOST_TEST_REQUIRE(d.has_value());
        work.submit(cb);
        port.async_wait(d.value(), [&](gpu_async::error_code ec) { ok += !ec ? 1 : 0; });
    }
    run_to_completion(ctx);
    BOOST_TEST(ok == 3);
    BOOST_TEST(line.line().words[7].load() == 1u); // max - 1, then max, 0, 1
}

// Closed and moved-from lines refuse stores with a coded error.
BOOST_FIXTURE_TEST_CASE(a_closed_line_refuses_stores, rig) {
    const vulkan::semaphore_t timeline = work.make_timeline();
    auto source = vulkan_source::create(line, slot(0), timeline);
    BOOST_TEST_REQUIRE(source.has_value());
    BOOST_TEST(!vulkan_source::create(line, slot(0), vulkan::semaphore_t{}).has_value());
    vulkan_line moved = std::move(line);
    BOOST_TEST(!line.is_open());
    BOOST_TEST(moved.is_open());
    auto cb = work.begin();
    BOOST_TEST(line.record_store(slot(0), cb).error().code() == errc::backend);
    BOOST_TEST(!moved.close().has_value());
    BOOST_TEST(moved.record_store(slot(0), cb).error().code() == errc::backend);
    BOOST_TEST(moved.await_semaphore(slot(0), timeline, 1).error().code() == errc::backend);
    BOOST_TEST(!vulkan_source::create(moved, slot(0), timeline).has_value());
    work.submit(cb);
}

BOOST_AUTO_TEST_SUITE_END()

// --- the doorbell on a real device -------------------------------------------------------------

BOOST_AUTO_TEST_SUITE(vulkan_doorbell_suite,
                      *boost::unit_test::precondition(gpu_async::test::vulkan_device_here))

namespace {

/// Waits (at most run_bound) until the line's own timeline semaphore reaches submitted(): its
/// batches have run to their end, the doorbell's store included.
bool batches_done(const vulkan_line& line) {
    const vulkan_device& d = *line.device();
    const vulkan::semaphore_t timeline = line.timeline();
    const std::uint64_t value = line.submitted();
    vulkan::semaphore_wait_info info{};
    info.semaphore_count = 1;
    info.semaphores = &timeline;
    info.values = &value;
    const auto bound = std::chrono::duration_cast<std::chrono::nanoseconds>(run_bound).count();
    return d.api().wait_semaphores(d.device(), &info, static_cast<std::uint64_t>(bound)) ==
           vulkan::success;
}

} // namespace

// The device of its own enables VK_EXT_external_memory_host where it has it (lavapipe does).
BOOST_AUTO_TEST_CASE(a_device_of_its_own_can_attach_a_doorbell) {
    auto device = gpu_async::test::make_vulkan_device();
    BOOST_TEST(device->can_attach_doorbell(), device->doorbell_unavailable());
    BOOST_TEST(device->doorbell_unavailable().empty());
    const auto align = device->import_alignment();
    BOOST_TEST((align != 0u && (align & (align - 1)) == 0u));
}

// Both ways of storing ring the attached doorbell: its device word is set after the store, and
// not by a store made before the doorbell was attached. Each store is awaited to its end (the
// command buffer's completion, the line's timeline), not timed.
BOOST_FIXTURE_TEST_CASE(both_ways_of_storing_ring_an_attached_doorbell, rig) {
    BOOST_TEST_REQUIRE(device->can_attach_doorbell(), device->doorbell_unavailable());
    // Before: a store rings nothing.
    auto cb = work.begin();
    auto before = line.record_store(slot(0), cb);
    BOOST_TEST_REQUIRE(before.has_value());
    work.submit(cb);
    BOOST_TEST_REQUIRE(work.wait_idle());
    BOOST_TEST(before.value().is_complete());

    auto bell = std::make_shared<doorbell>();
    BOOST_TEST(!bell->device_signaled());
    BOOST_TEST_REQUIRE(!line.attach_doorbell(bell).has_value());
    BOOST_TEST(!line.attach_doorbell(bell).has_value()); // the same one again: nothing
    BOOST_TEST(line.attached_doorbell() == bell);
    BOOST_TEST(bell->device_producers() == 1u);
    auto other = line.attach_doorbell(std::make_shared<doorbell>());
    BOOST_TEST_REQUIRE(other.has_value());
    BOOST_TEST(other->code() == errc::backend);
    BOOST_TEST(line.attach_doorbell(nullptr)->code() == errc::backend);
    BOOST_TEST(!bell->device_signaled());

    // Recorded into the caller's command buffer, behind their work.
    cb = work.begin();
    work.spin(cb, 1000);
    auto recorded = line.record_store(slot(0), cb);
    BOOST_TEST_REQUIRE(recorded.has_value());
    work.submit(cb);
    BOOST_TEST_REQUIRE(work.wait_idle());
    BOOST_TEST(recorded.value().is_complete());
    BOOST_TEST(bell->take_device_signal());
    BOOST_TEST(bell->line().words[doorbell::device_word].load() == 0u);
    BOOST_TEST(bell->count() == 0u); // the host ring counter is not the device's word

    // Behind a timeline value the host signals.
    const vulkan::semaphore_t timeline = work.make_timeline();
    auto awaited = line.await_semaphore(slot(1), timeline, 1);
    BOOST_TEST_REQUIRE(awaited.has_value(), error_of(awaited));
    work.signal(timeline, 1);
    BOOST_TEST_REQUIRE(batches_done(line));
    BOOST_TEST(awaited.value().is_complete());
    BOOST_TEST(bell->take_device_signal());

    // The line holds the doorbell until settled; the device keeps it with the memory of a line
    // that stores were recorded for, until those are released.
    BOOST_TEST(!line.close().has_value());
    BOOST_TEST(bell->device_producers() == 0u);
    BOOST_TEST(device->kept_lines() == 1u);
    BOOST_TEST(bell.use_count() == 2);
    device->release_closed_lines();
    BOOST_TEST(bell.use_count() == 1);
}

// A line without recorded stores gives its doorbell back at close.
BOOST_FIXTURE_TEST_CASE(an_awaiting_line_gives_its_doorbell_back_at_close, rig) {
    auto bell = std::make_shared<doorbell>();
    BOOST_TEST_REQUIRE(!line.attach_doorbell(bell).has_value());
    const vulkan::semaphore_t timeline = work.make_timeline();
    auto awaited = line.await_semaphore(slot(2), timeline, 1);
    BOOST_TEST_REQUIRE(awaited.has_value());
    work.signal(timeline, 1);
    BOOST_TEST(!line.close().has_value()); // settles: the batch has run, the bell's store too
    BOOST_TEST(bell->take_device_signal());
    BOOST_TEST(device->kept_lines() == 0u);
    BOOST_TEST(bell.use_count() == 1);
}

// The port's own doorbell, attached, under a park bound of an hour: the store's signal ends the
// reactor's park, so the wait completes well within the run's bound.
BOOST_FIXTURE_TEST_CASE(a_store_wakes_a_port_parked_with_a_long_bound, rig) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    port.park_bound(std::chrono::hours(1));
    BOOST_TEST_REQUIRE(!line.attach_doorbell(port.shared_bell()).has_value());
    const memory_descriptor done = spin_then_record(slot(3), 20000, true);
    std::optional<gpu_async::error_code> got;
    port.async_wait(done, [&](gpu_async::error_code ec) { got = ec; });
    work.open();
    run_to_completion(ctx);
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(!*got);
    BOOST_TEST(work.runs() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_devices_vulkan
