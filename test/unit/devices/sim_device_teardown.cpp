// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/device/sim_device.hpp>

#include <gpu_async/line/detail/line_watchers.hpp>
#include <gpu_async/line/line_health.hpp>
#include <gpu_async/line/line_life.hpp>

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <future>
#include <latch>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace unit_devices_sim_device_teardown {

// Handles dropped on one thread while another stops or destroys the device.

using namespace gpu_async;

namespace {

// A one-shot gate with a bounded wait.
class gate {
public:
    void open() {
        {
            std::lock_guard lk(mutex_);
            open_ = true;
        }
        cv_.notify_all();
    }
    bool wait(std::chrono::seconds bound = std::chrono::seconds(30)) {
        std::unique_lock lk(mutex_);
        return cv_.wait_for(lk, bound, [&] { return open_; });
    }

private:
    std::mutex mutex_;
    std::condition_variable cv_;
    bool open_ = false;
};

// A line watcher that holds the first retirement of `target` until the test lets it go: the
// give-back that retires the line is then certainly inside dispose(), as a slow reactor or a
// plan-driven wait inside its query would keep it.
class holding_watcher final : public detail::line_watcher {
public:
    explicit holding_watcher(const completion_line& target)
        : target_(&target) {
        detail::add_line_watcher(*this);
    }
    ~holding_watcher() { detail::remove_line_watcher(*this); }
    holding_watcher(const holding_watcher&) = delete;
    holding_watcher& operator=(const holding_watcher&) = delete;

    void retire_line(const completion_line& line) noexcept override {
        if (&line != target_) return;
        if (retired.fetch_add(1) != 0) return;
        entered.open();
        (void)release.wait();
    }
    void fault_slot(const completion_line&, slot_id, std::uint64_t) noexcept override {}
    void retire_slot(const completion_line&, slot_id, detail::slot_retirement) noexcept override {}

    std::atomic<int> retired{0};
    gate entered;
    gate release;

private:
    const completion_line* target_;
};

struct joiner {
    std::thread& t;
    ~joiner() {
        if (t.joinable()) t.join();
    }
};

} // namespace

BOOST_AUTO_TEST_SUITE(sim_device_teardown)

// shutdown() used to collect every stream marked released and dispose of it again, while the
// thread that gave it back was still disposing of it: the second dispose read the freed stream
// and erased a live one, and put the line on the free list twice.
BOOST_AUTO_TEST_CASE(give_back_racing_shutdown_disposes_once) {
    sim_device dev({1, false});
    sim_stream_handle a = dev.make_stream();
    sim_stream_handle b = dev.make_stream();
    completion_line* const line_b = &b->line();
    holding_watcher watcher(a->line());
    std::thread dropper([&] { a.reset(); });
    const joiner join_dropper{dropper};
    BOOST_TEST_REQUIRE(watcher.entered.wait()); // the give-back is inside its retirement
    auto stopped = std::async(std::launch::async, [&] { dev.shutdown(sim_shutdown::cancel); });
    // shutdown has nothing of that stream's to do: it must not wait for the retirement.
    const bool prompt = stopped.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
    BOOST_TEST(prompt);
    watcher.release.open();
    dropper.join();
    stopped.get();
    BOOST_TEST(watcher.retired.load() == 1);
    BOOST_TEST(dev.stream_count() == 1u); // b is still there
    BOOST_TEST(&b->line() == line_b);
    // The retired line went onto the free list once: two new streams get two lines.
    sim_stream_handle c = dev.make_stream();
    sim_stream_handle d = dev.make_stream();
    BOOST_TEST(&c->line() != &d->line());
    BOOST_TEST(&c->line() != line_b);
    BOOST_TEST(&d->line() != line_b);
    BOOST_TEST(dev.stream_count() == 3u);
    b.reset();
    c.reset();
    d.reset();
    BOOST_TEST(dev.stream_count() == 0u);
}

