// SPDX-License-Identifier: BSL-1.0
//
// test/abi/abi_check.hpp: compares the backend's own declarations of a vendor ABI with the
// vendor's headers, at compile time (scripts/ci/backends.sh compiles the checks).
//
// A vendor status or attribute enum and our `int` have the same ABI on the platforms we build
// for (4 bytes, passed in an integer register), so signatures are compared after mapping each
// 4-byte enum (and pointer to one) to int.
//
#ifndef GPU_ASYNC_TEST_ABI_ABI_CHECK_HPP
#define GPU_ASYNC_TEST_ABI_ABI_CHECK_HPP

#include <type_traits>

namespace gpu_async::abi {

template <class T>
struct norm {
    using type = T;
};
template <class T>
requires std::is_enum_v<T>
struct norm<T> {
    static_assert(sizeof(T) == sizeof(int));
    using type = int;
};
template <class T>
requires std::is_enum_v<T>
struct norm<T*> {
    static_assert(sizeof(T) == sizeof(int));
    using type = int*;
};

template <class F>
struct norm_fn;
template <class R, class... A>
struct norm_fn<R (*)(A...)> {
    using type = typename norm<R>::type (*)(typename norm<A>::type...);
};
template <class R, class... A>
struct norm_fn<R (*)(A...) noexcept> : norm_fn<R (*)(A...)> {};

} // namespace gpu_async::abi

/// Our entry point `member` of `entry_points` has the vendor function `fn`'s signature.
#define GPU_ASYNC_ABI_SAME_SIGNATURE(entry_points, member, fn)                                     \
    static_assert(std::is_same_v<decltype(entry_points::member),                                   \
                                 ::gpu_async::abi::norm_fn<decltype(&fn)>::type>,                  \
                  #member " differs from the vendor's " #fn)

#endif // GPU_ASYNC_TEST_ABI_ABI_CHECK_HPP
