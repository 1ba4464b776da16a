// SPDX-License-Identifier: BSL-1.0
//
// test/common/fault_recorder.hpp: what the line health tests share: a line watcher that records
// the faults and retirements it is told of, and fresh virtual times for
// gpu_async::detail::query_line_health.
//
#ifndef GPU_ASYNC_TEST_COMMON_FAULT_RECORDER_HPP
#define GPU_ASYNC_TEST_COMMON_FAULT_RECORDER_HPP

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/line/detail/line_watchers.hpp>
#include <gpu_async/line/line_health.hpp>
#include <gpu_async/line/line_life.hpp>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace gpu_async::test {

/// A reactor stand-in: registered while it lives, it records every fault_slot, retire_line and
/// retire_slot of the process (with the slot's word as it was when the fault came).
class fault_recorder final : public detail::line_watcher {
public:
    struct fault {
        const completion_line* line;
        std::size_t slot;
        std::uint64_t word; ///< the slot's word when the fault came
    };

    fault_recorder() { detail::add_line_watcher(*this); }
    ~fault_recorder() { detail::remove_line_watcher(*this); }
    fault_recorder(const fault_recorder&) = delete;
    fault_recorder& operator=(const fault_recorder&) = delete;

    void retire_line(const completion_line& line) noexcept override {
        std::lock_guard lk(m_);
        retired_.push_back(&line);
    }
    void retire_slot(const completion_line& line, slot_id slot,
                     detail::slot_retirement) noexcept override {
        std::lock_guard lk(m_);
        slots_retired_.push_back({&line, slot.index(), 0});
    }
    void fault_slot(const completion_line& line, slot_id slot, std::uint64_t) noexcept override {
        std::lock_guard lk(m_);
        faults_.push_back(
            {&line, slot.index(), line.words[slot.index()].load(std::memory_order_acquire)});
    }

    /// The faults told of `line`, in order.
    std::vector<fault> faults_of(const completion_line& line) const {
        std::lock_guard lk(m_);
        std::vector<fault> out;
        for (const fault& f : faults_)
            if (f.line == &line) out.push_back(f);
        return out;
    }
    std::size_t faults() const {
        std::lock_guard lk(m_);
        return faults_.size();
    }
    std::size_t retirements_of(const completion_line& line) const {
        std::lock_guard lk(m_);
        std::size_t n = 0;
        for (const completion_line* l : retired_)
            n += l == &line ? 1 : 0;
        return n;
    }

    /// The slot retirements told of `line`.
    std::size_t slot_retirements_of(const completion_line& line, slot_id slot) const {
        std::lock_guard lk(m_);
        std::size_t n = 0;
        for (const fault& r : slots_retired_)
            n += r.line == &line && r.slot == slot.index() ? 1 : 0;
        return n;
    }

private:
    mutable std::mutex m_;
    std::vector<fault> faults_;
    std::vector<fault> slots_retired_; // (the word is not recorded)
    std::vector<const completion_line*> retired_;
};

/// A virtual now for detail::query_line_health a whole hour past the last one this gave (and far
/// from any real clock's reading), so the health queries are due at it whatever ran before.
inline std::uint64_t fresh_health_now() {
    static std::uint64_t now = std::uint64_t{1} << 62;
    now += std::uint64_t{3600} * 1'000'000'000;
    return now;
}

/// Sets the fault backstop for one test and restores the one before.
class backstop_scope {
public:
    explicit backstop_scope(dur_ns b)
        : before_(fault_backstop()) {
        set_fault_backstop(b);
    }
    ~backstop_scope() { set_fault_backstop(before_); }
    backstop_scope(const backstop_scope&) = delete;
    backstop_scope& operator=(const backstop_scope&) = delete;

private:
    dur_ns before_;
};

} // namespace gpu_async::test

#endif // GPU_ASYNC_TEST_COMMON_FAULT_RECORDER_HPP
