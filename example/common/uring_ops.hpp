// SPDX-License-Identifier: BSL-1.0
//
// example/common/uring_ops.hpp: a program's own socket operations on the ring of a `uring_idle`,
// awaited from FILL tasks (example/uring_server.cpp and the demo's io-uring server). Needs
// liburing (gpu_async::uring). Not part of the library.
//
//     const int n = co_await on_ring(idle, ex, [&](io_uring_sqe* sqe) {
//         io_uring_prep_recv(sqe, fd, buf, sizeof buf, 0);
//     });                                            // the completion's result (-errno on error)
//
#ifndef GPU_ASYNC_EXAMPLE_COMMON_URING_OPS_HPP
#define GPU_ASYNC_EXAMPLE_COMMON_URING_OPS_HPP

#include <gpu_async/fill/fill_executor.hpp>
#include <gpu_async/fill/uring_host.hpp>

#include <liburing.h>

#include <cerrno>
#include <coroutine>

namespace gpu_async::examples {

/// Awaitable: one operation on the idle's ring, prepared by `prep(sqe)`; resumes the task with
/// the completion's result (a negative errno on failure; -EBUSY when the ring had no entry).
template <class Prep>
class ring_call : public uring_op {
public:
    ring_call(uring_idle& idle, fill_executor& ex, Prep prep)
        : uring_op(&ring_call::on_complete)
        , idle_(&idle)
        , ex_(&ex)
        , prep_(prep) {}

    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> h) {
        h_ = h;
        io_uring_sqe* sqe = idle_->prepare(*this);
        if (sqe == nullptr) {
            res_ = -EBUSY;
            ex_->post(h);
            return;
        }
        prep_(sqe);
        idle_->submit();
    }
    int await_resume() const noexcept { return res_; }

private:
    static void on_complete(uring_op& o, int res) noexcept {
        auto& self = static_cast<ring_call&>(o);
        self.res_ = res;
        self.ex_->post(self.h_);
    }

    uring_idle* idle_;
    fill_executor* ex_;
    Prep prep_;
    std::coroutine_handle<> h_;
    int res_ = 0;
};

/// The operation `prep` fills, on `idle`'s ring, resumed on `ex`.
template <class Prep>
ring_call<Prep> on_ring(uring_idle& idle, fill_executor& ex, Prep prep) {
    return ring_call<Prep>(idle, ex, prep);
}

} // namespace gpu_async::examples

#endif // GPU_ASYNC_EXAMPLE_COMMON_URING_OPS_HPP
