// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The registry's codes as native error codes of the Asio in use (the Asio layer).
///
/// An Asio handler receives a gpu_async::error_code (<gpu_async/asio/detail/flavour.hpp>). With
/// standalone Asio that is std::error_code, and the registry's standard category
/// (<gpu_async/core/error.hpp>) is already native: `std::error_code ec = errc::device_fault`.
/// With Boost.Asio it is boost::system::error_code, and this header makes the codes native
/// Boost codes:
///
///     boost::system::error_code ec = gpu_async::errc::device_fault;
///     ec.category().name();            // "gpu_async"
///     ec.value();                      // 14, the registry number
///     ec == gpu_async::errc::device_fault;   // true, both ways round
///
/// as Beast and Boost.MySQL do it: boost::system::is_error_code_enum<errc> is specialized, and
/// the errc_code that make_error_code(errc) returns converts to a code of the Boost category.
/// The standard side is unchanged: std::error_code ec = errc::x has the standard category of the
/// same name (<gpu_async/core/error.hpp>). Conversions between the two code types keep the
/// comparison against the enum:
///
///     std::error_code s = ec;          // Boost's standard view: "gpu_async", 14
///     s == gpu_async::errc::device_fault;                     // true
///     gpu_async::to_boost_error_code(std_code);               // native again
///
/// Include it (or <gpu_async/gpu_async.hpp>) wherever a boost::system::error_code is made from
/// an errc: without it that conversion does not compile. In both flavours
/// `gpu_async::detail::to_asio_error_code` turns a std::error_code into the flavour's code.
#ifndef GPU_ASYNC_ASIO_ERROR_HPP
#define GPU_ASYNC_ASIO_ERROR_HPP

#include <gpu_async/asio/detail/flavour.hpp>
#include <gpu_async/core/detail/config.hpp>
#include <gpu_async/core/error.hpp>

#if !defined(GPU_ASYNC_STANDALONE_ASIO)
#include <boost/system/error_category.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/is_error_code_enum.hpp>
#endif

#include <string>
#include <system_error>
#include <type_traits>

#if defined(GPU_ASYNC_STANDALONE_ASIO)

namespace gpu_async::detail {
GPU_ASYNC_ASIO_NAMESPACE_BEGIN
/// The flavour's code for `ec`: the code itself (std::error_code is the flavour's code).
inline std::error_code to_asio_error_code(const std::error_code& ec) noexcept {
    return ec;
}
GPU_ASYNC_ASIO_NAMESPACE_END
} // namespace gpu_async::detail

#else

namespace boost::system {
/// The registry's enum is a Boost error-code enum too.
template <>
struct is_error_code_enum<gpu_async::errc> : std::true_type {};
} // namespace boost::system

namespace gpu_async {

/// The Boost category of the registry: its name is "gpu_async", its values the registry
/// numbers, its messages the registry's summaries. Categories compare by a fixed 64-bit
/// identifier, so a copy in another shared object compares equal.
GPU_ASYNC_DECL const boost::system::error_category& gpu_async_boost_category() noexcept;

/// Makes boost::system::error_code from an errc (and from make_error_code's errc_code).
template <>
struct errc_conversion<boost::system::error_code> {
    static boost::system::error_code make(errc e) noexcept {
        return {static_cast<int>(e), gpu_async_boost_category()};
    }
};

/// True when `ec` holds the registry code `e`: a native code of the Boost category, or a code
/// that Boost wraps or converted from a standard code of the registry. Either way round.
inline bool operator==(const boost::system::error_code& ec, errc e) noexcept {
    if (ec.category() == gpu_async_boost_category()) return ec.value() == static_cast<int>(e);
    return static_cast<std::error_code>(ec) == e;
}

/// `ec` as a boost::system::error_code. A code of the registry's standard category becomes a
/// native code of its Boost category (Boost alone would wrap it as "std:unknown" with a value
/// that is not the registry number); any other code converts as Boost converts it.
inline boost::system::error_code to_boost_error_code(const std::error_code& ec) noexcept {
    if (ec && is_gpu_async_category(ec.category())) return {ec.value(), gpu_async_boost_category()};
    return ec;
}

namespace detail {
GPU_ASYNC_ASIO_NAMESPACE_BEGIN
/// The flavour's code for `ec`: to_boost_error_code(ec).
inline boost::system::error_code to_asio_error_code(const std::error_code& ec) noexcept {
    return to_boost_error_code(ec);
}
GPU_ASYNC_ASIO_NAMESPACE_END
} // namespace detail

} // namespace gpu_async

#if GPU_ASYNC_HEADER_ONLY
#include <gpu_async/asio/impl/boost_error.ipp>
#endif

#endif // GPU_ASYNC_STANDALONE_ASIO

#endif // GPU_ASYNC_ASIO_ERROR_HPP
