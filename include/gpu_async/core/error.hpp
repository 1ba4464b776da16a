// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The coded-error registry.
///
/// One append-only registry: numbers are never reused or changed; texts may change, the number
/// never does; callers branch on codes only. The enum is a standard error-code enum:
///
///     std::error_code ec = gpu_async::errc::stalled;   // category "gpu_async", value() 7
///     ec == gpu_async::errc::stalled;                   // true, both ways round
///
/// The Asio layer (<gpu_async/asio/error.hpp>, included by every Asio-layer header) gives the same
/// enum a native Boost category, so a boost::system::error_code made from it (what an Asio
/// handler receives) also says "gpu_async" and the registry number:
///
///     boost::system::error_code b = gpu_async::errc::stalled;  // "gpu_async", value() 7
///
/// That is why make_error_code(errc) returns an errc_code, which becomes whichever error code it
/// initializes. Standard and Boost codes are two categories of the same name; a code converted
/// from one to the other still compares equal to the enum (comparisons against an errc go by
/// value and category name). Compare codes against the enum, not against each other.
///
/// Warnings (park_fallback, executor_fallback) are codes of the same registry, as the numbers
/// are fixed: they are never delivered as a failed operation's error code, only carried beside a
/// result that runs (a resolved plan's or executor's `warning`); is_warning() tells them apart.
///
/// Standard library only.
#ifndef GPU_ASYNC_CORE_ERROR_HPP
#define GPU_ASYNC_CORE_ERROR_HPP

#include <gpu_async/core/detail/config.hpp>

#include <array>
#include <concepts>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace gpu_async {

/// The registry. Append only; never renumber.
enum class errc : int {
    invalid_plan = 1,      ///< a wait plan or band text did not parse
    park_fallback = 2,     ///< warning: a plan fell back to one the host can run
    executor_fallback = 3, ///< warning: an executor kind fell back to one the host can run
    executor_refused = 4,  ///< a strict executor request the host cannot run
    invalid_executor = 5,  ///< an executor kind text that names no kind
    pended_inline = 6,     ///< an operation that must complete at once did not
    stalled = 7,           ///< tasks left with nothing registered to wake them
    backend = 8,           ///< a backend failed
    driver_status = 9,     ///< a driver call returned a failure status
    unavailable = 10,      ///< a library, entry point, device or capability is missing
    no_domain = 11,        ///< no current device context to own a line
    foreign_stream = 12,   ///< a store was asked of a stream outside the line's domain
    ring_setup = 13,       ///< io_uring setup failed
    device_fault = 14,     ///< work on a device stream failed
    shut_down = 15,        ///< the reactor stopped before the wait ended
    stale_descriptor = 16, ///< a descriptor of a line that was retired (its stream or device gone)
    device_gone = 17,      ///< a call through a stream handle whose device was destroyed
    invalid_target = 18,   ///< a descriptor was asked for a number its stream was never given
};

} // namespace gpu_async

/// The registry's enum is a standard error-code enum.
template <>
struct std::is_error_code_enum<gpu_async::errc> : std::true_type {};

