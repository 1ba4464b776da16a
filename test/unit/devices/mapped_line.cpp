// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/device/mapped_line.hpp>

#include "common/fake_line_driver.hpp"
#include "common/slots.hpp"

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace unit_devices_mapped_line {

using namespace gpu_async;
using gpu_async::test::fake_line_driver;
using gpu_async::test::fake_stream;
using gpu_async::test::slot;

namespace {

using calls_t = std::vector<std::string>;

} // namespace

BOOST_AUTO_TEST_SUITE(mapped_line_suite)

BOOST_AUTO_TEST_CASE(create_retains_before_alloc_and_close_settles_frees_then_releases) {
    fake_line_driver fake;
    auto made = mapped_line::create(fake.table());
    BOOST_TEST_REQUIRE(made.has_value());
    mapped_line& line = made.value();
    BOOST_TEST((fake.calls == calls_t{"current", "retain 0", "alloc 4096", "device_pointer"}));
    BOOST_TEST(fake.refs[0] == 1);
    BOOST_TEST(fake.pages.size() == 1u);
    // The line sits at the start of its own page; the words start at zero.
    BOOST_TEST(static_cast<const void*>(&line.line()) == *fake.pages.begin());
    BOOST_TEST(line.device() == 0);
    BOOST_TEST(line.domain() == fake.domain_of(0));
    BOOST_TEST(line.is_open());
    for (std::size_t i = 0; i < line_words; ++i) {
        BOOST_TEST(line.line().words[i].load() == 0u);
        BOOST_TEST(line.sequence(slot(i)) == 0u);
        BOOST_TEST(line.device_address(slot(i)) ==
                   reinterpret_cast<std::uintptr_t>(&line.line().words[i]) +
                       fake_line_driver::device_offset);
    }

    fake.calls.clear();
    BOOST_TEST(!line.close().has_value());
    BOOST_TEST((fake.calls == calls_t{"settle", "free", "release 0"}));
    BOOST_TEST(fake.refs[0] == 0);
    BOOST_TEST(fake.pages.empty());
    BOOST_TEST(!line.is_open());
    BOOST_TEST(!line.leaked());

    // Closing again, and destroying, do nothing more.
    fake.calls.clear();
    BOOST_TEST(!line.close().has_value());
    BOOST_TEST(fake.calls.empty());
}

BOOST_AUTO_TEST_CASE(destruction_settles_frees_then_releases) {
    fake_line_driver fake;
    {
        auto made = mapped_line::create_on(fake.table(), 2);
        BOOST_TEST_REQUIRE(made.has_value());
        BOOST_TEST((fake.calls == calls_t{"retain 2", "alloc 4096", "device_pointer"}));
        fake.calls.clear();
    }
    BOOST_TEST((fake.calls == calls_t{"settle", "free", "release 2"}));
    BOOST_TEST(fake.refs[2] == 0);
    BOOST_TEST(fake.pages.empty());
}

BOOST_AUTO_TEST_CASE(no_current_context_is_an_error_and_takes_nothing) {
    fake_line_driver fake;
    fake.current = -1;
    auto made = mapped_line::create(fake.table());
    BOOST_TEST_REQUIRE(!made.has_value());
    BOOST_TEST(made.error().code() == errc::no_domain);
    BOOST_TEST(made.error().message().find("no current context") != std::string::npos);
    BOOST_TEST((fake.calls == calls_t{"current"}));
}

BOOST_AUTO_TEST_CASE(current_device_failure_is_a_driver_status) {
    fake_line_driver fake;
    fake.fail[driver_op::current_device] = 201;
    auto made = mapped_line::create(fake.table());
    BOOST_TEST_REQUIRE(!made.has_value());
    BOOST_TEST(made.error().code() == errc::driver_status);
    BOOST_TEST((made.error().args() ==
                std::vector<std::string>{"fakeCurrentDevice", "FAKE_ERROR", "201"}));
    BOOST_TEST(made.error().message() == "driver call fakeCurrentDevice failed: FAKE_ERROR (201)");
    BOOST_TEST((fake.calls == calls_t{"current"}));
}

BOOST_AUTO_TEST_CASE(retain_failure_allocates_nothing) {
    fake_line_driver fake;
    fake.fail[driver_op::retain_domain] = 3;
    auto made = mapped_line::create(fake.table());
    BOOST_TEST_REQUIRE(!made.has_value());
    BOOST_TEST(made.error().code() == errc::driver_status);
    BOOST_TEST(made.error().args().at(0) == "fakeRetain");
    BOOST_TEST((fake.calls == calls_t{"current", "retain 0"}));
    BOOST_TEST(fake.refs[0] == 0);
}

BOOST_AUTO_TEST_CASE(allocation_failure_releases_the_domain) {
    fake_line_driver fake;
    fake.fail[driver_op::alloc_page] = 2;
    auto made = mapped_line::create(fake.table());
    BOOST_TEST_REQUIRE(!made.has_value());
    BOOST_TEST(made.error().code() == errc::driver_status);
    BOOST_TEST((made.error().args() == std::vector<std::string>{"fakeAlloc", "FAKE_ERROR", "2"}));
    BOOST_TEST((fake.calls == calls_t{"current", "retain 0", "alloc 4096", "release 0"}));
    BOOST_TEST(fake.refs[0] == 0);
    BOOST_TEST(fake.pages.empty());
}

BOOST_AUTO_TEST_CASE(misaligned_page_is_freed_then_the_domain_released) {
    fake_line_driver fake;
    fake.misaligned_page = true;
    auto made = mapped_line::create(fake.table());
    BOOST_TEST_REQUIRE(!made.has_value());
    BOOST_TEST(made.error().code() == errc::backend);
    BOOST_TEST(made.error().message().find("not 64-byte aligned") != std::string::npos);
    BOOST_TEST((fake.calls == calls_t{"current", "retain 0", "alloc 4096", "free", "release 0"}));
    BOOST_TEST(fake.refs[0] == 0);
    BOOST_TEST(fake.pages.empty());
}

BOOST_AUTO_TEST_CASE(device_pointer_failure_frees_the_page_then_releases) {
    fake_line_driver fake;
    fake.fail[driver_op::device_pointer] = 9;
    auto made = mapped_line::create(fake.table());
    BOOST_TEST_REQUIRE(!made.has_value());
    BOOST_TEST(made.error().args().at(0) == "fakeDevPtr");
    BOOST_TEST((fake.calls == calls_t{"current", "retain 0", "alloc 4096", "device_pointer", "free",
                                      "release 0"}));
    BOOST_TEST(fake.refs[0] == 0);
    BOOST_TEST(fake.pages.empty());
}

BOOST_AUTO_TEST_CASE(unfreeable_page_after_a_failed_create_keeps_its_reference) {
    fake_line_driver fake;
    fake.fail[driver_op::device_pointer] = 9;
    fake.fail[driver_op::free_page] = 4;
    auto made = mapped_line::create(fake.table());
    BOOST_TEST_REQUIRE(!made.has_value());
    // The first failure is reported; the page could not be freed, so the domain stays retained.
    BOOST_TEST(made.error().args().at(0) == "fakeDevPtr");
    BOOST_TEST(
        (fake.calls == calls_t{"current", "retain 0", "alloc 4096", "device_pointer", "free"}));
    BOOST_TEST(fake.refs[0] == 1);
    BOOST_TEST(fake.pages.size() == 1u);
}

BOOST_AUTO_TEST_CASE(settle_failure_leaks_the_page_and_the_reference) {
    fake_line_driver fake;
    auto made = mapped_line::create(fake.table());
    BOOST_TEST_REQUIRE(made.has_value());
    fake.fail[driver_op::settle] = 700;
    fake.calls.clear();
    const auto error = made.value().close();
    BOOST_TEST_REQUIRE(error.has_value());
    BOOST_TEST(error->code() == errc::driver_status);
    BOOST_TEST((error->args() == std::vector<std::string>{"fakeSettle", "FAKE_ERROR", "700"}));
    BOOST_TEST((fake.calls == calls_t{"settle"})); // never freed under a pending store
    BOOST_TEST(made.value().leaked());
    BOOST_TEST(!made.value().is_open());
    BOOST_TEST(fake.refs[0] == 1);
    BOOST_TEST(fake.pages.size() == 1u);
}

BOOST_AUTO_TEST_CASE(settle_failure_in_the_destructor_leaks_too) {
    fake_line_driver fake;
    {
        auto made = mapped_line::create(fake.table());
        BOOST_TEST_REQUIRE(made.has_value());
        fake.fail[driver_op::settle] = 700;
        fake.calls.clear();
    }
    BOOST_TEST((fake.calls == calls_t{"settle"}));
    BOOST_TEST(fake.refs[0] == 1);
    BOOST_TEST(fake.pages.size() == 1u);
}

BOOST_AUTO_TEST_CASE(free_failure_leaks_the_reference) {
    fake_line_driver fake;
    auto made = mapped_line::create(fake.table());
    BOOST_TEST_REQUIRE(made.has_value());
    fake.fail[driver_op::free_page] = 5;
    fake.calls.clear();
    const auto error = made.value().close();
    BOOST_TEST_REQUIRE(error.has_value());
    BOOST_TEST(error->args().at(0) == "fakeFree");
    BOOST_TEST((fake.calls == calls_t{"settle", "free"}));
    BOOST_TEST(made.value().leaked());
    BOOST_TEST(fake.refs[0] == 1);
}

BOOST_AUTO_TEST_CASE(release_failure_is_reported_after_the_page_is_freed) {
    fake_line_driver fake;
    auto made = mapped_line::create(fake.table());
    BOOST_TEST_REQUIRE(made.has_value());
    fake.fail[driver_op::release_domain] = 6;
    fake.calls.clear();
    const auto error = made.value().close();
    BOOST_TEST_REQUIRE(error.has_value());
    BOOST_TEST(error->args().at(0) == "fakeRelease");
    BOOST_TEST((fake.calls == calls_t{"settle", "free", "release 0"}));
    BOOST_TEST(!made.value().leaked());
    BOOST_TEST(fake.pages.empty());
}

BOOST_AUTO_TEST_CASE(a_foreign_stream_is_refused_with_nothing_enqueued) {
    fake_line_driver fake;
    auto made = mapped_line::create_on(fake.table(), 0);
    BOOST_TEST_REQUIRE(made.has_value());
    fake_stream other = fake.stream_on(1);
    fake.calls.clear();
    auto stored = made.value().store(slot(3), &other);
    BOOST_TEST_REQUIRE(!stored.has_value());
    BOOST_TEST(stored.error().code() == errc::foreign_stream);
    BOOST_TEST(stored.error().message().find("nothing was enqueued") != std::string::npos);
    BOOST_TEST(stored.error().message().find("device 0") != std::string::npos);
    BOOST_TEST((fake.calls == calls_t{"stream_domain"}));
    BOOST_TEST(fake.writes.empty());
    BOOST_TEST(made.value().sequence(slot(3)) == 0u);
    BOOST_TEST(made.value().line().words[3].load() == 0u);
}

BOOST_AUTO_TEST_CASE(stream_domain_failure_enqueues_nothing) {
    fake_line_driver fake;
    auto made = mapped_line::create(fake.table());
    BOOST_TEST_REQUIRE(made.has_value());
    fake_stream own = fake.stream_on(0);
    fake.fail[driver_op::stream_domain] = 400;
    auto stored = made.value().store(slot(0), &own);
    BOOST_TEST_REQUIRE(!stored.has_value());
    BOOST_TEST(stored.error().code() == errc::driver_status);
    BOOST_TEST(stored.error().args().at(0) == "fakeStreamDomain");
    BOOST_TEST(fake.writes.empty());
    BOOST_TEST(made.value().sequence(slot(0)) == 0u);
}

BOOST_AUTO_TEST_CASE(write_failure_keeps_the_sequence) {
    fake_line_driver fake;
    auto made = mapped_line::create(fake.table());
    BOOST_TEST_REQUIRE(made.has_value());
    fake_stream own = fake.stream_on(0);
    fake.fail[driver_op::write_value64] = 1;
    auto stored = made.value().store(slot(1), &own);
    BOOST_TEST_REQUIRE(!stored.has_value());
    BOOST_TEST(stored.error().code() == errc::driver_status);
    BOOST_TEST(stored.error().args().at(0) == "fakeWrite64");
    BOOST_TEST(made.value().sequence(slot(1)) == 0u);
    // Once the driver recovers, the next store takes the number the failed one would have had.
    fake.fail.clear();
    auto again = made.value().store(slot(1), &own);
    BOOST_TEST_REQUIRE(again.has_value());
    BOOST_TEST(again.value().target() == 1u);
}

BOOST_AUTO_TEST_CASE(stores_increase_per_slot_and_land_in_the_slot_word) {
    fake_line_driver fake;
    auto made = mapped_line::create(fake.table());
    BOOST_TEST_REQUIRE(made.has_value());
    mapped_line& line = made.value();
    fake_stream own = fake.stream_on(0);
    for (std::uint64_t n = 1; n <= 3; ++n) {
        auto d = line.store(slot(2), &own);
        BOOST_TEST_REQUIRE(d.has_value());
        BOOST_TEST(d.value().target() == n);
        BOOST_TEST((d.value().slot() == slot(2)));
        BOOST_TEST(&d.value().line() == &line.line());
        BOOST_TEST(d.value().is_complete());
    }
    auto other = line.store(slot(5), &own);
    BOOST_TEST_REQUIRE(other.has_value());
    BOOST_TEST(other.value().target() == 1u); // each slot counts on its own
    BOOST_TEST(line.sequence(slot(2)) == 3u);
    BOOST_TEST(line.sequence(slot(5)) == 1u);
    BOOST_TEST(line.last(slot(2)).target() == 3u);
    BOOST_TEST_REQUIRE(fake.writes.size() == 4u);
    BOOST_TEST(fake.writes[0].address == line.device_address(slot(2)));
    BOOST_TEST(fake.writes[3].address == line.device_address(slot(5)));
    BOOST_TEST(fake.writes[0].stream == static_cast<void*>(&own));
    BOOST_TEST(line.line().words[2].load() == 3u);
    BOOST_TEST(line.line().words[5].load() == 1u);
}

BOOST_AUTO_TEST_CASE(sequence_numbers_wrap) {
    fake_line_driver fake;
    constexpr std::uint64_t top = std::numeric_limits<std::uint64_t>::max();
    auto made = mapped_line::create(fake.table(), mapped_line_options{top - 1});
    BOOST_TEST_REQUIRE(made.has_value());
    mapped_line& line = made.value();
    BOOST_TEST(line.line().words[0].load() == top - 1);
    BOOST_TEST(line.sequence(slot(0)) == top - 1);
    // A descriptor of the initial sequence is complete at once.
    BOOST_TEST(line.last(slot(0)).is_complete());
    fake_stream own = fake.stream_on(0);
    auto a = line.store(slot(0), &own);
    auto b = line.store(slot(0), &own);
    auto c = line.store(slot(0), &own);
    BOOST_TEST_REQUIRE((a.has_value() && b.has_value() && c.has_value()));
    BOOST_TEST(a.value().target() == top);
    BOOST_TEST(b.value().target() == 0u);
    BOOST_TEST(c.value().target() == 1u);
    // After the wrap the word (1) has reached every earlier target in wrapping order.
    BOOST_TEST(line.line().words[0].load() == 1u);
    BOOST_TEST(a.value().is_complete());
    BOOST_TEST(b.value().is_complete());
    BOOST_TEST(c.value().is_complete());
    // A target ahead of the word is pending.
    BOOST_TEST(!memory_descriptor(line.line(), slot(0), 2).is_complete());
}

BOOST_AUTO_TEST_CASE(a_slot_takes_another_stream_only_once_the_last_store_landed) {
    // Two streams on one slot: their stores land in no set order. If stream B's 2 landed before
    // stream A's 1, A's descriptor would complete before A's work, and the word would then go
    // back to 1. So B is refused while A's store is pending, and accepted once it has landed.
    fake_line_driver fake;
    fake.hold_writes = true;
    auto made = mapped_line::create(fake.table());
    BOOST_TEST_REQUIRE(made.has_value());
    mapped_line& line = made.value();
    fake_stream a = fake.stream_on(0);
    fake_stream b = fake.stream_on(0);
    auto first = line.store(slot(3), &a);
    BOOST_TEST_REQUIRE(first.has_value());
    BOOST_TEST(!first.value().is_complete());
    auto refused = line.store(slot(3), &b);
    BOOST_TEST_REQUIRE(!refused.has_value());
    BOOST_TEST((refused.error().code() == errc::backend));
    const std::string text = refused.error().message();
    BOOST_TEST(text.find("slot 3") != std::string::npos, text);
    BOOST_TEST(text.find(detail::hex(&b)) != std::string::npos, text);
    BOOST_TEST(text.find(detail::hex(&a)) != std::string::npos, text);
    BOOST_TEST(text.find("nothing was enqueued") != std::string::npos, text);
    BOOST_TEST(fake.writes.size() == 1u);
    BOOST_TEST(line.sequence(slot(3)) == 1u);
    // The same stream may queue more behind its own store; another slot is free for b.
    BOOST_TEST(line.store(slot(3), &a).has_value());
    BOOST_TEST(line.store(slot(4), &b).has_value());
    fake.land();
    BOOST_TEST(first.value().is_complete());
    // Everything a enqueued on the slot has landed: b may take it over.
    auto taken = line.store(slot(3), &b);
    BOOST_TEST_REQUIRE(taken.has_value());
    BOOST_TEST(taken.value().target() == 3u);
    fake.land();
    BOOST_TEST(taken.value().is_complete());
}

BOOST_AUTO_TEST_CASE(a_moved_from_line_owns_nothing) {
    fake_line_driver fake;
    auto made = mapped_line::create(fake.table());
    BOOST_TEST_REQUIRE(made.has_value());
    const completion_line* where = &made.value().line();
    mapped_line moved(std::move(made.value()));
    BOOST_TEST(!made.value().is_open());
    BOOST_TEST(moved.is_open());
    BOOST_TEST(&moved.line() == where);
    fake.calls.clear();
    BOOST_TEST(!made.value().close().has_value());
    BOOST_TEST(fake.calls.empty());
    fake_stream own = fake.stream_on(0);
    auto refused = made.value().store(slot(0), &own);
    BOOST_TEST_REQUIRE(!refused.has_value());
    BOOST_TEST(refused.error().code() == errc::backend);
    BOOST_TEST(fake.calls.empty());
}

BOOST_AUTO_TEST_CASE(move_assignment_closes_the_line_it_replaces) {
    fake_line_driver fake;
    auto first = mapped_line::create_on(fake.table(), 0);
    auto second = mapped_line::create_on(fake.table(), 1);
    BOOST_TEST_REQUIRE((first.has_value() && second.has_value()));
    fake.calls.clear();
    first.value() = std::move(second.value());
    BOOST_TEST((fake.calls == calls_t{"settle", "free", "release 0"}));
    BOOST_TEST(fake.refs[0] == 0);
    BOOST_TEST(fake.refs[1] == 1);
    BOOST_TEST(first.value().device() == 1);
    BOOST_TEST(!second.value().is_open());
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_devices_mapped_line
