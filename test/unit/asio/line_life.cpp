// SPDX-License-Identifier: BSL-1.0
// A line's life as the port sees it: descriptors of retired lines (a stream given back, a device
// destroyed) end with errc::stale_descriptor and never with success, waits pending at a
// retirement end aborted, and a stream's fault ends its descriptor waits with device_fault.
#include <gpu_async/gpu_completion_port.hpp>

#include "common/asio.hpp"
#include "common/eventually.hpp"
#include "common/fault_recorder.hpp"
#include "common/io_context_fixture.hpp"
#include "common/manual_device.hpp"
#include "common/race_rounds.hpp"
#include "common/run_fill_bounded.hpp"
#include "common/work_gate.hpp"

#include <gpu_async/device/sim_device.hpp>
#include <gpu_async/line/detail/line_watchers.hpp>
#include <gpu_async/line/line_health.hpp>
#include <gpu_async/line/line_life.hpp>

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace unit_asio_line_life {

using gpu_async::errc;
using gpu_async::error_code;
using gpu_async::gpu_completion_port;
using gpu_async::memory_descriptor;
using gpu_async::sim_device;
using gpu_async::test::manual;
using gpu_async::test::run_to_completion;

namespace {

// A descriptor of `s` for the number `ahead` past its tail: one the stream was never given
// (sim_stream::descriptor_for refuses those), for a wait on a number it never stores.
memory_descriptor past_tail(const gpu_async::sim_stream& s, std::uint64_t ahead) {
    const memory_descriptor tail = s.descriptor();
    return memory_descriptor(tail.line(), tail.slot(), tail.target() + ahead, tail.generation());
}

/// Records the codes a port's waits end with, in completion order.
struct endings {
    std::vector<error_code> codes;
    auto handler() {
        return [this](error_code ec) { codes.push_back(ec); };
    }
    /// Checks that `n` waits ended, each with `expected`.
    template <class Code>
    void check_all(std::size_t n, Code expected) const {
        BOOST_TEST_REQUIRE(codes.size() == n);
        for (const error_code& ec : codes)
            BOOST_TEST((ec == expected), ec.message());
    }
};

/// A thread that retires `line` over and over until the object goes.
class retiring_thread {
public:
    explicit retiring_thread(const gpu_async::completion_line& line)
        : thread_([this, &line] {
            while (!done_.load(std::memory_order_relaxed)) {
                gpu_async::retire_line(line);
                std::this_thread::yield();
            }
        }) {}
    retiring_thread(const retiring_thread&) = delete;
    retiring_thread& operator=(const retiring_thread&) = delete;
    ~retiring_thread() {
        done_.store(true, std::memory_order_relaxed);
        thread_.join();
    }

private:
    std::atomic<bool> done_{false};
    std::thread thread_;
};

/// How the waits of a test ended: run (with their codes), or destroyed without running.
struct wait_tally {
    std::atomic<std::size_t> started{0};
    std::atomic<std::size_t> aborted{0}; // ran with operation_aborted
    std::atomic<std::size_t> other{0};   // ran with anything else
    std::atomic<std::size_t> unrun{0};   // destroyed without running

    /// A handler that counts itself once: when it runs, or when its last copy goes unrun.
    class handler {
    public:
        explicit handler(wait_tally& t) noexcept
            : tally_(&t) {
            t.started.fetch_add(1, std::memory_order_relaxed);
        }
        handler(handler&& o) noexcept
            : tally_(std::exchange(o.tally_, nullptr)) {}
        handler& operator=(handler&&) = delete;
        ~handler() {
            if (tally_ != nullptr) tally_->unrun.fetch_add(1, std::memory_order_relaxed);
        }
        void operator()(error_code ec) {
            wait_tally* t = std::exchange(tally_, nullptr);
            (ec == asio::error::operation_aborted ? t->aborted : t->other)
                .fetch_add(1, std::memory_order_relaxed);
        }

    private:
        wait_tally* tally_;
    };
};

/// Waits on `d` through `port`, each of which starts another when it ends aborted (a retirement
/// ended it), so that waits stay pending however often the line is retired.
struct rearming_waits {
    gpu_completion_port& port;
    memory_descriptor d;
    wait_tally& tally;

    void start() {
        port.async_wait(d, [this, h = wait_tally::handler(tally)](error_code ec) mutable {
            std::move(h)(ec);
            if (ec == asio::error::operation_aborted) start();
        });
    }
};

/// A work item that its worker holds until open(): run_on() enqueues it and returns once a
/// worker runs it; the item then returns `result`. Declare it after the device (its gate opens
/// when it goes).
class held_item {
public:
    void run_on(gpu_async::sim_stream& s, std::error_code result = {}) {
        // The flag is shared: the worker stores it after the gate opened, which may be after
        // this object went.
        s.enqueue([this, result, left = left_, held = gate_.item()]() -> std::error_code {
            started_.set_value();
            (void)held();
            *left = true;
            return result;
        });
        started_.get_future().wait();
    }
    void open() { gate_.open(); }
    /// Whether the item still holds its worker (it has not seen open() yet).
    bool still_held() const { return !left_->load(); }

private:
    std::promise<void> started_;
    gpu_async::test::work_gate gate_;
    std::shared_ptr<std::atomic<bool>> left_ = std::make_shared<std::atomic<bool>>(false);
};

/// A simulated stream as a completion source that says when a wait calls its block(): from then
/// on the wait is inside the call, holding whatever it holds across it.
struct block_telling_source {
    gpu_async::sim_stream* s;
    std::promise<void>* in_block;
    gpu_async::query_result query() { return s->query(); }
    std::error_code block() {
        in_block->set_value();
        return s->block();
    }
    std::error_code arm() { return s->arm(); }
    memory_descriptor descriptor() const { return s->descriptor(); }
    bool park(gpu_async::dur_ns bound) { return s->park(bound); }
};
static_assert(gpu_async::completion_source<block_telling_source>);

/// How a give-back beside a plan-driven wait blocked on slot 0 of a device line went.
struct give_back_outcome {
    bool blocking = false;            // the wait was inside block() when the stream was given back
    bool returned_while_held = false; // the give-back returned while slot 0's work still held
    bool stopped = false;             // the context ran out of work within its bound
    std::optional<error_code> ended;  // how the wait ended
};

/// A plan-driven wait with the "block" plan on slot 0 of a device line, whose work holds its
/// worker until the give-back of `give_back` (0 or 1: that slot's stream) returned; then the
/// work is let through. Runs on a thread of its own, which it leaves behind (with everything it
/// uses) when it does not finish within the bound: a give-back that waits for the held work
/// would otherwise wait for good.
std::optional<give_back_outcome> give_back_beside_a_block(std::size_t give_back) {
    auto done = std::make_shared<std::promise<give_back_outcome>>();
    std::future<give_back_outcome> outcome = done->get_future();
    std::thread scenario([done, give_back] {
        give_back_outcome out;
        asio::io_context ctx;
        sim_device dev;
        gpu_completion_port port(ctx);
        gpu_async::completion_line& line = dev.make_line();
        gpu_async::sim_stream_handle streams[2] = {
            dev.make_stream(line, *gpu_async::slot_id::at(0)),
            dev.make_stream(line, *gpu_async::slot_id::at(1))};
        held_item held; // after the device: its gate opens before the device goes
        held.run_on(*streams[0]);
        std::promise<void> in_block;
        block_telling_source src{streams[0].get(), &in_block};
        const auto plan = gpu_async::wait_plan::parse("block");
        port.async_wait(src, plan.value(), "b",
                        [&](error_code ec, gpu_async::wait_report) { out.ended = ec; });
        std::thread io([&] {
            ctx.run_for(gpu_async::test::run_bound);
            out.stopped = ctx.stopped();
        });
        out.blocking =
            in_block.get_future().wait_for(gpu_async::test::run_bound) == std::future_status::ready;
        streams[give_back].reset();
        out.returned_while_held = held.still_held();
        held.open();
        io.join();
        done->set_value(out);
    });
    if (outcome.wait_for(gpu_async::test::run_bound) != std::future_status::ready) {
        scenario.detach(); // deadlocked: leave it
        return std::nullopt;
    }
    scenario.join();
    return outcome.get();
}

} // namespace

BOOST_AUTO_TEST_SUITE(line_life_suite)

BOOST_AUTO_TEST_CASE(a_given_back_streams_descriptor_is_stale_even_when_its_line_is_reused) {
    asio::io_context ctx;
    sim_device dev(manual());
    gpu_completion_port port(ctx);
    auto first = dev.make_stream();
    const memory_descriptor old =
        first->descriptor_for(first->enqueue(std::chrono::microseconds(1)));
    const auto* line = &old.line();
    first.reset(); // given back: its line retired, kept for the next stream
    auto second = dev.make_stream();
    BOOST_TEST_REQUIRE(&second->line() == line); // the same memory, a new life
    second->enqueue(std::chrono::microseconds(1));
    second->enqueue(std::chrono::microseconds(1));
    dev.step_all(); // the new stream's word passes the old descriptor's target
    BOOST_TEST_REQUIRE(old.is_complete());
    endings e;
    port.async_wait(old, e.handler());
    run_to_completion(ctx);
    e.check_all(1, errc::stale_descriptor);
    BOOST_TEST((gpu_async::descriptor_status(old) == gpu_async::line_status::stale));
    // The new stream's own descriptors are live.
    BOOST_TEST(
        (gpu_async::descriptor_status(second->descriptor()) == gpu_async::line_status::live));
}

BOOST_AUTO_TEST_CASE(a_wait_pending_when_its_stream_is_given_back_ends_aborted_not_success) {
    asio::io_context ctx;
    sim_device dev(manual());
    gpu_completion_port port(ctx);
    auto first = dev.make_stream();
    const memory_descriptor d = first->descriptor_for(first->enqueue(std::chrono::microseconds(1)));
    endings e;
    port.async_wait(d, e.handler());
    first.reset();
    auto second = dev.make_stream(); // reuses the line and runs past the old target
    second->enqueue(std::chrono::microseconds(1));
    dev.step_all();
    run_to_completion(ctx);
    e.check_all(1, asio::error::operation_aborted);
}

// A stream with its own line given back (the line retired with it) keeps the promise of a slot's
// give-back: a wait pending on a target it stored completes with success, one on a target it
// never stored ends aborted, whether the waiter had taken the waits in or not (the rounds race
// the watcher thread). The stores ring nothing: only the retirement can see them.
BOOST_AUTO_TEST_CASE(a_wait_pending_when_its_own_line_is_given_back_keeps_what_was_stored) {
    asio::io_context ctx;
    sim_device dev(manual());
    gpu_completion_port port(ctx);
    endings stored;
    endings never;
    constexpr std::size_t rounds = 100;
    for (std::size_t i = 0; i < rounds; ++i) {
        auto s = dev.make_stream(); // its own line (a given-back one, reused)
        const memory_descriptor d = s->descriptor_for(s->enqueue(std::chrono::microseconds(1)));
        port.async_wait(d, stored.handler());
        // The next item, enqueued and never run.
        port.async_wait(s->descriptor_for(s->enqueue(std::chrono::microseconds(1))),
                        never.handler());
        BOOST_TEST_REQUIRE(dev.step(*s)); // the first item stored
        s.reset();                        // then given back
    }
    run_to_completion(ctx);
    stored.check_all(rounds, error_code());
    never.check_all(rounds, asio::error::operation_aborted);
}

// A device destroyed with waits pending: what its streams stored before it went completes, on
// their own lines and on the device's lines alike; the rest ends aborted.
BOOST_AUTO_TEST_CASE(a_destroyed_device_completes_the_waits_on_what_it_stored) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    port.park_bound(std::chrono::seconds(5)); // the watcher does not look between the stores
    endings stored;
    endings never;
    // The handles outlive the device (dropped after it, they do nothing): the device's own end
    // retires both lines.
    gpu_async::sim_stream_handle own;
    gpu_async::sim_stream_handle shared;
    {
        sim_device dev(manual());
        own = dev.make_stream();
        gpu_async::completion_line& line = dev.make_line();
        shared = dev.make_stream(line, *gpu_async::slot_id::at(4));
        for (gpu_async::sim_stream* s : {own.get(), shared.get()}) {
            port.async_wait(s->descriptor_for(s->enqueue(std::chrono::microseconds(1))),
                            stored.handler());
            port.async_wait(s->descriptor_for(s->enqueue(std::chrono::microseconds(1))),
                            never.handler());
            BOOST_TEST_REQUIRE(dev.step(*s)); // the first item of each stored
        }
    } // the device goes: its lines are retired, then freed
    run_to_completion(ctx);
    stored.check_all(2, error_code());
    never.check_all(2, asio::error::operation_aborted);
}

