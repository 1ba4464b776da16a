#include <gpu_async/core/error.hpp>

#include <gpu_async/core/result.hpp>

#include <boost/system/error_code.hpp>
#include <boost/test/unit_test.hpp>

#include <set>
#include <string>
#include <system_error>

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
    BOOST_TEST((ec == errc::stalled));
    BOOST_TEST((errc::stalled == ec));
    BOOST_TEST((ec != errc::backend));
    BOOST_TEST(!(ec == std::errc::timed_out));
}

BOOST_AUTO_TEST_CASE(boost_error_code_interop_both_ways) {
    boost::system::error_code b = errc::stalled; // what an Asio handler receives
    BOOST_TEST(static_cast<bool>(b));
    BOOST_TEST((b == errc::stalled));
    BOOST_TEST((errc::stalled == b));
    BOOST_TEST((b != errc::invalid_plan));
    BOOST_TEST((errc::invalid_plan != b));
    BOOST_TEST(b.message() == "stalled");

    boost::system::error_code from_std(make_error_code(errc::backend));
    BOOST_TEST((from_std == errc::backend));
    BOOST_TEST((errc::backend == from_std));

    // Back to a standard code: the registry number and category survive the round trip.
    std::error_code back = b;
    BOOST_TEST(back.value() == 7);
    BOOST_TEST(&back.category() == &gpu_async_category());
    BOOST_TEST((back == errc::stalled));

    // A standard code compared against a Boost code that wraps it.
    std::error_code s = errc::stalled;
    BOOST_TEST((b == s));
    BOOST_TEST((s == b));
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
