// SPDX-License-Identifier: BSL-1.0
// Helper of basic_gpu_completion_port.cpp: a plan-driven wait, compiled where the plan machinery
// is seen, so that the other file can destroy a port whose point table exists without seeing it.
#include <gpu_async/gpu_completion_port.hpp>

#include "common/io_context_fixture.hpp"

#include "common/asio.hpp"

#include <cstddef>
#include <system_error>

namespace gpu_async::test {

namespace {

/// A source whose work has already finished: the wait ends at its first query.
struct finished_source {
    completion_line line;
    query_result query() { return query_result::done(); }
    std::error_code block() { return {}; }
    std::error_code arm() { return {}; }
    memory_descriptor descriptor() const { return memory_descriptor(line, *slot_id::at(0), 0); }
    bool park(dur_ns) { return true; }
};

} // namespace

/// Runs one plan-driven wait on `port` (which feeds its point table); returns the table's size.
std::size_t feed_point_table(gpu_completion_port& port, asio::io_context& ctx) {
    finished_source src;
    bool ok = false;
    port.async_wait(src, *wait_plan::parse("poll"), "light",
                    [&](gpu_async::error_code ec, const wait_report&) { ok = !ec; });
    run_to_completion(ctx);
    BOOST_TEST(ok);
    return port.points().size();
}

} // namespace gpu_async::test
