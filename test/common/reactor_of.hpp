// SPDX-License-Identifier: BSL-1.0
//
// test/common/reactor_of.hpp: the reactor service behind a port, for tests that look at its
// diagnostics (pending waits, whether the watcher thread runs).
//
#ifndef GPU_ASYNC_TEST_COMMON_REACTOR_OF_HPP
#define GPU_ASYNC_TEST_COMMON_REACTOR_OF_HPP

#include <gpu_async/asio/detail/reactor_service.hpp>
#include <gpu_async/gpu_completion_port.hpp>

#include "common/asio.hpp"

namespace gpu_async::test {

template <class Executor>
gpu_async::detail::reactor_service& reactor_of(const basic_gpu_completion_port<Executor>& port) {
    return asio::use_service<gpu_async::detail::reactor_service>(
        gpu_async::detail::context_of(port.get_executor()));
}

} // namespace gpu_async::test

#endif // GPU_ASYNC_TEST_COMMON_REACTOR_OF_HPP
