// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The Vulkan backend: the loader found at run time, a completion line
/// a Vulkan device stores into, the store behind a command buffer or a timeline semaphore, and
/// a completion source over a timeline semaphore.
///
/// Nothing links libvulkan: `vulkan_loader::load()` opens "libvulkan.so.1" by name with dlopen
/// and takes vkGetInstanceProcAddr with dlsym; every other entry point comes through it
/// (vkGetInstanceProcAddr, then vkGetDeviceProcAddr for the device's). No Vulkan header is needed
/// (<gpu_async/device/vulkan_api.hpp> declares the ABI used, checked against vulkan_core.h), and
/// a VkInstance, VkDevice, VkQueue, VkCommandBuffer or VkSemaphore converts without a cast. A
/// machine without a loader, a device or a feature learns so at run time, as errc::unavailable
/// naming what is missing.
///
///     auto loader = gpu_async::vulkan_loader::load();       // errc::unavailable without one
///     // your objects (the common case), or vulkan_device::create(loader) for a device of its own
///     auto device = gpu_async::vulkan_device::adopt(*loader.value(), {instance, physical,
///                                                    vk_device, queue, queue_family});
///     auto line = gpu_async::vulkan_line::create(*device.value()).value();
///     // record your work into cmd, then, still recording:
///     auto done = line.record_store(*slot_id::at(0), cmd).value();  // submit cmd as usual
///     co_await port.async_wait(done, asio::use_awaitable);
///     // or behind a timeline value your own submissions signal:
///     auto signalled = line.await_semaphore(*slot_id::at(1), timeline, 42).value();
///
/// Requirements: Vulkan 1.2 (instance and device), a queue family with compute, and the features
/// timelineSemaphore, shaderInt64 and shaderBufferInt64Atomics (the store is a 64-bit atomic, so
/// the host never reads half a number). A device without one is refused with errc::unavailable
/// naming it. A device you make must have them enabled at vkCreateDevice (Vulkan cannot tell a
/// library what was enabled; adopt() checks only that the device supports them).
///
/// The line's memory: the device allocates it (vkAllocateMemory, HOST_VISIBLE | HOST_COHERENT,
/// preferring HOST_CACHED and not DEVICE_LOCAL: system memory the host polls cheaply and a
/// user-mode monitor can watch) and the line is mapped at offset 0 of the mapping, which Vulkan
/// aligns to minMemoryMapAlignment (at least 64 bytes). It is a storage buffer bound to one
/// descriptor set of the line's own. (Importing the library's own line with
/// VK_EXT_external_memory_host was not chosen: the import needs an alignment of the host pointer
/// that devices set, often a whole page, and an extension not every device has.)
///
/// The stores. Each is a tiny compute dispatch (shader in device/detail/vulkan_line_store.comp,
/// its SPIR-V checked in: no shader compiler at run time) storing the slot's next sequence
/// number with one 64-bit atomic store, between two pipeline barriers: the first orders it after
/// every earlier command of the queue (ALL_COMMANDS, MEMORY_WRITE) and makes their writes
/// available to the host (HOST_READ), the second makes the store itself available to the host.
/// - `record_store(slot, command_buffer)` records that into your command buffer (recording,
///   outside a render pass, of a queue family with compute), behind your work; you submit it.
///   It binds the backend's compute pipeline, descriptor set and push constants: rebind yours
///   before later dispatches in the same command buffer.
/// - `await_semaphore(slot, semaphore, value)` submits, on the device's queue, a small batch
///   that waits for your timeline semaphore to reach `value` and then stores (the analogue of
///   cuda_event_waiter): your submissions signal the semaphore behind the work to await. The
///   batch also signals the line's own timeline semaphore (`timeline()`) at `submitted()`.
///   A queue runs its batches in order on most implementations (lavapipe, and GPUs' hardware
///   queues), so the batch holds back the queue's later work until the value is reached: submit
///   the work that signals the value first (or signal it from another queue or the host), or
///   give the backend a queue of its own; a value signalled only by work submitted later to the
///   same queue never comes.
/// A slot's stores must run in the order they were made: record them into command buffers you
/// submit in that order to one queue (or await on the line's queue alone); a slot's store by the
/// other way is refused (errc::backend) until the slot's last store has landed.
///
/// Memory lifetime: the line's memory is never freed while a store it made may still reach it,
/// nor its objects destroyed while the device may still use them. close() (and the device's
/// destructor for its lines still open)
/// 1. unregisters the line's health query, then retires the line (gpu_async::retire_line: every
///    pending wait on it ends, with success where its word reached the target, else with
///    operation_aborted, and no reactor reads it again);
/// 2. settles it: waits (vkWaitSemaphores) until the line's own timeline semaphore reaches
///    `submitted()`, the value its last await_semaphore batch signals, and until each slot's word
///    reaches the last number record_store recorded (the word is that store's own landing: a
///    slot's stores land in order), for at most `settle_timeout`; then, if it submitted
///    batches, waits for the device's queue to go idle (vkQueueWaitIdle under the queue's lock:
///    a driver may still touch a batch's semaphores just after its signal is seen);
/// 3. only then destroys the objects of its batches and frees its memory. The memory, buffer and
///    descriptor set of a line that a store was ever recorded for (whatever way its slots' later
///    stores were made) are kept by the device instead: your command buffers refer to them and
///    may still be pending after the store landed, and only you know when they finish. They go at
///    vulkan_device::release_closed_lines() or with the device (after vkDeviceWaitIdle, on a device
///    of its own).
/// When the settle times out or the device is lost, close() leaks the line's memory and objects
/// (leaked() is true; the device then leaks its own objects and, if it made them, the device and
/// the instance) rather than free memory a store may reach. So submit the command buffers you
/// recorded stores into before closing the line (a command buffer never submitted keeps close()
/// waiting for its store until the timeout), and destroy a vulkan_device that adopted your
/// device, then your VkDevice, only after your command buffers have completed.
///
/// Closing without blocking: close() blocks its thread until the stores land. The line's
/// destructor, start_close() and gpu_async::async_close (<gpu_async/asio/vulkan_close.hpp>, the
/// Asio layer) never do: they take step 1 at once and hand the line to its device, which takes
/// step 2 by looking (vkGetSemaphoreCounterValue, the words) whenever vulkan_device::
/// settle_closed_lines() runs (a later close, start_close or create, release_closed_lines(),
/// async_close's polls) and waits only in its destructor. A settled line's memory goes as in
/// step 3; its batches' semaphore and command pool, instead of waiting for the queue to drain,
/// go to the device's next line, and what is left of them with the device. Past settle_timeout
/// the line leaks as above (vulkan_closing::error() says why).
///
/// Health: each line registers a health query (gpu_async::watch_line_health): vkGetSemaphore-
/// CounterValue on the line's own timeline semaphore, which never blocks; VK_ERROR_DEVICE_LOST
/// faults every slot of the line, once. So a lost device reaches the descriptor waits on the line
/// within one fault backstop plus the reactor's park bound, while a reactor with pending waits
/// runs. A plan-driven wait over a vulkan_source hears of it at its status query.
///
/// The doorbell: `line.attach_doorbell(port.shared_bell())` imports the doorbell's line into the
/// device with VK_EXT_external_memory_host (create() enables it where the device has it; enable
/// it at your vkCreateDevice for a device you adopt) and makes every later store, both ways, also
/// store doorbell::device_signal into doorbell::device_word after the completion, so a reactor
/// parked on the doorbell wakes at once (see mapped_line.hpp, the CUDA and HIP lines' doorbell).
/// Without a doorbell the reactor sees a store at its next scan, within one park bound. The
/// doorbell and its import live as long as the line's memory (see Memory lifetime).
#ifndef GPU_ASYNC_DEVICE_VULKAN_HPP
#define GPU_ASYNC_DEVICE_VULKAN_HPP

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/completion_source.hpp>
#include <gpu_async/core/detail/config.hpp>
#include <gpu_async/core/error.hpp>
#include <gpu_async/core/result.hpp>
#include <gpu_async/core/time.hpp>
#include <gpu_async/core/wait_tuning.hpp>
#include <gpu_async/device/vulkan_api.hpp>
#include <gpu_async/wait/detail/ranked_mutex.hpp>
#include <gpu_async/wait/doorbell.hpp>
#include <gpu_async/wait/wordwait.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace gpu_async {