// The sweep: in each round one thread drops handles and enqueues through others while a second
// stops the device (drain or cancel) or destroys it; the start is staggered by the round, so the
// rounds cover the orders of the two. Within the header's rule: no stream is used by two threads
// and no handle is dropped while its own stream is in use. Run under ASan and TSan in CI.
namespace {

constexpr int sweep_rounds = 150;
constexpr std::size_t sweep_streams = 8;

enum class stopper { drain, cancel, destroy };

void stagger(int n) {
    for (int i = 0; i < n; ++i)
        std::this_thread::yield();
}

// Fills `hs`: own-line streams and streams sharing one device line, each with queued work (some
// items still waiting, some running on a worker when the race starts).
void populate(sim_device& dev, std::vector<sim_stream_handle>& hs) {
    completion_line& shared = dev.make_line();
    for (std::size_t i = 0; i < sweep_streams; ++i) {
        hs.push_back(i % 2 == 0 ? dev.make_stream() : dev.make_stream(shared, *slot_id::at(i / 2)));
        sim_stream& s = *hs.back();
        s.enqueue(dur_ns::zero());
        s.enqueue([] {}, dur_ns::from_us(20 * (i % 3)));
        if (i % 3 == 0) s.enqueue(dur_ns::from_us(100));
    }
}

void sweep_round(int round, stopper how) {
    auto dev = std::make_unique<sim_device>(sim_device::options{2, false});
    std::vector<sim_stream_handle> hs;
    populate(*dev, hs);
    std::vector<sim_stream_handle> kept; // used by the racing thread, checked afterwards
    for (std::size_t i = sweep_streams / 2; i < sweep_streams; ++i)
        kept.push_back(std::move(hs[i]));
    hs.resize(sweep_streams / 2);
    std::latch start(2);
    std::thread racer([&] {
        start.arrive_and_wait();
        stagger(round % 11);
        for (std::size_t i = 0; i < hs.size(); ++i) {
            hs[i].reset();
            // A stream must not be used once its device may be gone: only drops then.
            if (how == stopper::destroy)
                kept[i].reset();
            else
                kept[i]->enqueue(dur_ns::from_us(i * 10));
        }
    });
    start.arrive_and_wait();
    stagger(round % 5);
    switch (how) {
    case stopper::drain:
        dev->shutdown(sim_shutdown::drain);
        break;
    case stopper::cancel:
        dev->shutdown(sim_shutdown::cancel);
        break;
    case stopper::destroy:
        dev.reset();
        break;
    }
    racer.join();
    if (!dev) return; // every handle was dropped, before or after the device went
    // Every item enqueued either ran or was cancelled, never left pending.
    for (const sim_stream_handle& k : kept) {
        const query_result q = k->query();
        BOOST_TEST_REQUIRE(
            (q.is_done() ||
             (q.is_failed() && q.error == std::make_error_code(std::errc::operation_canceled))),
            "round " << round);
    }
    BOOST_TEST_REQUIRE(dev->stream_count() == kept.size(), "round " << round);
    kept.clear();
    BOOST_TEST_REQUIRE(dev->stream_count() == 0u, "round " << round);
    // Each retired line went onto the free list once: fresh streams get distinct lines.
    std::vector<sim_stream_handle> fresh;
    for (std::size_t i = 0; i < sweep_streams; ++i)
        fresh.push_back(dev->make_stream());
    for (std::size_t i = 0; i < fresh.size(); ++i)
        for (std::size_t j = i + 1; j < fresh.size(); ++j)
            BOOST_TEST_REQUIRE(&fresh[i]->line() != &fresh[j]->line(), "round " << round);
}

} // namespace

BOOST_AUTO_TEST_CASE(sweep_drops_and_enqueues_racing_shutdown_drain) {
    for (int r = 0; r < sweep_rounds; ++r)
        sweep_round(r, stopper::drain);
}

BOOST_AUTO_TEST_CASE(sweep_drops_and_enqueues_racing_shutdown_cancel) {
    for (int r = 0; r < sweep_rounds; ++r)
        sweep_round(r, stopper::cancel);
}

BOOST_AUTO_TEST_CASE(sweep_drops_racing_the_destructor) {
    for (int r = 0; r < sweep_rounds; ++r)
        sweep_round(r, stopper::destroy);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_devices_sim_device_teardown
