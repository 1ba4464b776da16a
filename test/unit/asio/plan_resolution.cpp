// SPDX-License-Identifier: BSL-1.0
// The park fallback applied by every host: the port's plan-driven wait, the std host's blocking
// wait and the FILL executor's wait each resolve the plan against what they and the source can
// run, run the plan that results, and report the fallback (errc::park_fallback) in the report.
// Wait bands from the port: the band the published rows select runs.
#include <gpu_async/core/park_fallback.hpp>
#include <gpu_async/device/sim_device.hpp>
#include <gpu_async/fill/fill_executor.hpp>
#include <gpu_async/fill/wait_bands.hpp>
#include <gpu_async/gpu_completion_port.hpp>
#include <gpu_async/host/std_host.hpp>

#include "common/io_context_fixture.hpp"
#include "common/manual_device.hpp"
#include "common/scripted_idle.hpp"
#include "common/virtual_time.hpp"

#include "common/asio.hpp"
#include <boost/test/unit_test.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace unit_asio_plan_resolution {

using gpu_async::error_code;
using namespace gpu_async;
using gpu_async::test::manual;

namespace {

wait_plan plan(std::string_view text) {
    auto p = wait_plan::parse(text);
    BOOST_TEST_REQUIRE(p.has_value());
    return p.value();
}

constexpr std::string_view flag_text = "flag:park_us=100,backstop_us=1000";

/// A simulated stream seen through a source that cannot enqueue a word store (as a device
/// without stream memory operations): it declares word_store missing and counts arm() calls.
class storeless_source {
public:
    explicit storeless_source(sim_stream& s)
        : s_(&s) {}
    query_result query() { return s_->query(); }
    std::error_code block() { return s_->block(); }
    std::error_code arm() {
        ++arms;
        return s_->arm();
    }
    memory_descriptor descriptor() const { return s_->descriptor(); }
    bool park(dur_ns bound) { return s_->park(bound); }
    gpu_async::plan_capabilities plan_capabilities() const {
        gpu_async::plan_capabilities caps;
        caps.set_missing(plan_capability::word_store, "no stream memory operations");
        return caps;
    }
    int arms = 0;

private:
    sim_stream* s_;
};
static_assert(completion_source<storeless_source>);

struct outcome_of {
    std::optional<error_code> ec;
    wait_report report;
};

} // namespace

BOOST_AUTO_TEST_SUITE(plan_resolution_tests)

BOOST_AUTO_TEST_CASE(combine_keeps_what_both_can_run) {
    plan_capabilities a;
    a.set_missing(plan_capability::word_park, "no monitor");
    plan_capabilities b;
    b.set_missing(plan_capability::word_park, "other reason");
    b.set_missing(plan_capability::blocking_wait, "would block");
    const plan_capabilities c = combine(a, b);
    BOOST_TEST(!c.has(plan_capability::word_park));
    BOOST_TEST(c.why_missing(plan_capability::word_park) == "no monitor");
    BOOST_TEST(!c.has(plan_capability::blocking_wait));
    BOOST_TEST(c.why_missing(plan_capability::blocking_wait) == "would block");
    BOOST_TEST(c.has(plan_capability::word_store));
    BOOST_TEST((combine(plan_capabilities{}, plan_capabilities{}) == plan_capabilities{}));
}

BOOST_AUTO_TEST_CASE(a_source_without_declared_capabilities_has_every_capability) {
    sim_device dev(manual());
    auto s = dev.make_stream();
    BOOST_TEST((source_plan_capabilities(*s) == plan_capabilities{}));
    storeless_source st(*s);
    BOOST_TEST(!source_plan_capabilities(st).has(plan_capability::word_store));
}

BOOST_AUTO_TEST_CASE(the_port_runs_a_flag_plan_as_poll_on_a_source_that_cannot_store) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    sim_device dev(manual());
    auto h = dev.make_stream();
    h->enqueue(dur_ns{});
    storeless_source src(*h);
    BOOST_TEST(port.plan_capabilities_for(src).has(plan_capability::word_park));
    BOOST_TEST(!port.plan_capabilities_for(src).has(plan_capability::word_store));
    outcome_of r;
    port.async_wait(src, plan(flag_text), "p", [&](error_code ec, wait_report rep) {
        r.ec = ec;
        r.report = rep;
    });
    asio::post(ctx, [&] { dev.step_all(); }); // after the first query said pending
    gpu_async::test::run_to_completion(ctx);
    BOOST_REQUIRE(r.ec.has_value());
    BOOST_TEST(!*r.ec);
    BOOST_TEST(src.arms == 0); // a poll never arms
    BOOST_TEST(r.report.parks == 0u);
    BOOST_REQUIRE(r.report.warning.has_value());
    BOOST_TEST((r.report.warning->code() == errc::park_fallback));
    const std::string text = r.report.warning->message();
    BOOST_TEST(text.find("word_store") != std::string::npos);
    BOOST_TEST(text.find("no stream memory operations") != std::string::npos);
    BOOST_TEST(text.find("poll") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(the_port_runs_a_plan_it_can_run_unchanged_and_without_a_warning) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    sim_device dev(manual());
    auto h = dev.make_stream();
    h->set_doorbell(port.shared_bell());
    h->enqueue(dur_ns{});
    outcome_of r;
    port.async_wait(*h, plan(flag_text), "p", [&](error_code ec, wait_report rep) {
        r.ec = ec;
        r.report = rep;
    });
    asio::post(ctx, [&] { dev.step_all(); });
    gpu_async::test::run_to_completion(ctx);
    BOOST_REQUIRE(r.ec.has_value());
    BOOST_TEST(!*r.ec);
    BOOST_TEST((r.report.kind == wait_kind::parked));
    BOOST_TEST(!r.report.warning.has_value());
}

