// SPDX-License-Identifier: BSL-1.0
//
// test/common/race_rounds.hpp: how many rounds a race loop runs.
//
#ifndef GPU_ASYNC_TEST_COMMON_RACE_ROUNDS_HPP
#define GPU_ASYNC_TEST_COMMON_RACE_ROUNDS_HPP

namespace gpu_async::test {

/// Rounds of a race loop: fewer where instrumentation makes each round 5-20x slower.
inline int race_rounds(int normal) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    return normal / 10;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
    return normal / 10;
#endif
#endif
    return normal;
}

} // namespace gpu_async::test

#endif // GPU_ASYNC_TEST_COMMON_RACE_ROUNDS_HPP
