// SPDX-License-Identifier: BSL-1.0
//
// bench/common/vulkan_spin.hpp: real compute work of a requested length for the demo and the
// benchmark's Vulkan cell: the spin shader (vulkan_spin.comp) recorded as one dispatch per 65535
// iterations (lavapipe ends a shader loop there), with iterations per microsecond measured once
// on the device (calibrate()). Through the backend's own entry points: no Vulkan header needed.
//
#ifndef GPU_ASYNC_BENCH_COMMON_VULKAN_SPIN_HPP
#define GPU_ASYNC_BENCH_COMMON_VULKAN_SPIN_HPP

#include "stats.hpp"
#include "vulkan_spin_spirv.hpp"

#include <gpu_async/core/error.hpp>
#include <gpu_async/device/vulkan.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpu_async::bench {

/// The spin shader's pipeline over a host-visible buffer of its own. Record with record(); the
/// caller submits. Not thread-safe; the device must outlive it, and every command buffer it was
/// recorded into must have completed before it goes.
class vulkan_spin {
public:
    /// The most iterations one dispatch runs (lavapipe ends a shader loop after 65535).
    static constexpr std::uint32_t max_iterations = 65535;

    explicit vulkan_spin(vulkan_device& device)
        : device_(&device)
        , a_(&device.api())
        , dev_(device.device()) {}
    vulkan_spin(const vulkan_spin&) = delete;
    vulkan_spin& operator=(const vulkan_spin&) = delete;
    ~vulkan_spin() {
        if (pipeline_ != vulkan::pipeline_t{}) a_->destroy_pipeline(dev_, pipeline_, nullptr);
        if (shader_ != vulkan::shader_module_t{}) a_->destroy_shader_module(dev_, shader_, nullptr);
        if (layout_ != vulkan::pipeline_layout_t{})
            a_->destroy_pipeline_layout(dev_, layout_, nullptr);
        if (pool_ != vulkan::descriptor_pool_t{}) a_->destroy_descriptor_pool(dev_, pool_, nullptr);
        if (set_layout_ != vulkan::descriptor_set_layout_t{})
            a_->destroy_descriptor_set_layout(dev_, set_layout_, nullptr);
        if (buffer_ != vulkan::buffer_t{}) a_->destroy_buffer(dev_, buffer_, nullptr);
        if (memory_ != vulkan::device_memory_t{}) a_->free_memory(dev_, memory_, nullptr);
    }

    /// Makes the pipeline and measures the iterations per microsecond: errc::driver_status
    /// naming the call that failed, or errc::unavailable.
    std::optional<coded_error> open() {
        if (auto e = make()) return e;
        return calibrate();
    }

    /// Records `us` microseconds of work into `cb` (recording): the dispatches it takes.
    void record(vulkan::command_buffer_t cb, unsigned us) const {
        const std::uint64_t n = static_cast<std::uint64_t>(us) * iterations_per_ms_ / 1000;
        record_iterations(cb, us > 0 ? std::max<std::uint64_t>(n, 1) : 0);
    }

    /// Iterations the device runs in a millisecond (calibrate()).
    std::uint64_t iterations_per_ms() const noexcept { return iterations_per_ms_; }

private:
    void record_iterations(vulkan::command_buffer_t cb, std::uint64_t left) const {
        a_->cmd_bind_pipeline(cb, vulkan::pipeline_bind_point_compute, pipeline_);
        a_->cmd_bind_descriptor_sets(cb, vulkan::pipeline_bind_point_compute, layout_, 0, 1, &set_,
                                     0, nullptr);
        while (left > 0) {
            const auto n =
                static_cast<std::uint32_t>(std::min<std::uint64_t>(left, max_iterations));
            a_->cmd_push_constants(cb, layout_, vulkan::shader_stage_compute_bit, 0, sizeof(n), &n);
            a_->cmd_dispatch(cb, 1, 1, 1);
            left -= n;
        }
    }

    std::optional<coded_error> fail(const char* call, vulkan::result_t r) const {
        return device_->error(call, r);
    }

