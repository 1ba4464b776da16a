// SPDX-License-Identifier: BSL-1.0
//
// mapped_line's doorbell: the device signal word, the stores that follow each completion store
// (order, stream, batch), and the ownership of the doorbell's registration (register and
// unregister counts, a use per line, a device pointer per domain, every failure path), against
// the recording fake driver table.
#include <gpu_async/asio/error.hpp>
#include <gpu_async/device/mapped_line.hpp>
#include <gpu_async/gpu_completion_port.hpp>
#include <gpu_async/wait/doorbell.hpp>

#include "common/fake_line_driver.hpp"
#include "common/io_context_fixture.hpp"
#include "common/slots.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace unit_devices_mapped_line_doorbell {

using namespace gpu_async;
using gpu_async::test::fake_line_driver;
using gpu_async::test::fake_stream;
using gpu_async::test::slot;

namespace {

using calls_t = std::vector<std::string>;

std::uintptr_t host_of(const doorbell& bell) {
    return reinterpret_cast<std::uintptr_t>(&bell.line());
}

/// The device address the fake gives the doorbell's device word.
std::uint64_t signal_address(const doorbell& bell) {
    return host_of(bell) + fake_line_driver::device_offset +
           doorbell::device_word * sizeof(std::uint64_t);
}

mapped_line make_line(fake_line_driver& fake, int device = 0) {
    auto made = mapped_line::create_on(fake.table(), device);
    BOOST_TEST_REQUIRE(made.has_value());
    return std::move(made).value();
}

} // namespace

BOOST_AUTO_TEST_SUITE(mapped_line_doorbell_suite)

BOOST_AUTO_TEST_CASE(the_device_signal_word_is_not_the_ring_counter) {
    doorbell bell;
    BOOST_TEST(doorbell::device_word != 0u);
    BOOST_TEST(doorbell::device_word < line_words);
    BOOST_TEST(doorbell::device_signal != 0u);
    bell.ring();
    BOOST_TEST(!bell.device_signaled());
    BOOST_TEST(!bell.take_device_signal());
    // A device's store: the signal is seen and taken once; the ring count never moves for it.
    bell.line().words[doorbell::device_word].store(doorbell::device_signal);
    BOOST_TEST(bell.device_signaled());
    BOOST_TEST(bell.count() == 1u);
    BOOST_TEST(bell.take_device_signal());
    BOOST_TEST(!bell.device_signaled());
    BOOST_TEST(!bell.take_device_signal());
    BOOST_TEST(bell.count() == 1u);
}

BOOST_AUTO_TEST_CASE(without_a_doorbell_a_store_is_one_write) {
    fake_line_driver fake;
    mapped_line line = make_line(fake);
    fake_stream s = fake.stream_on(0);
    fake.calls.clear();
    BOOST_TEST(line.store(slot(0), &s).has_value());
    BOOST_TEST((fake.calls == calls_t{"stream_domain", "write 1"}));
    BOOST_TEST(fake.batch_calls == 0u);
    BOOST_TEST(line.attached_doorbell() == nullptr);
    BOOST_TEST(line.doorbell_address() == 0u);
}

