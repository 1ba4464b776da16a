// SPDX-License-Identifier: BSL-1.0
// The Asio of the flavour under test, whole: the port's tests build against Boost.Asio and, with
// GPU_ASYNC_STANDALONE_ASIO, against standalone Asio. They name it `asio` and its error code
// gpu_async::error_code.
#ifndef GPU_ASYNC_TEST_COMMON_ASIO_HPP
#define GPU_ASYNC_TEST_COMMON_ASIO_HPP

#include <gpu_async/asio/detail/flavour.hpp>

#if defined(GPU_ASYNC_STANDALONE_ASIO)
#include <asio.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/experimental/parallel_group.hpp>
#if ASIO_VERSION < 102400
// Before Asio 1.24 these tokens were experimental; the tests use their later names.
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/deferred.hpp>
namespace asio {
using experimental::as_tuple;
using experimental::deferred;
} // namespace asio
#endif
#else
#include <boost/asio.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
namespace asio = boost::asio;
#endif

#endif // GPU_ASYNC_TEST_COMMON_ASIO_HPP
