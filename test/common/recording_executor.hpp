// SPDX-License-Identifier: BSL-1.0
//
// test/common/recording_executor.hpp: an executor that wraps another standard executor and
// records every function it runs: how many were submitted, how many with blocking.never (posted),
// how many ran, and on which threads. Tests use it to prove where and how handlers ran.
//
#ifndef GPU_ASYNC_TEST_COMMON_RECORDING_EXECUTOR_HPP
#define GPU_ASYNC_TEST_COMMON_RECORDING_EXECUTOR_HPP

#include "common/asio.hpp"

#include <atomic>
#include <cstddef>
#include <mutex>
#include <set>
#include <thread>
#include <type_traits>
#include <utility>

namespace gpu_async::test {

/// What a recording_executor saw. Shared by every copy of the executor.
struct execution_record {
    std::atomic<std::size_t> submitted{0};       // execute() calls
    std::atomic<std::size_t> submitted_never{0}; // ... with blocking.never (a post or a defer)
    std::atomic<std::size_t> ran{0};             // functions that ran through the executor

    void note_thread() {
        std::lock_guard lk(mutex_);
        threads_.insert(std::this_thread::get_id());
    }
    std::set<std::thread::id> threads() const {
        std::lock_guard lk(mutex_);
        return threads_;
    }

private:
    mutable std::mutex mutex_;
    std::set<std::thread::id> threads_;
};

template <class Inner>
class recording_executor {
public:
    recording_executor(Inner inner, execution_record& record, bool never = false) noexcept
        : inner_(std::move(inner))
        , record_(&record)
        , never_(never) {}

    template <class F>
    void execute(F&& f) const {
        record_->submitted.fetch_add(1);
        if (never_) record_->submitted_never.fetch_add(1);
        auto run = [record = record_, fn = std::forward<F>(f)]() mutable {
            record->ran.fetch_add(1);
            record->note_thread();
            std::move(fn)();
        };
#if GPU_ASYNC_ASIO_VERSION >= 102400
        inner_.execute(std::move(run));
#else
        asio::execution::execute(inner_, std::move(run)); // before Asio 1.24 execute() was private
#endif
    }

    recording_executor<std::decay_t<decltype(asio::require(std::declval<const Inner&>(),
                                                           asio::execution::blocking.never))>>
    require(asio::execution::blocking_t::never_t p) const {
        return {asio::require(inner_, p), *record_, true};
    }
    recording_executor<std::decay_t<decltype(asio::require(std::declval<const Inner&>(),
                                                           asio::execution::blocking.possibly))>>
    require(asio::execution::blocking_t::possibly_t p) const {
        return {asio::require(inner_, p), *record_, false};
    }
    template <class P>
    requires(!std::is_same_v<P, asio::execution::blocking_t::never_t> &&
             !std::is_same_v<P, asio::execution::blocking_t::possibly_t>) auto require(const P& p)
        const -> recording_executor<
            std::decay_t<decltype(asio::require(std::declval<const Inner&>(), p))>> {
        return {asio::require(inner_, p), *record_, never_};
    }

    template <class P>
    auto query(const P& p) const -> decltype(asio::query(std::declval<const Inner&>(), p)) {
        return asio::query(inner_, p);
    }

    const Inner& inner() const noexcept {
        return inner_;
    }
    execution_record& record() const noexcept {
        return *record_;
    }
    bool never() const noexcept {
        return never_;
    }

    friend bool operator==(const recording_executor& a, const recording_executor& b) noexcept {
        return a.inner_ == b.inner_ && a.record_ == b.record_ && a.never_ == b.never_;
    }
    friend bool operator!=(const recording_executor& a, const recording_executor& b) noexcept {
        return !(a == b);
    }

private:
    Inner inner_;
    execution_record* record_;
    bool never_;
};

} // namespace gpu_async::test

#endif // GPU_ASYNC_TEST_COMMON_RECORDING_EXECUTOR_HPP
