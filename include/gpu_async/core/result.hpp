// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief A value or a coded error, for operations that must not throw
/// (parsers, resolution). A small stand-in for C++23 std::expected<T, coded_error>.
///
/// Standard library only.
#ifndef GPU_ASYNC_CORE_RESULT_HPP
#define GPU_ASYNC_CORE_RESULT_HPP

#include <gpu_async/core/error.hpp>

#include <cassert>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

namespace gpu_async {

/// What result<T>::value() throws when the result holds an error: a std::system_error whose
/// code() is the registry code and whose what() is the coded message (the registry's text with
/// its arguments); error() gives the coded_error itself.
class bad_result_access : public coded_system_error {
public:
    using coded_system_error::coded_system_error;
};

/// Either a `T` or a `coded_error`. value() of an error throws bad_result_access (a
/// std::system_error carrying the code and the coded message); error() of a value is a
/// precondition violation: it asserts (and gives an empty coded_error in release builds).
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

    /// The value; throws bad_result_access when the result holds an error.
    const T& value() const& {
        check();
        return *value_;
    }
    /// The value; throws bad_result_access when the result holds an error.
    T& value() & {
        check();
        return *value_;
    }
    /// The value, moved out; throws bad_result_access when the result holds an error.
    T&& value() && {
        check();
        return std::move(*value_);
    }

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
    void check() const {
        if (!value_) throw bad_result_access(error_);
    }

    std::optional<T> value_;
    coded_error error_; // meaningful only without a value
};

} // namespace gpu_async

#endif // GPU_ASYNC_CORE_RESULT_HPP
