// SPDX-License-Identifier: BSL-1.0
//
// example/common/executor_select.hpp: executor selection at start-up for the example programs
// (example/uring_server.cpp, the demo): the host's capabilities (io-uring needs a ring, probed by
// making one; gpu-reactor and naive run on the std host everywhere), resolve() along
// io-uring -> gpu-reactor -> naive, and the coded lines "warning [3]: ..." / "error [4]: ...".
// Not part of the library.
//
// --fail-ring makes ring creation fail with EPERM, as seccomp or kernel.io_uring_disabled
// would, to show the fallback and the strict refusal: the ring is made through calls whose
// setup the "kernel" refuses (basic_uring_idle's Calls).
//
#ifndef GPU_ASYNC_EXAMPLE_COMMON_EXECUTOR_SELECT_HPP
#define GPU_ASYNC_EXAMPLE_COMMON_EXECUTOR_SELECT_HPP

#include <gpu_async/core/error.hpp>
#include <gpu_async/core/result.hpp>
#include <gpu_async/fill/executor_kind.hpp>

#if GPU_ASYNC_HAS_LIBURING
#include <gpu_async/fill/uring_host.hpp>
#endif

#include <cerrno>
#include <cstdio>
#include <string>

namespace gpu_async::examples {

/// Prints "<prefix><level> [<code>]: <message>" and a newline on `out`.
inline void print_coded(std::FILE* out, const char* prefix, const char* level,
                        const coded_error& e) {
    std::fprintf(out, "%s%s [%d]: %s\n", prefix, level, e.code().value(), e.message().c_str());
}

#if GPU_ASYNC_HAS_LIBURING
/// liburing's calls, but a ring setup fails with EPERM (--fail-ring).
struct refused_setup_calls : liburing_calls {
    int queue_init(unsigned, io_uring&, unsigned) noexcept { return -EPERM; }
};

/// The program's ring: with `fail_ring`, errc::ring_setup for EPERM.
inline result<uring_idle> make_ring(bool fail_ring) {
    if (fail_ring) return basic_uring_idle<refused_setup_calls>::create().error();
    return uring_idle::create();
}
#endif

/// The executor capabilities of this host: io-uring is missing where no ring can be made (the
/// setup error's text) or the program was built without liburing.
inline executor_capabilities host_executor_capabilities([[maybe_unused]] bool fail_ring) {
#if GPU_ASYNC_HAS_LIBURING
    if (fail_ring) return uring_capabilities({}, refused_setup_calls{});
    return uring_capabilities();
#else
    return executor_capabilities().set_missing(executor_kind::io_uring, "built without liburing");
#endif
}

/// Resolves `requested` against this host's capabilities. A fallback's coded warning is printed
/// on `warn_out` ("<prefix>warning [3]: executor fallback: ..."); a strict refusal is printed on
/// stderr ("<prefix>error [4]: executor refused: ...") and returned.
inline result<resolved_executor> select_executor(executor_kind requested, bool strict,
                                                 bool fail_ring, std::FILE* warn_out,
                                                 const char* prefix = "") {
    auto resolved = resolve(requested, host_executor_capabilities(fail_ring),
                            strict ? executor_strictness::strict : executor_strictness::fallback);
    if (!resolved.has_value()) {
        print_coded(stderr, prefix, "error", resolved.error());
        return resolved;
    }
    if (resolved.value().warning)
        print_coded(warn_out, prefix, "warning", *resolved.value().warning);
    std::fflush(warn_out);
    return resolved;
}

} // namespace gpu_async::examples

#endif // GPU_ASYNC_EXAMPLE_COMMON_EXECUTOR_SELECT_HPP