namespace detail {
struct vulkan_line_state;

/// What a closed line leaves its device to destroy once the command buffers its stores were
/// recorded into are done (vulkan_device::release_closed_lines).
struct vulkan_kept_line {
    vulkan::descriptor_pool_t descriptor_pool{};
    vulkan::buffer_t buffer{};
    vulkan::device_memory_t memory{};
    bool mapped = false;
    /// The attached doorbell's imported page(s), and the doorbell itself: the recorded stores
    /// ring it, so it lives as long as the memory they store into.
    vulkan::buffer_t bell_buffer{};
    vulkan::device_memory_t bell_memory{};
    std::shared_ptr<doorbell> bell;
};

/// A closed line's timeline semaphore and command pool, settled but not drained: a driver may
/// still touch a batch's semaphore just after its signal is seen, so rather than wait for the
/// queue to drain the device gives them to its next line (vulkan_line::create) and destroys what
/// is left only at its end.
struct vulkan_spare_batch {
    vulkan::semaphore_t timeline{};
    vulkan::command_pool_t command_pool{};
    std::uint64_t submitted = 0; ///< the timeline's value, which every batch has signalled
    std::vector<vulkan::command_buffer_t> buffers;
};

/// How far a closing line's settle went (defined in device/impl/vulkan_common.ipp).
struct vulkan_settle;

/// A descriptor of a Vulkan line at generation `generation` (adopt_line's, which the descriptor's
/// generation field holds whatever its width).
inline memory_descriptor vulkan_descriptor(const completion_line& line, slot_id slot,
                                           std::uint64_t target,
                                           std::uint64_t generation) noexcept {
    using generation_type = decltype(std::declval<const memory_descriptor&>().generation());
    return memory_descriptor(line, slot, target, static_cast<generation_type>(generation));
}
} // namespace detail