    // Times a command buffer of `runs` full dispatches, submitted and awaited on a timeline
    // semaphore: the median of five runs after a first (which may still compile the shader).
    std::optional<coded_error> calibrate() {
        const auto& a = *a_;
        vulkan::command_pool_create_info pool_info{};
        pool_info.queue_family_index = device_->queue_family();
        vulkan::command_pool_t pool{};
        if (auto r = a.create_command_pool(dev_, &pool_info, nullptr, &pool); r != vulkan::success)
            return fail("vkCreateCommandPool", r);
        vulkan::semaphore_type_create_info type{};
        type.semaphore_type = vulkan::semaphore_type_timeline;
        vulkan::semaphore_create_info sem_info{};
        sem_info.next = &type;
        vulkan::semaphore_t sem{};
        if (auto r = a.create_semaphore(dev_, &sem_info, nullptr, &sem); r != vulkan::success) {
            a.destroy_command_pool(dev_, pool, nullptr);
            return fail("vkCreateSemaphore", r);
        }
        std::optional<coded_error> error;
        std::vector<std::uint64_t> per_ms;
        constexpr std::uint32_t runs = 4;
        for (std::uint64_t value = 1; value <= 6 && !error; ++value) {
            vulkan::command_buffer_allocate_info alloc{};
            alloc.command_pool = pool;
            alloc.command_buffer_count = 1;
            vulkan::command_buffer_t cb{};
            if (auto r = a.allocate_command_buffers(dev_, &alloc, &cb); r != vulkan::success) {
                error = fail("vkAllocateCommandBuffers", r);
                break;
            }
            vulkan::command_buffer_begin_info begin{};
            begin.flags = vulkan::command_buffer_usage_one_time_submit_bit;
            static_cast<void>(a.begin_command_buffer(cb, &begin));
            record_iterations(cb, std::uint64_t{runs} * max_iterations);
            static_cast<void>(a.end_command_buffer(cb));
            vulkan::timeline_semaphore_submit_info timeline{};
            timeline.signal_semaphore_value_count = 1;
            timeline.signal_semaphore_values = &value;
            vulkan::submit_info submit{};
            submit.next = &timeline;
            submit.command_buffer_count = 1;
            submit.command_buffers = &cb;
            submit.signal_semaphore_count = 1;
            submit.signal_semaphores = &sem;
            const std::uint64_t t0 = now_ns();
            if (auto r = device_->submit(1, &submit); r != vulkan::success) {
                error = fail("vkQueueSubmit", r);
                break;
            }
            vulkan::semaphore_wait_info wait{};
            wait.semaphore_count = 1;
            wait.semaphores = &sem;
            wait.values = &value;
            if (auto r = a.wait_semaphores(dev_, &wait, 60'000'000'000ull); r != vulkan::success) {
                error = fail("vkWaitSemaphores", r);
                break;
            }
            const std::uint64_t ns = std::max<std::uint64_t>(now_ns() - t0, 1);
            if (value > 1) per_ms.push_back(1'000'000ull * runs * max_iterations / ns);
        }
        static_cast<void>(a.device_wait_idle(dev_));
        a.destroy_semaphore(dev_, sem, nullptr);
        a.destroy_command_pool(dev_, pool, nullptr);
        if (error) return error;
        std::sort(per_ms.begin(), per_ms.end());
        iterations_per_ms_ = std::max<std::uint64_t>(per_ms[per_ms.size() / 2], 1);
        return std::nullopt;
    }

    std::optional<coded_error> make() {
        const auto& a = *a_;
        vulkan::buffer_create_info buffer_info{};
        buffer_info.size = 8;
        buffer_info.usage = vulkan::buffer_usage_storage_buffer_bit;
        if (auto r = a.create_buffer(dev_, &buffer_info, nullptr, &buffer_); r != vulkan::success)
            return fail("vkCreateBuffer", r);
        vulkan::memory_requirements needs{};
        a.get_buffer_memory_requirements(dev_, buffer_, &needs);
        vulkan::physical_device_memory_properties props{};
        device_->instance_api().get_physical_device_memory_properties(device_->physical_device(),
                                                                      &props);
        std::uint32_t type = 0;
        while (type < props.memory_type_count && (needs.memory_type_bits & (1u << type)) == 0)
            ++type;
        if (type == props.memory_type_count)
            return coded_error(errc::unavailable, {"memory for the spin shader's buffer", ""});
        vulkan::memory_allocate_info alloc{};
        alloc.allocation_size = needs.size;
        alloc.memory_type_index = type;
        if (auto r = a.allocate_memory(dev_, &alloc, nullptr, &memory_); r != vulkan::success)
            return fail("vkAllocateMemory", r);
        if (auto r = a.bind_buffer_memory(dev_, buffer_, memory_, 0); r != vulkan::success)
            return fail("vkBindBufferMemory", r);

        vulkan::descriptor_set_layout_binding binding{};
        binding.descriptor_type = vulkan::descriptor_type_storage_buffer;
        binding.descriptor_count = 1;
        binding.stage_flags = vulkan::shader_stage_compute_bit;
        vulkan::descriptor_set_layout_create_info set_info{};
        set_info.binding_count = 1;
        set_info.bindings = &binding;
        if (auto r = a.create_descriptor_set_layout(dev_, &set_info, nullptr, &set_layout_);
            r != vulkan::success)
            return fail("vkCreateDescriptorSetLayout", r);
        vulkan::descriptor_pool_size size{};
        size.type = vulkan::descriptor_type_storage_buffer;
        size.descriptor_count = 1;
        vulkan::descriptor_pool_create_info pool_info{};
        pool_info.max_sets = 1;
        pool_info.pool_size_count = 1;
        pool_info.pool_sizes = &size;
        if (auto r = a.create_descriptor_pool(dev_, &pool_info, nullptr, &pool_);
            r != vulkan::success)
            return fail("vkCreateDescriptorPool", r);
        vulkan::descriptor_set_allocate_info alloc_set{};
        alloc_set.descriptor_pool = pool_;
        alloc_set.descriptor_set_count = 1;
        alloc_set.set_layouts = &set_layout_;
        if (auto r = a.allocate_descriptor_sets(dev_, &alloc_set, &set_); r != vulkan::success)
            return fail("vkAllocateDescriptorSets", r);
        vulkan::descriptor_buffer_info ref{};
        ref.buffer = buffer_;
        ref.range = vulkan::whole_size;
        vulkan::write_descriptor_set write{};
        write.dst_set = set_;
        write.descriptor_count = 1;
        write.descriptor_type = vulkan::descriptor_type_storage_buffer;
        write.buffer_info = &ref;
        a.update_descriptor_sets(dev_, 1, &write, 0, nullptr);

        vulkan::push_constant_range range{};
        range.stage_flags = vulkan::shader_stage_compute_bit;
        range.size = sizeof(std::uint32_t);
        vulkan::pipeline_layout_create_info layout_info{};
        layout_info.set_layout_count = 1;
        layout_info.set_layouts = &set_layout_;
        layout_info.push_constant_range_count = 1;
        layout_info.push_constant_ranges = &range;
        if (auto r = a.create_pipeline_layout(dev_, &layout_info, nullptr, &layout_);
            r != vulkan::success)
            return fail("vkCreatePipelineLayout", r);
        vulkan::shader_module_create_info shader_info{};
        shader_info.code_size = sizeof(vulkan_spin_spirv);
        shader_info.code = vulkan_spin_spirv;
        if (auto r = a.create_shader_module(dev_, &shader_info, nullptr, &shader_);
            r != vulkan::success)
            return fail("vkCreateShaderModule", r);
        vulkan::compute_pipeline_create_info pipeline_info{};
        pipeline_info.stage.stage = vulkan::shader_stage_compute_bit;
        pipeline_info.stage.module = shader_;
        pipeline_info.stage.name = "main";
        pipeline_info.layout = layout_;
        if (auto r = a.create_compute_pipelines(dev_, {}, 1, &pipeline_info, nullptr, &pipeline_);
            r != vulkan::success)
            return fail("vkCreateComputePipelines", r);
        return std::nullopt;
    }

    vulkan_device* device_;
    const vulkan::device_api* a_;
    vulkan::device_t dev_;
    vulkan::buffer_t buffer_{};
    vulkan::device_memory_t memory_{};
    vulkan::descriptor_set_layout_t set_layout_{};
    vulkan::descriptor_pool_t pool_{};
    vulkan::descriptor_set_t set_{};
    vulkan::pipeline_layout_t layout_{};
    vulkan::shader_module_t shader_{};
    vulkan::pipeline_t pipeline_{};
    std::uint64_t iterations_per_ms_ = 1;
};

} // namespace gpu_async::bench

#endif // GPU_ASYNC_BENCH_COMMON_VULKAN_SPIN_HPP