BOOST_AUTO_TEST_CASE(the_port_runs_the_band_the_published_rows_select) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    sim_device dev(manual());
    auto h = dev.make_stream();
    h->set_doorbell(port.shared_bell());
    auto bands = wait_bands::parse("poll;rows>=64:flag:park_us=100,backstop_us=1000");
    BOOST_TEST_REQUIRE(bands.has_value());
    step_rows rows;
    for (std::uint32_t n : {8u, 128u}) {
        rows.publish(n);
        h->enqueue(dur_ns{});
        outcome_of r;
        port.async_wait(*h, bands.value(), rows, "b", [&](error_code ec, wait_report rep) {
            r.ec = ec;
            r.report = rep;
        });
        asio::post(ctx, [&] { dev.step_all(); });
        gpu_async::test::run_to_completion(ctx);
        ctx.restart();
        BOOST_REQUIRE(r.ec.has_value());
        BOOST_TEST(!*r.ec);
        // Small steps poll (no park); large ones park on the word.
        if (n < 64)
            BOOST_TEST(r.report.parks == 0u);
        else
            BOOST_TEST(r.report.parks >= 1u);
    }
}

BOOST_AUTO_TEST_CASE(the_std_host_reports_the_fallback_it_applies) {
    sim_device dev(manual());
    auto h = dev.make_stream();
    h->enqueue(dur_ns{});
    dev.step_all();
    point_table<std::string> table;
    const wait_result r = wait_blocking(*h, plan(flag_text), table, std::string("p"));
    BOOST_REQUIRE(r.has_value());
    // Without a user-mode monitor the std host cannot park on a word: the plan ran as poll.
    const bool monitor = std_plan_capabilities().has(plan_capability::word_park);
    BOOST_TEST(r.value().warning.has_value() == !monitor);
    if (!monitor) BOOST_TEST((r.value().warning->code() == errc::park_fallback));

    storeless_source st(*h);
    h->enqueue(dur_ns{});
    dev.step_all();
    const wait_result s = wait_blocking(st, plan(flag_text), table, std::string("p"));
    BOOST_REQUIRE(s.has_value());
    BOOST_REQUIRE(s.value().warning.has_value());
    BOOST_TEST((s.value().warning->code() == errc::park_fallback));
    BOOST_TEST(st.arms == 0);
}

BOOST_AUTO_TEST_CASE(the_fill_executor_runs_a_block_plan_as_poll_with_a_warning) {
    manual_clock clk;
    gpu_async::test::scripted_idle idle(clk);
    completion_line line;
    line.words[0].store(1);
    struct source {
        completion_line* line;
        int blocks = 0;
        query_result query() {
            return line->words[0].load() >= 1 ? query_result::done() : query_result::pending();
        }
        std::error_code block() {
            ++blocks;
            return {};
        }
        std::error_code arm() { return {}; }
        memory_descriptor descriptor() const {
            return memory_descriptor(*line, *slot_id::at(0), 1);
        }
        bool park(dur_ns) { return line->words[0].load() >= 1; }
    } src{&line};
    fill_executor ex(gpu_async::test::us(100));
    std::optional<wait_result> got;
    ex.spawn(
        [](reactor& r, source& s, manual_clock& c, std::optional<wait_result>& out) -> fill_task<> {
            out = co_await fill_wait(r, s, wait_plan::block(), std::nullopt, c);
        }(ex.get_reactor(), src, clk, got));
    BOOST_REQUIRE(ex.run(idle).has_value());
    BOOST_REQUIRE(got.has_value());
    BOOST_REQUIRE(got->has_value());
    BOOST_TEST(src.blocks == 0);
    BOOST_TEST((got->value().kind == wait_kind::immediate));
    BOOST_REQUIRE(got->value().warning.has_value());
    BOOST_TEST((got->value().warning->code() == errc::park_fallback));
    BOOST_TEST(got->value().warning->message().find("blocking_wait") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_asio_plan_resolution
