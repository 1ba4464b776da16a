// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/core/error.hpp>

#include <gpu_async/asio/error.hpp>
#include <gpu_async/core/result.hpp>
#include <gpu_async/core/wait_end.hpp>
#include <gpu_async/core/wait_plan.hpp>
#include <gpu_async/device/sim_device.hpp>
#include <gpu_async/fill/wait_bands.hpp>
#include <gpu_async/gpu_completion_port.hpp>

#include "common/io_context_fixture.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>
#include <boost/test/unit_test.hpp>

#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

namespace unit_asio_error {

using namespace gpu_async;

BOOST_AUTO_TEST_SUITE(error_suite)

BOOST_AUTO_TEST_CASE(reference_numbers_are_fixed) {
    static_assert(static_cast<int>(errc::invalid_plan) == 1);
    static_assert(static_cast<int>(errc::park_fallback) == 2);
    static_assert(static_cast<int>(errc::executor_fallback) == 3);
    static_assert(static_cast<int>(errc::executor_refused) == 4);
    static_assert(static_cast<int>(errc::invalid_executor) == 5);
    static_assert(static_cast<int>(errc::pended_inline) == 6);
    static_assert(static_cast<int>(errc::stalled) == 7);
    static_assert(static_cast<int>(errc::backend) == 8);
    static_assert(static_cast<int>(errc::device_fault) == 14);
    static_assert(static_cast<int>(errc::shut_down) == 15);
    static_assert(static_cast<int>(errc::stale_descriptor) == 16);
    static_assert(static_cast<int>(errc::device_gone) == 17);
    static_assert(static_cast<int>(errc::invalid_target) == 18);
    BOOST_TEST(std::string(gpu_async_category().name()) == "gpu_async");
}

BOOST_AUTO_TEST_CASE(registry_is_dense_and_each_code_has_its_own_message) {
    std::set<std::string> summaries, formats, names;
    int expected = 1;
    for (const auto& row : errc_registry) {
        BOOST_TEST(static_cast<int>(row.code) == expected); // append-only, no gaps
        ++expected;
        const std::error_code ec = row.code;
        BOOST_TEST(ec.message() == std::string(row.summary));
        BOOST_TEST(!row.summary.empty());
        summaries.insert(std::string(row.summary));
        formats.insert(std::string(row.format));
        names.insert(std::string(row.name));
        // The format names exactly `arity` arguments, {0} .. {arity-1}.
        for (std::size_t i = 0; i < 10; ++i) {
            const char placeholder[] = {'{', static_cast<char>('0' + i), '}', '\0'};
            const bool named = row.format.find(placeholder) != std::string_view::npos;
            BOOST_TEST(named == (i < row.arity), row.name << " argument " << i);
        }
    }
    BOOST_TEST(summaries.size() == errc_registry.size());
    BOOST_TEST(formats.size() == errc_registry.size());
    BOOST_TEST(names.size() == errc_registry.size());
    BOOST_TEST(find_errc(0) == nullptr);
    BOOST_TEST(find_errc(static_cast<int>(errc_registry.size()) + 1) == nullptr);
    BOOST_TEST(gpu_async_category().message(999).find("999") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(std_error_code_interop) {
    std::error_code ec = errc::stalled;
    BOOST_TEST(ec.value() == 7);
    BOOST_TEST(&ec.category() == &gpu_async_category());
    BOOST_TEST(std::string(ec.category().name()) == "gpu_async");
    BOOST_TEST((ec == errc::stalled));
    BOOST_TEST((errc::stalled == ec));
    BOOST_TEST((ec != errc::backend));
    BOOST_TEST((errc::backend != ec));
    BOOST_TEST(!(ec == std::errc::timed_out));
    const std::error_code made = make_error_code(errc::device_fault);
    BOOST_TEST(made.value() == 14);
    BOOST_TEST((made == errc::device_fault));
    // A standard code of another category with the same value is not a registry code.
    BOOST_TEST(!(std::error_code(7, std::generic_category()) == errc::stalled));
    BOOST_TEST(!(errc::stalled == std::error_code(7, std::system_category())));
}

// What an Asio handler receives: a native Boost code, named and numbered as the registry.
BOOST_AUTO_TEST_CASE(boost_error_code_has_a_native_category) {
    static_assert(boost::system::is_error_code_enum<errc>::value);
    boost::system::error_code b = errc::invalid_plan;
    BOOST_TEST(static_cast<bool>(b));
    BOOST_TEST(b.failed());
    BOOST_TEST(std::string(b.category().name()) == "gpu_async");
    BOOST_TEST(b.value() == 1);
    BOOST_TEST((b.category() == gpu_async_boost_category()));
    BOOST_TEST(b.message() == "invalid wait plan");
    BOOST_TEST(b.to_string() == "gpu_async:1");
    for (const auto& row : errc_registry) {
        const boost::system::error_code c = row.code;
        BOOST_TEST(c.value() == static_cast<int>(row.code));
        BOOST_TEST(c.message() == std::string(row.summary));
        BOOST_TEST((c == row.code));
    }
    // Assignment and make_error_code give the same code.
    boost::system::error_code assigned;
    assigned = errc::device_fault;
    BOOST_TEST(assigned.value() == 14);
    const boost::system::error_code made = make_error_code(errc::device_fault);
    BOOST_TEST((made == assigned));
    BOOST_TEST(std::string(made.category().name()) == "gpu_async");
    // A Boost system error built from it says the same in its what().
    const boost::system::system_error thrown(b);
    BOOST_TEST(std::string(thrown.what()).find("gpu_async:1") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(boost_error_code_compares_with_the_enum_both_ways) {
    const boost::system::error_code b = errc::stalled;
    BOOST_TEST((b == errc::stalled));
    BOOST_TEST((errc::stalled == b));
    BOOST_TEST((b != errc::invalid_plan));
    BOOST_TEST((errc::invalid_plan != b));
    BOOST_TEST((b == make_error_code(errc::stalled)));
    BOOST_TEST((make_error_code(errc::stalled) == b));
    BOOST_TEST(!(b == make_error_code(errc::backend)));
    // Another category's code of the same value is not a registry code.
    const boost::system::error_code other(7, boost::system::generic_category());
    BOOST_TEST(!(other == errc::stalled));
    BOOST_TEST(!(errc::stalled == other));
    BOOST_TEST(!(boost::system::error_code() == errc::stalled));
}

BOOST_AUTO_TEST_CASE(boost_and_std_codes_convert_both_ways_and_keep_the_comparison) {
    // Boost to standard: Boost's standard view of the category, same name and number.
    const boost::system::error_code b = errc::stalled;
    const std::error_code s = b;
    BOOST_TEST(s.value() == 7);
    BOOST_TEST(std::string(s.category().name()) == "gpu_async");
    BOOST_TEST((s == errc::stalled));
    BOOST_TEST((errc::stalled == s));
    BOOST_TEST((s != errc::backend));
    BOOST_TEST(s.message() == "stalled");
    // ... and back: native again, the very same code.
    const boost::system::error_code again = s;
    BOOST_TEST((again.category() == gpu_async_boost_category()));
    BOOST_TEST((again == b));
    BOOST_TEST((again == errc::stalled));

    // Standard to Boost: Boost alone wraps a foreign standard category (it would log as
    // "std:unknown"), yet the comparison with the enum holds; to_boost_error_code() gives the
    // native code.
    const std::error_code std_code = errc::device_fault;
    const boost::system::error_code wrapped = std_code;
    BOOST_TEST((wrapped == errc::device_fault));
    BOOST_TEST((errc::device_fault == wrapped));
    BOOST_TEST((wrapped != errc::stalled));
    const std::error_code unwrapped = wrapped;
    BOOST_TEST((unwrapped == std_code));
    const boost::system::error_code native = to_boost_error_code(std_code);
    BOOST_TEST(std::string(native.category().name()) == "gpu_async");
    BOOST_TEST(native.value() == 14);
    BOOST_TEST((native == errc::device_fault));
    // Other codes convert as Boost converts them; an empty code stays empty.
    BOOST_TEST(!to_boost_error_code(std::error_code()));
    const boost::system::error_code timed_out =
        to_boost_error_code(std::make_error_code(std::errc::timed_out));
    BOOST_TEST((timed_out == boost::system::errc::timed_out));
}

// A device fault reaching a handler of the plan-driven wait compares equal to the enum.
BOOST_AUTO_TEST_CASE(a_device_fault_reaches_the_handler_as_the_registry_code) {
    boost::asio::io_context ctx;
    gpu_completion_port port(ctx);
    sim_device::options manual;
    manual.manual = true;
    sim_device dev(manual);
    auto s_handle = dev.make_stream();
    auto& s = *s_handle;
    s.enqueue_fault();
    std::optional<boost::system::error_code> got;
    port.async_wait(s, wait_plan::recommended(), "fault",
                    [&](boost::system::error_code ec, wait_report) { got = ec; });
    boost::asio::post(ctx, [&] { dev.step_all(); });
    gpu_async::test::run_to_completion(ctx);
    BOOST_REQUIRE(got.has_value());
    BOOST_TEST((*got == errc::device_fault));
    BOOST_TEST((errc::device_fault == *got));
    BOOST_TEST(to_boost_error_code(*got).value() == 14);
    BOOST_TEST(std::string(to_boost_error_code(*got).category().name()) == "gpu_async");
    // The handler's code itself has the native category: it logs as gpu_async:14.
    BOOST_TEST(std::string(got->category().name()) == "gpu_async");
    BOOST_TEST(got->value() == 14);
}

BOOST_AUTO_TEST_CASE(a_port_wait_ends_with_asio_codes_through_the_one_mapping) {
    const auto& g = gpu_async::detail::asio_codes();
    BOOST_TEST(!to_error_code(wait_end::reached, g));
    BOOST_TEST((to_error_code(wait_end::aborted, g) == boost::asio::error::operation_aborted));
    BOOST_TEST((to_error_code(wait_end::expired, g) == boost::asio::error::timed_out));
    BOOST_TEST((to_error_code(wait_end::no_memory, g) == boost::asio::error::no_memory));
    // The library's own endings are registry codes of the Boost category.
    const boost::system::error_code fault = to_error_code(wait_end::faulted, g);
    BOOST_TEST((fault == errc::device_fault));
    BOOST_TEST((fault.category() == gpu_async_boost_category()));
    BOOST_TEST((to_error_code(wait_end::stale, g) == errc::stale_descriptor));
}

BOOST_AUTO_TEST_CASE(warnings_are_codes_of_the_same_registry) {
    BOOST_TEST(is_warning(errc::park_fallback));
    BOOST_TEST(is_warning(errc::executor_fallback));
    for (const auto& row : errc_registry)
        BOOST_TEST(is_warning(row.code) == row.warning, row.name);
    BOOST_TEST(!is_warning(static_cast<errc>(999)));
}

BOOST_AUTO_TEST_CASE(coded_error_substitutes_arguments) {
    coded_error e(errc::invalid_plan, {"flag:park_us=0", "park_us must be above 0"});
    BOOST_TEST((e.code() == errc::invalid_plan));
    BOOST_TEST((e.value() == errc::invalid_plan));
    BOOST_TEST(e.args().size() == 2u);
    BOOST_TEST(e.message() == "invalid plan 'flag:park_us=0': park_us must be above 0");
    BOOST_TEST(!e.is_warning());

    coded_error w(errc::park_fallback, {"flag:park_us=100,backstop_us=1000", "a word wait",
                                        "no user-mode monitor", "poll"});
    BOOST_TEST(w.is_warning());
    BOOST_TEST(w.message() == "park fallback: plan 'flag:park_us=100,backstop_us=1000' needs a "
                              "word wait (no user-mode monitor); running 'poll'");

    // A missing argument keeps its placeholder; an argument holding braces is not re-expanded.
    coded_error partial(errc::executor_fallback, {"{1}"});
    BOOST_TEST(partial.message() == "executor fallback: '{1}' is unavailable ({1}); running '{2}'");
    BOOST_TEST((coded_error(errc::stalled, {"3"}) == coded_error(errc::stalled, {"3"})));
    BOOST_TEST(!(coded_error(errc::stalled, {"3"}) == coded_error(errc::stalled, {"4"})));
}

BOOST_AUTO_TEST_CASE(value_of_an_error_throws_a_system_error_with_the_code_and_message) {
    const auto bad = wait_plan::parse("poll:");
    BOOST_TEST_REQUIRE(!bad.has_value());
    const std::string message = bad.error().message();
    try {
        static_cast<void>(bad.value());
        BOOST_FAIL("value() of an error did not throw");
    } catch (const std::system_error& e) {
        BOOST_TEST((e.code() == errc::invalid_plan));
        BOOST_TEST(std::string(e.code().category().name()) == "gpu_async");
        BOOST_TEST(std::string(e.what()) == message);
        BOOST_TEST(message.find("'poll' takes no parameters") != std::string::npos);
    }
    // The thrown type carries the coded error itself; every accessor throws it.
    result<int> stalled = coded_error(errc::stalled, {"2"});
    BOOST_CHECK_THROW(static_cast<void>(stalled.value()), bad_result_access);
    BOOST_CHECK_THROW(static_cast<void>(*stalled), bad_result_access);
    BOOST_CHECK_THROW(static_cast<void>(std::move(stalled).value()), bad_result_access);
    try {
        static_cast<void>(std::as_const(stalled).value());
    } catch (const bad_result_access& e) {
        BOOST_TEST((e.error() == coded_error(errc::stalled, {"2"})));
        BOOST_TEST(std::string(e.what()) ==
                   "stalled: 2 task(s) left and nothing registered to wake them");
        const bad_result_access copy = e; // copying never throws
        BOOST_TEST(std::string(copy.what()) == e.what());
    }
    static_assert(std::is_nothrow_copy_constructible_v<bad_result_access>);
}

// coded_error::code() is the error code: natively a Boost code of the registry's category (what
// a handler receives), and a standard one; value() stays the enum.
BOOST_AUTO_TEST_CASE(coded_error_code_is_the_error_code_in_either_type) {
    const coded_error e(errc::invalid_plan, {"x", "y"});
    const boost::system::error_code b = e.code();
    BOOST_TEST(b.to_string() == "gpu_async:1");
    BOOST_TEST((b.category() == gpu_async_boost_category()));
    BOOST_TEST((b == errc::invalid_plan));
    const std::error_code s = e.code();
    BOOST_TEST(std::string(s.category().name()) == "gpu_async");
    BOOST_TEST(s.value() == 1);
    BOOST_TEST((e.code() == errc::invalid_plan));
    BOOST_TEST(e.code().value() == 1);
    BOOST_TEST(e.code().message() == "invalid wait plan");
    BOOST_TEST(static_cast<bool>(e.code())); // an error, as the code it becomes
    BOOST_TEST((e.value() == errc::invalid_plan));
}

// A coded exception's what() is the coded message once: the category's message ("device gone")
// is not appended to a text that already begins with it.
BOOST_AUTO_TEST_CASE(a_coded_exception_says_its_message_once) {
    try {
        detail::throw_device_gone();
    } catch (const std::system_error& e) {
        BOOST_TEST((e.code() == errc::device_gone));
        BOOST_TEST(std::string(e.what()) == "device gone: a sim_stream_handle outlived its device");
    }
    const coded_system_error e(coded_error(errc::device_gone, {"a stream"}));
    BOOST_TEST(std::string(e.what()) == "device gone: a stream outlived its device");
    BOOST_TEST((e.error() == coded_error(errc::device_gone, {"a stream"})));
}

BOOST_AUTO_TEST_CASE(result_holds_value_or_error) {
    result<int> ok = 5;
    BOOST_TEST(ok.has_value());
    BOOST_TEST(ok.value() == 5);
    result<int> bad = coded_error(errc::stalled, {"2"});
    BOOST_TEST(!bad.has_value());
    BOOST_TEST((bad.error().code() == errc::stalled));
    BOOST_TEST(bad.error().message() ==
               "stalled: 2 task(s) left and nothing registered to wake them");
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_asio_error
