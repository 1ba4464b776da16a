// SPDX-License-Identifier: BSL-1.0
// A translation unit of the standalone flavour built against the Boost flavour's separately
// compiled library. It must not link: the Asio layer's entities live in the flavour's inline
// namespace, so the references below name gpu_async::...::standalone_asio::..., which the
// library (gpu_async::boost_asio) does not define. ctest checks the linker says so.
#include <gpu_async/gpu_completion_port.hpp>

#include <asio/io_context.hpp>

#if !defined(GPU_ASYNC_STANDALONE_ASIO) || !defined(GPU_ASYNC_SEPARATE_COMPILATION)
#error "built standalone against the separately compiled library"
#endif

int main() {
    asio::io_context ctx;
    gpu_async::gpu_completion_port port(ctx.get_executor());
    return static_cast<int>(port.pending());
}
