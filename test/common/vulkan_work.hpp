// SPDX-License-Identifier: BSL-1.0
//
// test/common/vulkan_work.hpp: real Vulkan device work for the Vulkan tests (test/unit/devices/
// vulkan.cpp): whether a device is here, a device of the tests' own, and the spin shader
// (bench/common/vulkan_spin.comp) as work that runs for a number of iterations, optionally held
// back until the test opens a gate. Everything goes through the backend's own entry points: no
// Vulkan header is needed.
//
#ifndef GPU_ASYNC_TEST_COMMON_VULKAN_WORK_HPP
#define GPU_ASYNC_TEST_COMMON_VULKAN_WORK_HPP

#include <gpu_async/device/vulkan.hpp>

#include "../../bench/common/vulkan_spin_spirv.hpp"

#include <boost/test/unit_test.hpp>

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpu_async::test {

/// Keeps every Vulkan driver loaded now (a module with vk_icdGetInstanceProcAddr) loaded for the
/// process's life. The loader unloads a driver when the last instance goes, and the driver's own
/// allocations that only its globals reach would then read as leaks to LeakSanitizer, from a
/// module it can no longer name (lavapipe: 128 bytes a device). Pinned, the driver's globals
/// still reach them at exit. (A device kept alive instead would do it too, but lavapipe then
/// holds 48 bytes that LeakSanitizer cannot see reached.)
inline void pin_vulkan_drivers() {
    std::vector<std::string> names;
    ::dl_iterate_phdr(
        [](::dl_phdr_info* info, std::size_t, void* out) -> int {
            if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0')
                static_cast<std::vector<std::string>*>(out)->emplace_back(info->dlpi_name);
            return 0;
        },
        &names);
    for (const std::string& name : names) { // dlopen outside the iteration's lock
        void* handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_NOLOAD);
        if (handle == nullptr) continue;
        if (::dlsym(handle, "vk_icdGetInstanceProcAddr") == nullptr)
            ::dlclose(handle); // not a driver: the reference is given back
        // A driver: the reference is never given back.
    }
}

/// Why there is no Vulkan device here: empty when the loader loads and a device can be made
/// (vulkan_device::create). Asked once; pins the drivers it finds (pin_vulkan_drivers).
inline const std::string& vulkan_missing() {
    static const std::string why = [] {
        auto loader = vulkan_loader::load();
        if (!loader.has_value()) return loader.error().message();
        auto device = vulkan_device::create(*loader.value());
        if (!device.has_value()) return device.error().message();
        pin_vulkan_drivers(); // while the device's instance holds the driver loaded
        return std::string();
    }();
    return why;
}

/// Whether CI runs the tests (the environment's CI is "true").
inline bool under_ci() {
    const char* ci = std::getenv("CI");
    return ci != nullptr && std::string_view(ci) == "true";
}

/// A Boost.Test precondition: the Vulkan tests run where a device is found and are reported as
/// skipped, with the reason, elsewhere; under CI they always run, and so fail without a device
/// (CI must run them on a real driver: Mesa's lavapipe).
inline boost::test_tools::assertion_result vulkan_device_here(boost::unit_test::test_unit_id) {
    if (under_ci()) return true;
    boost::test_tools::assertion_result r(vulkan_missing().empty());
    r.message() << "no Vulkan device here: " << vulkan_missing();
    return r;
}

/// The message of `r`'s error, or "" when it holds a value: for assertion messages, which
/// Boost.Test builds whether or not the assertion holds.
template <class T>
std::string error_of(const result<T>& r) {
    return r.has_value() ? std::string() : r.error().message();
}

/// A device of the test's own (vulkan_device::create); fails the test where none can be made.
inline std::unique_ptr<vulkan_device> make_vulkan_device() {
    static_cast<void>(vulkan_missing()); // pins the driver (see pin_vulkan_drivers)
    auto loader = vulkan_loader::load();
    BOOST_TEST_REQUIRE(loader.has_value(), "no Vulkan loader: " << error_of(loader));
    auto device = vulkan_device::create(*loader.value());
    BOOST_TEST_REQUIRE(device.has_value(), "no Vulkan device: " << error_of(device));
    return std::move(device).value();
}

