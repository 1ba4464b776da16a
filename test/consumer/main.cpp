// SPDX-License-Identifier: BSL-1.0
// Uses the installed library: a port wait completes, a coded error reads as expected (native in
// the flavour's error code: Boost's category, or the standard one with standalone Asio), and
// the headers are the version the CMake package says.
#include <gpu_async/gpu_async.hpp>

#if defined(GPU_ASYNC_STANDALONE_ASIO)
#include <asio/io_context.hpp>
#else
#include <boost/asio/io_context.hpp>
#endif

#include <chrono>
#include <cstdio>
#include <cstring>

int main() {
    gpu_async::asio::io_context ctx;
    gpu_async::gpu_completion_port port(ctx.get_executor());
    gpu_async::completion_line line;
    gpu_async::memory_descriptor d(line, *gpu_async::slot_id::at(3), 2);
    if (d.is_complete()) return 1;
    int completed = 0;
    port.async_wait(d, [&](gpu_async::error_code ec) { completed = ec ? -1 : 1; });
    line.words[3].store(2, std::memory_order_release);
    port.bell().ring();
    ctx.run_for(std::chrono::seconds(10));
    if (completed != 1) return 2;
    gpu_async::error_code ec = gpu_async::errc::stalled;
    if (ec != gpu_async::errc::stalled) return 3;
    if (std::strcmp(ec.category().name(), "gpu_async") != 0 || ec.value() != 7) return 5;
    if (std::strcmp(CONSUMER_PACKAGE_VERSION, GPU_ASYNC_VERSION_STRING) != 0) return 4;
    std::printf("consumer: gpu_async %s (%s Asio %d); a port wait completed; %s\n",
                GPU_ASYNC_VERSION_STRING,
#if defined(GPU_ASYNC_STANDALONE_ASIO)
                "standalone",
#else
                "Boost",
#endif
                GPU_ASYNC_ASIO_VERSION, ec.message().c_str());
    return 0;
}
