// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/asio/impl/boost_error.ipp: the registry's Boost category.
//
#ifndef GPU_ASYNC_IMPL_BOOST_ERROR_IPP
#define GPU_ASYNC_IMPL_BOOST_ERROR_IPP

#include <gpu_async/asio/error.hpp>

namespace gpu_async {

namespace detail {

class gpu_async_boost_category final : public boost::system::error_category {
public:
    // A fixed identifier: copies of the category (one per shared object) compare equal.
    constexpr gpu_async_boost_category() noexcept
        : boost::system::error_category(0x6a2f'91c4'd0b3'5e17ULL) {}

    const char* name() const noexcept override { return "gpu_async"; }

    std::string message(int value) const override { return gpu_async_category().message(value); }
};

} // namespace detail

GPU_ASYNC_DECL const boost::system::error_category& gpu_async_boost_category() noexcept {
    static const detail::gpu_async_boost_category instance;
    return instance;
}

} // namespace gpu_async

#endif // GPU_ASYNC_IMPL_BOOST_ERROR_IPP