/// Device work: the spin shader over a host-visible buffer (`spins`, `runs`), its pipeline, a
/// command pool, a timeline semaphore that every submission signals, and the gate: a timeline
/// semaphore that gated submissions wait for (at 1) before they run, which open() signals from
/// the host. (A gate in memory that a shader loop polls would not hold on lavapipe, which ends a
/// shader loop after 65535 iterations.) A gated submission holds back the queue's later work
/// too: queues run their batches in order. Not thread-safe (one per thread), but for open().
/// Construction records its first failure (ok(), error()) instead of throwing; a later call that
/// fails throws std::runtime_error. The destructor opens the gate, waits for every submission,
/// then destroys what was made.
class spin_work {
public:
    explicit spin_work(vulkan_device& device)
        : device_(&device)
        , a_(&device.api())
        , dev_(device.device()) {
        make();
    }
    spin_work(const spin_work&) = delete;
    spin_work& operator=(const spin_work&) = delete;
    ~spin_work() {
        open();
        static_cast<void>(wait_idle());
        // The queue drains before the semaphores go: a driver may still touch a batch's
        // semaphores just after its signal is seen (Mesa's emulated timelines, lavapipe's
        // among them, release their wait points then). Nothing else submits at this point.
        if (pool_ != vulkan::command_pool_t{})
            static_cast<void>(a_->queue_wait_idle(device_->queue()));
        for (vulkan::semaphore_t s : semaphores_)
            a_->destroy_semaphore(dev_, s, nullptr);
        if (done_ != vulkan::semaphore_t{}) a_->destroy_semaphore(dev_, done_, nullptr);
        if (gate_ != vulkan::semaphore_t{}) a_->destroy_semaphore(dev_, gate_, nullptr);
        if (pool_ != vulkan::command_pool_t{}) a_->destroy_command_pool(dev_, pool_, nullptr);
        if (pipeline_ != vulkan::pipeline_t{}) a_->destroy_pipeline(dev_, pipeline_, nullptr);
        if (shader_ != vulkan::shader_module_t{}) a_->destroy_shader_module(dev_, shader_, nullptr);
        if (layout_ != vulkan::pipeline_layout_t{})
            a_->destroy_pipeline_layout(dev_, layout_, nullptr);
        if (descriptors_ != vulkan::descriptor_pool_t{})
            a_->destroy_descriptor_pool(dev_, descriptors_, nullptr);
        if (set_layout_ != vulkan::descriptor_set_layout_t{})
            a_->destroy_descriptor_set_layout(dev_, set_layout_, nullptr);
        if (words_ != nullptr) a_->unmap_memory(dev_, memory_);
        if (buffer_ != vulkan::buffer_t{}) a_->destroy_buffer(dev_, buffer_, nullptr);
        if (memory_ != vulkan::device_memory_t{}) a_->free_memory(dev_, memory_, nullptr);
    }

    bool ok() const noexcept { return error_.empty(); }
    const std::string& error() const noexcept { return error_; }

    /// A new primary command buffer, recording.
    vulkan::command_buffer_t begin() {
        vulkan::command_buffer_allocate_info info{};
        info.command_pool = pool_;
        info.command_buffer_count = 1;
        vulkan::command_buffer_t cb = nullptr;
        check(a_->allocate_command_buffers(dev_, &info, &cb), "vkAllocateCommandBuffers");
        vulkan::command_buffer_begin_info begin{};
        begin.flags = vulkan::command_buffer_usage_one_time_submit_bit;
        check(a_->begin_command_buffer(cb, &begin), "vkBeginCommandBuffer");
        return cb;
    }

    /// Records one run of the spin shader: `iterations` atomic adds (below 65536, see the
    /// shader).
    void spin(vulkan::command_buffer_t cb, std::uint32_t iterations) {
        a_->cmd_bind_pipeline(cb, vulkan::pipeline_bind_point_compute, pipeline_);
        a_->cmd_bind_descriptor_sets(cb, vulkan::pipeline_bind_point_compute, layout_, 0, 1, &set_,
                                     0, nullptr);
        a_->cmd_push_constants(cb, layout_, vulkan::shader_stage_compute_bit, 0, sizeof(iterations),
                               &iterations);
        a_->cmd_dispatch(cb, 1, 1, 1);
    }

    /// Ends `cb` and submits it through the device's queue lock; the submission signals the
    /// work's own semaphore and, when given, `semaphore` at `value`.
    void submit(vulkan::command_buffer_t cb, vulkan::semaphore_t semaphore = {},
                std::uint64_t value = 0) {
        submit(cb, semaphore, value, false);
    }

    /// As submit(), the submission held back until open().
    void submit_gated(vulkan::command_buffer_t cb, vulkan::semaphore_t semaphore = {},
                      std::uint64_t value = 0) {
        submit(cb, semaphore, value, true);
    }

    /// A timeline semaphore at 0, destroyed with the work.
    vulkan::semaphore_t make_timeline() {
        vulkan::semaphore_t s{};
        vulkan::semaphore_type_create_info type{};
        type.semaphore_type = vulkan::semaphore_type_timeline;
        vulkan::semaphore_create_info info{};
        info.next = &type;
        check(a_->create_semaphore(dev_, &info, nullptr, &s), "vkCreateSemaphore");
        semaphores_.push_back(s);
        return s;
    }

