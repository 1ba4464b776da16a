// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/device/vulkan.hpp>

#include <gpu_async/asio/error.hpp>
#include <gpu_async/gpu_completion_port.hpp>
#include <gpu_async/line/detail/line_watchers.hpp>
#include <gpu_async/line/line_health.hpp>
#include <gpu_async/line/line_life.hpp>

#include "common/fake_vulkan_driver.hpp"
#include "common/fault_sweep.hpp"
#include "common/io_context_fixture.hpp"
#include "common/slots.hpp"

#include "common/asio.hpp"
#include <boost/test/unit_test.hpp>

#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace unit_devices_vulkan_faults {

// The Vulkan backend against a fake driver (test/common/fake_vulkan_driver.hpp): refusals of a
// device that lacks something, a lost device, a store that never lands, and a sweep failing
// each call of a device's and a line's life in turn. The real driver's tests are in vulkan.cpp.

using namespace gpu_async;
using namespace gpu_async::test::vulkan_fake;
using gpu_async::test::names;
using gpu_async::test::run_result;
using gpu_async::test::run_to_completion;
using gpu_async::test::slot;

namespace {

/// A device's and a line's life on the fake: a doorbell attached, a store recorded into the
/// caller's command buffer
/// (which then runs), two batches behind the caller's semaphore (the second reusing the first's
/// command buffer), each awaited through the port; then the line is closed and the device goes.
/// Stops at the first error (a failed close is not retried: the line is closed either way).
run_result scenario(const vulkan_loader& loader) {
    run_result r;
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    auto fail = [&](const coded_error& e) {
        if (r.error.empty()) r.error = e.message();
    };
    auto wait = [&](const memory_descriptor& d) {
        int& ends = r.ends.emplace_back(0);
        port.async_wait(d, [&ends](gpu_async::error_code) { ++ends; });
    };
    // Outlives the device: a line that leaked may still hold it (and a store ring it).
    auto bell = std::make_shared<doorbell>();
    {
        auto device = vulkan_device::create(loader);
        if (!device.has_value()) {
            fail(device.error());
        } else {
            auto line = vulkan_line::create(*device.value());
            if (!line.has_value()) {
                fail(line.error());
            } else {
                vulkan_line& l = line.value();
                if (auto e = l.attach_doorbell(bell)) fail(*e);
                const vulkan::command_buffer_t cb = fake->caller_command_buffer();
                if (auto d = l.record_store(slot(0), cb); d.has_value()) {
                    wait(d.value());
                    fake->run(cb);
                } else {
                    fail(d.error());
                }
                const vulkan::semaphore_t sem = fake->caller_semaphore();
                bool ok = true;
                for (int i = 0; i < 2 && ok; ++i) {
                    if (auto d = l.await_semaphore(slot(1), sem, 1); d.has_value()) {
                        wait(d.value());
                        fake->signal(sem, 1);
                    } else {
                        fail(d.error());
                        ok = false;
                    }
                }
                if (auto e = l.close()) fail(*e);
            }
            device.value()->release_closed_lines(); // the caller's command buffer has run
        }
    }
    ctx.run_for(gpu_async::test::run_bound);
    BOOST_TEST_REQUIRE(ctx.stopped(), "the port's waits did not end within the bound");
    return r;
}

} // namespace

BOOST_AUTO_TEST_SUITE(vulkan_faults)

BOOST_FIXTURE_TEST_CASE(a_device_lacking_a_feature_is_refused_naming_it, fixture) {
    auto loader = this->loader();
    state.int64_atomics = false;
    auto d = vulkan_device::create(*loader);
    BOOST_TEST_REQUIRE(!d.has_value());
    BOOST_TEST(d.error().code() == errc::unavailable);
    BOOST_TEST(names(d.error().message(), "shaderBufferInt64Atomics"));
    BOOST_TEST(names(d.error().message(), "fake Vulkan device"));
    state.int64_atomics = true;
    state.timelines = false;
    auto t = vulkan_device::create(*loader);
    BOOST_TEST_REQUIRE(!t.has_value());
    BOOST_TEST(names(t.error().message(), "timelineSemaphore"));
    state.timelines = true;
    state.api_version = (1u << 22) | (1u << 12); // 1.1
    auto old = vulkan_device::create(*loader);
    BOOST_TEST_REQUIRE(!old.has_value());
    BOOST_TEST(names(old.error().message(), "needs 1.2"));
    BOOST_TEST(state.live.empty()); // each instance made was destroyed
}

