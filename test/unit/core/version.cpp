// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/version.hpp>

#include <boost/test/unit_test.hpp>

#include <string>

namespace unit_core_version {

BOOST_AUTO_TEST_SUITE(version_suite)

BOOST_AUTO_TEST_CASE(the_number_and_the_text_agree_with_the_parts) {
    static_assert(GPU_ASYNC_VERSION == GPU_ASYNC_VERSION_MAJOR * 100000 +
                                           GPU_ASYNC_VERSION_MINOR * 100 + GPU_ASYNC_VERSION_PATCH);
    static_assert(GPU_ASYNC_VERSION_MINOR < 1000 && GPU_ASYNC_VERSION_PATCH < 100);
    const std::string parts = std::to_string(GPU_ASYNC_VERSION_MAJOR) + "." +
                              std::to_string(GPU_ASYNC_VERSION_MINOR) + "." +
                              std::to_string(GPU_ASYNC_VERSION_PATCH);
    BOOST_TEST(parts == GPU_ASYNC_VERSION_STRING);
}

// The CMake build passes its project version (the installed package's) to this file.
BOOST_AUTO_TEST_CASE(the_header_is_the_cmake_package_version) {
#ifdef GPU_ASYNC_TEST_PACKAGE_VERSION
    BOOST_TEST(std::string(GPU_ASYNC_TEST_PACKAGE_VERSION) == GPU_ASYNC_VERSION_STRING);
#else
    BOOST_TEST_MESSAGE("built without CMake: no package version to compare");
#endif
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_core_version
