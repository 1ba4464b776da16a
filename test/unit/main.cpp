// SPDX-License-Identifier: BSL-1.0
// The entry point of each unit test executable (shared Boost.Test library). The module is named
// after the executable's layer; Boost.Test reports it in every summary.
#define BOOST_TEST_MODULE gpu_async_unit
#include <boost/test/unit_test.hpp>