BOOST_FIXTURE_TEST_CASE(no_device_or_no_compute_is_unavailable, fixture) {
    auto loader = this->loader();
    state.physical_devices = 0;
    auto none = vulkan_device::create(*loader);
    BOOST_TEST_REQUIRE(!none.has_value());
    BOOST_TEST(none.error().code() == errc::unavailable);
    BOOST_TEST(names(none.error().message(), "found none"));
    state.physical_devices = 1;
    state.compute = false;
    auto no_compute = vulkan_device::create(*loader);
    BOOST_TEST_REQUIRE(!no_compute.has_value());
    BOOST_TEST(names(no_compute.error().message(), "no compute"));
    BOOST_TEST(state.live.empty());
}

BOOST_FIXTURE_TEST_CASE(a_missing_entry_point_is_unavailable_and_nothing_is_left, fixture) {
    auto loader = this->loader();
    state.missing = {"vkWaitSemaphores", "vkCmdDispatch"};
    auto d = vulkan_device::create(*loader);
    BOOST_TEST_REQUIRE(!d.has_value());
    BOOST_TEST(d.error().code() == errc::unavailable);
    BOOST_TEST(names(d.error().message(), "vkWaitSemaphores"));
    BOOST_TEST(names(d.error().message(), "vkCmdDispatch"));
    BOOST_TEST(state.live.empty()); // the device and the instance were destroyed
}

BOOST_FIXTURE_TEST_CASE(no_host_visible_memory_is_unavailable, fixture) {
    auto loader = this->loader();
    auto d = vulkan_device::create(*loader);
    BOOST_TEST_REQUIRE(d.has_value());
    state.host_visible = false;
    // The memory types are read when the device is made: make another.
    auto again = vulkan_device::create(*loader);
    BOOST_TEST_REQUIRE(again.has_value());
    auto line = vulkan_line::create(*again.value());
    BOOST_TEST_REQUIRE(!line.has_value());
    BOOST_TEST(line.error().code() == errc::unavailable);
    BOOST_TEST(names(line.error().message(), "HOST_VISIBLE"));
    BOOST_TEST(state.count("VkBuffer") == 0u);
}

// The line's calls, in their order: made, two batches (the second reuses the first's command
// buffer), closed: the batches awaited, the queue drained, then the batch objects destroyed;
// the memory a store was recorded for stays with the device until release_closed_lines().
BOOST_FIXTURE_TEST_CASE(a_line_runs_its_calls_in_the_owned_order, fixture) {
    rig r(*this);
    vulkan_line& line = *r.line;
    BOOST_TEST(state.count("VkBuffer") == 1u);
    BOOST_TEST(state.count("VkSemaphore") == 1u);
    const vulkan::command_buffer_t cb = state.caller_command_buffer();
    auto recorded = line.record_store(slot(2), cb);
    BOOST_TEST_REQUIRE(recorded.has_value());
    state.run(cb);
    BOOST_TEST(recorded.value().is_complete());
    const vulkan::semaphore_t sem = state.caller_semaphore();
    state.calls.clear();
    for (std::uint64_t v : {1u, 2u}) {
        auto d = line.await_semaphore(slot(3), sem, v);
        BOOST_TEST_REQUIRE(d.has_value());
        BOOST_TEST(!d.value().is_complete()); // behind the caller's value
        state.signal(sem, v);
        BOOST_TEST(d.value().is_complete());
    }
    BOOST_TEST(state.count_calls("vkAllocateCommandBuffers") == 1u);
    BOOST_TEST(state.count_calls("vkResetCommandBuffer") == 1u);
    BOOST_TEST(state.count_calls("vkQueueSubmit") == 2u);
    BOOST_TEST(line.submitted() == 2u);
    state.calls.clear();
    BOOST_TEST(!line.close().has_value());
    const std::vector<std::string> closing = {"vkWaitSemaphores", "vkQueueWaitIdle",
                                              "vkDestroyCommandPool", "vkDestroySemaphore"};
    BOOST_TEST((state.calls == closing));
    BOOST_TEST(state.count("VkBuffer") == 1u); // kept: the caller's command buffer refers to it
    BOOST_TEST(r.device->kept_lines() == 1u);
    r.device->release_closed_lines();
    BOOST_TEST(state.count("VkBuffer") == 0u);
    BOOST_TEST(state.count("VkDeviceMemory") == 0u);
    BOOST_TEST(state.count("VkDescriptorPool") == 0u);
    r.device.reset();
    BOOST_TEST(state.live.empty());
}

