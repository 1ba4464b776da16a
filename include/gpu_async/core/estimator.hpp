//
// gpu_async/core/estimator.hpp: the deadline estimator (SPEC.md section 5).
//
// Standard library only.
//
#ifndef GPU_ASYNC_CORE_ESTIMATOR_HPP
#define GPU_ASYNC_CORE_ESTIMATOR_HPP

#include <gpu_async/core/wait_plan.hpp>

#include <cstdint>

namespace gpu_async {

/// What one wait taught the estimator about its readback point.
class outcome {
public:
    enum class kind_type : std::uint8_t {
        exact, ///< the wait saw the work pending, then saw it finish `ns` after the wait started
        late,  ///< the first query after a sleep found the work done `ns` after the start
               ///< (an upper bound: censored)
    };

    static constexpr outcome exact(std::uint64_t residual_ns) noexcept {
        return outcome(kind_type::exact, residual_ns);
    }
    static constexpr outcome late(std::uint64_t woke_ns) noexcept {
        return outcome(kind_type::late, woke_ns);
    }

    constexpr kind_type kind() const noexcept { return kind_; }
    constexpr bool is_exact() const noexcept { return kind_ == kind_type::exact; }
    constexpr bool is_late() const noexcept { return kind_ == kind_type::late; }
    constexpr std::uint64_t ns() const noexcept { return ns_; }

    friend constexpr bool operator==(const outcome&, const outcome&) = default;

private:
    constexpr outcome(kind_type k, std::uint64_t ns) noexcept : kind_(k), ns_(ns) {}
    kind_type kind_;
    std::uint64_t ns_;
};

} // namespace gpu_async

#endif // GPU_ASYNC_CORE_ESTIMATOR_HPP
