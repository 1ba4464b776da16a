// SPDX-License-Identifier: BSL-1.0
// The one Boost.Test unit executable (shared Boost.Test library).
#define BOOST_TEST_MODULE gpu_async
#include <boost/test/unit_test.hpp>