/// Ends each wait by name, in the order the handlers run.
struct named_endings {
    std::vector<std::pair<std::string, error_code>> runs;
    auto handler(std::string name) {
        return [this, name = std::move(name)](error_code ec) { runs.emplace_back(name, ec); };
    }
};

// Waits of one slot that end together run the reached first, in ascending target order, also
// when the waiter has not taken them in yet: started from a handler under run_fill (no watcher
// thread; nothing scans before the handler returns), the unreached first, then the stream
// stores the lower target and is given back, or its next item faults.
BOOST_AUTO_TEST_CASE(waits_of_a_slot_ended_before_their_take_in_run_the_reached_first) {
    for (const bool fault : {false, true}) {
        asio::io_context ctx;
        sim_device dev(manual());
        gpu_completion_port port(ctx);
        gpu_async::completion_line& line = dev.make_line();
        auto own = dev.make_stream();
        auto shared = dev.make_stream(line, *gpu_async::slot_id::at(6));
        named_endings e;
        asio::post(ctx, [&] {
            for (gpu_async::sim_stream_handle* h : {&own, &shared}) {
                gpu_async::sim_stream& s = **h;
                const std::uint64_t one = s.enqueue(std::chrono::microseconds(1));
                const std::uint64_t three =
                    fault ? s.enqueue_fault() : s.enqueue(std::chrono::microseconds(1));
                port.async_wait(s.descriptor_for(three), e.handler("three"));
                port.async_wait(s.descriptor_for(one), e.handler("one"));
                BOOST_TEST_REQUIRE(dev.step(s)); // stores one, ringing nothing
                if (fault)
                    BOOST_TEST_REQUIRE(dev.step(s)); // the fault
                else
                    h->reset(); // given back with three never run
            }
        });
        gpu_async::test::run_fill_bounded(ctx);
        BOOST_TEST_REQUIRE(e.runs.size() == 4u);
        for (std::size_t i = 0; i < 4; i += 2) {
            BOOST_TEST(e.runs[i].first == "one");
            BOOST_TEST(!e.runs[i].second);
            BOOST_TEST(e.runs[i + 1].first == "three");
            BOOST_TEST(
                (e.runs[i + 1].second == (fault ? error_code(errc::device_fault)
                                                : error_code(asio::error::operation_aborted))),
                e.runs[i + 1].second.message());
        }
    }
}

