// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/core/impl/error.ipp: definitions of the registry's non-template functions.
//
#ifndef GPU_ASYNC_IMPL_ERROR_IPP
#define GPU_ASYNC_IMPL_ERROR_IPP

#include <gpu_async/core/error.hpp>

namespace gpu_async {

namespace detail {

class gpu_async_category final : public std::error_category {
public:
    const char* name() const noexcept override { return "gpu_async"; }

    std::string message(int value) const override {
        if (const errc_info* row = find_errc(value)) return std::string(row->summary);
        return "unknown gpu_async error " + std::to_string(value);
    }
};

} // namespace detail

GPU_ASYNC_DECL const std::error_category& gpu_async_category() noexcept {
    static const detail::gpu_async_category instance;
    return instance;
}

GPU_ASYNC_DECL std::string format_message(std::string_view format, const std::string* args,
                                          std::size_t count) {
    std::string out;
    out.reserve(format.size() + 32);
    for (std::size_t i = 0; i < format.size(); ++i) {
        const char c = format[i];
        if (c == '{' && i + 2 < format.size() && format[i + 2] == '}' && format[i + 1] >= '0' &&
            format[i + 1] <= '9') {
            const auto n = static_cast<std::size_t>(format[i + 1] - '0');
            if (n < count) {
                out += args[n];
                i += 2;
                continue;
            }
        }
        out += c;
    }
    return out;
}

GPU_ASYNC_DECL std::string coded_error::message() const {
    const errc_info* row = find_errc(static_cast<int>(code_));
    if (row == nullptr) return code().message();
    return format_message(row->format, args_.data(), args_.size());
}

} // namespace gpu_async

#endif // GPU_ASYNC_IMPL_ERROR_IPP
