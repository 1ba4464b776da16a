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
#include <type_traits>
#include <utility>
#include <variant>

namespace gpu_async {

/// Either a `T` or a `coded_error`. Accessing the wrong alternative is a precondition
/// violation (asserted in debug builds), never undefined behaviour in release builds: it
/// terminates through std::get.
template <class T>
class result {
public:
    using value_type = T;
    using error_type = coded_error;

    result(T value) : v_(std::in_place_index<0>, std::move(value)) {}
    result(coded_error error) : v_(std::in_place_index<1>, std::move(error)) {}

    bool has_value() const noexcept { return v_.index() == 0; }
    explicit operator bool() const noexcept { return has_value(); }

    const T& value() const& { return std::get<0>(v_); }
    T& value() & { return std::get<0>(v_); }
    T&& value() && { return std::get<0>(std::move(v_)); }

    const coded_error& error() const& { return std::get<1>(v_); }
    coded_error&& error() && { return std::get<1>(std::move(v_)); }

    const T& operator*() const& { return value(); }
    const T* operator->() const { return &value(); }

    friend bool operator==(const result&, const result&) = default;

private:
    std::variant<T, coded_error> v_;
};

} // namespace gpu_async

#endif // GPU_ASYNC_CORE_RESULT_HPP