/// The Vulkan loader, found at run time. Not copyable, not movable (devices point at it); it must
/// outlive every device made with it.
class vulkan_loader {
public:
    /// The library `load()` opens.
    static constexpr const char* library_name = "libvulkan.so.1";

    /// The process's loader: opens libvulkan.so.1 once (thread-safe; later calls return the
    /// first answer) and takes its global entry points. Errors: errc::unavailable naming what is
    /// missing (the library, vkGetInstanceProcAddr, vkCreateInstance). Never unloaded.
    GPU_ASYNC_DECL static result<const vulkan_loader*> load();

    /// As load(), from the library `name` (opened, never closed), without caching.
    GPU_ASYNC_DECL static result<std::unique_ptr<vulkan_loader>> load_library(const char* name);

    /// As load(), with every entry point taken through `get_instance_proc_addr` (a program's own
    /// loader, or a test's fake).
    GPU_ASYNC_DECL static result<std::unique_ptr<vulkan_loader>>
    from_resolver(vulkan::get_instance_proc_addr_fn get_instance_proc_addr);

    vulkan_loader(const vulkan_loader&) = delete;
    vulkan_loader& operator=(const vulkan_loader&) = delete;

    /// The global entry points.
    const vulkan::global_api& api() const noexcept { return api_; }

    /// The instance version the loader offers (vkEnumerateInstanceVersion; 1.0 without it).
    std::uint32_t version() const noexcept { return version_; }

    /// The name of a result ("VK_ERROR_DEVICE_LOST"), or "VK_RESULT_<n>".
    GPU_ASYNC_DECL static std::string result_name(vulkan::result_t result);

    /// errc::driver_status for `call` returning `result`.
    GPU_ASYNC_DECL static coded_error error(const char* call, vulkan::result_t result);

private:
    vulkan_loader() = default;

    vulkan::global_api api_{};
    std::uint32_t version_ = 0;
};

/// How a line closed without blocking stands (vulkan_line::start_close(), async_close, the
/// line's destructor): shared between the device, which settles the line, and whoever waits for
/// it. Thread-safe to read.
class vulkan_closing {
public:
    /// True once the device has settled the line: its memory freed or kept, or leaked.
    bool done() const noexcept { return done_.load(std::memory_order_acquire); }
    /// The settle's failure (as close() returns it), once done(); nothing before.
    const std::optional<coded_error>& error() const noexcept { return error_; }

private:
    friend class vulkan_device;
    friend class vulkan_line;

    std::atomic<bool> done_{false};
    std::optional<coded_error> error_;
};

