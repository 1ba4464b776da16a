// SPDX-License-Identifier: BSL-1.0
//
// test/common/fake_uring_calls.hpp: the io_uring calls of a basic_uring_idle with faults a test
// sets: a ring setup that fails with an errno (as ENOSYS without kernel support, or EPERM under
// seccomp or the sysctl kernel.io_uring_disabled), and a kernel that rejects the idle's own
// timeouts and futex waits (as one without the operation would: the entry completes with an
// error). Everything else goes to liburing.
//
#ifndef GPU_ASYNC_TEST_COMMON_FAKE_URING_CALLS_HPP
#define GPU_ASYNC_TEST_COMMON_FAKE_URING_CALLS_HPP

#include <gpu_async/fill/uring_host.hpp>

#include <liburing.h>

#include <cstdint>

namespace gpu_async::test {

/// The faults, shared by the test and the calls of its idle.
struct uring_faults {
    /// When non-zero, queue_init fails with -setup_errno and makes no ring.
    int setup_errno = 0;
    /// While true, every timeout and futex wait the idle submits for itself is rejected by the
    /// kernel (its opcode is made invalid before the submit), so sleeps and parks take their
    /// fallbacks. The program's own entries and the link timeouts are left alone.
    bool reject_own = false;
    /// Entries rejected so far.
    std::uint64_t rejected = 0;
};

class fake_uring_calls {
public:
    explicit fake_uring_calls(uring_faults& faults) noexcept
        : faults_(&faults) {}

    int queue_init(unsigned entries, io_uring& ring, unsigned flags) noexcept {
        if (faults_->setup_errno != 0) return -faults_->setup_errno;
        return liburing_calls{}.queue_init(entries, ring, flags);
    }

    void queue_exit(io_uring& ring) noexcept { liburing_calls{}.queue_exit(ring); }

    int submit(io_uring& ring) noexcept {
        if (faults_->reject_own) reject_own_entries(ring);
        return liburing_calls{}.submit(ring);
    }

private:
    // The entries prepared since the last submit are sqe_head..sqe_tail (liburing's local
    // indices, masked into the entry array).
    void reject_own_entries(io_uring& ring) noexcept {
        for (unsigned i = ring.sq.sqe_head; i != ring.sq.sqe_tail; ++i) {
            io_uring_sqe& sqe = ring.sq.sqes[i & ring.sq.ring_mask];
            const std::uint64_t kind = sqe.user_data & detail::uring::kind_mask;
            if (kind == detail::uring::kind_timeout || kind == detail::uring::kind_futex) {
                sqe.opcode = 0xff; // no such operation: the kernel completes it with -EINVAL
                ++faults_->rejected;
            }
        }
    }

    uring_faults* faults_;
};

static_assert(uring_calls<fake_uring_calls>);

} // namespace gpu_async::test

#endif // GPU_ASYNC_TEST_COMMON_FAKE_URING_CALLS_HPP