// A slot's store recorded into the caller's command buffer, then (once it landed) its next store
// behind a semaphore: the slot's last store is an awaited one, but the caller's command buffer
// still refers to the line's memory and, on another queue, may still be pending. close() keeps
// the memory with the device all the same, until release_closed_lines().
BOOST_FIXTURE_TEST_CASE(a_line_ever_recorded_into_is_kept_after_an_awaited_store, fixture) {
    rig r(*this);
    vulkan_line& line = *r.line;
    const vulkan::command_buffer_t cb = state.caller_command_buffer();
    auto recorded = line.record_store(slot(0), cb);
    BOOST_TEST_REQUIRE(recorded.has_value());
    state.run(cb);
    BOOST_TEST_REQUIRE(recorded.value().is_complete());
    const vulkan::semaphore_t sem = state.caller_semaphore();
    auto awaited = line.await_semaphore(slot(0), sem, 1);
    BOOST_TEST_REQUIRE(awaited.has_value());
    state.signal(sem, 1);
    BOOST_TEST_REQUIRE(awaited.value().is_complete());
    const std::size_t kept = r.device->kept_lines();
    BOOST_TEST(!line.close().has_value());
    BOOST_TEST(r.device->kept_lines() == kept + 1);
    BOOST_TEST(state.count("VkBuffer") == 1u);
    BOOST_TEST(state.count("VkDeviceMemory") == 1u);
    BOOST_TEST(state.count("VkDescriptorPool") == 1u);
    r.device->release_closed_lines();
    BOOST_TEST(r.device->kept_lines() == 0u);
    BOOST_TEST(state.count("VkBuffer") == 0u);
    BOOST_TEST(state.count("VkDeviceMemory") == 0u);
}

// A lost device: the line's health query faults its slots (device_fault reaches the pending
// wait), the source's query reports it, and close() leaks the memory rather than free it.
// The doorbell: the line imports the page holding it at the device's alignment and binds it in a
// set of its own; each store, either way, rings it after the completion; the line holds it until
// settled, the device after that while it keeps the line's memory.
BOOST_FIXTURE_TEST_CASE(an_attached_doorbell_is_imported_rung_and_held_until_settled, fixture) {
    rig r(*this);
    vulkan_line& line = *r.line;
    BOOST_TEST_REQUIRE(r.device->can_attach_doorbell(), r.device->doorbell_unavailable());
    BOOST_TEST(state.host_import_enabled); // create() enabled the extension
    BOOST_TEST(r.device->import_alignment() == 4096u);
    auto bell = std::make_shared<doorbell>();
    state.calls.clear();
    BOOST_TEST_REQUIRE(!line.attach_doorbell(bell).has_value());
    const std::vector<std::string> attaching = {"vkGetMemoryHostPointerPropertiesEXT",
                                                "vkCreateBuffer",
                                                "vkGetBufferMemoryRequirements",
                                                "vkAllocateMemory",
                                                "vkBindBufferMemory",
                                                "vkAllocateDescriptorSets",
                                                "vkUpdateDescriptorSets"};
    BOOST_TEST((state.calls == attaching));
    BOOST_TEST(state.imported.size() == 1u);
    BOOST_TEST(state.count("VkBuffer") == 2u);
    BOOST_TEST(bell->device_producers() == 1u);

    const vulkan::command_buffer_t cb = state.caller_command_buffer();
    auto recorded = line.record_store(slot(0), cb);
    BOOST_TEST_REQUIRE(recorded.has_value());
    BOOST_TEST(!bell->device_signaled());
    state.run(cb);
    BOOST_TEST(recorded.value().is_complete());
    BOOST_TEST(bell->take_device_signal());
    const vulkan::semaphore_t sem = state.caller_semaphore();
    auto awaited = line.await_semaphore(slot(1), sem, 1);
    BOOST_TEST_REQUIRE(awaited.has_value());
    BOOST_TEST(!bell->device_signaled());
    state.signal(sem, 1);
    BOOST_TEST(awaited.value().is_complete());
    BOOST_TEST(bell->take_device_signal());
    BOOST_TEST(bell->count() == 0u);

    BOOST_TEST(!line.close().has_value());
    BOOST_TEST(bell->device_producers() == 0u);
    BOOST_TEST(bell.use_count() == 2); // kept with the line's memory
    BOOST_TEST(state.imported.size() == 1u);
    r.device->release_closed_lines();
    BOOST_TEST(bell.use_count() == 1);
    BOOST_TEST(state.imported.empty());
    r.device.reset();
    BOOST_TEST(state.live.empty());
}