BOOST_AUTO_TEST_CASE(attach_registers_once_and_each_store_batches_completion_then_signal) {
    fake_line_driver fake;
    mapped_line line = make_line(fake);
    auto bell = std::make_shared<doorbell>();
    std::weak_ptr<doorbell> watch = bell;
    fake.calls.clear();

    BOOST_TEST(!line.attach_doorbell(bell).has_value());
    // Its own domain reference first, then the registration, then this domain's device pointer.
    BOOST_TEST((fake.calls == calls_t{"retain 0", "register 0 64", "device_pointer"}));
    BOOST_TEST(fake.refs[0] == 2);
    BOOST_TEST(fake.registered.size() == 1u);
    BOOST_TEST(fake.registered.count(&bell->line()) == 1u);
    BOOST_TEST(line.doorbell_address() == signal_address(*bell));
    BOOST_TEST(line.attached_doorbell() == bell);

    // Attaching it again does nothing.
    fake.calls.clear();
    BOOST_TEST(!line.attach_doorbell(bell).has_value());
    BOOST_TEST(fake.calls.empty());

    fake_stream s = fake.stream_on(0);
    fake.calls.clear();
    auto stored = line.store(slot(3), &s);
    BOOST_TEST_REQUIRE(stored.has_value());
    BOOST_TEST(stored.value().target() == 1u);
    BOOST_TEST((fake.calls == calls_t{"stream_domain", "batch 1 1"}));
    BOOST_TEST_REQUIRE(fake.writes.size() == 2u);
    // The completion word first, the doorbell's device word second: same stream, one batch.
    BOOST_TEST(fake.writes[0].address == line.device_address(slot(3)));
    BOOST_TEST(fake.writes[0].value == 1u);
    BOOST_TEST(fake.writes[1].address == signal_address(*bell));
    BOOST_TEST(fake.writes[1].value == doorbell::device_signal);
    BOOST_TEST(fake.writes[0].stream == static_cast<void*>(&s));
    BOOST_TEST(fake.writes[1].stream == static_cast<void*>(&s));
    BOOST_TEST(fake.writes[0].batch == 1u);
    BOOST_TEST(fake.writes[1].batch == 1u);
    BOOST_TEST(stored.value().is_complete());
    BOOST_TEST(bell->device_signaled());
    BOOST_TEST(bell->count() == 0u); // the ring counter is untouched

    // A second store, a second batch.
    BOOST_TEST(bell->take_device_signal());
    auto second = line.store(slot(3), &s);
    BOOST_TEST_REQUIRE(second.has_value());
    BOOST_TEST(second.value().target() == 2u);
    BOOST_TEST(fake.batch_calls == 2u);
    BOOST_TEST(bell->device_signaled());

    // The doorbell lives while the line maps it, though nobody else holds it.
    bell.reset();
    BOOST_TEST(!watch.expired());
    fake.calls.clear();
    BOOST_TEST(!line.close().has_value());
    // Settle, then the last use unregisters (in the registering domain) and releases the
    // registration's reference, then the line's own page and reference go.
    BOOST_TEST((fake.calls == calls_t{"settle", "unregister 0", "release 0", "free", "release 0"}));
    BOOST_TEST(fake.refs[0] == 0);
    BOOST_TEST(fake.registered.empty());
    BOOST_TEST(watch.expired());
}

BOOST_AUTO_TEST_CASE(without_batches_the_signal_is_a_second_write_after_the_completion) {
    fake_line_driver fake;
    fake.batches = false;
    mapped_line line = make_line(fake);
    auto bell = std::make_shared<doorbell>();
    BOOST_TEST(!line.attach_doorbell(bell).has_value());
    fake_stream s = fake.stream_on(0);
    fake.calls.clear();
    auto stored = line.store(slot(1), &s);
    BOOST_TEST_REQUIRE(stored.has_value());
    BOOST_TEST((fake.calls == calls_t{"stream_domain", "write 1", "write 1"}));
    BOOST_TEST_REQUIRE(fake.writes.size() == 2u);
    BOOST_TEST(fake.writes[0].address == line.device_address(slot(1)));
    BOOST_TEST(fake.writes[1].address == signal_address(*bell));
    BOOST_TEST(fake.writes[1].value == doorbell::device_signal);
    BOOST_TEST(fake.writes[0].stream == static_cast<void*>(&s));
    BOOST_TEST(fake.writes[1].stream == static_cast<void*>(&s));
    BOOST_TEST(fake.writes[0].batch == 0u);
    BOOST_TEST(fake.writes[1].batch == 0u);
    BOOST_TEST(fake.batch_calls == 0u);
    BOOST_TEST(bell->device_signaled());
}

BOOST_AUTO_TEST_CASE(lines_share_one_registration_with_a_device_pointer_each) {
    fake_line_driver fake;
    mapped_line a = make_line(fake, 0);
    mapped_line b = make_line(fake, 1);
    mapped_line c = make_line(fake, 1);
    auto bell = std::make_shared<doorbell>();
    std::weak_ptr<doorbell> watch = bell;
    fake.calls.clear();
    fake.pointer_devices.clear();
    BOOST_TEST(!a.attach_doorbell(bell).has_value());
    BOOST_TEST(!b.attach_doorbell(bell).has_value());
    BOOST_TEST(!c.attach_doorbell(bell).has_value());
    // One registration (by the first line, on its device), one device pointer per line, each
    // in that line's domain.
    BOOST_TEST((fake.calls == calls_t{"retain 0", "register 0 64", "device_pointer",
                                      "device_pointer", "device_pointer"}));
    BOOST_TEST((fake.pointer_devices == std::vector<int>{0, 1, 1}));
    BOOST_TEST(fake.refs[0] == 2);
    BOOST_TEST(fake.refs[1] == 2);
    // Each attached line counts as a device producer of the doorbell (the waiter without a
    // monitor then polls the device word); each close ends its count.
    BOOST_TEST(bell->device_producers() == 3u);
    bell.reset();

    // Stores of both devices signal the same word.
    fake_stream s0 = fake.stream_on(0);
    fake_stream s1 = fake.stream_on(1);
    BOOST_TEST(a.store(slot(0), &s0).has_value());
    BOOST_TEST(b.store(slot(0), &s1).has_value());
    BOOST_TEST_REQUIRE(fake.writes.size() == 4u);
    BOOST_TEST(fake.writes[1].address == fake.writes[3].address);

    // The registration outlives the lines that made it; the last use unregisters it.
    fake.calls.clear();
    BOOST_TEST(!a.close().has_value());
    BOOST_TEST((fake.calls == calls_t{"settle", "free", "release 0"}));
    BOOST_TEST(fake.refs[0] == 1); // the registration's reference on device 0
    BOOST_TEST(!watch.expired());
    BOOST_TEST(watch.lock()->device_producers() == 2u);
    fake.calls.clear();
    BOOST_TEST(!b.close().has_value());
    BOOST_TEST((fake.calls == calls_t{"settle", "free", "release 1"}));
    BOOST_TEST(fake.registered.size() == 1u);
    BOOST_TEST(watch.lock()->device_producers() == 1u);
    fake.calls.clear();
    BOOST_TEST(!c.close().has_value());
    BOOST_TEST((fake.calls == calls_t{"settle", "unregister 0", "release 0", "free", "release 1"}));
    BOOST_TEST(fake.refs[0] == 0);
    BOOST_TEST(fake.refs[1] == 0);
    BOOST_TEST(fake.registered.empty());
    BOOST_TEST(watch.expired());
}

