// SPDX-License-Identifier: BSL-1.0
// Uses the installed library: a descriptor completes, a coded error reads as expected (the
// native Boost category), and the headers are the version the CMake package says.
#include <gpu_async/gpu_async.hpp>

#include <boost/system/error_code.hpp>

#include <cstdio>
#include <cstring>

int main() {
    gpu_async::completion_line line;
    gpu_async::memory_descriptor d(line, *gpu_async::slot_id::at(3), 2);
    if (d.is_complete()) return 1;
    line.words[3].store(2, std::memory_order_release);
    if (!d.is_complete()) return 2;
    boost::system::error_code ec = gpu_async::errc::stalled;
    if (ec != gpu_async::errc::stalled) return 3;
    if (std::strcmp(ec.category().name(), "gpu_async") != 0 || ec.value() != 7) return 5;
    if (std::strcmp(CONSUMER_PACKAGE_VERSION, GPU_ASYNC_VERSION_STRING) != 0) return 4;
    std::printf("consumer: gpu_async %s; descriptor completed; %s (%s)\n", GPU_ASYNC_VERSION_STRING,
                ec.message().c_str(), ec.to_string().c_str());
    return 0;
}