namespace gpu_async {

/// One row of the registry.
struct errc_info {
    errc code;
    std::string_view name;    ///< stable identifier, e.g. "invalid_plan"
    std::string_view summary; ///< the message of the bare code
    std::string_view format;  ///< the message with arguments {0}, {1}, ... substituted
    std::size_t arity;        ///< how many arguments the format names
    bool warning;             ///< true for codes that report a fallback, not a failure
};

inline constexpr std::array<errc_info, 18> errc_registry{{
    {errc::invalid_plan, "invalid_plan", "invalid wait plan", "invalid plan '{0}': {1}", 2, false},
    {errc::park_fallback, "park_fallback", "park fallback",
     "park fallback: plan '{0}' needs {1} ({2}); running '{3}'", 4, true},
    {errc::executor_fallback, "executor_fallback", "executor fallback",
     "executor fallback: '{0}' is unavailable ({1}); running '{2}'", 3, true},
    {errc::executor_refused, "executor_refused", "executor refused",
     "executor refused: '{0}' is unavailable ({1}) and the request is strict", 2, false},
    {errc::invalid_executor, "invalid_executor", "invalid executor",
     "invalid executor '{0}': accepted names are {1}", 2, false},
    {errc::pended_inline, "pended_inline", "operation pended inline",
     "pended inline: {0} did not complete at once", 1, false},
    {errc::stalled, "stalled", "stalled",
     "stalled: {0} task(s) left and nothing registered to wake them", 1, false},
    {errc::backend, "backend", "backend failure", "backend failure: {0}", 1, false},
    {errc::driver_status, "driver_status", "driver call failed",
     "driver call {0} failed: {1} ({2})", 3, false},
    {errc::unavailable, "unavailable", "unavailable", "{0} is unavailable: {1}", 2, false},
    {errc::no_domain, "no_domain", "no device domain", "no device domain: {0}", 1, false},
    {errc::foreign_stream, "foreign_stream", "foreign stream",
     "foreign stream: {0} is not of the line's domain; nothing was enqueued", 1, false},
    {errc::ring_setup, "ring_setup", "io_uring setup failed", "io_uring setup failed: {0}", 1,
     false},
    {errc::device_fault, "device_fault", "device work failed", "device work failed: {0}", 1, false},
    {errc::shut_down, "shut_down", "reactor shut down",
     "reactor shut down: {0} stopped with the wait pending", 1, false},
    {errc::stale_descriptor, "stale_descriptor", "stale descriptor",
     "stale descriptor: {0} was retired before the wait began", 1, false},
    {errc::device_gone, "device_gone", "device gone", "device gone: {0} outlived its device", 1,
     false},
    {errc::invalid_target, "invalid_target", "invalid target",
     "invalid target {0}: {1} was never given it", 2, false},
}};

/// The registry row of `e`, or nullptr for a number the registry does not hold.
constexpr const errc_info* find_errc(int value) noexcept {
    for (const auto& row : errc_registry)
        if (static_cast<int>(row.code) == value) return &row;
    return nullptr;
}

/// True for the codes the registry marks as warnings (a fallback that runs, not a failure).
constexpr bool is_warning(errc e) noexcept {
    const errc_info* row = find_errc(static_cast<int>(e));
    return row != nullptr && row->warning;
}

/// The standard category of the registry; its name is "gpu_async".
GPU_ASYNC_DECL const std::error_category& gpu_async_category() noexcept;

/// True for the registry's standard category, and for any other category named "gpu_async"
/// (the standard view of the Asio layer's Boost category, or a second copy of the category in
/// another shared object).
inline bool is_gpu_async_category(const std::error_category& category) noexcept {
    return &category == &gpu_async_category() ||
           std::string_view(category.name()) == std::string_view("gpu_async");
}

/// Converts an errc into an error code type other than std::error_code. The Asio layer
/// (<gpu_async/asio/error.hpp>) specializes it for boost::system::error_code with a static
/// `make(errc)`; the primary template has none.
template <class Code>
struct errc_conversion {};

namespace detail {

/// An error code type other than std::error_code that can hold a standard code (Boost's).
template <class Code>
concept foreign_error_code =
    !std::is_same_v<Code, std::error_code> &&
    std::is_constructible_v<Code, const std::error_code&> && requires(const Code& c) {
    c.value();
    c.category();
};

template <class Code>
concept has_errc_conversion = requires(errc e) {
    { errc_conversion<Code>::make(e) } -> std::same_as<Code>;
};

} // namespace detail

/// What make_error_code(errc) returns: an errc on its way to an error code. It converts to a
/// std::error_code (the registry's standard category) and, with <gpu_async/asio/error.hpp>, to a
/// boost::system::error_code of the registry's Boost category. Without that header a Boost
/// conversion does not compile, rather than silently giving a code that logs as "std:unknown".
class errc_code {
public:
    constexpr explicit errc_code(errc e) noexcept
        : code_(e) {}

    /// The registry code.
    constexpr errc code() const noexcept { return code_; }

    /// The registry number, as error_code::value() gives it.
    constexpr int value() const noexcept { return static_cast<int>(code_); }

    /// The registry's standard category ("gpu_async").
    const std::error_category& category() const noexcept { return gpu_async_category(); }

    /// The bare code's message (the registry's summary), as error_code::message() gives it.
    std::string message() const { return category().message(value()); }

    /// True, as for the error code it becomes: no registry number is zero.
    constexpr explicit operator bool() const noexcept { return true; }

    /// True when this is the registry code `e`.
    friend constexpr bool operator==(const errc_code& a, errc e) noexcept { return a.code_ == e; }

