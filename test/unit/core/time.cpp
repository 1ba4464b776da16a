// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/core/time.hpp>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdint>
#include <limits>
#include <vector>

namespace unit_core_time {

using namespace gpu_async;

BOOST_AUTO_TEST_SUITE(time_suite)

BOOST_AUTO_TEST_CASE(saturating_arithmetic) {
    constexpr auto max64 = std::numeric_limits<std::uint64_t>::max();
    static_assert(mono_ns{10}.since(mono_ns{4}) == dur_ns{6});
    static_assert(mono_ns{4}.since(mono_ns{10}) == dur_ns{0});
    static_assert(mono_ns{max64 - 1}.after(dur_ns{5}) == mono_ns::max());
    static_assert(mono_ns{1}.after(dur_ns{5}) == mono_ns{6});
    static_assert(dur_ns{3} - dur_ns{5} == dur_ns{0});
    static_assert(dur_ns::max() + dur_ns{1} == dur_ns::max());
    static_assert(dur_ns::from_us(150) == dur_ns{150000});
    static_assert(dur_ns::from_us(max64) == dur_ns::max());
    static_assert(dur_ns::from_ms(2) == dur_ns{2000000});
    static_assert(dur_ns::from_ms(max64 / 1000) == dur_ns::max());
    static_assert(dur_ns{7} * 3 == dur_ns{21});
    static_assert(dur_ns{5} * 0 == dur_ns{0});
    static_assert(dur_ns{max64 / 1000} * 1000 == dur_ns{max64 / 1000 * 1000});
    static_assert(dur_ns{max64 / 1000 + 1} * 1000 == dur_ns::max());
    static_assert(dur_ns::max() * 2 == dur_ns::max());
    BOOST_TEST(min(dur_ns{3}, dur_ns{4}).count() == 3u);
    BOOST_TEST(max(mono_ns{3}, mono_ns{4}).count() == 4u);
}

BOOST_AUTO_TEST_CASE(manual_clock_moves_only_forward) {
    manual_clock c(mono_ns{100});
    BOOST_TEST(c.now().count() == 100u);
    c.advance(dur_ns{50});
    BOOST_TEST(c.now().count() == 150u);
    BOOST_TEST(!c.set(mono_ns{149}));
    BOOST_TEST(c.now().count() == 150u);
    BOOST_TEST(c.set(mono_ns{150}));
    BOOST_TEST(c.set(mono_ns{1000}));
    BOOST_TEST(c.now().count() == 1000u);
    c.advance(dur_ns::max());
    BOOST_TEST((c.now() == mono_ns::max()));
}

BOOST_AUTO_TEST_CASE(timers_fire_earliest_first_at_their_own_deadline) {
    manual_clock c;
    std::vector<std::pair<int, std::uint64_t>> fired;
    auto rec = [&](int id) { return [&, id] { fired.emplace_back(id, c.now().count()); }; };
    c.schedule(mono_ns{30}, rec(3));
    c.schedule(mono_ns{10}, rec(1));
    c.schedule(mono_ns{20}, rec(2));
    c.schedule(mono_ns{20}, rec(22)); // same deadline: in scheduling order
    const auto cancelled = c.schedule(mono_ns{15}, rec(99));
    BOOST_TEST(c.pending() == 5u);
    BOOST_TEST(c.next_deadline()->count() == 10u);
    BOOST_TEST(c.cancel(cancelled));
    BOOST_TEST(!c.cancel(cancelled));
    BOOST_TEST(c.pending() == 4u);

    c.advance(dur_ns{25});
    BOOST_TEST(c.now().count() == 25u);
    BOOST_TEST_REQUIRE(fired.size() == 3u);
    BOOST_TEST(fired[0].first == 1);
    BOOST_TEST(fired[0].second == 10u);
    BOOST_TEST(fired[1].first == 2);
    BOOST_TEST(fired[1].second == 20u);
    BOOST_TEST(fired[2].first == 22);
    BOOST_TEST(fired[2].second == 20u);
    BOOST_TEST(c.pending() == 1u);
    BOOST_TEST(c.next_deadline()->count() == 30u);

    c.set(mono_ns{30});
    BOOST_TEST(fired.size() == 4u);
    BOOST_TEST(fired[3].second == 30u);
    BOOST_TEST(c.pending() == 0u);
    BOOST_TEST(!c.next_deadline().has_value());
}

BOOST_AUTO_TEST_CASE(timer_scheduled_from_a_timer_and_past_deadlines) {
    manual_clock c(mono_ns{100});
    std::vector<std::uint64_t> at;
    c.schedule(mono_ns{50}, [&] { at.push_back(c.now().count()); }); // already past
    c.schedule(mono_ns{110}, [&] {
        at.push_back(c.now().count());
        c.schedule(mono_ns{115}, [&] { at.push_back(c.now().count()); });
        c.schedule(mono_ns{500}, [&] { at.push_back(c.now().count()); });
    });
    BOOST_TEST(c.pending() == 2u);
    c.advance(dur_ns{0});
    BOOST_TEST_REQUIRE(at.size() == 1u);
    BOOST_TEST(at[0] == 100u); // a past deadline fires at the current time, never earlier
    c.advance(dur_ns{20});
    BOOST_TEST_REQUIRE(at.size() == 3u);
    BOOST_TEST(at[1] == 110u);
    BOOST_TEST(at[2] == 115u);
    BOOST_TEST(c.now().count() == 120u);
    BOOST_TEST(c.pending() == 1u);
}

BOOST_AUTO_TEST_CASE(manual_timer_sleeps_on_virtual_time) {
    manual_clock c(mono_ns{5});
    manual_timer t(c);
    int fired = 0;
    c.schedule(mono_ns{7}, [&] { ++fired; });
    t.sleep_until(mono_ns{10});
    BOOST_TEST(c.now().count() == 10u);
    BOOST_TEST(fired == 1);
    t.sleep_until(mono_ns{3}); // in the past: returns at once, time unchanged
    BOOST_TEST(c.now().count() == 10u);
}

BOOST_AUTO_TEST_CASE(dur_ns_and_std_chrono) {
    using namespace std::chrono_literals;
    static_assert(dur_ns::from(2ms) == dur_ns::from_ms(2));
    static_assert(dur_ns::from(std::chrono::nanoseconds(7)).count() == 7u);
    static_assert(dur_ns::from(-5ms) == dur_ns::zero());
    static_assert(dur_ns::from(std::chrono::duration<double, std::micro>(1.5)).count() == 1500u);
    static_assert(dur_ns::from(std::chrono::hours::max()) == dur_ns::max());
    static_assert(dur_ns::from_us(3).chrono() == 3us);
    static_assert(dur_ns::max().chrono() == std::chrono::nanoseconds::max());
    const std::chrono::nanoseconds read = dur_ns::from_ms(4); // reads as std::chrono
    BOOST_TEST(read.count() == 4'000'000);
    BOOST_TEST(dur_ns::from(std::chrono::seconds(3)).count() == 3'000'000'000u);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_core_time