// Without the extension (not offered, or an adopted device that did not enable it) a line takes
// no doorbell: a coded refusal that says why, and nothing made.
BOOST_FIXTURE_TEST_CASE(without_host_import_a_doorbell_is_unavailable_and_says_why, fixture) {
    state.host_import = false;
    {
        rig r(*this);
        BOOST_TEST(!r.device->can_attach_doorbell());
        BOOST_TEST(!state.host_import_enabled);
        auto refused = r.line->attach_doorbell(std::make_shared<doorbell>());
        BOOST_TEST_REQUIRE(refused.has_value());
        BOOST_TEST(refused->code() == errc::unavailable);
        BOOST_TEST(refused->message().find("does not support VK_EXT_external_memory_host") !=
                   std::string::npos);
        BOOST_TEST(state.count("VkBuffer") == 1u);
        BOOST_TEST(!r.line->attached_doorbell());
        BOOST_TEST(r.line->attach_doorbell(nullptr)->code() == errc::backend);
    }
    // Offered but not enabled at the caller's vkCreateDevice: its entry point does not resolve.
    state.host_import = true;
    state.host_import_enabled = false;
    auto l = loader();
    auto made = vulkan_device::create(*l);
    BOOST_TEST_REQUIRE(made.has_value());
    auto& owner = *made.value();
    state.host_import_enabled = false; // as if the caller's device had not enabled it
    auto adopted = vulkan_device::adopt(*l, {owner.instance(), owner.physical_device(),
                                             owner.device(), owner.queue(), owner.queue_family()});
    BOOST_TEST_REQUIRE(adopted.has_value());
    BOOST_TEST(!adopted.value()->can_attach_doorbell());
    BOOST_TEST(adopted.value()->doorbell_unavailable().find("not enabled") != std::string::npos);
    auto line = vulkan_line::create(*adopted.value());
    BOOST_TEST_REQUIRE(line.has_value());
    auto refused = line.value().attach_doorbell(std::make_shared<doorbell>());
    BOOST_TEST_REQUIRE(refused.has_value());
    BOOST_TEST(refused->code() == errc::unavailable);
    BOOST_TEST(refused->message().find("not enabled") != std::string::npos);
}

// A line that leaks (its store never lands) leaks its doorbell with it: a store may still ring it.
BOOST_FIXTURE_TEST_CASE(a_leaking_line_keeps_its_doorbell_alive, fixture) {
    vulkan_line_options options;
    options.settle_timeout = dur_ns::from_ms(1);
    rig r(*this, options);
    auto bell = std::make_shared<doorbell>();
    BOOST_TEST_REQUIRE(!r.line->attach_doorbell(bell).has_value());
    const vulkan::command_buffer_t cb = state.caller_command_buffer();
    BOOST_TEST_REQUIRE(r.line->record_store(slot(0), cb).has_value()); // never run
    auto e = r.line->close();
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST(r.line->leaked());
    BOOST_TEST(bell.use_count() == 2); // the other reference is leaked on purpose
    r.line.reset();
    BOOST_TEST(bell.use_count() == 2);
}

