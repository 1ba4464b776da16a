// SPDX-License-Identifier: BSL-1.0
// The stand-back gate: the count of drains out and the wait a reactor's waiter makes while
// they scan for it.
#include <gpu_async/asio/detail/stand_back.hpp>

#include <boost/test/unit_test.hpp>

namespace unit_hosts_stand_back {

using namespace gpu_async;

BOOST_AUTO_TEST_SUITE(stand_back_suite)

BOOST_AUTO_TEST_CASE(the_gate_counts_the_drains_out) {
    detail::stand_back_gate gate;
    BOOST_TEST(gate.drains_out() == 0u);
    gate.drain_out();
    gate.drain_out();
    BOOST_TEST(gate.drains_out() == 2u);
    gate.drain_ended();
    BOOST_TEST(gate.drains_out() == 1u);
    gate.drain_ended();
    BOOST_TEST(gate.drains_out() == 0u);
}

BOOST_AUTO_TEST_CASE(a_wait_that_is_over_or_unbounded_returns_without_looking_again) {
    detail::stand_back_gate gate;
    doorbell bell;
    detail::bell_waiter waiter(word_wait::probe());
    int looks = 0;
    gate.wait(bell, waiter, dur_ns::from_ms(1000), true, [&] {
        ++looks;
        return true;
    });
    BOOST_TEST(looks == 1);
    looks = 0;
    gate.wait(bell, waiter, dur_ns{}, true, [&] {
        ++looks;
        return false;
    });
    BOOST_TEST(looks == 1);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_hosts_stand_back
