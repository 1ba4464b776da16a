//
// gpu_async/core/wait_plan.hpp: typed wait plans, parsed once from text, then immutable.
//
//   plan     := park | park "+predict:" deadline
//   park     := "block" | "poll" | "flag:park_us=" N ",backstop_us=" N
//   deadline := "margin_us=" N ",min_sleep_us=" N ",max_sleep_us=" N ",window=" N
//
// Units are microseconds in text, nanoseconds in the types. Standard library only.
//
#ifndef GPU_ASYNC_CORE_WAIT_PLAN_HPP
#define GPU_ASYNC_CORE_WAIT_PLAN_HPP

#include <gpu_async/core/error.hpp>
#include <gpu_async/core/result.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpu_async {

/// How a wait parks once any predicted sleep is over.
enum class park_kind : std::uint8_t {
    block, ///< the vendor's blocking wait; takes no prediction
    poll,  ///< query the status until done
    flag,  ///< park on the completion word, with a status query at least every backstop
};

/// The largest estimator window (samples kept per readback point).
inline constexpr std::uint32_t window_max = 16;
/// The largest single park of a flag plan: 10 ms.
inline constexpr std::uint64_t park_ns_max = 10'000'000;
/// The largest backstop of a flag plan: 1 s.
inline constexpr std::uint64_t backstop_ns_max = 1'000'000'000;

/// The "+predict:" part of a plan: sleep to the predicted completion minus `margin_ns` before
/// parking, when that sleep is at least `min_sleep_ns`, and never longer than `max_sleep_ns`.
struct deadline_plan {
    std::uint64_t margin_ns = 0;
    std::uint64_t min_sleep_ns = 0;
    std::uint64_t max_sleep_ns = 0;
    std::uint32_t window = 0;

    friend constexpr bool operator==(const deadline_plan&, const deadline_plan&) = default;
};

/// A parsed, validated, immutable wait plan.
class wait_plan {
public:
    /// Parses `text`; on failure the error's code is errc::invalid_plan and its message names
    /// the text and the first thing wrong.
    static result<wait_plan> parse(std::string_view text);

    /// The plan "block".
    static wait_plan block() noexcept { return wait_plan(park_kind::block, 0, 0, std::nullopt); }

    /// The plan "poll", optionally with a prediction. Validated as parse() validates.
    static result<wait_plan> poll(std::optional<deadline_plan> predict = std::nullopt);

    /// The plan "flag:park_us=..,backstop_us=..", optionally with a prediction. Values are in
    /// nanoseconds and must be whole microseconds. Validated as parse() validates.
    static result<wait_plan> flag(std::uint64_t park_ns, std::uint64_t backstop_ns,
                                  std::optional<deadline_plan> predict = std::nullopt);

    /// The recommended default: "flag:park_us=100,backstop_us=1000".
    static wait_plan recommended() noexcept {
        return wait_plan(park_kind::flag, 100'000, 1'000'000, std::nullopt);
    }

    park_kind kind() const noexcept { return kind_; }
    /// The bound of one park (flag plans; zero otherwise).
    std::uint64_t park_ns() const noexcept { return park_ns_; }
    /// The longest time between two status queries while parking (flag plans; zero otherwise).
    std::uint64_t backstop_ns() const noexcept { return backstop_ns_; }
    /// The prediction, when the plan has one.
    const std::optional<deadline_plan>& predict() const noexcept { return predict_; }

    /// The canonical text: parse(label()) gives back this plan.
    std::string label() const;

    friend bool operator==(const wait_plan&, const wait_plan&) = default;

private:
    wait_plan(park_kind kind, std::uint64_t park_ns, std::uint64_t backstop_ns,
              std::optional<deadline_plan> predict) noexcept
        : kind_(kind)
        , park_ns_(park_ns)
        , backstop_ns_(backstop_ns)
        , predict_(predict) {}

    park_kind kind_;
    std::uint64_t park_ns_;
    std::uint64_t backstop_ns_;
    std::optional<deadline_plan> predict_;
};

} // namespace gpu_async

#endif // GPU_ASYNC_CORE_WAIT_PLAN_HPP