    /// The code in the registry's standard category.
    operator std::error_code() const noexcept {
        return {static_cast<int>(code_), gpu_async_category()};
    }

    /// The code as another code type (boost::system::error_code).
    template <detail::foreign_error_code Code>
    operator Code() const noexcept {
        return convert<Code>(code_);
    }

    /// Compares a code of another code type with this one, as that type compares.
    template <detail::foreign_error_code Code>
    friend bool operator==(const Code& a, const errc_code& b) noexcept {
        return a == convert<Code>(b.code_);
    }

private:
    template <class Code>
    static Code convert(errc e) noexcept {
        static_assert(detail::has_errc_conversion<Code>,
                      "include <gpu_async/asio/error.hpp> to make a boost::system::error_code (or "
                      "compare one) from a gpu_async::errc");
        return errc_conversion<Code>::make(e);
    }

    errc code_;
};

/// Found by argument-dependent lookup when a std::error_code (or, with <gpu_async/asio/error.hpp>,
/// a boost::system::error_code) is made from an errc.
constexpr errc_code make_error_code(errc e) noexcept {
    return errc_code(e);
}

/// True when `ec` holds the registry code `e`: the same value in a category named "gpu_async"
/// (so a code that went through Boost and back still compares equal). Either way round.
inline bool operator==(const std::error_code& ec, errc e) noexcept {
    return ec.value() == static_cast<int>(e) && is_gpu_async_category(ec.category());
}

/// Substitutes `{i}` (one digit) in `format` with `args[i]`. A placeholder without an argument
/// is kept as written. Exposed for the hosts' own messages.
GPU_ASYNC_DECL std::string format_message(std::string_view format, const std::string* args,
                                          std::size_t count);

/// A coded error value: a registry code and the argument texts of its message. The message is
/// made when displayed, so carrying one costs only the argument strings.
class coded_error {
public:
    coded_error() = default;

    coded_error(errc code, std::vector<std::string> args)
        : code_(code)
        , args_(std::move(args)) {}

    coded_error(errc code, std::initializer_list<std::string_view> args)
        : code_(code) {
        args_.reserve(args.size());
        for (auto a : args)
            args_.emplace_back(a);
    }

    /// The registry code as an error code: it becomes a std::error_code (category "gpu_async")
    /// and, with <gpu_async/asio/error.hpp>, a boost::system::error_code of the registry's Boost
    /// category, the code an Asio handler receives; it compares equal to the enum.
    errc_code code() const noexcept { return errc_code(code_); }

    /// The registry code itself, the enum (code() is the error code made from it).
    errc value() const noexcept { return code_; }

    /// The argument texts, in the order the registry's format names them.
    const std::vector<std::string>& args() const noexcept { return args_; }

    /// The message: the registry's format with the arguments substituted.
    GPU_ASYNC_DECL std::string message() const;

    /// True for codes the registry marks as warnings (a fallback that runs, not a failure).
    bool is_warning() const noexcept { return gpu_async::is_warning(code_); }

    friend bool operator==(const coded_error&, const coded_error&) = default;

private:
    errc code_ = errc::backend;
    std::vector<std::string> args_;
};

/// A std::system_error that carries a coded error: code() is the registry code and what() the
/// coded message alone (the registry's text with its arguments, which already says what the
/// category's message would add); error() gives the coded_error itself. What the library throws
/// for a coded error.
class coded_system_error : public std::system_error {
public:
    explicit coded_system_error(coded_error error)
        : std::system_error(error.code())
        , state_(std::make_shared<const state>(std::move(error))) {}

    /// The coded message, e.g. "device gone: a sim_stream_handle outlived its device".
    const char* what() const noexcept override { return state_->message.c_str(); }

    /// The coded error thrown.
    const coded_error& error() const noexcept { return state_->error; }

private:
    struct state {
        explicit state(coded_error e)
            : error(std::move(e))
            , message(error.message()) {}
        coded_error error;
        std::string message;
    };
    std::shared_ptr<const state> state_; // shared: copying an exception must not throw
};

} // namespace gpu_async

#if GPU_ASYNC_HEADER_ONLY
#include <gpu_async/core/impl/error.ipp>
#endif

#endif // GPU_ASYNC_CORE_ERROR_HPP