// Waits started on a stored target while another thread gives the stream back: each ends with
// success or stale_descriptor (it began no earlier than the give-back), never with
// operation_aborted, which would say the target was never stored. The race is looped, on a
// stream with its own line and on a slot of a device line.
BOOST_AUTO_TEST_CASE(a_start_overlapping_a_give_back_ends_success_or_stale) {
    const auto rounds = static_cast<std::size_t>(gpu_async::test::race_rounds(300));
    for (const bool own_line : {true, false}) {
        asio::io_context ctx;
        auto guard = asio::make_work_guard(ctx);
        std::thread io([&] { ctx.run_for(gpu_async::test::run_bound); });
        sim_device dev(manual());
        gpu_completion_port port(ctx);
        gpu_async::completion_line& line = dev.make_line();
        std::atomic<std::size_t> success{0};
        std::atomic<std::size_t> stale{0};
        std::atomic<std::size_t> other{0};
        std::atomic<std::size_t> started{0};
        const auto tally = [&](error_code ec) {
            (!ec ? success : ec == errc::stale_descriptor ? stale : other).fetch_add(1);
        };
        for (std::size_t i = 0; i < rounds; ++i) {
            auto s = own_line ? dev.make_stream()
                              : dev.make_stream(line, *gpu_async::slot_id::at(i % 8));
            const memory_descriptor d = s->descriptor_for(s->enqueue(std::chrono::microseconds(1)));
            BOOST_TEST_REQUIRE(dev.step(*s));
            std::atomic<bool> gone{false};
            std::atomic<bool> go{false};
            std::thread starter([&] {
                go = true;
                for (int after = 0; after < 4;) {
                    port.async_wait(d, tally);
                    started.fetch_add(1);
                    if (gone.load()) ++after;
                }
            });
            while (!go.load())
                std::this_thread::yield();
            s.reset();
            gone = true;
            starter.join();
        }
        BOOST_TEST_REQUIRE(
            gpu_async::test::eventually([&] { return success + stale + other == started.load(); }));
        guard.reset();
        io.join();
        BOOST_TEST(other.load() == 0u, other.load() << " of " << started.load());
        BOOST_TEST_MESSAGE("own line " << own_line << ": " << success.load() << " succeeded, "
                                       << stale.load() << " stale");
    }
}

BOOST_AUTO_TEST_CASE(a_destroyed_devices_descriptor_ends_stale_without_reading_the_line) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    std::optional<memory_descriptor> d;
    {
        sim_device dev(manual());
        auto s = dev.make_stream();
        d = s->descriptor_for(s->enqueue(std::chrono::microseconds(1)));
    } // the device and its lines' memory are gone: AddressSanitizer reports any read of them
    endings e;
    port.async_wait(*d, e.handler());
    run_to_completion(ctx);
    e.check_all(1, errc::stale_descriptor);
}

// A service registers for retirements once it is whole: a retirement on another thread calls
// into it, and ThreadSanitizer reports a call that races the constructor's setting of its type.
BOOST_AUTO_TEST_CASE(services_made_while_another_thread_retires_a_line_end_its_waits) {
    gpu_async::completion_line line;
    (void)gpu_async::adopt_line(line);
    const auto slot = *gpu_async::slot_id::at(0);
    const retiring_thread retirer(line);
    constexpr int services = 40;
    for (int i = 0; i < services; ++i) {
        asio::io_context ctx; // its service is made by the port, while the retirer runs
        gpu_completion_port port(ctx);
        endings e;
        port.async_wait(memory_descriptor(line, slot, 1, gpu_async::line_generation(line)),
                        e.handler()); // never stored: only a retirement ends it
        run_to_completion(ctx);
        BOOST_TEST_REQUIRE(e.codes.size() == 1u);
        BOOST_TEST(
            (e.codes[0] == asio::error::operation_aborted || e.codes[0] == errc::stale_descriptor));
    }
}

