// SPDX-License-Identifier: BSL-1.0
//
// test/common/virtual_time.hpp: shorthands the core tests share for virtual time and
// descriptors.
//
#ifndef GPU_ASYNC_TEST_COMMON_VIRTUAL_TIME_HPP
#define GPU_ASYNC_TEST_COMMON_VIRTUAL_TIME_HPP

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/time.hpp>

#include <cstddef>
#include <cstdint>

namespace gpu_async::test {

/// The virtual time `n` microseconds after zero.
constexpr mono_ns at_us(std::uint64_t n) {
    return mono_ns{n * 1000};
}

/// `n` microseconds.
constexpr dur_ns us(std::uint64_t n) {
    return dur_ns::from_us(n);
}

/// The descriptor of `slot` (checked: 0..7) of `line` reaching `target`.
inline memory_descriptor desc(const completion_line& line, std::size_t slot, std::uint64_t target) {
    return memory_descriptor(line, *slot_id::at(slot), target);
}

} // namespace gpu_async::test

#endif // GPU_ASYNC_TEST_COMMON_VIRTUAL_TIME_HPP