BOOST_FIXTURE_TEST_CASE(a_lost_device_faults_the_waits_and_the_line_leaks, fixture) {
    rig r(*this);
    vulkan_line& line = *r.line;
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    const vulkan::command_buffer_t cb = state.caller_command_buffer();
    auto pending = line.record_store(slot(0), cb); // never runs
    BOOST_TEST_REQUIRE(pending.has_value());
    std::optional<gpu_async::error_code> got;
    port.async_wait(pending.value(), [&](gpu_async::error_code ec) { got = ec; });
    ctx.poll();
    BOOST_TEST(!got.has_value());
    const vulkan::semaphore_t sem = state.caller_semaphore();
    auto source = vulkan_source::create(line, slot(1), sem);
    BOOST_TEST_REQUIRE(source.has_value());
    source.value().set_target(1);
    BOOST_TEST((source.value().query() == query_result::pending()));
    {
        std::lock_guard lk(state.mutex);
        state.lost = true;
    }
    set_fault_backstop(dur_ns::zero()); // the fixture restores it
    run_to_completion(ctx);
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(*got == errc::device_fault);
    const query_result q = source.value().query();
    BOOST_TEST(q.is_failed());
    BOOST_TEST(q.error == errc::device_fault);
    BOOST_TEST_REQUIRE(source.value().last_error().has_value());
    BOOST_TEST(source.value().last_error()->args().at(1) == "VK_ERROR_DEVICE_LOST");
    BOOST_TEST(source.value().block() == errc::device_fault);
    set_fault_backstop(dur_ns::max());
    const auto closed = line.close();
    BOOST_TEST_REQUIRE(closed.has_value());
    BOOST_TEST(names(closed->message(), "VK_ERROR_DEVICE_LOST"));
    BOOST_TEST(line.leaked());
    BOOST_TEST(state.count("VkDeviceMemory") == 1u); // leaked, never freed
    r.device.reset();
    BOOST_TEST(state.count("VkDevice") == 1u); // a leaked line keeps its device alive
}

// A recorded store whose command buffer never runs: close() waits the settle timeout, then
// leaks the line's memory (its waits ended at once with operation_aborted).
BOOST_FIXTURE_TEST_CASE(a_store_that_never_lands_leaks_at_the_settle_timeout, fixture) {
    vulkan_line_options options;
    options.settle_timeout = dur_ns::from_ms(20);
    rig r(*this, options);
    vulkan_line& line = *r.line;
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    auto pending = line.record_store(slot(4), state.caller_command_buffer());
    BOOST_TEST_REQUIRE(pending.has_value());
    std::optional<gpu_async::error_code> got;
    port.async_wait(pending.value(), [&](gpu_async::error_code ec) { got = ec; });
    ctx.poll();
    const auto closed = line.close();
    BOOST_TEST_REQUIRE(closed.has_value());
    BOOST_TEST(closed->code() == errc::backend);
    BOOST_TEST(names(closed->message(), "slot 4"));
    BOOST_TEST(line.leaked());
    BOOST_TEST(state.count("VkDeviceMemory") == 1u);
    run_to_completion(ctx);
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(*got == asio::error::operation_aborted);
}

// Every call of the scenario that returns a VkResult fails in turn. After each run: the error
// names the failed call (but vkDeviceWaitIdle's, which a device's end tolerates: it destroys
// what it made either way); nothing the driver holds is left behind, except where the failed
// call is a settle's (vkWaitSemaphores, vkQueueWaitIdle), which leaks by design rather than
// free what the device may still use; every wait that started ended exactly once.
BOOST_AUTO_TEST_CASE(sweep_fails_each_call_in_turn) {
    std::vector<std::string> clean;
    {
        fixture f;
        auto loader = f.loader();
        const run_result r = scenario(*loader);
        BOOST_TEST_REQUIRE(r.error.empty(), r.error);
        BOOST_TEST_REQUIRE(r.ends.size() == 3u);
        for (int ends : r.ends)
            BOOST_TEST(ends == 1);
        BOOST_TEST(f.state.live.empty());
        clean = f.state.calls;
    }
    const int fallible = [&] {
        fixture f;
        auto loader = f.loader();
        static_cast<void>(scenario(*loader));
        return f.state.call_count;
    }();
    BOOST_TEST_REQUIRE(fallible > 20);
    BOOST_TEST_MESSAGE("Vulkan sweep: " << clean.size() << " calls, " << fallible
                                        << " that can fail, each failed in turn");
    for (int n = 1; n <= fallible; ++n) {
        fixture f;
        auto loader = f.loader();
        f.state.fail_at = n;
        const run_result r = scenario(*loader);
        const std::string failed = f.state.failed_call;
        BOOST_TEST_REQUIRE(!failed.empty(), "call " << n);
        const bool may_leak = failed == "vkWaitSemaphores" || failed == "vkQueueWaitIdle";
        BOOST_TEST_CONTEXT("call " << n << ": " << failed) {
            if (failed != "vkDeviceWaitIdle")
                BOOST_TEST(names(r.error, failed), "error: " << r.error);
            if (!may_leak) BOOST_TEST(f.state.live.empty(), f.state.live.size() << " left");
            for (int ends : r.ends)
                BOOST_TEST(ends == 1);
        }
    }
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_devices_vulkan_faults
