//
// gpu_async/core/result.hpp: a value or a coded error, for operations that must not throw
// (parsers, resolution). A small stand-in for C++23 std::expected<T, coded_error>.
//
// Standard library only.
//
#ifndef GPU_ASYNC_CORE_RESULT_HPP
#define GPU_ASYNC_CORE_RESULT_HPP

#include <gpu_async/core/error.hpp>

#include <cassert>
#include <optional>
#include <type_traits>
#include <utility>

namespace gpu_async {

/// Either a `T` or a `coded_error`. Accessing the wrong alternative is a precondition
/// violation: value() of an error throws std::bad_optional_access, error() of a value asserts
/// (and gives an empty coded_error in release builds).
///
/// Not a std::variant: g++ 12 reports a false -Wmaybe-uninitialized for a variant holding a
/// std::vector at -O2, which would break every -Werror build of our users.
template <class T>
class result {
public:
    using value_type = T;
    using error_type = coded_error;

    result(T value)
        : value_(std::move(value)) {}
    result(coded_error error)
        : error_(std::move(error)) {}

    bool has_value() const noexcept { return value_.has_value(); }
    explicit operator bool() const noexcept { return has_value(); }

    const T& value() const& { return value_.value(); }
    T& value() & { return value_.value(); }
    T&& value() && { return std::move(value_).value(); }

    const coded_error& error() const& {
        assert(!has_value());
        return error_;
    }
    coded_error&& error() && {
        assert(!has_value());
        return std::move(error_);
    }

    const T& operator*() const& { return value(); }
    const T* operator->() const { return &value(); }

    friend bool operator==(const result&, const result&) = default;

private:
    std::optional<T> value_;
    coded_error error_; // meaningful only without a value
};

} // namespace gpu_async

#endif // GPU_ASYNC_CORE_RESULT_HPP