/// Vulkan objects of yours that a vulkan_device works with; none is owned or destroyed by it.
struct vulkan_handles {
    vulkan::instance_t instance = nullptr;
    vulkan::physical_device_t physical_device = nullptr;
    vulkan::device_t device = nullptr;
    /// The queue the backend submits its await_semaphore batches to: of `queue_family`, which
    /// must have compute.
    vulkan::queue_t queue = nullptr;
    std::uint32_t queue_family = 0;
};

/// Options of a device the backend makes (vulkan_device::create).
struct vulkan_device_options {
    /// The index, in vkEnumeratePhysicalDevices' order, of the physical device to use; -1 picks
    /// the first that meets the requirements, a discrete GPU before an integrated, a virtual one
    /// and a CPU implementation (lavapipe).
    int physical_device = -1;
};

/// A Vulkan device the backend works with: yours (adopt) or one it makes with an instance of its
/// own (create). Holds the device's entry points, the store's compute pipeline and the lock of
/// the queue it submits to. Not copyable, not movable (lines point at it).
///
/// Destroying it closes every line of it still open (see vulkan_line::close(): their waits end
/// as a retirement ends them, their stores are awaited) and settles the lines closed without
/// blocking that are still settling (waiting for their stores, up to each one's settle timeout),
/// then, on a device of its own, waits for the device to go idle, destroys the backend's objects
/// (release_closed_lines() among them) and, if it made them, the device and the instance. Do not
/// use a line of it on another thread meanwhile; destroy one that adopted your device only once the
/// command buffers you recorded stores into have completed.
class vulkan_device {
public:
    /// Works with your device. Errors: errc::unavailable (the instance or the physical device is
    /// older than Vulkan 1.2, the queue family lacks compute, the device lacks a required
    /// feature, an entry point is missing), errc::backend (a null handle), errc::driver_status.
    GPU_ASYNC_DECL static result<std::unique_ptr<vulkan_device>>
    adopt(const vulkan_loader& loader, const vulkan_handles& handles);

    /// Makes an instance and a device of its own (Vulkan 1.2, the required features enabled,
    /// one queue of the first family with compute), for programs that have none. Errors:
    /// errc::unavailable (no physical device, or none that meets the requirements: the message
    /// names each device and what it lacks), errc::driver_status.
    GPU_ASYNC_DECL static result<std::unique_ptr<vulkan_device>>
    create(const vulkan_loader& loader, vulkan_device_options options = {});

    vulkan_device(const vulkan_device&) = delete;
    vulkan_device& operator=(const vulkan_device&) = delete;
    GPU_ASYNC_DECL ~vulkan_device();

    const vulkan_loader& loader() const noexcept { return *loader_; }
    /// The instance's entry points.
    const vulkan::instance_api& instance_api() const noexcept { return instance_api_; }
    /// The device's entry points.
    const vulkan::device_api& api() const noexcept { return api_; }

    vulkan::instance_t instance() const noexcept { return handles_.instance; }
    vulkan::physical_device_t physical_device() const noexcept { return handles_.physical_device; }
    vulkan::device_t device() const noexcept { return handles_.device; }
    vulkan::queue_t queue() const noexcept { return handles_.queue; }
    std::uint32_t queue_family() const noexcept { return handles_.queue_family; }
    /// The physical device's name (deviceName), e.g. "llvmpipe (LLVM 15.0.6, 256 bits)".
    const std::string& name() const noexcept { return name_; }
    /// Whether the backend made the device and the instance (create) and destroys them.
    bool owns_device() const noexcept { return owned_; }

    /// Whether lines of the device can take a doorbell (vulkan_line::attach_doorbell):
    /// VK_EXT_external_memory_host is supported, its entry point resolved (create() enables the
    /// extension where the device has it; a device you adopt must have it enabled) and its
    /// import alignment known. When not, doorbell_unavailable() says why.
    bool can_attach_doorbell() const noexcept { return import_alignment_ != 0; }
    /// Why lines of the device take no doorbell (empty when they can).
    const std::string& doorbell_unavailable() const noexcept { return no_import_; }
    /// minImportedHostPointerAlignment (0 without the extension).
    vulkan::device_size_t import_alignment() const noexcept { return import_alignment_; }

