// SPDX-License-Identifier: BSL-1.0
#include <gpu_async/fill/wait_bands.hpp>

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace unit_core_wait_bands {

using namespace gpu_async;

namespace {

const std::string flag_predict = "flag:park_us=100,backstop_us=1000+predict:margin_us=150,"
                                 "min_sleep_us=20,max_sleep_us=50000,window=8";

template <class T>
std::string why(const result<T>& r) {
    return r.has_value() ? std::string() : r.error().message();
}

wait_bands parsed(std::string_view text) {
    auto r = wait_bands::parse(text);
    BOOST_TEST_REQUIRE(r.has_value(), "refused '" << text << "': " << why(r));
    return r.value();
}

wait_plan plan(std::string_view text) {
    auto r = wait_plan::parse(text);
    BOOST_TEST_REQUIRE(r.has_value(), why(r));
    return r.value();
}

} // namespace

BOOST_AUTO_TEST_SUITE(wait_bands_suite)

BOOST_AUTO_TEST_CASE(fixture_block_then_flag_from_32_rows) {
    const std::string text = "block;rows>=32:" + flag_predict;
    const wait_bands b = parsed(text);
    BOOST_TEST(b.size() == 2u);
    BOOST_TEST(b.label() == text);
    for (std::uint32_t rows = 0; rows < 32; ++rows)
        BOOST_TEST((b.select(rows) == wait_plan::block()), rows);
    const wait_plan f = plan(flag_predict);
    for (std::uint32_t rows : {32u, 33u, 64u, 1000u, 65535u, band_rows_max - 1, band_rows_max})
        BOOST_TEST((b.select(rows) == f), rows);
    BOOST_TEST(b.bands()[0].min_rows == 0u);
    BOOST_TEST(b.bands()[1].min_rows == 32u);
}

BOOST_AUTO_TEST_CASE(fixture_block_poll_flag) {
    const std::string text = "block;rows>=2:poll;rows>=5:" + flag_predict;
    const wait_bands b = parsed(text);
    BOOST_TEST(b.size() == 3u);
    BOOST_TEST(b.label() == text);
    BOOST_TEST((b.select(0) == wait_plan::block()));
    BOOST_TEST((b.select(1) == wait_plan::block()));
    BOOST_TEST((b.select(2) == wait_plan::poll().value()));
    BOOST_TEST((b.select(3) == wait_plan::poll().value()));
    BOOST_TEST((b.select(4) == wait_plan::poll().value()));
    BOOST_TEST((b.select(5) == plan(flag_predict)));
    BOOST_TEST((b.select(6) == plan(flag_predict)));
    BOOST_TEST((b.select(band_rows_max) == plan(flag_predict)));
}

BOOST_AUTO_TEST_CASE(a_single_plan_is_one_band_for_every_row_count) {
    const wait_bands b = parsed("poll");
    BOOST_TEST(b.size() == 1u);
    BOOST_TEST(b.label() == "poll");
    BOOST_TEST((b.select(0) == wait_plan::poll().value()));
    BOOST_TEST((b.select(band_rows_max) == wait_plan::poll().value()));
    BOOST_TEST((b == wait_bands(wait_plan::poll().value())));
    BOOST_TEST(!(b == wait_bands(wait_plan::block())));
}

BOOST_AUTO_TEST_CASE(four_bands_and_the_largest_edge) {
    const std::string text =
        "block;rows>=1:poll;rows>=4294967294:flag:park_us=1,backstop_us=1;rows>=4294967295:block";
    const wait_bands b = parsed(text);
    BOOST_TEST(b.size() == bands_max);
    BOOST_TEST(b.label() == text);
    BOOST_TEST((b.select(0) == wait_plan::block()));
    BOOST_TEST((b.select(1) == wait_plan::poll().value()));
    BOOST_TEST((b.select(4294967293u) == wait_plan::poll().value()));
    BOOST_TEST((b.select(4294967294u).kind() == plan_kind::flag));
    BOOST_TEST((b.select(4294967295u) == wait_plan::block()));
}

BOOST_AUTO_TEST_CASE(step_rows_counter_selects_the_published_step) {
    static_assert(alignof(step_rows) == 64);
    step_rows rows;
    BOOST_TEST(rows.load() == 0u);
    const wait_bands b = parsed("block;rows>=2:poll;rows>=5:" + flag_predict);
    BOOST_TEST((b.select(rows) == wait_plan::block()));
    rows.publish(3);
    BOOST_TEST(rows.load() == 3u);
    BOOST_TEST((b.select(rows) == wait_plan::poll().value()));
    rows.publish(band_rows_max);
    BOOST_TEST((b.select(rows).kind() == plan_kind::flag));
    const step_rows preset(7);
    BOOST_TEST(preset.load() == 7u);
}

struct refusal {
    std::string text;
    std::string fault;
};

BOOST_AUTO_TEST_CASE(every_refusal_names_its_fault) {
    const std::vector<refusal> refusals = {
        {"", "empty text"},
        {"rows>=0:block",
         "the first band must start at 0 rows and takes no edge (found 'rows>=0')"},
        {"rows>=5:poll;rows>=9:block", "the first band must start at 0 rows"},
        {"block;rows>=0:poll", "edges not increasing: band 2 starts at rows>=0, not above band 1 "
                               "at 0 rows"},
        {"block;rows>=5:poll;rows>=5:block",
         "edges not increasing: band 3 starts at rows>=5, not above band 2 (rows>=5)"},
        {"block;rows>=5:poll;rows>=4:block", "edges not increasing: band 3 starts at rows>=4"},
        {"block;rows>=1:poll;rows>=2:block;rows>=3:poll;rows>=4:block",
         "more than 4 bands (band 5 is one too many)"},
        {"block;rows>=1:poll;rows>=2:block;rows>=3:poll;", "more than 4 bands"},
        {"block;", "band 2 has no 'rows>=N:' edge (found '')"},
        {"block;poll", "band 2 has no 'rows>=N:' edge (found 'poll')"},
        {"block;rows>5:poll", "band 2 has no 'rows>=N:' edge"},
        {"block;rows>=5", "band 2 has no ':' after its edge"},
        {"block;rows>=:poll", "band 2 has an empty edge"},
        {"block;rows>=x:poll", "band 2 edge 'x' is not a whole number"},
        {"block;rows>=-1:poll", "band 2 edge '-1' is not a whole number"},
        {"block;rows>=05:poll", "band 2 edge '05' has a leading zero"},
        {"block;rows>=4294967296:poll", "band 2 edge '4294967296' is above the largest row count "
                                        "4294967295"},
        {"block;rows>=99999999999999999999999:poll", "band 2 edge '99999999999999999999999' is "
                                                     "above the largest row count"},
        {"blok", "band 1 has a bad plan: invalid plan 'blok': unknown plan kind 'blok'"},
        {"block;rows>=32:flag:park_us=0,backstop_us=1000",
         "band 2 (rows>=32) has a bad plan: invalid plan 'flag:park_us=0,backstop_us=1000': "
         "'park_us' must not be zero"},
        {"block;rows>=2:poll;rows>=5:block+predict:margin_us=1,min_sleep_us=1,max_sleep_us=1,"
         "window=1",
         "band 3 (rows>=5) has a bad plan: invalid plan 'block+predict:"},
        {"block;rows>=2:", "band 2 (rows>=2) has a bad plan: invalid plan '': empty text"},
        {";rows>=2:poll", "band 1 has a bad plan: invalid plan '': empty text"},
        {"block;;", "band 2 has no 'rows>=N:' edge (found '')"},
        {"block ;rows>=2:poll", "band 1 has a bad plan: invalid plan 'block '"},
        {"block;rows>=2:poll,", "band 2 (rows>=2) has a bad plan: invalid plan 'poll,'"},
    };
    for (const auto& [text, fault] : refusals) {
        const auto r = wait_bands::parse(text);
        BOOST_TEST_REQUIRE(!r.has_value(), "accepted '" << text << "'");
        BOOST_TEST((r.error().code() == errc::invalid_plan));
        BOOST_TEST_REQUIRE(r.error().args().size() == 2u);
        const std::string excerpt = detail::plan_text_excerpt(text); // pinned in wait_plan.cpp
        BOOST_TEST(r.error().args()[0] == excerpt);
        BOOST_TEST(r.error().message().starts_with("invalid plan '" + excerpt + "': "));
        BOOST_TEST(r.error().args()[1].find(fault) != std::string::npos,
                   "'" << text << "' gave '" << r.error().message() << "', expected to name '"
                       << fault << "'");
    }
}

BOOST_AUTO_TEST_CASE(a_one_mebibyte_band_text_quotes_its_first_64_characters) {
    // A huge last band, a huge plan inside a band, a huge edge: each message stays short.
    const std::size_t mib = std::size_t{1} << 20;
    std::string huge_plan = "block;rows>=2:";
    huge_plan.resize(mib, 'p');
    std::string huge_edge = "block;rows>=";
    huge_edge.resize(mib, '9');
    std::string many = "block";
    while (many.size() < mib)
        many += ";rows>=1:poll";
    for (const std::string& text : {huge_plan, huge_edge, many}) {
        const auto r = wait_bands::parse(text);
        BOOST_TEST_REQUIRE(!r.has_value());
        const std::string message = r.error().message();
        BOOST_TEST(message.size() < 400u, message.size());
        BOOST_TEST(message.starts_with("invalid plan '" + text.substr(0, 64) + "... (" +
                                       std::to_string(text.size()) + " characters)': "),
                   message);
    }
}

BOOST_AUTO_TEST_CASE(make_validates_as_parse_does) {
    const wait_band ok[] = {{0, wait_plan::block()}, {8, wait_plan::recommended()}};
    const auto good = wait_bands::make(ok);
    BOOST_TEST_REQUIRE(good.has_value(), why(good));
    BOOST_TEST(good.value().label() == "block;rows>=8:flag:park_us=100,backstop_us=1000");

    const auto empty = wait_bands::make({});
    BOOST_TEST_REQUIRE(!empty.has_value());
    BOOST_TEST(empty.error().args()[1].find("no bands") == 0u);

    const wait_band late_start[] = {{3, wait_plan::block()}};
    const auto first = wait_bands::make(late_start);
    BOOST_TEST_REQUIRE(!first.has_value());
    BOOST_TEST(first.error().args()[1] == "the first band must start at 0 rows (it starts at 3)");

    const wait_band flat[] = {
        {0, wait_plan::block()}, {4, wait_plan::block()}, {4, wait_plan::block()}};
    const auto same = wait_bands::make(flat);
    BOOST_TEST_REQUIRE(!same.has_value());
    BOOST_TEST(same.error().args()[0] == "block;rows>=4:block;rows>=4:block");
    BOOST_TEST(same.error().args()[1].find("edges not increasing: band 3 starts at rows>=4") == 0u);

    const wait_band five[] = {{0, wait_plan::block()},
                              {1, wait_plan::block()},
                              {2, wait_plan::block()},
                              {3, wait_plan::block()},
                              {4, wait_plan::block()}};
    const auto many = wait_bands::make(five);
    BOOST_TEST_REQUIRE(!many.has_value());
    BOOST_TEST(many.error().args()[1] == "more than 4 bands (5)");
}

BOOST_AUTO_TEST_CASE(resolve_each_band_against_the_host) {
    const wait_bands b = parsed("block;rows>=2:poll;rows>=5:" + flag_predict);
    plan_capabilities caps;
    caps.set_missing(plan_capability::word_park, "no user-mode monitor");
    const resolved_bands r = resolve(b, caps);
    BOOST_TEST(r.bands.label() ==
               "block;rows>=2:poll;rows>=5:poll+predict:margin_us=150,min_sleep_us=20,"
               "max_sleep_us=50000,window=8");
    BOOST_TEST_REQUIRE(r.warnings.size() == 1u);
    BOOST_TEST((r.warnings[0].code() == errc::park_fallback));
    BOOST_TEST(r.warnings[0].args()[0] == flag_predict);
    BOOST_TEST(r.warnings[0].args()[2] == "no user-mode monitor");

    caps.set_missing(plan_capability::blocking_wait, "no blocking wait");
    const resolved_bands r2 = resolve(b, caps);
    BOOST_TEST(r2.bands.label() ==
               "poll;rows>=2:poll;rows>=5:poll+predict:margin_us=150,min_sleep_us=20,"
               "max_sleep_us=50000,window=8");
    BOOST_TEST_REQUIRE(r2.warnings.size() == 2u);
    BOOST_TEST(r2.warnings[0].args()[0] == "block"); // band order
    BOOST_TEST(r2.warnings[1].args()[0] == flag_predict);
    BOOST_TEST((r2.bands.select(3) == wait_plan::poll().value())); // edges kept

    const resolved_bands same = resolve(b, plan_capabilities{});
    BOOST_TEST((same.bands == b));
    BOOST_TEST(same.warnings.empty());
}

namespace {

std::uint64_t draw(std::mt19937_64& rng, std::uint64_t lo, std::uint64_t hi) {
    return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
}

wait_plan random_plan(std::mt19937_64& rng) {
    std::optional<deadline_plan> predict;
    const auto kind = draw(rng, 0, 2);
    if (kind != 0 && draw(rng, 0, 1) == 1) {
        const std::uint64_t max_us = draw(rng, 0, plan_us_max);
        predict =
            deadline_plan{draw(rng, 0, plan_us_max) * 1000, draw(rng, 0, max_us) * 1000,
                          max_us * 1000, static_cast<std::uint32_t>(draw(rng, 1, window_max))};
    }
    if (kind == 0) return wait_plan::block();
    if (kind == 1) return wait_plan::poll(predict).value();
    const std::uint64_t park_us = draw(rng, 1, park_ns_max / 1000);
    return wait_plan::flag(park_us * 1000, draw(rng, park_us, backstop_ns_max / 1000) * 1000,
                           predict)
        .value();
}

} // namespace

BOOST_AUTO_TEST_CASE(round_trip_and_selection_over_random_valid_bands) {
    std::mt19937_64 rng(0x9a17'0003);
    for (int i = 0; i < 3000; ++i) {
        std::vector<wait_band> bands{{0, random_plan(rng)}};
        const auto n = draw(rng, 1, bands_max);
        std::uint64_t edge = 0;
        while (bands.size() < n && edge < band_rows_max) {
            const std::uint64_t room = band_rows_max - edge;
            edge += draw(rng, 1, draw(rng, 0, 1) == 0 ? std::min<std::uint64_t>(room, 64) : room);
            bands.push_back({static_cast<std::uint32_t>(edge), random_plan(rng)});
        }
        const auto made = wait_bands::make(bands);
        BOOST_TEST_REQUIRE(made.has_value(), why(made));
        const std::string text = made.value().label();
        const auto back = wait_bands::parse(text);
        BOOST_TEST_REQUIRE(back.has_value(), text << ": " << why(back));
        BOOST_TEST_REQUIRE((back.value() == made.value()), text);
        BOOST_TEST_REQUIRE(back.value().label() == text);
        // Selection: each band's own edge is inclusive; one row below it is the band before.
        for (std::size_t b = 0; b < bands.size(); ++b) {
            BOOST_TEST_REQUIRE((back.value().select(bands[b].min_rows) == bands[b].plan));
            if (b > 0)
                BOOST_TEST_REQUIRE(
                    (back.value().select(bands[b].min_rows - 1) == bands[b - 1].plan));
        }
        BOOST_TEST_REQUIRE((back.value().select(band_rows_max) == bands.back().plan));
    }
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace unit_core_wait_bands