// A context destroyed while another thread retires a line its port waits on: the service leaves
// the line watchers at its shutdown, after any retirement asking it has delivered, so no
// retirement posts into the context or reaches the service after that. (A retirement that took
// the waits out just before the port's cancel used to post their drain once the scheduler had
// shut down; its destructor then reported the drain dropped to the freed service:
// AddressSanitizer's heap-use-after-free in completion_queue::dropped, ThreadSanitizer's race
// in the scheduler's post.) The handlers re-arm, so that waits are pending at every teardown.
BOOST_AUTO_TEST_CASE(a_context_destroyed_while_its_line_is_retired_ends_cleanly) {
    gpu_async::completion_line line; // a caller's line: never adopted, never stored
    const memory_descriptor never(line, *gpu_async::slot_id::at(0), 1);
    wait_tally tally;
    {
        const retiring_thread retirer(line);
        constexpr int contexts = 200;
        constexpr int waits = 64;
        for (int i = 0; i < contexts; ++i) {
            asio::io_context ctx;
            {
                gpu_completion_port port(ctx);
                rearming_waits rearming{port, never, tally};
                for (int w = 0; w < waits; ++w)
                    rearming.start();
                // Bounded: the waits stay pending, so it runs until the bound.
                ctx.run_for(std::chrono::milliseconds(2));
                // The port cancels what is pending, then the context goes while a retirement
                // may be delivering to it.
            }
        }
    }
    // Every wait ended once: ran aborted (a retirement, the port's cancel) or destroyed unrun.
    BOOST_TEST(tally.other.load() == 0u);
    BOOST_TEST(tally.aborted.load() + tally.unrun.load() == tally.started.load());
}

BOOST_AUTO_TEST_CASE(a_descriptor_wait_on_a_faulted_stream_ends_with_device_fault) {
    asio::io_context ctx;
    sim_device dev(manual());
    gpu_completion_port port(ctx);
    auto s = dev.make_stream();
    const auto before = s->enqueue(std::chrono::microseconds(1));
    s->enqueue_fault();
    const auto behind = s->enqueue(std::chrono::microseconds(1)); // never runs: the fault sticks
    endings e;
    std::optional<error_code> on_before;
    port.async_wait(s->descriptor_for(before), [&](error_code ec) { on_before = ec; });
    port.async_wait(s->descriptor_for(behind), e.handler());
    port.async_wait(past_tail(*s, 5), e.handler());
    asio::post(ctx, [&] { dev.step_all(); });
    run_to_completion(ctx); // fails (bounded) if a wait hangs on the faulted stream
    BOOST_TEST_REQUIRE(e.codes.size() == 2u);
    BOOST_TEST((e.codes[0] == errc::device_fault));
    BOOST_TEST((e.codes[1] == errc::device_fault));
    // Work before the fault completed, and its wait with success, pending at the fault or not.
    BOOST_TEST_REQUIRE(on_before.has_value());
    BOOST_TEST(!*on_before);
    BOOST_TEST(s->descriptor_for(before).is_complete());
    ctx.restart();
    on_before.reset();
    port.async_wait(s->descriptor_for(before), [&](error_code ec) { on_before = ec; });
    // A wait started after the fault, behind it, ends at once.
    port.async_wait(s->descriptor_for(behind), e.handler());
    run_to_completion(ctx);
    BOOST_TEST_REQUIRE(e.codes.size() == 3u);
    BOOST_TEST((e.codes[2] == errc::device_fault));
    BOOST_TEST_REQUIRE(on_before.has_value());
    BOOST_TEST(!*on_before);
    BOOST_TEST((gpu_async::descriptor_status(s->descriptor_for(behind)) ==
                gpu_async::line_status::faulted));
}

BOOST_AUTO_TEST_CASE(a_fault_on_a_shared_line_ends_only_its_slots_waits) {
    asio::io_context ctx;
    sim_device dev(manual());
    gpu_completion_port port(ctx);
    gpu_async::completion_line& line = dev.make_line();
    auto faulty = dev.make_stream(line, *gpu_async::slot_id::at(2));
    auto healthy = dev.make_stream(line, *gpu_async::slot_id::at(5));
    faulty->enqueue_fault();
    const auto ok = healthy->enqueue(std::chrono::microseconds(1));
    std::optional<error_code> on_faulty, on_healthy;
    port.async_wait(faulty->descriptor_for(1), [&](error_code ec) { on_faulty = ec; });
    port.async_wait(healthy->descriptor_for(ok), [&](error_code ec) { on_healthy = ec; });
    asio::post(ctx, [&] { dev.step_all(); });
    run_to_completion(ctx);
    BOOST_TEST_REQUIRE(on_faulty.has_value());
    BOOST_TEST((*on_faulty == errc::device_fault));
    BOOST_TEST_REQUIRE(on_healthy.has_value());
    BOOST_TEST(!*on_healthy);
}

// A stream on a shared device line (make_line, then make_stream(line, slot)) given back retires
// its slot alone: its pending waits end aborted, its descriptors go stale, a later stream on the
// slot neither completes them nor inherits its fault, and the other slots' waits go on.
BOOST_AUTO_TEST_CASE(a_given_back_stream_on_a_shared_line_retires_its_slot_alone) {
    asio::io_context ctx;
    sim_device dev(manual());
    gpu_completion_port port(ctx);
    gpu_async::completion_line& line = dev.make_line();
    const auto slot = *gpu_async::slot_id::at(3);
    auto neighbour = dev.make_stream(line, *gpu_async::slot_id::at(4));
    auto first = dev.make_stream(line, slot);
    const auto t1 = first->enqueue(std::chrono::microseconds(1));
    const memory_descriptor taken = past_tail(*first, 1); // never waited before the drop
    std::optional<error_code> pending, other;
    port.async_wait(first->descriptor_for(t1), [&](error_code ec) { pending = ec; });
    port.async_wait(neighbour->descriptor_for(neighbour->enqueue(std::chrono::microseconds(1))),
                    [&](error_code ec) { other = ec; });
    first.reset(); // its queued item is dropped: nothing stores t1
    BOOST_TEST((gpu_async::descriptor_status(taken) == gpu_async::line_status::stale));

    // The next stream on the slot runs past both old targets: the old descriptors stay stale.
    auto second = dev.make_stream(line, slot);
    second->enqueue(std::chrono::microseconds(1));
    second->enqueue(std::chrono::microseconds(1));
    dev.step_all(); // the neighbour's item too
    BOOST_TEST_REQUIRE(taken.is_complete());
    endings e;
    port.async_wait(taken, e.handler());
    run_to_completion(ctx);
    BOOST_TEST_REQUIRE(pending.has_value());
    BOOST_TEST((*pending == asio::error::operation_aborted));
    BOOST_TEST_REQUIRE(other.has_value());
    BOOST_TEST(!*other); // the neighbour's slot is untouched
    e.check_all(1, errc::stale_descriptor);
    BOOST_TEST(
        (gpu_async::descriptor_status(second->descriptor()) == gpu_async::line_status::live));
}