    /// vkQueueSubmit on the device's queue under the lock the backend's own submissions take.
    /// Submit through it (or never at the same time as the backend, which submits only inside
    /// vulkan_line::await_semaphore) when your work shares the queue: Vulkan requires one
    /// submitter at a time per queue.
    GPU_ASYNC_DECL vulkan::result_t submit(std::uint32_t count, const vulkan::submit_info* submits,
                                           vulkan::fence_t fence = {}) const;

    /// errc::driver_status for `call` returning `result`.
    coded_error error(const char* call, vulkan::result_t result) const {
        return vulkan_loader::error(call, result);
    }

    /// The lines of the device that are open.
    GPU_ASYNC_DECL std::size_t open_lines() const;

    /// Destroys the memory, buffers and descriptor sets of the closed lines that stores were
    /// recorded for. close() keeps them (only you know when the command buffers you recorded
    /// their stores into have finished): call this once every such command buffer has completed
    /// or been freed. The destructor calls it, after vkDeviceWaitIdle on a device of its own.
    GPU_ASYNC_DECL void release_closed_lines();

    /// The closed lines whose objects the device keeps (see release_closed_lines()).
    GPU_ASYNC_DECL std::size_t kept_lines() const;

    /// Settles, without blocking, the lines closed by vulkan_line::start_close(), async_close or
    /// a line's destructor: each whose stores have landed is freed (or kept, see
    /// release_closed_lines()) and its vulkan_closing done; each still waiting past its settle
    /// timeout, or on a lost device, is leaked as close() leaks it. Returns how many still
    /// settle. Every close, start_close, create and release_closed_lines() calls it too, and the
    /// destructor waits for them. Thread-safe (each line is looked at by one caller at a time).
    GPU_ASYNC_DECL std::size_t settle_closed_lines() noexcept;

    /// The lines closed without blocking that are still settling (see settle_closed_lines()).
    GPU_ASYNC_DECL std::size_t closing_lines() const;

private:
    friend class vulkan_line;

    // Out of line: its members hold the line state, complete only in device/impl/vulkan_common.ipp.
    GPU_ASYNC_DECL explicit vulkan_device(const vulkan_loader& loader) noexcept;

    // create()'s steps, each undone by the destructor (owned_) when a later one fails.
    GPU_ASYNC_DECL std::optional<coded_error> make_instance();
    GPU_ASYNC_DECL std::optional<coded_error> choose_physical_device(int wanted);
    GPU_ASYNC_DECL std::optional<coded_error> make_device(bool host_import);
    GPU_ASYNC_DECL std::optional<coded_error> resolve_instance();
    GPU_ASYNC_DECL std::optional<coded_error> check_physical_device() const;
    GPU_ASYNC_DECL std::optional<coded_error> resolve_device();
    GPU_ASYNC_DECL std::optional<coded_error> make_pipeline();
    GPU_ASYNC_DECL bool has_extension(vulkan::physical_device_t pd, const char* name,
                                      std::string& why) const;
    GPU_ASYNC_DECL void probe_host_import(bool enabled);
    GPU_ASYNC_DECL void destroy_objects() noexcept;
    GPU_ASYNC_DECL void add_line(detail::vulkan_line_state* line);
    GPU_ASYNC_DECL static std::optional<coded_error>
    close_line(detail::vulkan_line_state& line) noexcept;
    GPU_ASYNC_DECL static void close_detached(std::unique_ptr<detail::vulkan_line_state>& owner,
                                              std::shared_ptr<vulkan_closing> status) noexcept;
    GPU_ASYNC_DECL static void begin_close(detail::vulkan_line_state& line) noexcept;
    GPU_ASYNC_DECL static detail::vulkan_settle
    settle_wait(detail::vulkan_line_state& line) noexcept;
    GPU_ASYNC_DECL static detail::vulkan_settle
    settle_poll(detail::vulkan_line_state& line) noexcept;
    GPU_ASYNC_DECL static void finish_close(detail::vulkan_line_state& line,
                                            detail::vulkan_settle& settle, bool drained) noexcept;
    GPU_ASYNC_DECL void keep_batch_objects(detail::vulkan_line_state& line) noexcept;
    GPU_ASYNC_DECL bool take_spare_batch(detail::vulkan_line_state& line) noexcept;
    GPU_ASYNC_DECL void destroy_spare_batches() noexcept;