BOOST_AUTO_TEST_CASE(two_doorbells_are_two_registrations) {
    fake_line_driver fake;
    mapped_line a = make_line(fake);
    mapped_line b = make_line(fake);
    auto one = std::make_shared<doorbell>();
    auto two = std::make_shared<doorbell>();
    BOOST_TEST(!a.attach_doorbell(one).has_value());
    BOOST_TEST(!b.attach_doorbell(two).has_value());
    BOOST_TEST(fake.count("register") == 2u);
    BOOST_TEST(fake.registered.size() == 2u);
    // A line takes one doorbell.
    const auto other = a.attach_doorbell(two);
    BOOST_TEST_REQUIRE(other.has_value());
    BOOST_TEST(other->code() == errc::backend);
    BOOST_TEST(a.attached_doorbell() == one);
    BOOST_TEST(!a.close().has_value());
    BOOST_TEST(!b.close().has_value());
    BOOST_TEST(fake.count("unregister") == 2u);
    BOOST_TEST(fake.registered.empty());
}

BOOST_AUTO_TEST_CASE(a_moved_line_keeps_its_doorbell) {
    fake_line_driver fake;
    mapped_line line = make_line(fake);
    auto bell = std::make_shared<doorbell>();
    BOOST_TEST(!line.attach_doorbell(bell).has_value());
    mapped_line moved(std::move(line));
    BOOST_TEST(moved.attached_doorbell() == bell);
    BOOST_TEST(line.attached_doorbell() == nullptr); // NOLINT(bugprone-use-after-move)
    fake_stream s = fake.stream_on(0);
    fake.calls.clear();
    BOOST_TEST(moved.store(slot(0), &s).has_value());
    BOOST_TEST((fake.calls == calls_t{"stream_domain", "batch 1 1"}));
    mapped_line assigned = make_line(fake);
    assigned = std::move(moved);
    BOOST_TEST(assigned.attached_doorbell() == bell);
    fake.calls.clear();
    BOOST_TEST(!assigned.close().has_value());
    BOOST_TEST(fake.count("unregister") == 1u);
    BOOST_TEST(fake.registered.empty());
}

BOOST_AUTO_TEST_CASE(bad_attachments_are_refused) {
    fake_line_driver fake;
    mapped_line line = make_line(fake);
    fake.calls.clear();
    const auto none = line.attach_doorbell(nullptr);
    BOOST_TEST_REQUIRE(none.has_value());
    BOOST_TEST(none->code() == errc::backend);
    BOOST_TEST(fake.calls.empty());

    BOOST_TEST(!line.close().has_value());
    const auto closed = line.attach_doorbell(std::make_shared<doorbell>());
    BOOST_TEST_REQUIRE(closed.has_value());
    BOOST_TEST(closed->code() == errc::backend);

    fake_line_driver plain;
    plain.registers = false;
    mapped_line unmappable = make_line(plain);
    plain.calls.clear();
    const auto unavailable = unmappable.attach_doorbell(std::make_shared<doorbell>());
    BOOST_TEST_REQUIRE(unavailable.has_value());
    BOOST_TEST(unavailable->code() == errc::unavailable);
    BOOST_TEST(unavailable->message().find("fakeRegister") != std::string::npos);
    BOOST_TEST(plain.calls.empty());
    BOOST_TEST(plain.refs[0] == 1);
}

