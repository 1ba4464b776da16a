// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/asio/detail/port_state.hpp: what a gpu_completion_port shares with its pending waits.
// Kept apart from the plan-driven wait (asio/detail/plan_wait_op.hpp) so that a descriptor wait's
// include path does not carry the estimator: the point table is only named here.
//
#ifndef GPU_ASYNC_ASIO_DETAIL_PORT_STATE_HPP
#define GPU_ASYNC_ASIO_DETAIL_PORT_STATE_HPP

#include <gpu_async/asio/detail/reactor_service.hpp>
#include <gpu_async/wait/detail/ranked_mutex.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

namespace gpu_async::detail {
GPU_ASYNC_ASIO_NAMESPACE_BEGIN

/// The point table of a port's plan-driven waits; defined in asio/detail/plan_wait_op.hpp.
struct port_points;

/// What a port shares with its pending waits: the reactor's per-port list, a generation that
/// cancel() and the destructor advance (plan-driven waits started before give up at their next
/// step), and the point table with its lock.
struct port_state {
    reactor_port reactor;
    ranked_mutex registration_mutex{
        lock_rank::port_registration}; // plan-driven parks register under it (line retirement)
    std::atomic<std::uint64_t> generation{0};
    mutable ranked_mutex points_mutex{lock_rank::port_points};
    /// Created by the first plan-driven wait (detail::points_of), guarded by points_mutex. A
    /// shared_ptr because its deleter is bound where it is created: a translation unit that sees
    /// only the descriptor wait can still destroy a port whose table exists.
    std::shared_ptr<port_points> points;
};

GPU_ASYNC_ASIO_NAMESPACE_END
} // namespace gpu_async::detail

#endif // GPU_ASYNC_ASIO_DETAIL_PORT_STATE_HPP
