// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/fill/executor_kind.hpp>

#include <boost/test/unit_test.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace unit_core_executor_kind {

using namespace gpu_async;

BOOST_AUTO_TEST_SUITE(executor_kind_suite)

BOOST_AUTO_TEST_CASE(parse_accepts_the_canonical_names_and_round_trips) {
    for (executor_kind k : executor_kinds) {
        const auto r = parse_executor_kind(to_string(k));
        BOOST_REQUIRE(r.has_value());
        BOOST_TEST((r.value() == k));
    }
    BOOST_TEST(to_string(executor_kind::naive) == "naive");
    BOOST_TEST(to_string(executor_kind::fill) == "gpu-reactor");
    BOOST_TEST(to_string(executor_kind::io_uring) == "io-uring");
}

BOOST_AUTO_TEST_CASE(parse_refuses_any_other_spelling) {
    for (std::string_view bad :
         {"", "Naive", "gpu_reactor", "io_uring", "io-uring ", " naive", "reactor", "fill"}) {
        const auto r = parse_executor_kind(bad);
        BOOST_REQUIRE(!r.has_value());
        BOOST_TEST((r.error().code() == errc::invalid_executor));
        BOOST_REQUIRE(r.error().args().size() == 2u);
        BOOST_TEST(r.error().args()[0] == std::string(bad));
        BOOST_TEST(r.error().args()[1] == "naive, gpu-reactor, io-uring");
    }
    BOOST_TEST(parse_executor_kind("uring").error().message() ==
               "invalid executor 'uring': accepted names are naive, gpu-reactor, io-uring");
}

BOOST_AUTO_TEST_CASE(capabilities_carry_reasons) {
    executor_capabilities caps;
    for (executor_kind k : executor_kinds)
        BOOST_TEST(caps.has(k));
    caps.set_missing(executor_kind::io_uring, "io_uring disabled")
        .set_missing(executor_kind::fill, "")
        .set_missing(executor_kind::naive, "ignored");
    BOOST_TEST(!caps.has(executor_kind::io_uring));
    BOOST_TEST(caps.why_missing(executor_kind::io_uring) == "io_uring disabled");
    BOOST_TEST(caps.why_missing(executor_kind::fill) == "not available");
    BOOST_TEST(caps.has(executor_kind::naive)); // the floor
    caps.set_available(executor_kind::io_uring);
    BOOST_TEST(caps.has(executor_kind::io_uring));
    BOOST_TEST(caps.why_missing(executor_kind::io_uring).empty());
}

// The whole fallback table: every kind x every host x strict or not.
BOOST_AUTO_TEST_CASE(fallback_table_strict_and_not) {
    struct row {
        executor_kind requested;
        bool io_uring_ok, reactor_ok;
        executor_strictness strictness;
        std::optional<executor_kind> runs; // empty: refused
        std::string why;                   // warning/refusal reason; empty: no warning
    };
    using K = executor_kind;
    constexpr auto lax = executor_strictness::fallback;
    constexpr auto strict = executor_strictness::strict;
    const std::string io = "io_uring disabled";
    const std::string mon = "no user-mode monitor";
    const std::vector<row> table{
        // naive runs everywhere.
        {K::naive, true, true, lax, K::naive, ""},
        {K::naive, false, false, lax, K::naive, ""},
        {K::naive, false, false, strict, K::naive, ""},
        // gpu-reactor.
        {K::fill, true, true, lax, K::fill, ""},
        {K::fill, false, true, strict, K::fill, ""},
        {K::fill, true, false, lax, K::naive, mon},
        {K::fill, true, false, strict, std::nullopt, mon},
        // io-uring.
        {K::io_uring, true, true, lax, K::io_uring, ""},
        {K::io_uring, true, false, strict, K::io_uring, ""},
        {K::io_uring, false, true, lax, K::fill, io},
        {K::io_uring, false, true, strict, std::nullopt, io},
        {K::io_uring, false, false, lax, K::naive, io + "; gpu-reactor: " + mon},
        {K::io_uring, false, false, strict, std::nullopt, io},
    };
    for (const row& r : table) {
        executor_capabilities caps;
        if (!r.io_uring_ok) caps.set_missing(K::io_uring, io);
        if (!r.reactor_ok) caps.set_missing(K::fill, mon);
        BOOST_TEST_CONTEXT("requested " << to_string(r.requested) << " io_uring " << r.io_uring_ok
                                        << " reactor " << r.reactor_ok << " strict "
                                        << (r.strictness == strict)) {
            const auto res = resolve(r.requested, caps, r.strictness);
            if (!r.runs) {
                BOOST_REQUIRE(!res.has_value());
                BOOST_TEST((res.error().code() == errc::executor_refused));
                BOOST_TEST(!res.error().is_warning());
                const std::vector<std::string> args{std::string(to_string(r.requested)), r.why};
                BOOST_TEST(res.error().args() == args, boost::test_tools::per_element());
                continue;
            }
            BOOST_REQUIRE(res.has_value());
            BOOST_TEST((res.value().kind == *r.runs));
            if (r.why.empty()) {
                BOOST_TEST(!res.value().warning.has_value());
            } else {
                BOOST_REQUIRE(res.value().warning.has_value());
                const coded_error& w = *res.value().warning;
                BOOST_TEST((w.code() == errc::executor_fallback));
                BOOST_TEST(w.is_warning());
                const std::vector<std::string> args{std::string(to_string(r.requested)), r.why,
                                                    std::string(to_string(*r.runs))};
                BOOST_TEST(w.args() == args, boost::test_tools::per_element());
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(fallback_messages_read_well) {
    const auto caps =
        executor_capabilities().set_missing(executor_kind::io_uring, "io_uring disabled");
    const auto w = resolve(executor_kind::io_uring, caps);
    BOOST_REQUIRE(w.has_value());
    BOOST_TEST(w.value().warning->message() ==
               "executor fallback: 'io-uring' is unavailable (io_uring disabled); running "
               "'gpu-reactor'");
    const auto refused = resolve(executor_kind::io_uring, caps, executor_strictness::strict);
    BOOST_REQUIRE(!refused.has_value());
    BOOST_TEST(refused.error().message() ==
               "executor refused: 'io-uring' is unavailable (io_uring disabled) and the request "
               "is strict");
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_core_executor_kind