    /// Signals `semaphore` at `value` from the host.
    void signal(vulkan::semaphore_t semaphore, std::uint64_t value) {
        vulkan::semaphore_signal_info info{};
        info.semaphore = semaphore;
        info.value = value;
        check(a_->signal_semaphore(dev_, &info), "vkSignalSemaphore");
    }

    /// Lets the gated submissions through, now and later (once; any thread).
    void open() noexcept {
        if (gate_ == vulkan::semaphore_t{} || opened_.exchange(true)) return;
        vulkan::semaphore_signal_info info{};
        info.semaphore = gate_;
        info.value = 1;
        static_cast<void>(a_->signal_semaphore(dev_, &info));
    }
    /// Runs finished, and iterations run in all.
    std::uint32_t runs() const noexcept { return std::atomic_ref<std::uint32_t>(words_[1]).load(); }
    std::uint32_t spins() const noexcept {
        return std::atomic_ref<std::uint32_t>(words_[0]).load();
    }

    /// Waits (at most 60 s) until every submission so far has run; false on a timeout or error.
    bool wait_idle() noexcept {
        if (done_ == vulkan::semaphore_t{} || submitted_ == 0) return true;
        vulkan::semaphore_wait_info info{};
        info.semaphore_count = 1;
        info.semaphores = &done_;
        info.values = &submitted_;
        return a_->wait_semaphores(dev_, &info, 60'000'000'000ull) == vulkan::success;
    }

private:
    // Throws rather than use Boost.Test's assertions, which are not for other threads (the
    // work is used from coroutines on a context's threads).
    static void check(vulkan::result_t r, const char* call) {
        if (r != vulkan::success)
            throw std::runtime_error(std::string(call) +
                                     " failed: " + vulkan_loader::result_name(r));
    }

    void submit(vulkan::command_buffer_t cb, vulkan::semaphore_t semaphore, std::uint64_t value,
                bool gated) {
        check(a_->end_command_buffer(cb), "vkEndCommandBuffer");
        const std::uint64_t mine = ++submitted_;
        const vulkan::semaphore_t signal[2] = {done_, semaphore};
        const std::uint64_t values[2] = {mine, value};
        const std::uint32_t count = semaphore != vulkan::semaphore_t{} ? 2 : 1;
        const std::uint64_t gate_value = 1;
        const vulkan::flags_t gate_stage = vulkan::pipeline_stage_all_commands_bit;
        vulkan::timeline_semaphore_submit_info timeline{};
        timeline.signal_semaphore_value_count = count;
        timeline.signal_semaphore_values = values;
        vulkan::submit_info info{};
        info.next = &timeline;
        if (gated) {
            timeline.wait_semaphore_value_count = 1;
            timeline.wait_semaphore_values = &gate_value;
            info.wait_semaphore_count = 1;
            info.wait_semaphores = &gate_;
            info.wait_dst_stage_mask = &gate_stage;
        }
        info.command_buffer_count = 1;
        info.command_buffers = &cb;
        info.signal_semaphore_count = count;
        info.signal_semaphores = signal;
        check(device_->submit(1, &info), "vkQueueSubmit");
    }

    // Records the first failure rather than throw from the constructor.
    bool made(vulkan::result_t r, const char* call) {
        if (r == vulkan::success) return true;
        if (error_.empty()) error_ = std::string(call) + ": " + vulkan_loader::result_name(r);
        return false;
    }

    void make() {
        const auto& a = *a_;
        vulkan::buffer_create_info buffer_info{};
        buffer_info.size = 8;
        buffer_info.usage = vulkan::buffer_usage_storage_buffer_bit;
        if (!made(a.create_buffer(dev_, &buffer_info, nullptr, &buffer_), "vkCreateBuffer")) return;
        vulkan::memory_requirements needs{};
        a.get_buffer_memory_requirements(dev_, buffer_, &needs);
        vulkan::physical_device_memory_properties props{};
        device_->instance_api().get_physical_device_memory_properties(device_->physical_device(),
                                                                      &props);
        const vulkan::flags_t want =
            vulkan::memory_property_host_visible_bit | vulkan::memory_property_host_coherent_bit;
        std::uint32_t type = 0;
        while (type < props.memory_type_count &&
               ((needs.memory_type_bits & (1u << type)) == 0 ||
                (props.memory_types[type].property_flags & want) != want))
            ++type;
        if (type == props.memory_type_count) {
            error_ = "no host-visible coherent memory for the gate";
            return;
        }
        vulkan::memory_allocate_info alloc{};
        alloc.allocation_size = needs.size;
        alloc.memory_type_index = type;
        if (!made(a.allocate_memory(dev_, &alloc, nullptr, &memory_), "vkAllocateMemory") ||
            !made(a.bind_buffer_memory(dev_, buffer_, memory_, 0), "vkBindBufferMemory"))
            return;
        void* mapped = nullptr;
        if (!made(a.map_memory(dev_, memory_, 0, vulkan::whole_size, 0, &mapped), "vkMapMemory"))
            return;
        words_ = static_cast<std::uint32_t*>(mapped);
        words_[0] = 0;
        words_[1] = 0;

        vulkan::descriptor_set_layout_binding binding{};
        binding.descriptor_type = vulkan::descriptor_type_storage_buffer;
        binding.descriptor_count = 1;
        binding.stage_flags = vulkan::shader_stage_compute_bit;
        vulkan::descriptor_set_layout_create_info set_info{};
        set_info.binding_count = 1;
        set_info.bindings = &binding;
        if (!made(a.create_descriptor_set_layout(dev_, &set_info, nullptr, &set_layout_),
                  "vkCreateDescriptorSetLayout"))
            return;
        vulkan::descriptor_pool_size size{};
        size.type = vulkan::descriptor_type_storage_buffer;
        size.descriptor_count = 1;
        vulkan::descriptor_pool_create_info pool_info{};
        pool_info.max_sets = 1;
        pool_info.pool_size_count = 1;
        pool_info.pool_sizes = &size;
        if (!made(a.create_descriptor_pool(dev_, &pool_info, nullptr, &descriptors_),
                  "vkCreateDescriptorPool"))
            return;
        vulkan::descriptor_set_allocate_info alloc_set{};
        alloc_set.descriptor_pool = descriptors_;
        alloc_set.descriptor_set_count = 1;
        alloc_set.set_layouts = &set_layout_;
        if (!made(a.allocate_descriptor_sets(dev_, &alloc_set, &set_), "vkAllocateDescriptorSets"))
            return;
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
        if (!made(a.create_pipeline_layout(dev_, &layout_info, nullptr, &layout_),
                  "vkCreatePipelineLayout"))
            return;
        vulkan::shader_module_create_info shader_info{};
        shader_info.code_size = sizeof(bench::vulkan_spin_spirv);
        shader_info.code = bench::vulkan_spin_spirv;
        if (!made(a.create_shader_module(dev_, &shader_info, nullptr, &shader_),
                  "vkCreateShaderModule"))
            return;
        vulkan::compute_pipeline_create_info pipeline_info{};
        pipeline_info.stage.stage = vulkan::shader_stage_compute_bit;
        pipeline_info.stage.module = shader_;
        pipeline_info.stage.name = "main";
        pipeline_info.layout = layout_;
        if (!made(a.create_compute_pipelines(dev_, {}, 1, &pipeline_info, nullptr, &pipeline_),
                  "vkCreateComputePipelines"))
            return;

        vulkan::command_pool_create_info command_info{};
        command_info.queue_family_index = device_->queue_family();
        if (!made(a.create_command_pool(dev_, &command_info, nullptr, &pool_),
                  "vkCreateCommandPool"))
            return;
        vulkan::semaphore_type_create_info type_info{};
        type_info.semaphore_type = vulkan::semaphore_type_timeline;
        vulkan::semaphore_create_info semaphore_info{};
        semaphore_info.next = &type_info;
        if (!made(a.create_semaphore(dev_, &semaphore_info, nullptr, &done_), "vkCreateSemaphore"))
            return;
        static_cast<void>(
            made(a.create_semaphore(dev_, &semaphore_info, nullptr, &gate_), "vkCreateSemaphore"));
    }

    vulkan_device* device_;
    const vulkan::device_api* a_;
    vulkan::device_t dev_;
    std::string error_;
    vulkan::buffer_t buffer_{};
    vulkan::device_memory_t memory_{};
    std::uint32_t* words_ = nullptr;
    vulkan::descriptor_set_layout_t set_layout_{};
    vulkan::descriptor_pool_t descriptors_{};
    vulkan::descriptor_set_t set_{};
    vulkan::pipeline_layout_t layout_{};
    vulkan::shader_module_t shader_{};
    vulkan::pipeline_t pipeline_{};
    vulkan::command_pool_t pool_{};
    vulkan::semaphore_t done_{};
    vulkan::semaphore_t gate_{};
    std::atomic<bool> opened_{false};
    std::uint64_t submitted_ = 0;
    std::vector<vulkan::semaphore_t> semaphores_;
};

} // namespace gpu_async::test

#endif // GPU_ASYNC_TEST_COMMON_VULKAN_WORK_HPP
