// SPDX-License-Identifier: BSL-1.0
// The aarch64 cross test executable: Boost.Test's header-only variant, because no arm64 Boost
// library is installable beside the host's (see CMakeLists.txt here). Only this executable does
// this; the native unit tests link the shared Boost.Test library.
#define BOOST_TEST_MODULE gpu_async_aarch64
#include <boost/test/included/unit_test.hpp>