    const vulkan_loader* loader_;
    vulkan::instance_api instance_api_{};
    vulkan::device_api api_{};
    vulkan_handles handles_{};
    std::string name_;
    vulkan::physical_device_memory_properties memory_{};
    std::vector<std::uint32_t> queue_families_; ///< every family of the physical device
    vulkan::descriptor_set_layout_t set_layout_{};
    vulkan::pipeline_layout_t pipeline_layout_{};
    vulkan::shader_module_t shader_{};
    vulkan::pipeline_t pipeline_{};
    bool owned_ = false;
    vulkan::device_size_t import_alignment_ = 0; ///< 0: no doorbell (no_import_ says why)
    std::string no_import_;

    mutable detail::ranked_mutex queue_mutex_{
        detail::lock_rank::device_queue}; ///< around every vkQueueSubmit of the backend (a leaf)
    mutable detail::ranked_mutex lines_mutex_{
        detail::lock_rank::device}; ///< around lines_, kept_, closing_, spare_batches_ and
                                    ///< leaked_lines_ (a leaf)
    std::vector<detail::vulkan_line_state*> lines_;
    std::vector<detail::vulkan_kept_line> kept_;
    /// The lines closed without blocking, still settling (a list: a settle takes them out and
    /// puts them back without allocating).
    std::list<std::unique_ptr<detail::vulkan_line_state>> closing_;
    std::vector<detail::vulkan_spare_batch> spare_batches_;
    std::size_t leaked_lines_ = 0;
};

/// Options of a new line.
struct vulkan_line_options {
    /// The value every word starts at, and every slot's last sequence number: the first store of
    /// a slot stores `initial_sequence + 1` (wrapping).
    std::uint64_t initial_sequence = 0;
    /// The longest close() waits for the line's stores to land (see the file comment) before it
    /// leaks the line's memory rather than free it.
    dur_ns settle_timeout = dur_ns::from_ms(10000);
};

/// A completion line of a Vulkan device (see the file comment): its memory, the stores behind
/// command buffers and timeline semaphores, its generation and its health query. Move-only; not
/// thread-safe (one thread at a time, as an Asio I/O object). The device must outlive it, or
/// close it (its destructor does). Its destructor never blocks: it closes the line as
/// start_close() does.
class vulkan_line {
public:
    /// A line of `device`. Errors: errc::unavailable (no memory type that is host-visible and
    /// coherent for a storage buffer), errc::driver_status (whatever was made is destroyed),
    /// errc::backend (no memory for the line's records).
    GPU_ASYNC_DECL static result<vulkan_line> create(vulkan_device& device,
                                                     vulkan_line_options options = {});

    /// Takes `other`'s line (`other` is then as closed).
    GPU_ASYNC_DECL vulkan_line(vulkan_line&& other) noexcept;
    /// Closes this line, then takes `other`'s.
    GPU_ASYNC_DECL vulkan_line& operator=(vulkan_line&& other) noexcept;
    vulkan_line(const vulkan_line&) = delete;
    vulkan_line& operator=(const vulkan_line&) = delete;
    /// Closes the line without blocking, as start_close() does (the device frees it once its
    /// stores have landed).
    GPU_ASYNC_DECL ~vulkan_line();

    /// The line the host watches. Precondition: is_open().
    GPU_ASYNC_DECL const completion_line& line() const noexcept;
    /// The line's generation, stamped into its descriptors (<gpu_async/line/line_life.hpp>).
    GPU_ASYNC_DECL std::uint64_t generation() const noexcept;
    /// The device (null once moved from).
    GPU_ASYNC_DECL vulkan_device* device() const noexcept;

    /// Records into `command_buffer` (recording, outside a render pass), behind the commands
    /// recorded so far, the store of the slot's next sequence number (the last one plus one,
    /// wrapping), and returns the descriptor that completes once the command buffer has run to
    /// it. Submit the command buffer as usual. Errors: errc::backend (the line is closed, or
    /// the slot's last store was an await_semaphore batch that has not landed yet; nothing is
    /// recorded).
    GPU_ASYNC_DECL result<memory_descriptor> record_store(slot_id slot,
                                                          vulkan::command_buffer_t command_buffer);

