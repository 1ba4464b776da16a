// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/core/park_fallback.hpp>

#include <boost/test/unit_test.hpp>

#include <string>

namespace unit_core_park_fallback {

using namespace gpu_async;

namespace {

constexpr deadline_plan fixture_predict{150'000, 20'000, 50'000'000, 8};

plan_capabilities without(plan_capability c, std::string_view why) {
    plan_capabilities caps;
    caps.set_missing(c, why);
    return caps;
}

} // namespace

BOOST_AUTO_TEST_SUITE(park_fallback_suite)

BOOST_AUTO_TEST_CASE(the_declared_table) {
    BOOST_TEST_REQUIRE(park_fallback_table.size() == 3u);
    BOOST_TEST((park_fallback_table[0].requested == plan_kind::flag));
    BOOST_TEST((park_fallback_table[0].needs == plan_capability::word_store));
    BOOST_TEST((park_fallback_table[0].runs == plan_kind::poll));
    BOOST_TEST((park_fallback_table[1].requested == plan_kind::flag));
    BOOST_TEST((park_fallback_table[1].needs == plan_capability::word_park));
    BOOST_TEST((park_fallback_table[1].runs == plan_kind::poll));
    BOOST_TEST((park_fallback_table[2].requested == plan_kind::block));
    BOOST_TEST((park_fallback_table[2].needs == plan_capability::blocking_wait));
    BOOST_TEST((park_fallback_table[2].runs == plan_kind::poll));
    BOOST_TEST(to_string(plan_capability::word_park) == "word_park");
    BOOST_TEST(to_string(plan_capability::word_store) == "word_store");
    BOOST_TEST(to_string(plan_capability::blocking_wait) == "blocking_wait");
}

BOOST_AUTO_TEST_CASE(capabilities_are_a_value_with_reasons) {
    plan_capabilities caps;
    for (auto c : {plan_capability::word_park, plan_capability::word_store,
                   plan_capability::blocking_wait}) {
        BOOST_TEST(caps.has(c));
        BOOST_TEST(caps.why_missing(c).empty());
    }
    caps.set_missing(plan_capability::word_park, "no user-mode monitor");
    BOOST_TEST(!caps.has(plan_capability::word_park));
    BOOST_TEST(caps.why_missing(plan_capability::word_park) == "no user-mode monitor");
    BOOST_TEST(caps.has(plan_capability::blocking_wait));
    BOOST_TEST(!(caps == plan_capabilities{}));
    caps.set_missing(plan_capability::blocking_wait, "");
    BOOST_TEST(caps.why_missing(plan_capability::blocking_wait) == "not available");
    caps.set_available(plan_capability::word_park).set_available(plan_capability::blocking_wait);
    BOOST_TEST((caps == plan_capabilities{}));
    const auto chained = plan_capabilities{}.set_missing(plan_capability::word_store, "Metal");
    BOOST_TEST(!chained.has(plan_capability::word_store));
}

BOOST_AUTO_TEST_CASE(everything_available_runs_as_asked_without_warning) {
    const plan_capabilities all;
    for (const auto& p :
         {wait_plan::block(), wait_plan::poll().value(), wait_plan::poll(fixture_predict).value(),
          wait_plan::recommended(), wait_plan::flag(100'000, 1'000'000, fixture_predict).value()}) {
        const resolved_plan r = resolve(p, all);
        BOOST_TEST((r.plan == p), p.label());
        BOOST_TEST(!r.warning.has_value());
    }
}

BOOST_AUTO_TEST_CASE(poll_runs_everywhere) {
    plan_capabilities none;
    none.set_missing(plan_capability::word_park, "a")
        .set_missing(plan_capability::word_store, "b")
        .set_missing(plan_capability::blocking_wait, "c");
    for (const auto& p : {wait_plan::poll().value(), wait_plan::poll(fixture_predict).value()}) {
        const resolved_plan r = resolve(p, none);
        BOOST_TEST((r.plan == p));
        BOOST_TEST(!r.warning.has_value());
    }
}

BOOST_AUTO_TEST_CASE(flag_without_a_word_park_becomes_poll_keeping_the_prediction) {
    const auto requested = wait_plan::flag(100'000, 1'000'000, fixture_predict).value();
    const resolved_plan r =
        resolve(requested, without(plan_capability::word_park, "no user-mode monitor"));
    BOOST_TEST((r.plan == wait_plan::poll(fixture_predict).value()));
    BOOST_TEST_REQUIRE(r.warning.has_value());
    BOOST_TEST((r.warning->code() == errc::park_fallback));
    BOOST_TEST(r.warning->is_warning());
    BOOST_TEST_REQUIRE(r.warning->args().size() == 4u);
    BOOST_TEST(r.warning->args()[0] == requested.label());
    BOOST_TEST(r.warning->args()[1] == "word_park");
    BOOST_TEST(r.warning->args()[2] == "no user-mode monitor");
    BOOST_TEST(r.warning->args()[3] ==
               "poll+predict:margin_us=150,min_sleep_us=20,max_sleep_us=50000,window=8");
    BOOST_TEST(r.warning->message() ==
               "park fallback: plan 'flag:park_us=100,backstop_us=1000+predict:margin_us=150,"
               "min_sleep_us=20,max_sleep_us=50000,window=8' needs word_park (no user-mode "
               "monitor); running 'poll+predict:margin_us=150,min_sleep_us=20,max_sleep_us="
               "50000,window=8'");
}

BOOST_AUTO_TEST_CASE(flag_without_a_word_store_becomes_poll) {
    const resolved_plan r = resolve(wait_plan::recommended(),
                                    without(plan_capability::word_store, "no stream mem ops"));
    BOOST_TEST((r.plan == wait_plan::poll().value()));
    BOOST_TEST_REQUIRE(r.warning.has_value());
    BOOST_TEST(r.warning->args()[0] == "flag:park_us=100,backstop_us=1000");
    BOOST_TEST(r.warning->args()[1] == "word_store");
    BOOST_TEST(r.warning->args()[2] == "no stream mem ops");
    BOOST_TEST(r.warning->args()[3] == "poll");
}

BOOST_AUTO_TEST_CASE(the_first_missing_row_of_the_table_is_named) {
    plan_capabilities caps;
    caps.set_missing(plan_capability::word_park, "no monitor")
        .set_missing(plan_capability::word_store, "no store");
    const resolved_plan r = resolve(wait_plan::recommended(), caps);
    BOOST_TEST((r.plan == wait_plan::poll().value()));
    BOOST_TEST_REQUIRE(r.warning.has_value());
    BOOST_TEST(r.warning->args()[1] == "word_store"); // row 0 of the table
    BOOST_TEST(r.warning->args()[2] == "no store");
}

BOOST_AUTO_TEST_CASE(block_without_a_blocking_wait_becomes_poll) {
    const resolved_plan r =
        resolve(wait_plan::block(), without(plan_capability::blocking_wait, "Metal has none"));
    BOOST_TEST((r.plan == wait_plan::poll().value()));
    BOOST_TEST_REQUIRE(r.warning.has_value());
    BOOST_TEST(r.warning->message() ==
               "park fallback: plan 'block' needs blocking_wait (Metal has none); running 'poll'");
}

BOOST_AUTO_TEST_CASE(an_unrelated_missing_capability_changes_nothing) {
    const resolved_plan b =
        resolve(wait_plan::block(), without(plan_capability::word_park, "no monitor"));
    BOOST_TEST((b.plan == wait_plan::block()));
    BOOST_TEST(!b.warning.has_value());
    const resolved_plan f =
        resolve(wait_plan::recommended(), without(plan_capability::blocking_wait, "none"));
    BOOST_TEST((f.plan == wait_plan::recommended()));
    BOOST_TEST(!f.warning.has_value());
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_core_park_fallback