BOOST_AUTO_TEST_CASE(a_failed_retain_or_register_gives_back_what_was_taken) {
    fake_line_driver fake;
    mapped_line line = make_line(fake);
    auto bell = std::make_shared<doorbell>();

    fake.fail[driver_op::retain_domain] = 3;
    auto retain = line.attach_doorbell(bell);
    BOOST_TEST_REQUIRE(retain.has_value());
    BOOST_TEST(retain->code() == errc::driver_status);
    BOOST_TEST(retain->args().at(0) == "fakeRetain");
    BOOST_TEST(fake.refs[0] == 1);
    fake.fail.clear();

    fake.fail[driver_op::register_host] = 712;
    fake.calls.clear();
    auto reg = line.attach_doorbell(bell);
    BOOST_TEST_REQUIRE(reg.has_value());
    BOOST_TEST(reg->code() == errc::driver_status);
    BOOST_TEST((reg->args() == std::vector<std::string>{"fakeRegister", "FAKE_ERROR", "712"}));
    BOOST_TEST((fake.calls == calls_t{"retain 0", "register 0 64", "release 0"}));
    BOOST_TEST(fake.refs[0] == 1);
    BOOST_TEST(line.attached_doorbell() == nullptr);
    fake.fail.clear();

    // Nothing attached: a store is the single write still.
    fake_stream s = fake.stream_on(0);
    fake.calls.clear();
    BOOST_TEST(line.store(slot(0), &s).has_value());
    BOOST_TEST((fake.calls == calls_t{"stream_domain", "write 1"}));
    // A later attach succeeds.
    BOOST_TEST(!line.attach_doorbell(bell).has_value());
    BOOST_TEST(fake.registered.size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_failed_device_pointer_unregisters_only_a_registration_of_its_own) {
    fake_line_driver fake;
    mapped_line a = make_line(fake, 0);
    mapped_line b = make_line(fake, 1);
    auto bell = std::make_shared<doorbell>();

    // First user: the new registration is undone.
    fake.fail[driver_op::device_pointer] = 9;
    fake.calls.clear();
    auto first = a.attach_doorbell(bell);
    BOOST_TEST_REQUIRE(first.has_value());
    BOOST_TEST(first->args().at(0) == "fakeDevPtr");
    BOOST_TEST((fake.calls == calls_t{"retain 0", "register 0 64", "device_pointer", "unregister 0",
                                      "release 0"}));
    BOOST_TEST(fake.registered.empty());
    BOOST_TEST(fake.refs[0] == 1);
    fake.fail.clear();

    // A later user: the registration of the others stays.
    BOOST_TEST(!a.attach_doorbell(bell).has_value());
    fake.fail[driver_op::device_pointer] = 9;
    fake.calls.clear();
    auto second = b.attach_doorbell(bell);
    BOOST_TEST_REQUIRE(second.has_value());
    BOOST_TEST((fake.calls == calls_t{"device_pointer"}));
    BOOST_TEST(fake.registered.size() == 1u);
    BOOST_TEST(b.attached_doorbell() == nullptr);
    fake.fail.clear();
    BOOST_TEST(!a.close().has_value());
    BOOST_TEST(fake.registered.empty());
}

BOOST_AUTO_TEST_CASE(a_failed_unregistration_leaks_the_registration_and_keeps_the_doorbell) {
    fake_line_driver fake;
    mapped_line line = make_line(fake);
    auto bell = std::make_shared<doorbell>();
    std::weak_ptr<doorbell> watch = bell;
    BOOST_TEST(!line.attach_doorbell(bell).has_value());
    bell.reset();
    fake.fail[driver_op::unregister_host] = 713;
    fake.calls.clear();
    const auto error = line.close();
    BOOST_TEST_REQUIRE(error.has_value());
    BOOST_TEST((error->args() == std::vector<std::string>{"fakeUnregister", "FAKE_ERROR", "713"}));
    // The line's own page and reference still go; the registration's reference and the doorbell
    // stay (never free memory that may still be registered).
    BOOST_TEST((fake.calls == calls_t{"settle", "unregister 0", "free", "release 0"}));
    BOOST_TEST(fake.pages.empty());
    BOOST_TEST(!line.leaked());
    BOOST_TEST(fake.refs[0] == 1);
    BOOST_TEST(!watch.expired());
}

BOOST_AUTO_TEST_CASE(a_failed_settle_leaks_the_doorbell_use_with_the_page) {
    fake_line_driver fake;
    mapped_line line = make_line(fake);
    auto bell = std::make_shared<doorbell>();
    std::weak_ptr<doorbell> watch = bell;
    BOOST_TEST(!line.attach_doorbell(bell).has_value());
    bell.reset();
    fake.fail[driver_op::settle] = 719;
    fake.calls.clear();
    const auto error = line.close();
    BOOST_TEST_REQUIRE(error.has_value());
    BOOST_TEST(error->args().at(0) == "fakeSettle");
    BOOST_TEST((fake.calls == calls_t{"settle"}));
    BOOST_TEST(line.leaked());
    BOOST_TEST(fake.registered.size() == 1u);
    BOOST_TEST(fake.refs[0] == 2);
    BOOST_TEST(!watch.expired());
}

BOOST_AUTO_TEST_CASE(a_failed_batch_enqueues_nothing) {
    fake_line_driver fake;
    mapped_line line = make_line(fake);
    auto bell = std::make_shared<doorbell>();
    BOOST_TEST(!line.attach_doorbell(bell).has_value());
    fake_stream s = fake.stream_on(0);
    fake.fail[driver_op::batch_write64] = 1;
    auto stored = line.store(slot(2), &s);
    BOOST_TEST_REQUIRE(!stored.has_value());
    BOOST_TEST(stored.error().code() == errc::driver_status);
    BOOST_TEST(stored.error().args().at(0) == "fakeBatch64");
    BOOST_TEST(line.sequence(slot(2)) == 0u);
    BOOST_TEST(fake.writes.empty());
    BOOST_TEST(!bell->device_signaled());
}

BOOST_AUTO_TEST_CASE(without_batches_a_failed_write_reports_and_the_sequence_says_what_ran) {
    fake_line_driver fake;
    fake.batches = false;
    mapped_line line = make_line(fake);
    auto bell = std::make_shared<doorbell>();
    BOOST_TEST(!line.attach_doorbell(bell).has_value());
    fake_stream s = fake.stream_on(0);

    // The completion's write fails: nothing enqueued, the sequence stays.
    fake.fail_address = line.device_address(slot(5));
    auto first = line.store(slot(5), &s);
    BOOST_TEST_REQUIRE(!first.has_value());
    BOOST_TEST(first.error().args().at(0) == "fakeWrite64");
    BOOST_TEST(line.sequence(slot(5)) == 0u);
    BOOST_TEST(fake.writes.empty());

    // The doorbell's write fails after the completion's was enqueued: the error is reported and
    // the number is spent (the next store does not reuse it).
    fake.fail_address = signal_address(*bell);
    auto second = line.store(slot(5), &s);
    BOOST_TEST_REQUIRE(!second.has_value());
    BOOST_TEST(second.error().code() == errc::driver_status);
    BOOST_TEST(line.sequence(slot(5)) == 1u);
    BOOST_TEST(line.last(slot(5)).is_complete());
    BOOST_TEST(fake.writes.size() == 1u);

    fake.fail_address = 0;
    auto third = line.store(slot(5), &s);
    BOOST_TEST_REQUIRE(third.has_value());
    BOOST_TEST(third.value().target() == 2u);
}

BOOST_AUTO_TEST_CASE(the_port_awaits_a_store_that_signals_its_own_doorbell) {
    fake_line_driver fake;
    fake.hold_writes = true;
    mapped_line line = make_line(fake);
    boost::asio::io_context io;
    gpu_completion_port port(io);
    BOOST_TEST(!line.attach_doorbell(port.shared_bell()).has_value());
    fake_stream s = fake.stream_on(0);
    auto stored = line.store(slot(0), &s);
    BOOST_TEST_REQUIRE(stored.has_value());
    std::optional<boost::system::error_code> result;
    port.async_wait(stored.value(), [&](boost::system::error_code ec) { result = ec; });
    BOOST_TEST(!stored.value().is_complete());
    // The batch stores the completion word, then the port's own doorbell. (The bell's state after
    // land() is not checked: the port's watcher thread may already have taken the signal.)
    BOOST_TEST_REQUIRE(fake.writes.size() == 2u);
    BOOST_TEST(fake.writes[0].address == line.device_address(slot(0)));
    BOOST_TEST(fake.writes[1].address == signal_address(*port.shared_bell()));
    BOOST_TEST(fake.writes[1].value == doorbell::device_signal);
    fake.land(); // the "device" runs the batch
    gpu_async::test::run_to_completion(io);
    BOOST_TEST_REQUIRE(result.has_value());
    BOOST_TEST(!*result);
    BOOST_TEST(!line.close().has_value());
    BOOST_TEST(fake.registered.empty());
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_devices_mapped_line_doorbell
