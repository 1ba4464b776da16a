// SPDX-License-Identifier: BSL-1.0
#if defined(GPU_ASYNC_HAS_LIBURING)
#include <gpu_async/fill/uring_host.hpp>

#include <gpu_async/device/sim_device.hpp>
#include <gpu_async/fill/fill_executor.hpp>

#include "common/eventually.hpp"
#include "common/fake_uring_calls.hpp"
#include "common/work_gate.hpp"

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>

namespace unit_hosts_uring_host {

using namespace gpu_async;
using gpu_async::test::eventually;
using gpu_async::test::fake_uring_calls;
using gpu_async::test::uring_faults;
using gpu_async::test::work_gate;

namespace {

// io_uring waits must not run under valgrind (it starves other threads while one blocks in
// io_uring_enter).
bool under_valgrind() {
    const char* p = std::getenv("LD_PRELOAD");
    return p != nullptr && std::strstr(p, "vgpreload") != nullptr;
}

// A ring made through `calls`, or none (with the reason logged) where io_uring is refused
// entirely or valgrind runs. This machine supports io_uring: there the tests run.
template <class Calls = liburing_calls>
std::unique_ptr<basic_uring_idle<Calls>> ring_or_skip(const uring_options& opts = {},
                                                      Calls calls = Calls{}) {
    if (under_valgrind()) {
        BOOST_TEST_MESSAGE("skipped: io_uring waits do not run under valgrind");
        return nullptr;
    }
    auto r = basic_uring_idle<Calls>::create(opts, std::move(calls));
    if (!r.has_value()) {
        BOOST_TEST_MESSAGE("skipped: the kernel refuses io_uring: " << r.error().message());
        return nullptr;
    }
    // On the heap: g++ 12 -O2 reports a false -Wmaybe-uninitialized for the ring's pointer
    // inside a std::optional.
    return std::make_unique<basic_uring_idle<Calls>>(std::move(r).value());
}

wait_plan plan_of(std::string_view text) {
    return wait_plan::parse(text).value();
}

} // namespace

BOOST_AUTO_TEST_SUITE(uring_host)

BOOST_AUTO_TEST_CASE(label_and_counters) {
    auto idle = ring_or_skip();
    if (!idle) return;
    BOOST_TEST(uring_idle::label() == "io-uring");
    BOOST_TEST(idle->failed_ops() == 0u);
    BOOST_TEST(idle->describe() == "io-uring (failed ops: 0)");
    BOOST_TEST(!idle->park_path().empty());
    BOOST_TEST_MESSAGE("io_uring futex wait supported: " << idle->futex_supported());
}

BOOST_AUTO_TEST_CASE(timeout_is_never_early) {
    auto idle = ring_or_skip();
    if (!idle) return;
    for (std::uint64_t us : {0u, 50u, 200u, 1000u, 5000u}) {
        const mono_ns at = idle->now().after(dur_ns::from_us(us));
        idle->sleep_until(at);
        const mono_ns end = idle->now();
        BOOST_TEST(end.ns >= at.ns);
        BOOST_TEST_MESSAGE("io_uring timeout of " << us << " us: late by " << end.since(at).count()
                                                  << " ns");
    }
    // The 1 ms and 5 ms sleeps at least: a shorter one may find its deadline passed on a loaded
    // machine, and the 0 us sleep needs no timeout at all.
    BOOST_TEST(idle->ring_sleeps() >= 2u);
    BOOST_TEST(idle->failed_ops() == 0u);
}

BOOST_AUTO_TEST_CASE(refused_timeout_falls_back_to_a_thread_sleep) {
    uring_faults faults;
    auto idle = ring_or_skip({}, fake_uring_calls(faults));
    if (!idle) return;
    faults.reject_own = true;
    const mono_ns at = idle->now().after(dur_ns::from_us(500));
    idle->sleep_until(at);
    BOOST_TEST(idle->now().ns >= at.ns);
    BOOST_TEST(faults.rejected == 1u);
    BOOST_TEST(idle->failed_ops() == 1u);
    BOOST_TEST(idle->describe() == "io-uring (failed ops: 1)");
    // The ring works again once the refusal stops.
    faults.reject_own = false;
    idle->sleep_until(idle->now().after(dur_ns::from_us(100)));
    BOOST_TEST(idle->failed_ops() == 1u);
}

BOOST_AUTO_TEST_CASE(futex_park_woken_by_a_ringing_producer) {
    auto idle = ring_or_skip();
    if (!idle) return;
    if (!idle->futex_supported()) {
        BOOST_TEST_MESSAGE("skipped: the kernel has no IORING_OP_FUTEX_WAIT (before 6.7)");
        return;
    }
    doorbell bell;
    completion_line line;
    const memory_descriptor d(line, *slot_id::at(0), 1);
    idle->set_doorbell(&bell);
    BOOST_TEST(idle->park_path() == "io_uring futex wait");
    std::atomic<int> looks{0};
    std::thread producer([&] {
        // Store once the idle has looked at the word a second time: the park's look after it
        // registered as the doorbell's sleeper, which a futex wait in the ring then follows
        // (woken by the ring, or refused at once as the count moved: a futex park either way).
        eventually([&] { return looks.load() >= 2; });
        line.words[0].store(1, std::memory_order_release);
        bell.ring();
    });
    const bool seen = idle->park_line(
        line,
        [&] {
            ++looks;
            return d.is_complete();
        },
        dur_ns::from_ms(10000));
    producer.join();
    BOOST_TEST(seen);
    BOOST_TEST(idle->futex_parks() >= 1u);
    BOOST_TEST(idle->failed_ops() == 0u);
    BOOST_TEST(bell.sleepers() == 0u);
    // Nothing rings: the linked timeout ends the park at its bound.
    const memory_descriptor later(line, *slot_id::at(0), 2);
    const mono_ns before = idle->now();
    BOOST_TEST(!idle->park_line(
        line, [&] { return later.is_complete(); }, dur_ns::from_us(500)));
    BOOST_TEST(idle->now().since(before).count() >= dur_ns::from_us(500).count());
    BOOST_TEST(idle->failed_ops() == 0u);
}

BOOST_AUTO_TEST_CASE(refused_park_falls_back_to_the_word_wait) {
    uring_faults faults;
    auto idle = ring_or_skip({}, fake_uring_calls(faults));
    if (!idle) return;
    doorbell bell;
    completion_line line;
    const memory_descriptor d(line, *slot_id::at(1), 1);
    idle->set_doorbell(&bell);
    faults.reject_own = true;
    BOOST_TEST(!idle->park_line(
        line, [&] { return d.is_complete(); }, dur_ns::from_us(300)));
    if (idle->futex_supported()) {
        BOOST_TEST(faults.rejected == 1u);
        BOOST_TEST(idle->failed_ops() == 1u);
    }
    line.words[1].store(1);
    BOOST_TEST(idle->park_line(
        line, [&] { return d.is_complete(); }, dur_ns::from_us(300)));
    // Without a doorbell the park is the word wait and submits nothing.
    idle->set_doorbell(nullptr);
    const std::uint64_t failed = idle->failed_ops();
    BOOST_TEST(!idle->park_line(
        line, [] { return false; }, dur_ns::from_us(200)));
    BOOST_TEST(idle->failed_ops() == failed);
    BOOST_TEST(idle->park_path() == std::string(word_wait::probe().name()));
}

BOOST_AUTO_TEST_CASE(setup_failure_is_the_coded_error) {
    for (int err : {ENOSYS, EPERM, ENOMEM}) {
        BOOST_TEST_CONTEXT(err) {
            uring_faults faults;
            faults.setup_errno = err;
            auto r = basic_uring_idle<fake_uring_calls>::create({}, fake_uring_calls(faults));
            BOOST_TEST_REQUIRE(!r.has_value());
            BOOST_TEST((r.error().code() == errc::ring_setup));
            const std::string msg = r.error().message();
            BOOST_TEST(msg.find("io_uring setup failed") != std::string::npos, msg);
            BOOST_TEST(msg.find(std::strerror(err)) != std::string::npos, msg);
            if (err == ENOSYS) BOOST_TEST(msg.find("no kernel support") != std::string::npos);
            if (err == EPERM) BOOST_TEST(msg.find("io_uring_disabled") != std::string::npos);
        }
    }
}

BOOST_AUTO_TEST_CASE(executor_resolution_with_a_failing_ring) {
    uring_faults faults;
    faults.setup_errno = EPERM;
    const executor_capabilities caps = uring_capabilities({}, fake_uring_calls(faults));
    BOOST_TEST(!caps.has(executor_kind::io_uring));
    BOOST_TEST(caps.has(executor_kind::fill));
    auto fb = resolve(executor_kind::io_uring, caps);
    BOOST_TEST_REQUIRE(fb.has_value());
    BOOST_TEST((fb.value().kind == executor_kind::fill));
    BOOST_TEST_REQUIRE(fb.value().warning.has_value());
    BOOST_TEST((fb.value().warning->code() == errc::executor_fallback));
    BOOST_TEST(fb.value().warning->message().find("io_uring setup failed") != std::string::npos);
    auto strict = resolve(executor_kind::io_uring, caps, executor_strictness::strict);
    BOOST_TEST_REQUIRE(!strict.has_value());
    BOOST_TEST((strict.error().code() == errc::executor_refused));
}

BOOST_AUTO_TEST_CASE(executor_resolution_with_a_working_ring) {
    if (!ring_or_skip()) return;
    auto r = resolve(executor_kind::io_uring, uring_capabilities());
    BOOST_TEST_REQUIRE(r.has_value());
    BOOST_TEST((r.value().kind == executor_kind::io_uring));
    BOOST_TEST(!r.value().warning.has_value());
}

BOOST_AUTO_TEST_CASE(program_operations_share_the_ring) {
    auto idle = ring_or_skip();
    if (!idle) return;
    struct nop_op : uring_op {
        nop_op()
            : uring_op([](uring_op& o, int r) noexcept {
                auto& self = static_cast<nop_op&>(o);
                self.res = r;
                ++self.completions;
            }) {}
        int res = -1;
        int completions = 0;
    };
    nop_op op;
    io_uring_sqe* sqe = idle->prepare(op);
    BOOST_TEST_REQUIRE(sqe != nullptr);
    io_uring_prep_nop(sqe);
    // A long sleep ends early once the program's completion is dispatched.
    const mono_ns far = idle->now().after(dur_ns::from_ms(60000));
    idle->sleep_until(far);
    BOOST_TEST(idle->now().ns < far.ns);
    BOOST_TEST(op.completions == 1);
    BOOST_TEST(op.res == 0);
    // A timeout left in flight by an early return serves the next sleep to the same deadline.
    nop_op op1;
    sqe = idle->prepare(op1);
    BOOST_TEST_REQUIRE(sqe != nullptr);
    io_uring_prep_nop(sqe);
    const mono_ns soon = idle->now().after(dur_ns::from_ms(50));
    idle->sleep_until(soon);
    BOOST_TEST(op1.completions == 1);
    const std::uint64_t submitted = idle->ring_sleeps();
    idle->sleep_until(soon);
    BOOST_TEST(idle->now().ns >= soon.ns);
    BOOST_TEST(idle->ring_sleeps() == submitted); // no second timeout
    // poll() dispatches what is there without waiting.
    nop_op op2;
    sqe = idle->prepare(op2);
    BOOST_TEST_REQUIRE(sqe != nullptr);
    io_uring_prep_nop(sqe);
    BOOST_TEST(idle->submit() == 1);
    BOOST_TEST(eventually([&] { return idle->poll() > 0 || op2.completions > 0; }));
    BOOST_TEST(op2.completions == 1);
    // A park ends early too.
    nop_op op3;
    sqe = idle->prepare(op3);
    BOOST_TEST_REQUIRE(sqe != nullptr);
    io_uring_prep_nop(sqe);
    BOOST_TEST(idle->submit() == 1);
    completion_line line;
    const mono_ns before = idle->now();
    idle->park_line(
        line, [] { return false; }, dur_ns::from_ms(60000));
    BOOST_TEST(idle->now().since(before).count() < dur_ns::from_ms(60000).count());
    BOOST_TEST(op3.completions == 1);
    // And so does a futex park in the ring.
    doorbell bell;
    idle->set_doorbell(&bell);
    nop_op op4;
    sqe = idle->prepare(op4);
    BOOST_TEST_REQUIRE(sqe != nullptr);
    io_uring_prep_nop(sqe);
    BOOST_TEST(idle->submit() == 1);
    const mono_ns before4 = idle->now();
    idle->park_line(
        line, [] { return false; }, dur_ns::from_ms(60000));
    BOOST_TEST(idle->now().since(before4).count() < dur_ns::from_ms(60000).count());
    BOOST_TEST(op4.completions == 1);
    BOOST_TEST(idle->failed_ops() == 0u);
    idle.reset(); // the ring goes before the doorbell a futex wait may still name
}

BOOST_AUTO_TEST_CASE(fill_executor_on_uring_idle_over_the_sim_device) {
    auto idle = ring_or_skip();
    if (!idle) return;
    sim_device dev;
    const auto bell_owner = std::make_shared<doorbell>();
    doorbell& bell = *bell_owner;
    const std_clock clk;
    fill_executor ex;
    int finished = 0;
    int alarms = 0;
    // The device's items wait behind a gate that a task of the executor opens once the reactor
    // has parked (in a futex wait, where the ring has them): the waits pend however slow the
    // machine.
    work_gate gate;
    // Each park step lasts 2 ms: with 100 us, a sanitizer build's turns (tens of us each, four
    // tasks) let one step expire before every turn, and the reactor never idles.
    auto waiter = [&](sim_stream& s) -> fill_task<> {
        s.enqueue(gate.item());
        auto r = co_await fill_wait(
            ex.get_reactor(), s, plan_of("flag:park_us=2000,backstop_us=10000"), std::nullopt, clk);
        if (r.has_value()) ++finished;
    };
    auto sleeper = [&]() -> fill_task<> {
        co_await ex.get_reactor().alarm(clk.now().after(dur_ns::from_ms(1)));
        ++alarms;
    };
    // Only an alarm pending: the reactor sleeps, and the sleep is an io_uring timeout.
    ex.spawn(sleeper());
    auto slept = ex.run(*idle);
    BOOST_TEST_REQUIRE(slept.has_value());
    BOOST_TEST(alarms == 1);
    BOOST_TEST(slept.value().sleeps > 0u);
    BOOST_TEST(idle->ring_sleeps() > 0u);
    // Device waits: parks, on the doorbell's futex in the ring where the kernel has it.
    std::vector<gpu_async::sim_stream_handle> streams;
    for (int i = 0; i < 4; ++i) {
        sim_stream& s = *streams.emplace_back(dev.make_stream());
        s.set_doorbell(bell_owner);
        ex.spawn(waiter(s));
    }
    const std::uint64_t parks_before = ex.stats().parks;
    // A park the ring's own completion (this task's alarm) ends early is no futex wait.
    const auto parked = [&] {
        return idle->futex_supported() ? idle->futex_parks() > 0 : ex.stats().parks > parks_before;
    };
    auto opener = [&]() -> fill_task<> {
        for (int i = 0; i < 5000 && !parked(); ++i) // at most a second
            co_await ex.get_reactor().alarm(clk.now().after(dur_ns::from_us(200)));
        gate.open();
    };
    ex.spawn(opener());
    idle->set_doorbell(&bell);
    auto stats = ex.run(*idle);
    BOOST_TEST_REQUIRE(stats.has_value());
    BOOST_TEST(finished == 4);
    BOOST_TEST(stats.value().parks > parks_before);
    if (idle->futex_supported()) BOOST_TEST(idle->futex_parks() > 0u);
    BOOST_TEST(idle->failed_ops() == 0u);
    BOOST_TEST_MESSAGE("FILL on io-uring: " << stats.value().parks << " parks, "
                                            << stats.value().sleeps << " sleeps, "
                                            << idle->futex_parks() << " futex parks, "
                                            << idle->ring_sleeps() << " ring sleeps");
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_hosts_uring_host

#else // no liburing: nothing to test, said so

#include <boost/test/unit_test.hpp>

BOOST_AUTO_TEST_SUITE(uring_host)
BOOST_AUTO_TEST_CASE(skipped_without_liburing) {
    BOOST_TEST_MESSAGE("skipped: built without liburing (GPU_ASYNC_HAS_LIBURING undefined)");
    BOOST_TEST(true);
}
BOOST_AUTO_TEST_SUITE_END()

#endif
