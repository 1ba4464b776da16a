// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief Which Asio the Asio layer is built on: Boost.Asio (the default) or standalone Asio.
///
/// One source serves both flavours, as asio-grpc does it:
/// - Boost.Asio (default): `boost::asio`, handlers receive `boost::system::error_code`. CMake
///   targets gpu_async::gpu_async (header-only) and gpu_async::compiled.
/// - Standalone Asio: define `GPU_ASYNC_STANDALONE_ASIO` in every translation unit (the CMake
///   target gpu_async::gpu_async_standalone does it): Asio from `<asio.hpp>`, handlers
///   receive `std::error_code`, and the `gpu_async` category is the registry's standard one,
///   native. Asio 1.22 (Debian 12's libasio-dev) is the oldest standalone Asio supported (it
///   does not detect clang's coroutines with libstdc++: define ASIO_HAS_CO_AWAIT and
///   ASIO_HAS_STD_COROUTINE for use_awaitable there).
///
/// Either way `gpu_async::asio` names the Asio in use and `gpu_async::error_code` its error code
/// type, so code written against them builds in both flavours.
///
/// Everything in the Asio layer is declared in an inline namespace named after the flavour
/// (`gpu_async::boost_asio` or `gpu_async::standalone_asio`): translation units built in the
/// two flavours never share a definition, and a translation unit of one flavour linked against
/// the separately compiled library of the other fails to link instead of misbehaving. The
/// layers below (core, hosts, devices) do not depend on the flavour.
#ifndef GPU_ASYNC_ASIO_DETAIL_FLAVOUR_HPP
#define GPU_ASYNC_ASIO_DETAIL_FLAVOUR_HPP

#include <gpu_async/core/detail/config.hpp>

#if defined(GPU_ASYNC_STANDALONE_ASIO)

#include <asio/version.hpp>

#include <system_error>

/// The version of the Asio in use, as ASIO_VERSION writes it (102201 for 1.22.1).
#define GPU_ASYNC_ASIO_VERSION ASIO_VERSION

// Opens the flavour's inline namespace inside the namespace where it is written.
#define GPU_ASYNC_ASIO_NAMESPACE_BEGIN inline namespace standalone_asio {
#define GPU_ASYNC_ASIO_NAMESPACE_END }

namespace asio {}
namespace gpu_async {
/// The Asio in use: standalone Asio.
namespace asio = ::asio;
/// The error code a handler receives: std::error_code.
using error_code = std::error_code;
/// The exception that carries an error_code.
using system_error = std::system_error;
} // namespace gpu_async

#else

#include <boost/asio/version.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>

/// The version of the Asio in use, as BOOST_ASIO_VERSION writes it (102600 for Boost 1.81).
#define GPU_ASYNC_ASIO_VERSION BOOST_ASIO_VERSION

#define GPU_ASYNC_ASIO_NAMESPACE_BEGIN inline namespace boost_asio {
#define GPU_ASYNC_ASIO_NAMESPACE_END }

namespace boost::asio {}
namespace gpu_async {
/// The Asio in use: Boost.Asio.
namespace asio = ::boost::asio;
/// The error code a handler receives: boost::system::error_code.
using error_code = ::boost::system::error_code;
/// The exception that carries an error_code.
using system_error = ::boost::system::system_error;
} // namespace gpu_async

#endif

/// 1 unless the Asio in use was built without its Networking TS executors
/// (ASIO_NO_TS_EXECUTORS, BOOST_ASIO_NO_TS_EXECUTORS).
#if defined(GPU_ASYNC_STANDALONE_ASIO) ? defined(ASIO_NO_TS_EXECUTORS)                             \
                                       : defined(BOOST_ASIO_NO_TS_EXECUTORS)
#define GPU_ASYNC_ASIO_HAS_TS_EXECUTORS 0
#else
#define GPU_ASYNC_ASIO_HAS_TS_EXECUTORS 1
#endif

/// 1 where the Asio in use has associated immediate executors (Asio 1.28, Boost 1.82).
#if GPU_ASYNC_ASIO_VERSION >= 102800
#define GPU_ASYNC_HAS_IMMEDIATE_EXECUTOR 1
#else
#define GPU_ASYNC_HAS_IMMEDIATE_EXECUTOR 0
#endif

#endif // GPU_ASYNC_ASIO_DETAIL_FLAVOUR_HPP