    /// Submits on the device's queue a batch that waits until the timeline `semaphore` reaches
    /// `value` and then stores the slot's next sequence number, and returns its descriptor. The
    /// semaphore stays yours (never destroyed here) and must outlive the batch. Errors:
    /// errc::backend (the line is closed, or the slot's last store was recorded into a command
    /// buffer and has not landed yet), errc::driver_status (nothing was submitted and the
    /// sequence did not move).
    GPU_ASYNC_DECL result<memory_descriptor>
    await_semaphore(slot_id slot, vulkan::semaphore_t semaphore, std::uint64_t value);

    /// The last sequence number stored, recorded or submitted on `slot`.
    GPU_ASYNC_DECL std::uint64_t sequence(slot_id slot) const noexcept;
    /// The descriptor of the last store on `slot`. Precondition: is_open().
    GPU_ASYNC_DECL memory_descriptor last(slot_id slot) const noexcept;

    /// The line's own timeline semaphore: its await_semaphore batches signal it, in order.
    GPU_ASYNC_DECL vulkan::semaphore_t timeline() const noexcept;
    /// The value the line's last await_semaphore batch signals on timeline() (0: none yet).
    GPU_ASYNC_DECL std::uint64_t submitted() const noexcept;

    /// Attaches `bell` (normally a port's shared_bell()): imports the doorbell's line into the
    /// device (VK_EXT_external_memory_host: the page(s) holding it, at the device's
    /// minImportedHostPointerAlignment, as a second storage buffer) and counts the line as a
    /// device producer of it. From then on each store, recorded or awaited, is followed in the
    /// same invocation by a store of doorbell::device_signal into doorbell::device_word, so a
    /// reactor parked on the doorbell wakes at once instead of at its park bound. Stores made
    /// before keep not ringing. The line holds the doorbell (and the device the import, for a
    /// line that stores were recorded for) until it is settled: never freed while a store may
    /// reach it. Attaching the doorbell already attached does nothing. Errors: errc::backend
    /// (the line is closed, `bell` is null, another doorbell is attached); errc::unavailable
    /// (the device cannot import host memory: see vulkan_device::doorbell_unavailable(), or no
    /// memory type fits the import); errc::driver_status (nothing is attached, nothing leaks).
    GPU_ASYNC_DECL std::optional<coded_error> attach_doorbell(std::shared_ptr<doorbell> bell);

    /// The attached doorbell, or null.
    GPU_ASYNC_DECL std::shared_ptr<doorbell> attached_doorbell() const noexcept;

    /// True while the line owns its memory (not closed, not moved from, its device not gone).
    GPU_ASYNC_DECL bool is_open() const noexcept;
    /// True when closing could not prove that no store may still reach the memory (the settle
    /// timed out or the device was lost), so the memory and the line's objects were leaked.
    GPU_ASYNC_DECL bool leaked() const noexcept;

    /// Unregisters the line's health query, retires the line (every pending wait on it ends:
    /// success where its word reached the target, else operation_aborted), settles it, then
    /// destroys its objects and frees its memory, or hands them to the device when stores were
    /// recorded for it; leaks them when the settle fails (see the file comment). Returns the
    /// settle's failure (errc::driver_status naming vkWaitSemaphores, vkGetSemaphoreCounterValue or
    /// vkQueueWaitIdle, or errc::backend naming the slot whose recorded store did not land), or
    /// nothing. Closing a closed line does nothing. Blocks the calling thread until the stores land
    /// (up to settle_timeout): on an event loop's thread, use start_close() or
    /// gpu_async::async_close
    /// (<gpu_async/asio/vulkan_close.hpp>) instead.
    GPU_ASYNC_DECL std::optional<coded_error> close();

    /// Closes the line without blocking: unregisters its health query, retires it (every pending
    /// wait on it ends as close() ends it) and hands it to its device, which settles it as
    /// close() does, but by looking (vulkan_device::settle_closed_lines()) instead of waiting,
    /// and then frees, keeps or leaks it. The line is then as moved from. Returns the close's
    /// progress, done at once where the stores had landed already or the line was closed.
    /// Throws std::bad_alloc (nothing changed).
    GPU_ASYNC_DECL std::shared_ptr<const vulkan_closing> start_close();

private:
    GPU_ASYNC_DECL explicit vulkan_line(std::unique_ptr<detail::vulkan_line_state> state) noexcept;

