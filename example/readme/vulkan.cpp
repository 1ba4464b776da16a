// SPDX-License-Identifier: BSL-1.0
// The README's "Vulkan": the store recorded into a command buffer behind the work, awaited through
// the port, on a Vulkan device of the backend's own (lavapipe where there is no GPU), and a
// device of the application's own adopted. Without a loader or a device the program says so and
// exits 0 (nothing links libvulkan); CI has lavapipe, and test/unit/devices/vulkan.cpp runs the
// backend there in full.
#include <gpu_async/asio/vulkan_close.hpp>
#include <gpu_async/device/vulkan.hpp>
#include <gpu_async/gpu_completion_port.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <memory>

namespace asio = boost::asio;
namespace vk = gpu_async::vulkan;

// The application's own Vulkan objects (its VkInstance, VkPhysicalDevice, VkDevice with the
// timelineSemaphore, shaderInt64 and shaderBufferInt64Atomics features enabled, and a queue of a
// family with compute): adopted, never destroyed by the backend.
std::unique_ptr<gpu_async::vulkan_device> adopt(vk::instance_t instance,
                                                vk::physical_device_t physical, vk::device_t device,
                                                vk::queue_t queue, std::uint32_t family) {
    //! [vulkan-adopt]
    const gpu_async::vulkan_loader* loader = gpu_async::vulkan_loader::load().value();
    auto adopted = gpu_async::vulkan_device::adopt(
        *loader, {instance, physical, device, queue, family}); // errc::unavailable: why
    //! [vulkan-adopt]
    return adopted.has_value() ? std::move(adopted).value() : nullptr;
}

// Records the store into `cb` (recording, your work already in it), submits it and awaits it.
asio::awaitable<void> step(gpu_async::gpu_completion_port& port, gpu_async::vulkan_device& device,
                           vk::command_buffer_t cb) {
    //! [vulkan-record]
    auto line = gpu_async::vulkan_line::create(device).value();
    // Your work is recorded into cb; then, still recording:
    auto done = line.record_store(*gpu_async::slot_id::at(0), cb).value();
    device.api().end_command_buffer(cb);
    vk::submit_info submit{};
    submit.command_buffer_count = 1;
    submit.command_buffers = &cb;
    device.submit(1, &submit); // vkQueueSubmit under the lock the backend's own submits take
    co_await port.async_wait(done, asio::use_awaitable);
    //! [vulkan-record]
    std::printf("the command buffer ran to its store: %s\n", done.is_complete() ? "yes" : "no");
    //! [vulkan-close]
    // Without blocking the thread (line.close() would): the device frees the line once its
    // stores have landed, or keeps it for your command buffers (release_closed_lines()).
    co_await gpu_async::async_close(line, port.get_executor(), asio::use_awaitable);
    //! [vulkan-close]
}

int main() {
    auto loader = gpu_async::vulkan_loader::load();
    if (!loader.has_value()) {
        std::printf("skipped: %s\n", loader.error().message().c_str());
        return 0;
    }
    auto device = gpu_async::vulkan_device::create(*loader.value()); // a device of its own
    if (!device.has_value()) {
        std::printf("skipped: %s\n", device.error().message().c_str());
        return 0;
    }
    gpu_async::vulkan_device& d = *device.value();
    const auto& a = d.api();
    vk::command_pool_create_info pool_info{};
    pool_info.queue_family_index = d.queue_family();
    vk::command_pool_t pool{};
    if (a.create_command_pool(d.device(), &pool_info, nullptr, &pool) != vk::success) return 1;
    vk::command_buffer_allocate_info alloc{};
    alloc.command_pool = pool;
    alloc.command_buffer_count = 1;
    vk::command_buffer_t cb{};
    vk::command_buffer_begin_info begin{};
    if (a.allocate_command_buffers(d.device(), &alloc, &cb) != vk::success ||
        a.begin_command_buffer(cb, &begin) != vk::success)
        return 1;
    static_cast<void>(&adopt);
    int rc = 1;
    {
        asio::io_context ctx;
        gpu_async::gpu_completion_port port(ctx);
        asio::co_spawn(ctx, step(port, d, cb), [&](std::exception_ptr e) { rc = e ? 1 : 0; });
        ctx.run_for(std::chrono::seconds(30));
    }
    // The line closed in step(); the device keeps its memory (the command buffer named it) until
    // the command buffer is done: after the queue is idle.
    a.queue_wait_idle(d.queue());
    d.release_closed_lines();
    a.destroy_command_pool(d.device(), pool, nullptr);
    std::printf("Vulkan device %s: %s\n", d.name().c_str(), rc == 0 ? "done" : "failed");
    return rc;
}
