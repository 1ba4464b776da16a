// SPDX-License-Identifier: BSL-1.0
//
// test/common/fake_source.hpp: a completion source on a manual clock, for driving the wait
// machine on virtual time. It records every call with the virtual time it was made at.
//
#ifndef GPU_ASYNC_TEST_COMMON_FAKE_SOURCE_HPP
#define GPU_ASYNC_TEST_COMMON_FAKE_SOURCE_HPP

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/completion_source.hpp>
#include <gpu_async/core/time.hpp>

#include <optional>
#include <system_error>
#include <vector>

namespace gpu_async::test {

/// Work that finishes at `done_at` on the manual clock (never when empty). The word store
/// arrives at `word_at` (defaults to done_at; set `word_never` to model a lost store). A query
/// costs `query_cost` of virtual time. Errors: `fail_at` makes queries from then on fail with
/// `fail_code`; `block_error` and `arm_error` are returned by block() and arm().
class fake_source {
public:
    enum class op { query, block, arm, park };
    struct call {
        op what;
        mono_ns at;   ///< virtual time the call was made
        dur_ns bound; ///< park bound
    };

    explicit fake_source(manual_clock& clock)
        : clock_(&clock) {}

    std::optional<mono_ns> done_at;
    std::optional<mono_ns> word_at; ///< when empty, the word arrives at done_at
    bool word_never = false;
    dur_ns query_cost{};
    std::optional<mono_ns> fail_at;
    std::error_code fail_code = std::make_error_code(std::errc::io_error);
    std::error_code block_error;
    std::error_code arm_error;

    std::vector<call> calls;

    query_result query() {
        calls.push_back({op::query, clock_->now(), {}});
        clock_->advance(query_cost);
        const mono_ns now = clock_->now();
        if (fail_at && now >= *fail_at) return query_result::failed(fail_code);
        if (done_at && now >= *done_at) return query_result::done();
        return query_result::pending();
    }

    std::error_code block() {
        calls.push_back({op::block, clock_->now(), {}});
        if (block_error) return block_error;
        if (done_at) clock_->set(max(*done_at, clock_->now()));
        return {};
    }

    std::error_code arm() {
        calls.push_back({op::arm, clock_->now(), {}});
        return arm_error;
    }

    memory_descriptor descriptor() const { return memory_descriptor(line_, *slot_id::at(0), 1); }

    bool park(dur_ns bound) {
        calls.push_back({op::park, clock_->now(), bound});
        const std::optional<mono_ns> w = word_time();
        const mono_ns limit = clock_->now().after(bound);
        if (w && *w <= limit) {
            clock_->set(max(*w, clock_->now()));
            return true;
        }
        clock_->set(limit);
        return false;
    }

    std::size_t count(op o) const {
        std::size_t n = 0;
        for (const auto& c : calls)
            n += c.what == o ? 1 : 0;
        return n;
    }

private:
    std::optional<mono_ns> word_time() const {
        if (word_never) return std::nullopt;
        return word_at ? word_at : done_at;
    }

    manual_clock* clock_;
    completion_line line_;
};

static_assert(completion_source<fake_source>);

} // namespace gpu_async::test

#endif // GPU_ASYNC_TEST_COMMON_FAKE_SOURCE_HPP
