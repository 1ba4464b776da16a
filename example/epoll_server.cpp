// SPDX-License-Identifier: BSL-1.0
//
// example/epoll_server.cpp: a plain epoll loop (no Asio, no thread of its own) serving TCP, that
// awaits simulated GPU work through a file descriptor.
//
// Each request ("<id> <work_us>\n") launches work on the simulated device and is answered
// ("<id> done\n") when the fd notifier, one eventfd in the same epoll set as the sockets, says
// the work completed. The program is its own load: --clients connections in the same loop, each
// sending --requests requests one after another and checking every reply. Then it shows the two
// other ways a wait ends, still through epoll: a cancelled request, and the watcher stopping
// with a request pending (the fd becomes readable; the entry says errc::shut_down). Before it
// stops the watcher, it counts the process's threads: this one, the watcher's, and the
// simulated device's workers (the "GPU"), nothing else (but ThreadSanitizer's own, in such a
// build). Exits 0 when every check passed.
//
//     example_epoll_server [--clients N] [--requests N] [--work-us N]
//
// Linux only (epoll, eventfd).
//
#include <gpu_async/core/error.hpp>
#include <gpu_async/device/sim_device.hpp>
#include <gpu_async/host/std_host.hpp>
#include <gpu_async/host/wait_fd.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace {

using gpu_async::fd_notifier;

// epoll data: the notifier, the listening socket, or a connection's index with its side.
constexpr std::uint64_t notifier_tag = ~std::uint64_t{0};
constexpr std::uint64_t listen_tag = notifier_tag - 1;
constexpr std::uint64_t client_bit = std::uint64_t{1} << 62;

[[noreturn]] void die(const char* what) {
    std::fprintf(stderr, "epoll_server: %s: %s\n", what, std::strerror(errno));
    std::exit(1);
}

// One end of a TCP connection: bytes in, bytes to send, whole lines out.
struct peer {
    int fd = -1;
    std::string in;
    std::string out;
    bool want_out = false; // EPOLLOUT registered

    // Reads what is there; false at end of stream or on an error.
    bool read_some() {
        char buf[4096];
        for (;;) {
            const ssize_t n = ::read(fd, buf, sizeof buf);
            if (n > 0) {
                in.append(buf, static_cast<std::size_t>(n));
                continue;
            }
            if (n < 0 && errno == EINTR) continue;
            return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
        }
    }

    // Takes the next whole line from `in` (without the newline), if there is one.
    bool next_line(std::string& line) {
        const auto nl = in.find('\n');
        if (nl == std::string::npos) return false;
        line.assign(in, 0, nl);
        in.erase(0, nl + 1);
        return true;
    }

    // Sends what it can; keeps the rest (and asks for EPOLLOUT) until the socket takes it.
    void send(int ep, std::uint64_t tag, std::string_view text) {
        out.append(text);
        flush(ep, tag);
    }

    void flush(int ep, std::uint64_t tag) {
        while (!out.empty()) {
            const ssize_t n = ::send(fd, out.data(), out.size(), MSG_NOSIGNAL);
            if (n > 0) {
                out.erase(0, static_cast<std::size_t>(n));
                continue;
            }
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
            die("send");
        }
        const bool want = !out.empty();
        if (want != want_out) {
            epoll_event ev{};
            ev.events = EPOLLIN | (want ? EPOLLOUT : 0u);
            ev.data.u64 = tag;
            if (::epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev) != 0) die("epoll_ctl");
            want_out = want;
        }
    }
};

void watch_fd(int ep, int fd, std::uint64_t tag) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag;
    if (::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) die("epoll_ctl");
}

// ThreadSanitizer runs a thread of its own, started with the program's first thread.
#if defined(__SANITIZE_THREAD__)
constexpr int tool_threads = 1;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr int tool_threads = 1;
#else
constexpr int tool_threads = 0;
#endif
#else
constexpr int tool_threads = 0;
#endif

int threads_in_process() {
    int n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task"))
        ++n;
    return n;
}

struct options {
    int clients = 8;
    int requests = 50;
    int work_us = 200;
};

options parse(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        int* field = a == "--clients"    ? &o.clients
                     : a == "--requests" ? &o.requests
                     : a == "--work-us"  ? &o.work_us
                                         : nullptr;
        if (field == nullptr || i + 1 == argc || (*field = std::atoi(argv[++i])) <= 0) {
            std::fprintf(stderr, "usage: %s [--clients N] [--requests N] [--work-us N]\n", argv[0]);
            std::exit(2);
        }
    }
    return o;
}

} // namespace