// The slot is retired when the handle is dropped, not when a worker still running the stream's
// item lets it go: a stream made on the slot meanwhile is not retired with the old one.
BOOST_AUTO_TEST_CASE(a_shared_slot_is_retired_when_its_handle_is_dropped) {
    sim_device dev; // a worker thread
    gpu_async::completion_line& line = dev.make_line();
    const auto slot = *gpu_async::slot_id::at(3);
    held_item held;
    auto first = dev.make_stream(line, slot);
    held.run_on(*first);
    first.reset(); // the worker runs its item still
    auto next = dev.make_stream(line, slot);
    held.open();
    // The one worker runs this after the old item: that item's late store is not the slot's.
    std::atomic<std::uint64_t> word_before{~std::uint64_t{0}};
    next->enqueue([&] { word_before = line.words[slot.index()].load(); });
    BOOST_TEST_REQUIRE(next->park(std::chrono::seconds(30)));
    BOOST_TEST(word_before.load() == 0u);
    BOOST_TEST((gpu_async::descriptor_status(next->descriptor()) == gpu_async::line_status::live));
}

// A stream given back while a worker runs its item, which then fails: the fault is not the slot's
// any more, and a stream made on the slot meanwhile completes its own work.
BOOST_AUTO_TEST_CASE(a_fault_after_the_give_back_is_not_the_next_streams) {
    gpu_async::test::fault_recorder faults;
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    sim_device dev; // one worker thread: it runs the next stream's item after the old one
    gpu_async::completion_line& line = dev.make_line();
    const auto slot = *gpu_async::slot_id::at(6);
    held_item held;
    auto first = dev.make_stream(line, slot);
    held.run_on(*first, make_error_code(errc::backend));
    first.reset(); // the slot is retired; the worker's item has not failed yet
    auto next = dev.make_stream(line, slot);
    std::optional<error_code> got;
    port.async_wait(next->descriptor_for(next->enqueue(std::chrono::microseconds(1))),
                    [&](error_code ec) { got = ec; });
    held.open();
    run_to_completion(ctx);
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(!*got);
    BOOST_TEST(faults.faults_of(line).empty());
}

