// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/asio/impl/run_fill.ipp: definition of run_fill().
//
#ifndef GPU_ASYNC_IMPL_RUN_FILL_IPP
#define GPU_ASYNC_IMPL_RUN_FILL_IPP

#include <gpu_async/asio/run_fill.hpp>

#include <gpu_async/core/park_policy.hpp>
#include <gpu_async/wait/detail/mono_clock.hpp>
#include <gpu_async/wait/detail/timer_slack.hpp>

#include <chrono>

namespace gpu_async {
namespace detail {
GPU_ASYNC_ASIO_NAMESPACE_BEGIN

/// Marks the calling thread as the reactor's waiter for its lifetime.
class fill_scope {
public:
    fill_scope(reactor_service& svc, dur_ns park_bound)
        : svc_(svc)
        , park_bound_(park_bound) {
        svc_.begin_fill(park_bound);
    }
    fill_scope(const fill_scope&) = delete;
    fill_scope& operator=(const fill_scope&) = delete;
    ~fill_scope() { svc_.end_fill(park_bound_); }

private:
    reactor_service& svc_;
    dur_ns park_bound_;
};

GPU_ASYNC_ASIO_NAMESPACE_END
} // namespace detail
GPU_ASYNC_ASIO_NAMESPACE_BEGIN

GPU_ASYNC_DECL std::size_t run_fill(asio::io_context& ctx, fill_options options) {
    detail::reactor_service& svc = asio::use_service<detail::reactor_service>(ctx);
    const dur_ns park_bound = max(dur_ns::from(options.park_bound), dur_ns{1});
    const std::chrono::nanoseconds idle_bound(static_cast<std::int64_t>(
        min(max(dur_ns::from(options.idle_bound), dur_ns{1}), dur_ns{std::uint64_t{1} << 62}).ns));
    detail::fill_scope scope(svc, park_bound);
    detail::scoped_timer_slack slack; // a park of 100 us must not oversleep by 50 us
    std::size_t n = 0;
    mono_ns last_scan = detail::mono_now();
    for (;;) {
        // Ready handlers, one at a time: however busy the queue stays (a handler that keeps
        // re-posting itself), the lines are scanned at least once per park bound.
        while (ctx.poll_one() != 0) {
            ++n;
            const mono_ns now = detail::mono_now();
            if (park_policy::scan_due(now, last_scan, park_bound)) {
                last_scan = now;
                svc.poll_ready();
            }
        }
        if (ctx.stopped()) return n; // out of work, or stop()
        // Nothing ready: look at the lines (the doorbell count is read first, so a ring after
        // the scan ends the park below at once).
        const std::uint64_t seen = svc.bell().count();
        last_scan = detail::mono_now();
        park_policy::view scanned;
        scanned.scanned = true;
        scanned.found = svc.poll_ready() != 0;
        scanned.pending = svc.pending() != 0;
        switch (park_policy::next(scanned)) {
        case park_policy::step::deliver: // queued on the io_context: run at the loop's top
            continue;
        case park_policy::step::idle: // nothing watched: the io_context's own wait
            n += ctx.run_one_for(idle_bound);
            if (ctx.stopped()) return n;
            continue;
        default: // park (the service's deadlines are its pending waits')
            break;
        }
        svc.park(seen, park_bound);
        // What ended the park is most likely a completion: look before asking the io_context,
        // whose poll costs a system call.
        last_scan = detail::mono_now();
        svc.poll_ready();
    }
}

GPU_ASYNC_ASIO_NAMESPACE_END
} // namespace gpu_async

#endif // GPU_ASYNC_IMPL_RUN_FILL_IPP
