// SPDX-License-Identifier: BSL-1.0
// The README's "A GPU wait as a file descriptor": an epoll loop awaits simulated GPU work.
#include <gpu_async/device/sim_device.hpp>
#include <gpu_async/host/std_host.hpp>
#include <gpu_async/host/wait_fd.hpp>

#include <sys/epoll.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>

namespace {

// An epoll set watching `fd` for reading (a program's own loop: libuv, asyncio, io_uring alike).
int epoll_for(int fd) {
    const int ep = epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    return ep;
}

} // namespace

int main() {
    //! [wait-fd]
    gpu_async::std_watcher watcher;                // the reactor: one thread watches every line
    gpu_async::sim_device device;                  // a software GPU
    auto stream = device.make_stream();            // one of its streams
    stream->set_doorbell(watcher.shared_bell());   // rings the watcher after each store
    gpu_async::fd_notifier notifier(watcher);      // one eventfd for any number of waits
    const int ep = epoll_for(notifier.fd());       // your loop watches the fd
    for (std::uint64_t job = 1; job <= 3; ++job) { // launch work; await it by a cookie
        const std::uint64_t seq = stream->enqueue(std::chrono::microseconds(300 * job));
        notifier.watch(stream->descriptor_for(seq), job);
    }
    for (int done = 0; done < 3;) {
        epoll_event ev{};
        if (epoll_wait(ep, &ev, 1, 5000) != 1) return 1; // readable: some waits ended
        for (const gpu_async::fd_notifier::entry& e : notifier.drain()) {
            std::printf("job %llu: %s\n", static_cast<unsigned long long>(e.cookie),
                        e.error ? e.error.message().c_str() : "done");
            ++done;
        }
    }
    //! [wait-fd]
    close(ep);
}
