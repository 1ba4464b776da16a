// SPDX-License-Identifier: BSL-1.0
//
// fuzz/plan_fuzzer.cpp: libFuzzer target for the wait-plan and wait-band parsers.
//
// For every input, each parser either refuses it with errc::invalid_plan, the input as the
// message's text (up to its first 64 characters) and a non-empty fault, or accepts it, and then
// the printer gives back exactly the input (every accepted text is canonical),
// parse(label(p)) == p, and label(parse(label(p))) == label(p). Anything else aborts. Built with
// -fsanitize=fuzzer,address,undefined by -DGPU_ASYNC_BUILD_FUZZERS=ON (clang only); run by
// scripts/ci/fuzz.sh.
//
#include <gpu_async/core/wait_plan.hpp>
#include <gpu_async/fill/wait_bands.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

[[noreturn]] void mismatch(const char* what, std::string_view input, const std::string& detail) {
    std::fprintf(stderr, "plan_fuzzer: %s\n  input: '%.*s'\n  detail: '%s'\n", what,
                 static_cast<int>(input.size()), input.data(), detail.c_str());
    std::abort();
}

template <class T>
void check(std::string_view input, const char* parser) {
    const auto r = T::parse(input);
    if (!r.has_value()) {
        const gpu_async::coded_error& e = r.error();
        if (e.code() != gpu_async::errc::invalid_plan)
            mismatch("refusal is not errc::invalid_plan", input, parser);
        // The text itself, or for a long one its first 64 characters, "..." and its length.
        if (e.args().size() != 2 || e.args()[0] != gpu_async::detail::plan_text_excerpt(input))
            mismatch("refusal does not name the text", input, parser);
        if (input.size() > gpu_async::plan_text_quote_max &&
            e.args()[0].size() > gpu_async::plan_text_quote_max + 32)
            mismatch("refusal quotes more than 64 characters of the text", input, parser);
        if (e.args()[1].empty()) mismatch("refusal names no fault", input, parser);
        if (e.message().empty()) mismatch("refusal has an empty message", input, parser);
        return;
    }
    const std::string label = r.value().label();
    if (label != input) mismatch("accepted text is not canonical", input, label);
    const auto again = T::parse(label);
    if (!again.has_value()) mismatch("label does not parse", input, again.error().message());
    if (!(again.value() == r.value())) mismatch("parse(label(p)) != p", input, label);
    if (again.value().label() != label)
        mismatch("label(parse(label(p))) != label(p)", input, label);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    check<gpu_async::wait_plan>(input, "wait_plan");
    check<gpu_async::wait_bands>(input, "wait_bands");
    return 0;
}