    // create()'s steps: what each made stays in the state, which create() destroys on failure.
    GPU_ASYNC_DECL static std::optional<coded_error> make_memory(vulkan_device& device,
                                                                 detail::vulkan_line_state& s);
    GPU_ASYNC_DECL static std::optional<coded_error>
    make_descriptor_set(vulkan_device& device, detail::vulkan_line_state& s);
    GPU_ASYNC_DECL static std::optional<coded_error> start_line(vulkan_device& device,
                                                                detail::vulkan_line_state& s,
                                                                const vulkan_line_options& options);
    // attach_doorbell()'s steps: what each made is left in its arguments for the caller to undo.
    GPU_ASYNC_DECL static std::optional<coded_error>
    import_doorbell(const vulkan_device& device, void* host, vulkan::device_size_t size,
                    std::uint32_t host_types, vulkan::buffer_t& buffer,
                    vulkan::device_memory_t& memory);
    GPU_ASYNC_DECL static std::optional<coded_error>
    make_doorbell_set(const vulkan_device& device, const detail::vulkan_line_state& s,
                      vulkan::buffer_t bell_buffer, vulkan::device_size_t size,
                      vulkan::descriptor_set_t& set);

    std::unique_ptr<detail::vulkan_line_state> state_;
};

/// A completion source over your timeline semaphore and one slot of a vulkan_line
/// (gpu_async::completion_source), for the plan-driven wait:
/// - the target is the value your submissions signal behind the awaited work (set_target());
/// - query(): vkGetSemaphoreCounterValue at or past the target: done, else pending;
///   VK_ERROR_DEVICE_LOST fails it with errc::device_fault (last_error() names the result);
/// - block(): vkWaitSemaphores for the target, without a bound; the same errors;
/// - arm(): line.await_semaphore(slot, semaphore, target): descriptor() then names its store;
/// - park(bound): the word wait on the line for at most `bound`.
/// Other failures report errc::driver_status. The line must stay open while the source is used
/// (a port's plan wait ends with operation_aborted when the line closes). Move-only; one thread
/// at a time.
class vulkan_source {
public:
    /// A source over `semaphore` (a timeline semaphore of the line's device; yours, never
    /// destroyed here) on `slot` of `line`, with target 0. Errors: errc::backend (the line is
    /// closed, or `semaphore` is null).
    GPU_ASYNC_DECL static result<vulkan_source> create(vulkan_line& line, slot_id slot,
                                                       vulkan::semaphore_t semaphore);

    /// The value to wait for: the timeline value your submissions signal behind the work.
    void set_target(std::uint64_t value) noexcept { target_ = value; }
    std::uint64_t target() const noexcept { return target_; }

    GPU_ASYNC_DECL query_result query();
    GPU_ASYNC_DECL std::error_code block();
    GPU_ASYNC_DECL std::error_code arm();

    /// The descriptor of the last store armed (of the line's slot before the first arm).
    memory_descriptor descriptor() const noexcept {
        return detail::vulkan_descriptor(line_->line(), slot_, armed_, line_->generation());
    }

    /// Parks on the line (the word wait) for at most `bound`; true when the word has reached
    /// the descriptor's target. False at once when the line is closed.
    bool park(dur_ns bound) const {
        if (!line_->is_open()) return false;
        const memory_descriptor d = descriptor();
        return word_wait::probe().park(
            d.line(), [&d] { return d.is_complete(); }, bound);
    }

    vulkan::semaphore_t semaphore() const noexcept { return semaphore_; }
    slot_id slot() const noexcept { return slot_; }

    /// The detail of the last failure (call, result name, number), if any.
    const std::optional<coded_error>& last_error() const noexcept { return last_error_; }

private:
    vulkan_source(vulkan_line& line, slot_id slot, vulkan::semaphore_t semaphore) noexcept
        : line_(&line)
        , semaphore_(semaphore)
        , armed_(line.sequence(slot))
        , slot_(slot) {}

    GPU_ASYNC_DECL std::error_code fail(const char* call, vulkan::result_t result);

    vulkan_line* line_;
    vulkan::semaphore_t semaphore_;
    std::uint64_t target_ = 0;
    std::uint64_t armed_;
    slot_id slot_;
    std::optional<coded_error> last_error_;
};

static_assert(completion_source<vulkan_source>);

} // namespace gpu_async

#if GPU_ASYNC_HEADER_ONLY
#include <gpu_async/device/impl/vulkan.ipp>
#endif

#endif // GPU_ASYNC_DEVICE_VULKAN_HPP