// A wait started while its stream is given back, a stream made on the same slot and stepped
// once (which stores the number the old descriptor waits for, a number the old stream never
// ran): the start's read of the word must not count, since the slot's life moved across it.
// Six threads start waits on the old descriptor while the main thread reuses the slot.
BOOST_AUTO_TEST_CASE(a_wait_started_while_its_slot_is_reused_never_succeeds) {
    asio::io_context ctx;
    sim_device dev(manual());
    std::vector<std::unique_ptr<gpu_completion_port>> ports;
    // More starters than cores: a start preempted between its judgement and its read is what
    // the old code got wrong, and preemptions come with more runnable threads.
    for (int i = 0; i < 6; ++i)
        ports.push_back(std::make_unique<gpu_completion_port>(ctx));
    gpu_async::completion_line& line = dev.make_line();
    const auto slot = *gpu_async::slot_id::at(2);
    std::mutex current_m;
    std::optional<memory_descriptor> current; // the old stream's target, under current_m
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> started{0}, ended{0}, succeeded{0};
    auto guard = asio::make_work_guard(ctx);
    std::thread runner([&] {
        while (!stop.load())
            ctx.run_for(std::chrono::milliseconds(5));
    });
    std::vector<std::thread> starters;
    for (auto& port : ports) {
        starters.emplace_back([&, p = port.get()] {
            while (!stop.load()) {
                std::optional<memory_descriptor> d;
                {
                    std::lock_guard lk(current_m);
                    d = current;
                }
                if (!d) continue;
                started.fetch_add(1);
                p->async_wait(*d, [&](error_code ec) {
                    if (!ec) succeeded.fetch_add(1);
                    ended.fetch_add(1);
                });
            }
        });
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    std::uint64_t rounds = 0;
    while (std::chrono::steady_clock::now() < until && succeeded.load() == 0) {
        auto old = dev.make_stream(line, slot);
        const memory_descriptor d =
            old->descriptor_for(old->enqueue(std::chrono::microseconds(1))); // never run
        {
            std::lock_guard lk(current_m);
            current = d;
        }
        std::this_thread::yield();
        old.reset(); // given back: d's target is never stored by its stream
        auto next = dev.make_stream(line, slot);
        BOOST_TEST_REQUIRE(next->enqueue(std::chrono::microseconds(1)) == d.target());
        BOOST_TEST_REQUIRE(dev.step(*next)); // stores d's target, as the next stream's first
        next.reset();
        ++rounds;
    }
    stop.store(true);
    for (auto& t : starters)
        t.join();
    runner.join();
    guard.reset();
    run_to_completion(ctx);
    BOOST_TEST_MESSAGE(rounds << " reuses, " << started.load() << " waits");
    BOOST_TEST(succeeded.load() == 0u);
    BOOST_TEST(ended.load() == started.load());
}

// A stream stores a wait's target and is given back at once, while the wait may still be in the
// reactor's incoming registrations: it completes with success (what the stream stored before it
// went), not operation_aborted, whichever of the service's own watcher thread and the
// retirement's visit takes it in (the first may come between the give-back and the visit).
BOOST_AUTO_TEST_CASE(a_target_stored_before_the_give_back_completes_a_wait_not_yet_taken_in) {
    asio::io_context ctx;
    sim_device dev(manual());
    gpu_completion_port port(ctx);
    gpu_async::completion_line& line = dev.make_line();
    const auto slot = *gpu_async::slot_id::at(1);
    endings e;
    constexpr std::size_t rounds = 300;
    for (std::size_t i = 0; i < rounds; ++i) {
        auto s = dev.make_stream(line, slot);
        const memory_descriptor d = s->descriptor_for(s->enqueue(std::chrono::microseconds(1)));
        port.async_wait(d, e.handler());
        BOOST_TEST_REQUIRE(dev.step(*s)); // stored
        s.reset();                        // then given back
    }
    run_to_completion(ctx);
    e.check_all(rounds, error_code());
}

// A line watcher registered before the port's service, so a slot's retirement asks it first:
// it holds the first retirement of its line until the test lets it go. The slot has then been
// given back in the side table, and the retirement's visit to the service comes after whatever
// the test does meanwhile.
class give_back_holding_watcher final : public gpu_async::detail::line_watcher {
public:
    explicit give_back_holding_watcher(const gpu_async::completion_line& line)
        : line_(&line) {
        gpu_async::detail::add_line_watcher(*this);
    }
    ~give_back_holding_watcher() {
        release.open();
        gpu_async::detail::remove_line_watcher(*this);
    }
    give_back_holding_watcher(const give_back_holding_watcher&) = delete;
    give_back_holding_watcher& operator=(const give_back_holding_watcher&) = delete;

    void retire_line(const gpu_async::completion_line&) noexcept override {}
    void fault_slot(const gpu_async::completion_line&, gpu_async::slot_id,
                    std::uint64_t) noexcept override {}
    void retire_slot(const gpu_async::completion_line& line, gpu_async::slot_id,
                     gpu_async::detail::slot_retirement) noexcept override {
        if (&line != line_ || !armed.load() || held_.exchange(true)) return;
        entered.open();
        auto held = release.item();
        (void)held();
    }

    std::atomic<bool> armed{false}; // a stream's making retires its slot too: held from here
    gpu_async::test::work_gate entered;
    gpu_async::test::work_gate release;

private:
    const gpu_async::completion_line* line_;
    std::atomic<bool> held_{false};
};

// Waits started on a given-back stream's descriptors after the give-back but before its
// retirement reached the service: the word still holds only what that stream stored, so what it
// stored completes with success and the rest ends operation_aborted; once the retirement is
// done, the same descriptors are stale.
BOOST_AUTO_TEST_CASE(a_wait_started_while_a_give_back_is_on_its_way_reads_what_was_stored) {
    sim_device dev(manual());
    gpu_async::completion_line& line = dev.make_line();
    give_back_holding_watcher holder(line);
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    const auto slot = *gpu_async::slot_id::at(2);
    auto s = dev.make_stream(line, slot);
    const memory_descriptor stored = s->descriptor_for(s->enqueue(std::chrono::microseconds(1)));
    const memory_descriptor never = s->descriptor_for(s->enqueue(std::chrono::microseconds(1)));
    BOOST_TEST_REQUIRE(dev.step(*s));
    std::optional<error_code> queued_never;
    port.async_wait(never, [&](error_code ec) { queued_never = ec; }); // pending at the give-back
    holder.armed = true;
    std::thread giver([&] { s.reset(); });
    auto entered = holder.entered.item(); // the slot is given back; the service not yet asked
    (void)entered();
    BOOST_TEST((gpu_async::descriptor_status(stored) == gpu_async::line_status::retiring));
    std::optional<error_code> got_stored;
    std::optional<error_code> got_never;
    port.async_wait(stored, [&](error_code ec) { got_stored = ec; });
    port.async_wait(never, [&](error_code ec) { got_never = ec; });
    holder.release.open();
    giver.join();
    BOOST_TEST((gpu_async::descriptor_status(stored) == gpu_async::line_status::stale));
    std::optional<error_code> after;
    port.async_wait(stored, [&](error_code ec) { after = ec; });
    run_to_completion(ctx);
    BOOST_TEST_REQUIRE(got_stored.has_value());
    BOOST_TEST(!*got_stored);
    BOOST_TEST_REQUIRE(got_never.has_value());
    BOOST_TEST((*got_never == asio::error::operation_aborted));
    BOOST_TEST_REQUIRE(queued_never.has_value());
    BOOST_TEST((*queued_never == asio::error::operation_aborted));
    BOOST_TEST_REQUIRE(after.has_value());
    BOOST_TEST((*after == errc::stale_descriptor));
}

// A line watcher registered before the port's service, so a fault asks it first: it holds the
// first fault of its slot until the test lets it go. The worker that reports the fault has then
// decided on it and updated the side table, and its visit to the service comes after whatever
// the test does meanwhile.
class fault_holding_watcher final : public gpu_async::detail::line_watcher {
public:
    explicit fault_holding_watcher(const gpu_async::completion_line& line)
        : line_(&line) {
        gpu_async::detail::add_line_watcher(*this);
    }
    ~fault_holding_watcher() {
        release.open();
        gpu_async::detail::remove_line_watcher(*this);
    }
    fault_holding_watcher(const fault_holding_watcher&) = delete;
    fault_holding_watcher& operator=(const fault_holding_watcher&) = delete;

    void retire_line(const gpu_async::completion_line&) noexcept override {}
    void fault_slot(const gpu_async::completion_line& line, gpu_async::slot_id,
                    std::uint64_t) noexcept override {
        if (&line != line_ || held_.exchange(true)) return;
        entered.open();
        auto held = release.item();
        (void)held();
    }
    void retire_slot(const gpu_async::completion_line&, gpu_async::slot_id,
                     gpu_async::detail::slot_retirement) noexcept override {}

    gpu_async::test::work_gate entered;
    gpu_async::test::work_gate release;

private:
    const gpu_async::completion_line* line_;
    std::atomic<bool> held_{false};
};

// A work item fails on its worker, which decides to fault the slot; before that fault reaches
// the service, the stream is given back, a new stream is made on the slot and a wait started on
// its work: the fault was the old stream's and must not end the new stream's wait.
BOOST_AUTO_TEST_CASE(a_fault_decided_before_the_give_back_never_lands_on_the_next_stream) {
    sim_device dev; // one worker: it runs the next stream's item once the old one's fault is done
    gpu_async::completion_line& line = dev.make_line();
    fault_holding_watcher holder(line);
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    const auto slot = *gpu_async::slot_id::at(3);
    held_item held;
    auto old = dev.make_stream(line, slot);
    held.run_on(*old, make_error_code(errc::backend));
    held.open();                          // fails now, on the worker
    auto entered = holder.entered.item(); // the worker is inside its fault_slot()
    (void)entered();
    old.reset(); // given back: the slot retired while the fault is still on its way
    auto next = dev.make_stream(line, slot);
    BOOST_TEST((gpu_async::descriptor_status(next->descriptor()) == gpu_async::line_status::live));
    std::optional<error_code> got;
    port.async_wait(next->descriptor_for(next->enqueue(std::chrono::microseconds(1))),
                    [&](error_code ec) { got = ec; });
    holder.release.open(); // the fault's visits go on, to the service too
    run_to_completion(ctx);
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(!*got);
    BOOST_TEST((gpu_async::descriptor_status(next->descriptor()) == gpu_async::line_status::live));
}

// A caller's line, even one the caller adopted to have its descriptors checked, is the caller's:
// a simulated stream on it given back ends no wait on it.
BOOST_AUTO_TEST_CASE(a_stream_given_back_leaves_a_callers_adopted_line_alone) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    gpu_async::completion_line line;
    const std::uint64_t g = gpu_async::adopt_line(line);
    const auto slot = *gpu_async::slot_id::at(2);
    std::optional<error_code> got;
    {
        sim_device dev(manual());
        auto s = dev.make_stream(line, slot);
        port.async_wait(memory_descriptor(line, slot, 1, g), [&](error_code ec) { got = ec; });
        s.reset();
        line.words[slot.index()].store(1, std::memory_order_release); // the caller's own store
        run_to_completion(ctx);
    }
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(!*got);
    BOOST_TEST((gpu_async::descriptor_status(memory_descriptor(line, slot, 2, g)) ==
                gpu_async::line_status::live));
    gpu_async::retire_line(line);
}

