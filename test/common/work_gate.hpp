// SPDX-License-Identifier: BSL-1.0
//
// test/common/work_gate.hpp: simulated device work held until the test lets it through, so that
// a wait is still pending when the code under test looks, however slow the machine.
//
#ifndef GPU_ASYNC_TEST_COMMON_WORK_GATE_HPP
#define GPU_ASYNC_TEST_COMMON_WORK_GATE_HPP

#include <gpu_async/core/completion_source.hpp>
#include <gpu_async/device/sim_device.hpp>

#include <chrono>
#include <future>
#include <mutex>
#include <system_error>

namespace gpu_async::test {

/// A gate that device work items wait behind. Its destructor opens it, so a failed check never
/// leaves a worker blocked when the device stops; an item also gives up after 30 s (a test that
/// never opens its gate fails, it does not hang).
class work_gate {
public:
    work_gate() = default;
    work_gate(const work_gate&) = delete;
    work_gate& operator=(const work_gate&) = delete;
    ~work_gate() { open(); }

    /// Lets every item through, now and later (idempotent, any thread).
    void open() {
        std::call_once(once_, [this] { promise_.set_value(); });
    }

    /// A work item for sim_stream::enqueue that returns (success) once the gate is open.
    auto item() const {
        return [opened = opened_]() -> std::error_code {
            opened.wait_for(std::chrono::seconds(30));
            return {};
        };
    }

private:
    std::promise<void> promise_;
    std::shared_future<void> opened_ = promise_.get_future().share();
    std::once_flag once_;
};

/// A simulated stream as a completion source that opens `gate` at its `open_at_query`-th query
/// (0: never), at its first park when `open_at_park`, and at block(): with the stream's work
/// behind the gate, a wait on it is certainly pending at its first query.
struct gated_source {
    sim_stream& s;
    work_gate& gate;
    int open_at_query = 0;
    bool open_at_park = false;
    int queries = 0;

    query_result query() {
        if (++queries == open_at_query) gate.open();
        return s.query();
    }
    std::error_code block() {
        gate.open();
        return s.block();
    }
    std::error_code arm() { return s.arm(); }
    memory_descriptor descriptor() const { return s.descriptor(); }
    bool park(dur_ns bound) {
        if (open_at_park) gate.open();
        return s.park(bound);
    }
};
static_assert(completion_source<gated_source>);

} // namespace gpu_async::test

#endif // GPU_ASYNC_TEST_COMMON_WORK_GATE_HPP
