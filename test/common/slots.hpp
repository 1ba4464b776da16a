// SPDX-License-Identifier: BSL-1.0
//
// test/common/slots.hpp: a line's slot by its index, for tests that name slots by number.
//
#ifndef GPU_ASYNC_TEST_COMMON_SLOTS_HPP
#define GPU_ASYNC_TEST_COMMON_SLOTS_HPP

#include <gpu_async/core/completion_line.hpp>

#include <cstddef>

namespace gpu_async::test {

/// Slot `i` of a line; tests name only slots that exist (below line_words).
inline slot_id slot(std::size_t i) {
    return *slot_id::at(i);
}

} // namespace gpu_async::test

#endif // GPU_ASYNC_TEST_COMMON_SLOTS_HPP