BOOST_AUTO_TEST_CASE(a_new_stream_on_a_faulted_streams_slot_starts_clean) {
    asio::io_context ctx;
    sim_device dev(manual());
    gpu_completion_port port(ctx);
    gpu_async::completion_line& line = dev.make_line();
    const auto slot = *gpu_async::slot_id::at(3);
    auto faulty = dev.make_stream(line, slot);
    faulty->enqueue_fault();
    dev.step_all();
    const memory_descriptor behind = faulty->descriptor_for(1);
    BOOST_TEST((gpu_async::descriptor_status(behind) == gpu_async::line_status::faulted));
    faulty.reset();
    BOOST_TEST((gpu_async::descriptor_status(behind) == gpu_async::line_status::stale));
    auto next = dev.make_stream(line, slot);
    const auto t = next->enqueue(std::chrono::microseconds(1));
    std::optional<error_code> got;
    port.async_wait(next->descriptor_for(t), [&](error_code ec) { got = ec; });
    asio::post(ctx, [&] { dev.step_all(); });
    run_to_completion(ctx);
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(!*got);
}

BOOST_AUTO_TEST_CASE(a_cancelled_stream_is_not_a_fault) {
    asio::io_context ctx;
    std::optional<error_code> got;
    gpu_completion_port port(ctx);
    {
        sim_device dev(manual());
        auto s = dev.make_stream();
        port.async_wait(s->descriptor_for(s->enqueue(std::chrono::microseconds(1))),
                        [&](error_code ec) { got = ec; });
    } // the device goes with work queued: cancelled, and its line retired
    run_to_completion(ctx);
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST((*got == asio::error::operation_aborted));
}

// A cancelling shutdown drops queued work: the waits on it end aborted at once (not with
// device_fault, and not only when the device goes), and later waits on the streams' descriptors
// end stale.
BOOST_AUTO_TEST_CASE(a_cancelling_shutdown_ends_the_waits_on_dropped_work) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    sim_device dev(manual());
    auto own = dev.make_stream();
    gpu_async::completion_line& line = dev.make_line();
    auto shared = dev.make_stream(line, *gpu_async::slot_id::at(5));
    const memory_descriptor a = own->descriptor_for(own->enqueue(std::chrono::microseconds(1)));
    const memory_descriptor b =
        shared->descriptor_for(shared->enqueue(std::chrono::microseconds(1)));
    endings pending;
    port.async_wait(a, pending.handler());
    port.async_wait(b, pending.handler());
    dev.shutdown(gpu_async::sim_shutdown::cancel);
    endings later;
    port.async_wait(a, later.handler());
    port.async_wait(b, later.handler());
    run_to_completion(ctx); // fails (bounded) if a wait on dropped work hangs
    pending.check_all(2, asio::error::operation_aborted);
    later.check_all(2, errc::stale_descriptor);
}

// Work a shut-down device refuses is never stored: a wait on its number ends aborted when it is
// pending at the refusal, stale when started after, and never hangs; work accepted before a
// draining shutdown still completes its waits.
BOOST_AUTO_TEST_CASE(work_refused_after_a_shutdown_ends_its_descriptor_waits) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    sim_device dev(manual());
    auto own = dev.make_stream();
    gpu_async::completion_line& line = dev.make_line();
    auto shared = dev.make_stream(line, *gpu_async::slot_id::at(6));
    endings accepted;
    port.async_wait(own->descriptor_for(own->enqueue(std::chrono::microseconds(1))),
                    accepted.handler());
    dev.shutdown(gpu_async::sim_shutdown::drain); // runs the accepted item
    run_to_completion(ctx);
    BOOST_TEST_REQUIRE(accepted.codes.size() == 1u);
    BOOST_TEST(!accepted.codes[0]);
    endings pending;
    port.async_wait(past_tail(*own, 1), pending.handler());
    port.async_wait(past_tail(*shared, 1), pending.handler());
    ctx.restart();
    ctx.poll(); // registered before the refusals
    const std::uint64_t a = own->enqueue(std::chrono::microseconds(1));
    const std::uint64_t b = shared->enqueue(std::chrono::microseconds(1));
    BOOST_TEST((own->error() == std::errc::operation_canceled));
    endings later;
    port.async_wait(own->descriptor_for(a), later.handler());
    port.async_wait(shared->descriptor_for(b), later.handler());
    run_to_completion(ctx); // fails (bounded) if a wait on refused work hangs
    pending.check_all(2, asio::error::operation_aborted);
    later.check_all(2, errc::stale_descriptor);
}

