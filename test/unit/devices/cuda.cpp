// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/device/cuda.hpp>
#include <gpu_async/wait/doorbell.hpp>

#include <gpu_async/asio/error.hpp>
#include <gpu_async/gpu_completion_port.hpp>

#include "common/fake_cuda_driver.hpp"
#include "common/io_context_fixture.hpp"
#include "common/slots.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>
#include <boost/test/unit_test.hpp>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace unit_devices_cuda {

using namespace gpu_async;

// The fake CUDA driver (test/common/fake_cuda_driver.hpp) records every call, so the tests check
// the CUDA table's wiring (which call, with which arguments, in which order) with no GPU and no
// libcuda.
using namespace gpu_async::test::cuda_fake;
using gpu_async::test::slot;

namespace {

using calls_t = std::vector<std::string>;

} // namespace

BOOST_AUTO_TEST_SUITE(cuda_suite)

BOOST_AUTO_TEST_CASE(a_missing_library_is_unavailable) {
    auto d = cuda_driver::load_library("libgpu_async_no_such_driver.so.1");
    BOOST_TEST_REQUIRE(!d.has_value());
    BOOST_TEST(d.error().code() == errc::unavailable);
    BOOST_TEST(d.error().message().find("libgpu_async_no_such_driver.so.1") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_library_without_get_proc_address_is_unavailable) {
    auto d = cuda_driver::load_library("libm.so.6");
    BOOST_TEST_REQUIRE(!d.has_value());
    BOOST_TEST(d.error().code() == errc::unavailable);
    BOOST_TEST(d.error().message().find("cuGetProcAddress_v2") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(loading_the_driver_here_succeeds_or_fails_cleanly) {
    // Where libcuda.so.1 is missing (CI, this machine) the load is a coded error naming it;
    // where a driver exists it loads. Either way the answer is cached.
    auto first = cuda_driver::load();
    auto second = cuda_driver::load();
    BOOST_TEST(first.has_value() == second.has_value());
    if (first.has_value()) {
        BOOST_TEST(first.value() == second.value());
        BOOST_TEST(first.value()->version() > 0);
    } else {
        BOOST_TEST(first.error().code() == errc::unavailable);
        BOOST_TEST((first.error() == second.error()));
        const std::string m = first.error().message();
        BOOST_TEST(
            (m.find("libcuda.so.1") != std::string::npos || m.find("cuInit") != std::string::npos));
    }
}

BOOST_AUTO_TEST_CASE(no_resolver_is_unavailable) {
    auto d = cuda_driver::from_resolver(nullptr);
    BOOST_TEST_REQUIRE(!d.has_value());
    BOOST_TEST(d.error().code() == errc::unavailable);
}

BOOST_FIXTURE_TEST_CASE(resolution_asks_the_12_0_abi_and_initializes, fixture) {
    auto d = cuda_driver::from_resolver(&f_get_proc_address);
    BOOST_TEST_REQUIRE(d.has_value());
    BOOST_TEST(state.init_flags == 0);
    BOOST_TEST(d.value()->version() == 13000);
    BOOST_TEST(!state.versions.empty());
    // Each entry point at the API version of its ABI: 12.0, and 12.1 for cuCtxSetFlags (which
    // CUDA 12.1 introduced: a 12.0 request fails as "version not sufficient" on a real driver).
    for (const auto& [name, v] : state.version_of)
        BOOST_TEST(v == (name == "cuCtxSetFlags" ? 12010 : 12000), name);
    BOOST_TEST(state.version_of.count("cuCtxSetFlags") == 1u);
    for (std::uint64_t f : state.flags)
        BOOST_TEST(f == 0u);
    BOOST_TEST(d.value()->api().stream_write_value64 != nullptr);
    BOOST_TEST(d.value()->api().memset_d8_async == nullptr); // optional, absent in the fake
    BOOST_TEST(std::string(d.value()->line_table().backend) == "CUDA");
    BOOST_TEST(d.value()->status_name(600) == "CUDA_ERROR_NOT_READY");
    BOOST_TEST(d.value()->status_name(12345) == "CUDA_ERROR_12345");
}

BOOST_FIXTURE_TEST_CASE(a_missing_entry_point_is_unavailable, fixture) {
    state.missing = {"cuStreamQuery", "cuMemHostAlloc"};
    auto d = cuda_driver::from_resolver(&f_get_proc_address);
    BOOST_TEST_REQUIRE(!d.has_value());
    BOOST_TEST(d.error().code() == errc::unavailable);
    const std::string m = d.error().message();
    BOOST_TEST(m.find("cuStreamQuery") != std::string::npos);
    BOOST_TEST(m.find("cuMemHostAlloc") != std::string::npos);
    BOOST_TEST(state.init_flags == -1); // nothing initialized
}

BOOST_FIXTURE_TEST_CASE(init_failure_is_unavailable_with_the_status, fixture) {
    state.fail["cuInit"] = 100;
    auto d = cuda_driver::from_resolver(&f_get_proc_address);
    BOOST_TEST_REQUIRE(!d.has_value());
    BOOST_TEST(d.error().code() == errc::unavailable);
    BOOST_TEST(d.error().message().find("CUDA_ERROR_NO_DEVICE (100)") != std::string::npos);
}

BOOST_FIXTURE_TEST_CASE(without_write_value64_only_line_creation_fails, fixture) {
    state.missing = {"cuStreamWriteValue64"};
    auto d = driver();
    BOOST_TEST(d->api().stream_write_value64 == nullptr);
    state.current = 0;
    auto line = cuda_line::create(*d);
    BOOST_TEST_REQUIRE(!line.has_value());
    BOOST_TEST(line.error().code() == errc::unavailable);
    BOOST_TEST(line.error().message().find("cuStreamWriteValue64_v2") != std::string::npos);
    BOOST_TEST(state.refs[0] == 0);
    BOOST_TEST(state.pages.empty());
}

BOOST_FIXTURE_TEST_CASE(a_device_that_cannot_map_host_memory_is_unavailable, fixture) {
    auto d = driver();
    state.can_map = 0;
    auto line = cuda_line::create_on(*d, 1);
    BOOST_TEST_REQUIRE(!line.has_value());
    BOOST_TEST(line.error().code() == errc::unavailable);
    BOOST_TEST(line.error().message().find("CUDA device 1") != std::string::npos);
    BOOST_TEST(line.error().message().find("CAN_MAP_HOST_MEMORY") != std::string::npos);
    BOOST_TEST(state.refs[1] == 0);
}

BOOST_FIXTURE_TEST_CASE(a_device_without_64_bit_memops_is_unavailable, fixture) {
    auto d = driver();
    state.can_memops = 0;
    state.current = 0;
    auto line = cuda_line::create(*d);
    BOOST_TEST_REQUIRE(!line.has_value());
    BOOST_TEST(line.error().code() == errc::unavailable);
    BOOST_TEST(line.error().message().find("CAN_USE_64_BIT_STREAM_MEM_OPS") != std::string::npos);
    BOOST_TEST(state.refs[0] == 0);
}

BOOST_FIXTURE_TEST_CASE(an_unknown_attribute_is_unavailable, fixture) {
    auto d = driver();
    state.fail["cuDeviceGetAttribute"] = cuda::error_invalid_value;
    auto line = cuda_line::create_on(*d, 0);
    BOOST_TEST_REQUIRE(!line.has_value());
    BOOST_TEST(line.error().code() == errc::unavailable);
    BOOST_TEST(line.error().message().find("unknown to this driver") != std::string::npos);
}

BOOST_FIXTURE_TEST_CASE(a_bad_ordinal_is_a_driver_status, fixture) {
    auto d = driver();
    state.fail["cuDeviceGet"] = 101;
    auto line = cuda_line::create_on(*d, 7);
    BOOST_TEST_REQUIRE(!line.has_value());
    BOOST_TEST(line.error().code() == errc::driver_status);
    BOOST_TEST(line.error().args().at(0) == "cuDeviceGet");
    BOOST_TEST(line.error().args().at(2) == "101");
}

BOOST_FIXTURE_TEST_CASE(no_current_context_is_no_domain, fixture) {
    auto d = driver();
    auto line = cuda_line::create(*d);
    BOOST_TEST_REQUIRE(!line.has_value());
    BOOST_TEST(line.error().code() == errc::no_domain);
    BOOST_TEST((state.calls == calls_t{"cuCtxGetCurrent"}));
}

BOOST_FIXTURE_TEST_CASE(a_line_runs_the_driver_calls_in_the_owned_order, fixture) {
    auto d = driver();
    state.current = 0;
    {
        auto line = cuda_line::create(*d);
        BOOST_TEST_REQUIRE(line.has_value());
        BOOST_TEST(
            (state.calls ==
             calls_t{"cuCtxGetCurrent", "cuCtxGetDevice", "cuDeviceGetAttribute 19 0",
                     "cuDeviceGetAttribute 122 0", "cuDevicePrimaryCtxRetain 0",
                     "cuCtxPushCurrent 0", "cuMemHostAlloc 4096", "cuCtxPopCurrent",
                     "cuCtxPushCurrent 0", "cuMemHostGetDevicePointer", "cuCtxPopCurrent",
                     // The probe of the line's health query: a stream of its own.
                     "cuCtxPushCurrent 0", "cuStreamCreate flags 1 in 0", "cuCtxPopCurrent"}));
        BOOST_TEST(state.alloc_flags ==
                   (cuda::memhostalloc_devicemap | cuda::memhostalloc_portable));
        BOOST_TEST(line.value().context() == state.ctx(0));
        BOOST_TEST(line.value().device() == 0);
        BOOST_TEST(state.refs[0] == 1);
        BOOST_TEST(state.current == 0); // the caller's context is current again

        state.calls.clear();
        auto stored = line.value().store(slot(4), state.stream(0));
        BOOST_TEST_REQUIRE(stored.has_value());
        BOOST_TEST(stored.value().target() == 1u);
        BOOST_TEST(stored.value().is_complete());
        BOOST_TEST((state.calls == calls_t{"cuStreamGetCtx", "cuStreamWriteValue64 1 flags 0"}));
        state.calls.clear();
    }
    BOOST_TEST((state.calls == calls_t{"cuCtxPushCurrent 0", "cuCtxSynchronize", "cuCtxPopCurrent",
                                       "cuCtxPushCurrent 0", "cuStreamDestroy 2", "cuCtxPopCurrent",
                                       "cuCtxPushCurrent 0", "cuMemFreeHost", "cuCtxPopCurrent",
                                       "cuDevicePrimaryCtxRelease 0"}));
    BOOST_TEST(state.refs[0] == 0);
    BOOST_TEST(state.pages.empty());
}

BOOST_FIXTURE_TEST_CASE(a_stream_of_another_context_is_refused, fixture) {
    auto d = driver();
    auto line = cuda_line::create_on(*d, 0);
    BOOST_TEST_REQUIRE(line.has_value());
    state.calls.clear();
    auto stored = line.value().store(slot(0), state.stream(1));
    BOOST_TEST_REQUIRE(!stored.has_value());
    BOOST_TEST(stored.error().code() == errc::foreign_stream);
    BOOST_TEST(stored.error().message().find("CUDA stream") != std::string::npos);
    BOOST_TEST((state.calls == calls_t{"cuStreamGetCtx"}));
}

BOOST_FIXTURE_TEST_CASE(a_failed_synchronize_leaks_the_page_and_the_context, fixture) {
    auto d = driver();
    auto line = cuda_line::create_on(*d, 0);
    BOOST_TEST_REQUIRE(line.has_value());
    state.fail["cuCtxSynchronize"] = 719;
    state.calls.clear();
    const auto error = line.value().close();
    BOOST_TEST_REQUIRE(error.has_value());
    BOOST_TEST((error->args() ==
                std::vector<std::string>{"cuCtxSynchronize", "CUDA_ERROR_LAUNCH_FAILED", "719"}));
    // The probe stream goes (nothing was ever enqueued on it); the page and the context leak.
    BOOST_TEST(
        (state.calls == calls_t{"cuCtxPushCurrent 0", "cuCtxSynchronize", "cuCtxPopCurrent",
                                "cuCtxPushCurrent 0", "cuStreamDestroy 2", "cuCtxPopCurrent"}));
    BOOST_TEST(state.refs[0] == 1);
    BOOST_TEST(state.pages.size() == 1u);
    BOOST_TEST(line.value().mapped().leaked());
}

BOOST_FIXTURE_TEST_CASE(a_failed_push_before_alloc_releases_the_context, fixture) {
    auto d = driver();
    state.fail["cuCtxPushCurrent"] = 201;
    auto line = cuda_line::create_on(*d, 0);
    BOOST_TEST_REQUIRE(!line.has_value());
    BOOST_TEST((line.error().args() ==
                std::vector<std::string>{"cuCtxPushCurrent", "CUDA_ERROR_INVALID_CONTEXT", "201"}));
    BOOST_TEST(state.calls.back() == "cuDevicePrimaryCtxRelease 0");
    BOOST_TEST(state.refs[0] == 0);
    BOOST_TEST(state.pages.empty());
}

BOOST_FIXTURE_TEST_CASE(a_failed_alloc_names_the_call_and_releases, fixture) {
    auto d = driver();
    state.fail["cuMemHostAlloc"] = 2;
    auto line = cuda_line::create_on(*d, 0);
    BOOST_TEST_REQUIRE(!line.has_value());
    BOOST_TEST(line.error().code() == errc::driver_status);
    BOOST_TEST(line.error().args().at(0) == "cuMemHostAlloc");
    BOOST_TEST(state.refs[0] == 0);
    BOOST_TEST(state.current == -1); // the push was popped
}

BOOST_FIXTURE_TEST_CASE(a_source_queries_blocks_arms_and_parks, fixture) {
    auto d = driver();
    auto line = cuda_line::create_on(*d, 0);
    BOOST_TEST_REQUIRE(line.has_value());
    auto made = cuda_source::create(line.value(), slot(2), state.stream(2));
    BOOST_TEST_REQUIRE(made.has_value());
    cuda_source& source = made.value();
    BOOST_TEST(source.descriptor().target() == 0u);
    BOOST_TEST(source.descriptor().is_complete());

    state.stream_status = cuda::error_not_ready;
    BOOST_TEST((source.query() == query_result::pending()));
    state.stream_status = cuda::success;
    BOOST_TEST((source.query() == query_result::done()));
    BOOST_TEST(!source.block());

    state.land_stores = false; // the store is enqueued but the "device" has not run it yet
    BOOST_TEST(!source.arm());
    BOOST_TEST(source.descriptor().target() == 1u);
    BOOST_TEST(&source.descriptor().line() == &line.value().line());
    BOOST_TEST(!source.descriptor().is_complete());
    BOOST_TEST(!source.park(dur_ns{1000})); // bounded: returns without the store
    state.land_stores = true;
    BOOST_TEST(!source.arm());
    BOOST_TEST(source.descriptor().target() == 2u);
    BOOST_TEST(source.park(dur_ns{1000}));
    BOOST_TEST(!source.last_error().has_value());
}

BOOST_FIXTURE_TEST_CASE(a_source_reports_device_faults_and_arm_failures, fixture) {
    auto d = driver();
    auto line = cuda_line::create_on(*d, 0);
    BOOST_TEST_REQUIRE(line.has_value());
    auto made = cuda_source::create(line.value(), slot(0), state.stream(0));
    BOOST_TEST_REQUIRE(made.has_value());
    cuda_source& source = made.value();

    state.stream_status = 719;
    const query_result q = source.query();
    BOOST_TEST(q.is_failed());
    BOOST_TEST(q.error == errc::device_fault);
    BOOST_TEST_REQUIRE(source.last_error().has_value());
    BOOST_TEST((source.last_error()->args() ==
                std::vector<std::string>{"cuStreamQuery", "CUDA_ERROR_LAUNCH_FAILED", "719"}));
    BOOST_TEST(source.block() == errc::device_fault);
    BOOST_TEST(source.last_error()->args().at(0) == "cuStreamSynchronize");

    state.fail["cuStreamWriteValue64"] = 1;
    BOOST_TEST(source.arm() == errc::driver_status);
    BOOST_TEST(source.descriptor().target() == 0u);
    BOOST_TEST(source.last_error()->args().at(0) == "cuStreamWriteValue64");
}

BOOST_FIXTURE_TEST_CASE(a_source_on_a_foreign_stream_is_refused, fixture) {
    auto d = driver();
    auto line = cuda_line::create_on(*d, 0);
    BOOST_TEST_REQUIRE(line.has_value());
    auto made = cuda_source::create(line.value(), slot(0), state.stream(1));
    BOOST_TEST_REQUIRE(!made.has_value());
    BOOST_TEST(made.error().code() == errc::foreign_stream);
    state.fail["cuStreamGetCtx"] = 400;
    auto failed = cuda_source::create(line.value(), slot(0), state.stream(0));
    BOOST_TEST_REQUIRE(!failed.has_value());
    BOOST_TEST(failed.error().code() == errc::driver_status);
}

// The Asio port accepts a CUDA line's descriptors and CUDA sources (fake driver: the "device"
// stores at once, and the stream reports what the test sets).
BOOST_FIXTURE_TEST_CASE(the_port_waits_on_a_cuda_descriptor, fixture) {
    auto d = driver();
    auto line = cuda_line::create_on(*d, 0);
    BOOST_TEST_REQUIRE(line.has_value());
    auto stored = line.value().store(slot(1), state.stream(0));
    BOOST_TEST_REQUIRE(stored.has_value());
    boost::asio::io_context io;
    gpu_completion_port port(io);
    std::optional<boost::system::error_code> result;
    port.async_wait(stored.value(), [&](boost::system::error_code ec) { result = ec; });
    gpu_async::test::run_to_completion(io);
    BOOST_TEST_REQUIRE(result.has_value());
    BOOST_TEST(!*result);
}

BOOST_FIXTURE_TEST_CASE(the_port_runs_a_plan_over_a_cuda_source, fixture) {
    auto d = driver();
    auto line = cuda_line::create_on(*d, 0);
    BOOST_TEST_REQUIRE(line.has_value());
    auto made = cuda_source::create(line.value(), slot(0), state.stream(0));
    BOOST_TEST_REQUIRE(made.has_value());
    boost::asio::io_context io;
    gpu_completion_port port(io);

    // Pending at the first query; the plan arms a store, which lands in the line at once; the
    // port parks on the line, sees it, and the final query (the authority) says done.
    state.pending_queries = 1;
    std::optional<boost::system::error_code> result;
    wait_report report;
    port.async_wait(made.value(), wait_plan::recommended(), "cuda",
                    [&](boost::system::error_code ec, wait_report r) {
                        result = ec;
                        report = r;
                    });
    gpu_async::test::run_to_completion(io);
    BOOST_TEST_REQUIRE(result.has_value());
    BOOST_TEST(!*result);
    BOOST_TEST((report.kind == wait_kind::parked));
    BOOST_TEST(made.value().descriptor().target() == 1u); // the plan armed one store
    BOOST_TEST(state.count_prefix("cuStreamWriteValue64") == 1u);

    // A device fault reaches the waiter as the source's code.
    state.stream_status = 719;
    std::optional<boost::system::error_code> failed;
    port.async_wait(made.value(), wait_plan::recommended(), "cuda",
                    [&](boost::system::error_code ec, wait_report) { failed = ec; });
    io.restart();
    gpu_async::test::run_to_completion(io);
    BOOST_TEST_REQUIRE(failed.has_value());
    BOOST_TEST((*failed == errc::device_fault));
    BOOST_TEST_REQUIRE(made.value().last_error().has_value());
    BOOST_TEST(made.value().last_error()->args().at(1) == "CUDA_ERROR_LAUNCH_FAILED");
}

// --- doorbell stores --------------------------------------------------------------------------

BOOST_FIXTURE_TEST_CASE(a_doorbell_is_registered_mapped_and_signalled_in_one_batch, fixture) {
    auto d = driver();
    state.current = 0;
    auto bell = std::make_shared<doorbell>();
    {
        auto line = cuda_line::create(*d);
        BOOST_TEST_REQUIRE(line.has_value());
        state.calls.clear();
        BOOST_TEST(!line.value().attach_doorbell(bell).has_value());
        // Registered in the line's context: the 64-byte line, PORTABLE | DEVICEMAP (not
        // write-combined: no such flag exists for a registration), then its device pointer.
        BOOST_TEST((state.calls == calls_t{"cuDevicePrimaryCtxRetain 0", "cuCtxPushCurrent 0",
                                           "cuMemHostRegister 64 flags 3 in 0", "cuCtxPopCurrent",
                                           "cuCtxPushCurrent 0", "cuMemHostGetDevicePointer",
                                           "cuCtxPopCurrent"}));
        BOOST_TEST(state.register_flags ==
                   (cuda::memhostregister_portable | cuda::memhostregister_devicemap));
        BOOST_TEST(state.registered.count(&bell->line()) == 1u);
        BOOST_TEST(state.refs[0] == 2);

        state.calls.clear();
        auto stored = line.value().store(slot(2), state.stream(0));
        BOOST_TEST_REQUIRE(stored.has_value());
        BOOST_TEST((state.calls == calls_t{"cuStreamGetCtx",
                                           "cuStreamBatchMemOp 2 flags 0: op 5 value 1 flags 0; "
                                           "op 5 value 1 flags 0;"}));
        BOOST_TEST_REQUIRE(state.stores.size() == 2u);
        BOOST_TEST(state.stores[0].address == line.value().mapped().device_address(slot(2)));
        BOOST_TEST(state.stores[1].address ==
                   reinterpret_cast<std::uintptr_t>(&bell->line().words[doorbell::device_word]) +
                       device_offset);
        BOOST_TEST(state.stores[0].stream == state.stream(0));
        BOOST_TEST(state.stores[1].stream == state.stream(0));
        BOOST_TEST(state.stores[0].batch == 1);
        BOOST_TEST(state.stores[1].batch == 1);
        BOOST_TEST(stored.value().is_complete());
        BOOST_TEST(bell->device_signaled());
        BOOST_TEST(bell->count() == 0u);
        state.calls.clear();
    }
    // Synchronize, unregister in the registering context, release its reference, then the page.
    BOOST_TEST((state.calls == calls_t{"cuCtxPushCurrent 0", "cuCtxSynchronize", "cuCtxPopCurrent",
                                       "cuCtxPushCurrent 0", "cuStreamDestroy 2", "cuCtxPopCurrent",
                                       "cuCtxPushCurrent 0", "cuMemHostUnregister in 0",
                                       "cuCtxPopCurrent", "cuDevicePrimaryCtxRelease 0",
                                       "cuCtxPushCurrent 0", "cuMemFreeHost", "cuCtxPopCurrent",
                                       "cuDevicePrimaryCtxRelease 0"}));
    BOOST_TEST(state.registered.empty());
    BOOST_TEST(state.refs[0] == 0);
}

BOOST_FIXTURE_TEST_CASE(without_batch_mem_op_the_doorbell_is_a_second_write_value, fixture) {
    state.missing = {"cuStreamBatchMemOp"};
    auto d = driver();
    BOOST_TEST(d->api().stream_batch_mem_op == nullptr);
    auto line = cuda_line::create_on(*d, 0);
    BOOST_TEST_REQUIRE(line.has_value());
    auto bell = std::make_shared<doorbell>();
    BOOST_TEST(!line.value().attach_doorbell(bell).has_value());
    state.calls.clear();
    BOOST_TEST(line.value().store(slot(0), state.stream(0)).has_value());
    BOOST_TEST((state.calls == calls_t{"cuStreamGetCtx", "cuStreamWriteValue64 1 flags 0",
                                       "cuStreamWriteValue64 1 flags 0"}));
    BOOST_TEST_REQUIRE(state.stores.size() == 2u);
    BOOST_TEST(state.stores[0].address == line.value().mapped().device_address(slot(0)));
    BOOST_TEST(state.stores[1].address == line.value().mapped().doorbell_address());
    BOOST_TEST(state.stores[0].batch == 0);
    BOOST_TEST(state.stores[1].stream == state.stream(0));
    BOOST_TEST(bell->device_signaled());
}

BOOST_FIXTURE_TEST_CASE(two_contexts_share_one_registration_with_a_pointer_each, fixture) {
    auto d = driver();
    auto bell = std::make_shared<doorbell>();
    auto a = cuda_line::create_on(*d, 0);
    auto b = cuda_line::create_on(*d, 1);
    BOOST_TEST_REQUIRE(a.has_value());
    BOOST_TEST_REQUIRE(b.has_value());
    state.calls.clear();
    state.pointer_contexts.clear();
    BOOST_TEST(!a.value().attach_doorbell(bell).has_value());
    BOOST_TEST(!b.value().attach_doorbell(bell).has_value());
    BOOST_TEST(state.count_prefix("cuMemHostRegister") == 1u);
    BOOST_TEST((state.pointer_contexts == std::vector<int>{0, 1})); // one per context
    BOOST_TEST(state.refs[0] == 2);                                 // line a + registration
    BOOST_TEST(state.refs[1] == 1);
    BOOST_TEST(!a.value().close().has_value());
    BOOST_TEST(state.count_prefix("cuMemHostUnregister") == 0u); // b still uses it
    BOOST_TEST(state.refs[0] == 1);
    state.calls.clear();
    BOOST_TEST(!b.value().close().has_value());
    BOOST_TEST(state.count_prefix("cuMemHostUnregister in 0") == 1u);
    BOOST_TEST(state.registered.empty());
    BOOST_TEST(state.refs[0] == 0);
    BOOST_TEST(state.refs[1] == 0);
}

BOOST_FIXTURE_TEST_CASE(doorbell_failures_are_coded, fixture) {
    {
        state.missing = {"cuMemHostUnregister"};
        auto d = driver();
        auto line = cuda_line::create_on(*d, 0);
        BOOST_TEST_REQUIRE(line.has_value());
        const auto e = line.value().attach_doorbell(std::make_shared<doorbell>());
        BOOST_TEST_REQUIRE(e.has_value());
        BOOST_TEST(e->code() == errc::unavailable);
        BOOST_TEST(e->message().find("cuMemHostRegister") != std::string::npos);
        state.missing.clear();
    }
    auto d = driver();
    auto line = cuda_line::create_on(*d, 0);
    BOOST_TEST_REQUIRE(line.has_value());
    auto bell = std::make_shared<doorbell>();
    state.fail["cuMemHostRegister"] = 712;
    const auto reg = line.value().attach_doorbell(bell);
    BOOST_TEST_REQUIRE(reg.has_value());
    BOOST_TEST(reg->code() == errc::driver_status);
    BOOST_TEST(reg->args().at(0) == "cuMemHostRegister");
    BOOST_TEST(state.refs[0] == 1);
    state.fail.clear();

    BOOST_TEST(!line.value().attach_doorbell(bell).has_value());
    state.fail["cuStreamBatchMemOp"] = 1;
    auto stored = line.value().store(slot(0), state.stream(0));
    BOOST_TEST_REQUIRE(!stored.has_value());
    BOOST_TEST(stored.error().args().at(0) == "cuStreamBatchMemOp");
    BOOST_TEST(line.value().mapped().sequence(slot(0)) == 0u);
    state.fail.clear();

    state.fail["cuMemHostUnregister"] = 713;
    const auto closed = line.value().close();
    BOOST_TEST_REQUIRE(closed.has_value());
    BOOST_TEST(closed->args().at(0) == "cuMemHostUnregister");
    BOOST_TEST(state.pages.empty()); // the line's page still went
    BOOST_TEST(state.refs[0] == 1);  // the registration's reference is leaked with it
    BOOST_TEST(state.registered.size() == 1u);
}

// --- awaiting events --------------------------------------------------------------------------

BOOST_FIXTURE_TEST_CASE(await_event_waits_on_its_own_stream_then_stores, fixture) {
    auto d = driver();
    state.current = 0;
    auto line = cuda_line::create(*d);
    BOOST_TEST_REQUIRE(line.has_value());
    state.calls.clear();
    {
        auto made = cuda_event_waiter::create(line.value(), slot(5));
        BOOST_TEST_REQUIRE(made.has_value());
        cuda_event_waiter& waiter = made.value();
        BOOST_TEST((state.calls == calls_t{"cuCtxPushCurrent 0", "cuStreamCreate flags 1 in 0",
                                           "cuCtxPopCurrent"}));
        BOOST_TEST(waiter.stream() == state.stream(2));
        BOOST_TEST(waiter.slot().index() == 5u);

        state.calls.clear();
        auto done = waiter.await_event(state.event(0));
        BOOST_TEST_REQUIRE(done.has_value());
        BOOST_TEST(
            (state.calls == calls_t{"cuCtxGetCurrent", "cuStreamWaitEvent stream 2 event 0 flags 0",
                                    "cuStreamGetCtx", "cuStreamWriteValue64 1 flags 0"}));
        BOOST_TEST(done.value().target() == 1u);
        BOOST_TEST(&done.value().line() == &line.value().line());
        BOOST_TEST(done.value().slot().index() == 5u);
        BOOST_TEST_REQUIRE(state.stores.size() == 1u);
        BOOST_TEST(state.stores[0].stream == state.stream(2));
        BOOST_TEST(done.value().is_complete());

        auto again = waiter.await_event(state.event(0)); // the same event, recorded again
        BOOST_TEST_REQUIRE(again.has_value());
        BOOST_TEST(again.value().target() == 2u);
        state.calls.clear();
    }
    // The stream is destroyed (in the line's context); the user's event never is.
    BOOST_TEST(
        (state.calls == calls_t{"cuCtxPushCurrent 0", "cuStreamDestroy 2", "cuCtxPopCurrent"}));
    BOOST_TEST(state.count_prefix("cuEventDestroy") == 0u);
}

BOOST_FIXTURE_TEST_CASE(await_event_with_a_doorbell_batches_after_the_wait, fixture) {
    auto d = driver();
    state.current = 0;
    auto line = cuda_line::create(*d);
    BOOST_TEST_REQUIRE(line.has_value());
    auto bell = std::make_shared<doorbell>();
    BOOST_TEST(!line.value().attach_doorbell(bell).has_value());
    auto waiter = cuda_event_waiter::create(line.value(), slot(0));
    BOOST_TEST_REQUIRE(waiter.has_value());
    state.calls.clear();
    auto done = waiter.value().await_event(state.event(1));
    BOOST_TEST_REQUIRE(done.has_value());
    BOOST_TEST(
        (state.calls == calls_t{"cuCtxGetCurrent", "cuStreamWaitEvent stream 2 event 1 flags 0",
                                "cuStreamGetCtx",
                                "cuStreamBatchMemOp 2 flags 0: op 5 value 1 flags 0; "
                                "op 5 value 1 flags 0;"}));
    BOOST_TEST_REQUIRE(state.stores.size() == 2u);
    BOOST_TEST(state.stores[0].stream == state.stream(2));
    BOOST_TEST(state.stores[1].stream == state.stream(2));
    BOOST_TEST(bell->device_signaled());
}

BOOST_FIXTURE_TEST_CASE(await_event_refuses_a_foreign_or_missing_context, fixture) {
    auto d = driver();
    auto line = cuda_line::create_on(*d, 0);
    BOOST_TEST_REQUIRE(line.has_value());
    auto waiter = cuda_event_waiter::create(line.value(), slot(0));
    BOOST_TEST_REQUIRE(waiter.has_value());

    state.current = 1; // the event's context is another device's
    state.calls.clear();
    auto foreign = waiter.value().await_event(state.event(0));
    BOOST_TEST_REQUIRE(!foreign.has_value());
    BOOST_TEST(foreign.error().code() == errc::foreign_stream);
    BOOST_TEST(foreign.error().message().find("CUDA event") != std::string::npos);
    BOOST_TEST((state.calls == calls_t{"cuCtxGetCurrent"})); // nothing enqueued

    state.current = -1;
    auto none = waiter.value().await_event(state.event(0));
    BOOST_TEST_REQUIRE(!none.has_value());
    BOOST_TEST(none.error().code() == errc::no_domain);

    state.current = 0;
    state.fail["cuCtxGetCurrent"] = 201;
    auto failed = waiter.value().await_event(state.event(0));
    BOOST_TEST_REQUIRE(!failed.has_value());
    BOOST_TEST(failed.error().args().at(0) == "cuCtxGetCurrent");
    BOOST_TEST(line.value().mapped().sequence(slot(0)) == 0u);
    BOOST_TEST(state.stores.empty());
}

BOOST_FIXTURE_TEST_CASE(await_event_reports_driver_errors, fixture) {
    auto d = driver();
    state.current = 0;
    auto line = cuda_line::create(*d);
    BOOST_TEST_REQUIRE(line.has_value());
    auto waiter = cuda_event_waiter::create(line.value(), slot(0));
    BOOST_TEST_REQUIRE(waiter.has_value());

    state.fail["cuStreamWaitEvent"] = 400;
    state.calls.clear();
    auto failed = waiter.value().await_event(state.event(0));
    BOOST_TEST_REQUIRE(!failed.has_value());
    BOOST_TEST(failed.error().code() == errc::driver_status);
    BOOST_TEST((failed.error().args() ==
                std::vector<std::string>{"cuStreamWaitEvent", "CUDA_ERROR_400", "400"}));
    BOOST_TEST(state.count_prefix("cuStreamWriteValue64") == 0u); // no store behind it
    BOOST_TEST(line.value().mapped().sequence(slot(0)) == 0u);
    state.fail.clear();

    state.fail["cuStreamWriteValue64"] = 1;
    auto store_failed = waiter.value().await_event(state.event(0));
    BOOST_TEST_REQUIRE(!store_failed.has_value());
    BOOST_TEST(store_failed.error().args().at(0) == "cuStreamWriteValue64");
    state.fail.clear();

    state.fail["cuStreamDestroy"] = 201;
    const auto closed = waiter.value().close();
    BOOST_TEST_REQUIRE(closed.has_value());
    BOOST_TEST(closed->args().at(0) == "cuStreamDestroy");
    BOOST_TEST(waiter.value().stream() == nullptr);
    BOOST_TEST(!waiter.value().close().has_value()); // closed: nothing more
    auto after = waiter.value().await_event(state.event(0));
    BOOST_TEST_REQUIRE(!after.has_value());
    BOOST_TEST(after.error().code() == errc::backend);
}

BOOST_FIXTURE_TEST_CASE(an_event_waiter_needs_its_entry_points_and_a_stream, fixture) {
    for (const char* absent : {"cuStreamWaitEvent", "cuStreamCreate", "cuStreamDestroy"}) {
        state.missing = {absent};
        auto d = driver();
        auto line = cuda_line::create_on(*d, 0);
        BOOST_TEST_REQUIRE(line.has_value());
        state.calls.clear();
        auto waiter = cuda_event_waiter::create(line.value(), slot(0));
        BOOST_TEST_REQUIRE(!waiter.has_value());
        BOOST_TEST(waiter.error().code() == errc::unavailable);
        BOOST_TEST(waiter.error().message().find("cuStreamWaitEvent") != std::string::npos);
        BOOST_TEST(state.calls.empty());
    }
    state.missing.clear();
    auto d = driver();
    auto line = cuda_line::create_on(*d, 0);
    BOOST_TEST_REQUIRE(line.has_value());
    state.fail["cuStreamCreate"] = 2;
    state.calls.clear();
    auto failed = cuda_event_waiter::create(line.value(), slot(0));
    BOOST_TEST_REQUIRE(!failed.has_value());
    BOOST_TEST(failed.error().args().at(0) == "cuStreamCreate");
    BOOST_TEST(state.calls.back() == "cuCtxPopCurrent"); // the push was undone
    state.fail.clear();
    BOOST_TEST(!line.value().close().has_value());
    auto closed = cuda_event_waiter::create(line.value(), slot(0));
    BOOST_TEST_REQUIRE(!closed.has_value());
    BOOST_TEST(closed.error().code() == errc::backend);
}

BOOST_FIXTURE_TEST_CASE(the_port_awaits_an_event, fixture) {
    auto d = driver();
    state.current = 0;
    auto line = cuda_line::create(*d);
    BOOST_TEST_REQUIRE(line.has_value());
    boost::asio::io_context io;
    gpu_completion_port port(io);
    BOOST_TEST(!line.value().attach_doorbell(port.shared_bell()).has_value());
    auto waiter = cuda_event_waiter::create(line.value(), slot(0));
    BOOST_TEST_REQUIRE(waiter.has_value());
    auto done = waiter.value().await_event(state.event(0));
    BOOST_TEST_REQUIRE(done.has_value());
    std::optional<boost::system::error_code> result;
    port.async_wait(done.value(), [&](boost::system::error_code ec) { result = ec; });
    gpu_async::test::run_to_completion(io);
    BOOST_TEST_REQUIRE(result.has_value());
    BOOST_TEST(!*result);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_devices_cuda