int main(int argc, char** argv) {
    const options opt = parse(argc, argv);
    constexpr int device_workers = 2;
    const int threads_before = threads_in_process(); // this one

    gpu_async::std_watcher watcher; // the reactor: one thread watches every line
    gpu_async::sim_device device(gpu_async::sim_device::options{.workers = device_workers});
    fd_notifier notifier(watcher); // one eventfd for every wait of this loop

    const int ep = ::epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) die("epoll_create1");
    watch_fd(ep, notifier.fd(), notifier_tag);

    // The server's listening socket, on a free port of the loopback address.
    const int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (lfd < 0) die("socket");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) die("bind");
    if (::listen(lfd, 128) != 0) die("listen");
    if (::getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) die("getsockname");
    watch_fd(ep, lfd, listen_tag);

    // Server side: one connection per accepted socket, one device stream each.
    struct connection {
        peer p;
        gpu_async::sim_stream_handle stream;
    };
    std::vector<std::unique_ptr<connection>> conns;

    // Client side: connected at once (loopback completes the handshake before accept()).
    struct client {
        peer p;
        int next = 0;     // the next request's id
        int answered = 0; // replies checked
        std::chrono::steady_clock::time_point sent;
    };
    std::vector<client> clients(static_cast<std::size_t>(opt.clients));
    const auto send_request = [&](std::size_t i) {
        client& c = clients[i];
        c.sent = std::chrono::steady_clock::now();
        c.p.send(ep, client_bit | i,
                 std::to_string(c.next++) + " " + std::to_string(opt.work_us) + "\n");
    };
    for (std::size_t i = 0; i < clients.size(); ++i) {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) die("socket");
        if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0)
            die("connect");
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (::fcntl(fd, F_SETFL, O_NONBLOCK) != 0) die("fcntl");
        clients[i].p.fd = fd;
        watch_fd(ep, fd, client_bit | i);
        send_request(i);
    }

    // What the loop does with an ended wait: the reply to the request that launched the work.
    // The cookie is (connection << 32) | request id.
    int failures = 0;
    std::map<std::uint64_t, std::error_code> special; // the cancel and shut-down demonstrations
    const auto on_ended = [&](const fd_notifier::entry& e) {
        if (e.cookie >> 63) { // a demonstration wait, not a request
            special[e.cookie] = e.error;
            return;
        }
        connection& c = *conns[e.cookie >> 32];
        const std::string id = std::to_string(e.cookie & 0xffffffffu);
        c.p.send(ep, e.cookie >> 32,
                 e.error ? id + " error " + e.error.message() + "\n" : id + " done\n");
    };

    std::uint64_t served = 0;
    std::vector<double> latency_us;
    int finished = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    std::vector<fd_notifier::entry> ended;
    std::string line;
    while (finished < opt.clients) {
        if (std::chrono::steady_clock::now() > deadline) {
            std::fprintf(stderr, "epoll_server: timed out with %d of %d clients done\n", finished,
                         opt.clients);
            return 1;
        }
        epoll_event evs[64];
        const int n = ::epoll_wait(ep, evs, 64, 1000);
        if (n < 0 && errno != EINTR) die("epoll_wait");
        for (int k = 0; k < n; ++k) {
            const std::uint64_t tag = evs[k].data.u64;
            if (tag == notifier_tag) {
                ended.clear();
                notifier.drain(ended); // never blocks; the fd stops being readable when empty
                for (const fd_notifier::entry& e : ended)
                    on_ended(e); // e.cookie: which wait; e.error: empty when the work completed
            } else if (tag == listen_tag) {
                for (;;) {
                    const int fd = ::accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
                    if (fd < 0) break;
                    auto c = std::make_unique<connection>();
                    c->p.fd = fd;
                    c->stream = device.make_stream();
                    c->stream->set_doorbell(watcher.shared_bell()); // seen at once, not polled
                    watch_fd(ep, fd, conns.size());
                    conns.push_back(std::move(c));
                }
            } else if (tag & client_bit) {
                const std::size_t i = tag & ~client_bit;
                client& c = clients[i];
                if (evs[k].events & EPOLLOUT) c.p.flush(ep, tag);
                if (!(evs[k].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) continue;
                if (!c.p.read_some()) {
                    std::fprintf(stderr, "epoll_server: client %zu: connection lost\n", i);
                    return 1;
                }
                while (c.p.next_line(line)) {
                    const std::string want = std::to_string(c.answered) + " done";
                    if (line != want) {
                        std::fprintf(stderr, "epoll_server: client %zu: got '%s', want '%s'\n", i,
                                     line.c_str(), want.c_str());
                        ++failures;
                    }
                    latency_us.push_back(std::chrono::duration<double, std::micro>(
                                             std::chrono::steady_clock::now() - c.sent)
                                             .count());
                    if (++c.answered < opt.requests)
                        send_request(i);
                    else
                        ++finished;
                }
            } else {
                connection& c = *conns[tag];
                if (evs[k].events & EPOLLOUT) c.p.flush(ep, tag);
                if (!(evs[k].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) continue;
                if (!c.p.read_some()) die("server read");
                while (c.p.next_line(line)) {
                    // "<id> <work_us>": launch the work, and await it through the notifier.
                    const auto space = line.find(' ');
                    const std::uint64_t id = std::stoull(line.substr(0, space));
                    const long us = std::stol(line.substr(space + 1));
                    const std::uint64_t seq = c.stream->enqueue(std::chrono::microseconds(us));
                    notifier.watch(c.stream->descriptor_for(seq), (tag << 32) | id);
                    ++served;
                }
            }
        }
    }

    // Two more ways a wait ends, seen through the same epoll set. A long item (far beyond this
    // run) is awaited twice: one wait is cancelled, the other is pending when the watcher stops.
    auto long_stream = device.make_stream();
    const std::uint64_t long_seq = long_stream->enqueue(std::chrono::seconds(60));
    constexpr std::uint64_t cancelled_cookie = std::uint64_t{1} << 63;
    constexpr std::uint64_t stopped_cookie = cancelled_cookie | 1;
    notifier.watch(long_stream->descriptor_for(long_seq), cancelled_cookie);
    notifier.watch(long_stream->descriptor_for(long_seq), stopped_cookie);
    // Threads started since: the watcher's and the device's (and a sanitizer's, if any).
    const int threads = threads_in_process() - threads_before + 1;
    const bool threads_ok =
        threads >= 2 + device_workers && threads <= 2 + device_workers + tool_threads;
    notifier.cancel(cancelled_cookie);
    bool stopped = false;
    while (special.size() < 2 && std::chrono::steady_clock::now() < deadline) {
        epoll_event evs[8];
        const int n = ::epoll_wait(ep, evs, 8, 1000);
        for (int k = 0; k < n; ++k) {
            if (evs[k].data.u64 != notifier_tag) continue;
            ended.clear();
            notifier.drain(ended);
            for (const fd_notifier::entry& e : ended)
                on_ended(e);
        }
        if (special.size() == 1 && !stopped) {
            watcher.shutdown(); // the reactor goes away with one wait pending
            stopped = true;
        }
    }
    const bool cancel_ok = special.count(cancelled_cookie) != 0 &&
                           special[cancelled_cookie] == std::errc::operation_canceled;
    const bool stop_ok = special.count(stopped_cookie) != 0 &&
                         special[stopped_cookie] == gpu_async::errc::shut_down &&
                         notifier.error() == gpu_async::errc::shut_down;
    pollfd still{notifier.fd(), POLLIN, 0}; // readable for good after the stop, though drained
    const bool readable_ok = ::poll(&still, 1, 0) == 1 && (still.revents & POLLIN) != 0;

    std::sort(latency_us.begin(), latency_us.end());
    const auto pct = [&](double p) {
        return latency_us.empty() ? 0.0
                                  : latency_us[static_cast<std::size_t>(
                                        p * static_cast<double>(latency_us.size() - 1))];
    };
    std::printf("served %llu requests over %d connections, %d us of device work each\n",
                static_cast<unsigned long long>(served), opt.clients, opt.work_us);
    std::printf("request latency: p50 %.0f us, p99 %.0f us\n", pct(0.5), pct(0.99));
    std::printf("threads: %d (this loop, the watcher, %d device workers%s)\n", threads,
                device_workers, threads > 2 + device_workers ? ", ThreadSanitizer's" : "");
    std::printf("cancelled wait: %s\n", cancel_ok ? "operation_canceled" : "WRONG");
    std::printf("wait pending at the watcher's stop: %s\n", stop_ok ? "errc::shut_down" : "WRONG");
    std::printf("fd after the stop: %s\n", readable_ok ? "readable" : "WRONG");

    const bool ok = failures == 0 &&
                    served == static_cast<std::uint64_t>(opt.clients) *
                                  static_cast<std::uint64_t>(opt.requests) &&
                    threads_ok && cancel_ok && stop_ok && readable_ok;
    for (client& c : clients)
        ::close(c.p.fd);
    for (auto& c : conns)
        ::close(c->p.fd);
    ::close(lfd);
    ::close(ep);
    std::printf("%s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