// A refusal while a draining shutdown still runs accepted work leaves that work its waits: the
// slot is retired only once the workers stopped, and what they stored completes.
BOOST_AUTO_TEST_CASE(a_refusal_during_a_drain_leaves_the_accepted_work_its_waits) {
    asio::io_context ctx;
    gpu_completion_port port(ctx);
    sim_device dev; // worker threads
    auto s = dev.make_stream();
    held_item held;
    held.run_on(*s);
    endings accepted;
    port.async_wait(s->descriptor_for(s->tail()), accepted.handler());
    std::thread stopper([&] { dev.shutdown(gpu_async::sim_shutdown::drain); });
    std::uint64_t refused = 0;
    do { // accepted (queued behind the held item) until the shutdown closes the device
        refused = s->enqueue(std::chrono::microseconds(1));
    } while (!s->error());
    endings gone;
    port.async_wait(s->descriptor_for(refused), gone.handler());
    held.open();
    stopper.join();
    run_to_completion(ctx);
    BOOST_TEST(s->word() == refused - 1); // every accepted item ran
    BOOST_TEST_REQUIRE(accepted.codes.size() == 1u);
    BOOST_TEST(!accepted.codes[0]);
    BOOST_TEST_REQUIRE(gone.codes.size() == 1u);
    BOOST_TEST((gone.codes[0] == asio::error::operation_aborted ||
                gone.codes[0] == errc::stale_descriptor));
}

BOOST_AUTO_TEST_CASE(a_callers_own_line_keeps_the_unchecked_rule) {
    gpu_async::completion_line line;
    const memory_descriptor d(line, *gpu_async::slot_id::at(0), 1);
    BOOST_TEST(d.generation() == 0u);
    BOOST_TEST((gpu_async::descriptor_status(d) == gpu_async::line_status::live));
    gpu_async::retire_line(line); // never adopted: nothing to advance
    BOOST_TEST((gpu_async::descriptor_status(d) == gpu_async::line_status::live));
    // Adopted, its generation advances with each retirement.
    const std::uint64_t g = gpu_async::adopt_line(line);
    BOOST_TEST(g != 0u);
    const memory_descriptor checked(line, *gpu_async::slot_id::at(0), 1, g);
    BOOST_TEST((gpu_async::descriptor_status(checked) == gpu_async::line_status::live));
    gpu_async::retire_line(line);
    BOOST_TEST((gpu_async::descriptor_status(checked) == gpu_async::line_status::stale));
    BOOST_TEST(gpu_async::line_generation(line) != g);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(plan_line_watch_suite)

// Each plan-driven wait used to register with the process's line registry (a global lock and a
// linear erase per wait) and to retire the line in the service once more per wait.
BOOST_AUTO_TEST_CASE(plan_driven_waits_register_their_line_once_per_port) {
    asio::io_context ctx;
    sim_device dev(manual());
    gpu_completion_port port(ctx);
    auto s = dev.make_stream();
    const auto plan = gpu_async::wait_plan::parse("flag:park_us=100,backstop_us=1000");
    BOOST_TEST_REQUIRE(plan.has_value());
    const std::size_t before = gpu_async::detail::line_watcher_count();
    std::vector<error_code> codes;
    constexpr int waits = 16;
    for (int i = 0; i < waits; ++i) {
        s->enqueue(std::chrono::microseconds(1));
        port.async_wait(*s, plan.value(), "p",
                        [&](error_code ec, gpu_async::wait_report) { codes.push_back(ec); });
    }
    asio::post(ctx, [&] {
        BOOST_TEST(gpu_async::detail::line_watcher_count() == before + 1);
        dev.step_all();
    });
    run_to_completion(ctx);
    BOOST_TEST_REQUIRE(codes.size() == std::size_t{waits});
    for (const error_code& ec : codes)
        BOOST_TEST(!ec);
    // A given-back stream's line, retired: the next plan-driven waits on it are aborted.
    ctx.restart();
    s->enqueue(std::chrono::seconds(10));
    std::optional<error_code> last;
    port.async_wait(*s, plan.value(), "p",
                    [&](error_code ec, gpu_async::wait_report) { last = ec; });
    asio::post(ctx, [&] { s.reset(); });
    run_to_completion(ctx);
    BOOST_TEST_REQUIRE(last.has_value());
    BOOST_TEST((*last == asio::error::operation_aborted));
}

// One slot's stream given back while a plan-driven wait blocks in another slot's block(): the
// retirement took the line's source lock, which the blocked wait held (shared) across block(),
// so the give-back lasted as long as the other slot's work, and for good when that work waited
// for the thread giving back, as here.
BOOST_AUTO_TEST_CASE(giving_back_a_slot_does_not_wait_for_a_block_on_another_slot) {
    const std::optional<give_back_outcome> out = give_back_beside_a_block(1);
    BOOST_TEST_REQUIRE(out.has_value(), "giving back slot 1 waited for slot 0's work: deadlock");
    BOOST_TEST(out->blocking);
    BOOST_TEST(out->returned_while_held);
    BOOST_TEST(out->stopped);
    BOOST_TEST_REQUIRE(out->ended.has_value());
    BOOST_TEST(!*out->ended); // slot 0's work, let through, completed it
}

// The stream a plan-driven wait blocks on, given back while its last item runs: that item will
// store nothing, so the give-back must wake block() (it did only with items queued) before its
// retirement waits for the wait to leave the stream. The wait ends with what block() answered,
// the stream's cancellation, as when the give-back drops queued items.
BOOST_AUTO_TEST_CASE(giving_back_the_stream_a_plan_wait_blocks_on_ends_the_wait) {
    const std::optional<give_back_outcome> out = give_back_beside_a_block(0);
    BOOST_TEST_REQUIRE(out.has_value(), "giving back slot 0 waited for its own work: deadlock");
    BOOST_TEST(out->blocking);
    BOOST_TEST(out->returned_while_held);
    BOOST_TEST(out->stopped);
    BOOST_TEST_REQUIRE(out->ended.has_value());
    BOOST_TEST((*out->ended == gpu_async::detail::to_asio_error_code(
                                   std::make_error_code(std::errc::operation_canceled))));
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_asio_line_life
