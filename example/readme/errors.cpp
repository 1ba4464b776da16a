// SPDX-License-Identifier: BSL-1.0
// The README's "Errors": a refused plan, its code as an Asio handler would see it, and the
// exception value() throws.
#include <gpu_async/asio/error.hpp> // errc as a native boost::system::error_code
#include <gpu_async/core/wait_plan.hpp>

#include <boost/system/error_code.hpp>

#include <cstdio>
#include <cstring>
#include <system_error>

int main() {
    //! [errors]
    const auto plan = gpu_async::wait_plan::parse("flag:park_us=0,backstop_us=1000");
    if (!plan.has_value()) {
        // "invalid plan 'flag:park_us=0,backstop_us=1000': 'park_us' must not be zero"
        std::printf("%s\n", plan.error().message().c_str());
        const boost::system::error_code ec = plan.error().code(); // what a handler receives
        if (ec == gpu_async::errc::invalid_plan)                  // branch on codes, never on texts
            std::printf("%s\n", ec.to_string().c_str());          // "gpu_async:1"
    }
    //! [errors]
    if (plan.has_value()) return 1;
    const boost::system::error_code ec = plan.error().code();
    if (ec != gpu_async::errc::invalid_plan || std::strcmp(ec.category().name(), "gpu_async") != 0)
        return 1;
    try {
        static_cast<void>(plan.value()); // an error: throws, with the code and the message
    } catch (const std::system_error& e) {
        return e.code() == gpu_async::errc::invalid_plan ? 0 : 1;
    }
    return 1;
}
