// SPDX-License-Identifier: BSL-1.0
//
// test/common/manual_device.hpp: the options of a simulated device in manual mode: no worker
// threads, so a test runs each item itself (step(), step_all()) and decides when its store lands.
//
#ifndef GPU_ASYNC_TEST_COMMON_MANUAL_DEVICE_HPP
#define GPU_ASYNC_TEST_COMMON_MANUAL_DEVICE_HPP

#include <gpu_async/device/sim_device.hpp>

namespace gpu_async::test {

/// Options of a manual sim_device: no threads; the test steps its streams.
inline sim_device::options manual() {
    sim_device::options o;
    o.manual = true;
    return o;
}

} // namespace gpu_async::test

#endif // GPU_ASYNC_TEST_COMMON_MANUAL_DEVICE_HPP
