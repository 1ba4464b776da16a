// SPDX-License-Identifier: BSL-1.0
//
// example/uring_server.cpp: one ring for everything. A single thread serves TCP connections
// through an io_uring (accept, recv, send, close) and awaits simulated-device completions with
// the FILL executor on `uring_idle` of the same ring: the deadline sleeps are ring timeouts, the
// parks are futex waits on the device's doorbell in the ring, and a socket completion ends
// either at once.
//
// Protocol: a client sends lines "<microseconds>\n"; for each, the server enqueues a device item
// of that length on the connection's stream, awaits its completion, and answers
// "ok <microseconds> <sequence>\n". A built-in client (loopback only, a bounded number of
// connections and requests, on threads of its own) checks every answer, so the program is its
// own test: exit status 0 when every answer was right.
//
// Executor selection at start-up: --executor naive|gpu-reactor|io-uring (default io-uring) and
// --strict resolve through resolve() along io-uring -> gpu-reactor -> naive; the program prints
// the label of what runs and any coded warning (a refused strict request exits with status 3).
// naive and gpu-reactor serve the connections one after another with blocking sockets (naive:
// the blocking wait; gpu-reactor: the FILL executor on the std idle). --fail-ring makes ring
// creation fail (EPERM, as seccomp or kernel.io_uring_disabled would), to show the fallback.
//
//     uring_server [--executor KIND] [--strict] [--port N] [--clients N] [--requests N]
//                  [--fail-ring]
//
#include <gpu_async/core/estimator.hpp>
#include <gpu_async/core/wait_plan.hpp>
#include <gpu_async/device/sim_device.hpp>
#include <gpu_async/fill/executor_kind.hpp>
#include <gpu_async/fill/fill_executor.hpp>
#include <gpu_async/fill/uring_host.hpp>
#include <gpu_async/host/std_host.hpp>
#include <gpu_async/wait/doorbell.hpp>

#include "common/executor_select.hpp"
#include "common/uring_ops.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using namespace gpu_async;
using gpu_async::examples::on_ring;

constexpr std::string_view plan_text =
    "flag:park_us=100,backstop_us=1000+predict:margin_us=150,min_sleep_us=20,"
    "max_sleep_us=50000,window=8";

struct options {
    std::string executor = "io-uring";
    bool strict = false;
    std::uint16_t port = 0;
    int clients = 4;
    int requests = 8;
    bool fail_ring = false;
};

bool parse_args(int argc, char** argv, options& o) {
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
        if (a == "--executor") {
            const char* v = value();
            if (v == nullptr) return false;
            o.executor = v;
        } else if (a == "--strict") {
            o.strict = true;
        } else if (a == "--fail-ring") {
            o.fail_ring = true;
        } else if (a == "--port" || a == "--clients" || a == "--requests") {
            const char* v = value();
            if (v == nullptr) return false;
            const long n = std::strtol(v, nullptr, 10);
            if (a == "--port") {
                if (n < 0 || n > 65535) return false;
                o.port = static_cast<std::uint16_t>(n);
            } else {
                if (n < 1 || n > 1000) return false;
                (a == "--clients" ? o.clients : o.requests) = static_cast<int>(n);
            }
        } else {
            return false;
        }
    }
    return true;
}

// A listening loopback socket; its port in `port` (the kernel's choice when 0 was asked).
int listen_loopback(std::uint16_t& port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    socklen_t len = sizeof addr;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 64) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        ::close(fd);
        return -1;
    }
    port = ntohs(addr.sin_port);
    return fd;
}

// The device work a request asks for, in microseconds: 200 us to 2 ms, varied.
std::uint64_t request_us(int client, int request) {
    return 200 + static_cast<std::uint64_t>((client * 7 + request * 13) % 10) * 200;
}

// The built-in client: `requests` requests on one connection, each answer checked.
bool run_client(std::uint16_t port, int client, int requests) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    timeval tv{};
    tv.tv_sec = 10; // a broken server fails the check instead of hanging it
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    for (int r = 0; ok && r < requests; ++r) {
        const std::string req = std::to_string(request_us(client, r)) + "\n";
        ok = ::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size());
        std::string answer;
        char c = 0;
        while (ok && answer.size() < 128) {
            if (::recv(fd, &c, 1, 0) != 1) {
                ok = false;
                break;
            }
            if (c == '\n') break;
            answer += c;
        }
        const std::string expect =
            "ok " + std::to_string(request_us(client, r)) + " " + std::to_string(r + 1);
        if (ok && answer != expect) {
            std::fprintf(stderr, "client %d: got '%s', expected '%s'\n", client, answer.c_str(),
                         expect.c_str());
            ok = false;
        }
    }
    ::close(fd);
    return ok;
}

std::string answer_for(std::uint64_t us, std::uint64_t seq) {
    return "ok " + std::to_string(us) + " " + std::to_string(seq) + "\n";
}

// ---------------------------------------------------------------------------------------------
// io-uring: one thread, one ring, the FILL executor.

struct uring_server {
    uring_idle& idle;
    fill_executor& ex;
    sim_device& dev;
    std::shared_ptr<doorbell> bell;
    wait_plan plan;
    int clients;
    std_clock clk;
    point_table<int> table;
    int closed = 0;
    int served = 0;
    int failures = 0;

    fill_task<> connection(int fd) {
        auto stream_handle = dev.make_stream();
        sim_stream& stream = *stream_handle;
        stream.set_doorbell(bell);
        std::string pending;
        char buf[256];
        for (;;) {
            const int n = co_await on_ring(idle, ex, [&](io_uring_sqe* sqe) {
                io_uring_prep_recv(sqe, fd, buf, sizeof buf, 0);
            });
            if (n <= 0) break;
            pending.append(buf, static_cast<std::size_t>(n));
            std::size_t eol;
            while ((eol = pending.find('\n')) != std::string::npos) {
                const std::uint64_t us = std::strtoull(pending.substr(0, eol).c_str(), nullptr, 10);
                pending.erase(0, eol + 1);
                const std::uint64_t seq = stream.enqueue(dur_ns::from_us(us));
                std::optional<std::uint64_t> sleep;
                if (plan.predict()) sleep = table.sleep_ns(0, *plan.predict());
                auto r = co_await fill_wait(ex.get_reactor(), stream, plan, sleep, clk);
                if (!r.has_value()) {
                    ++failures;
                    std::fprintf(stderr, "device wait failed: %s\n", r.message().c_str());
                    continue;
                }
                if (plan.predict() && r.value().outcome)
                    table.observe(0, *plan.predict(), *r.value().outcome);
                const std::string out = answer_for(us, seq);
                const int sent = co_await on_ring(idle, ex, [&](io_uring_sqe* sqe) {
                    io_uring_prep_send(sqe, fd, out.data(), out.size(), MSG_NOSIGNAL);
                });
                if (sent != static_cast<int>(out.size())) ++failures;
                ++served;
            }
        }
        co_await on_ring(idle, ex, [&](io_uring_sqe* sqe) { io_uring_prep_close(sqe, fd); });
        ++closed;
    }

    fill_task<> acceptor(int listen_fd) {
        for (int i = 0; i < clients; ++i) {
            const int fd = co_await on_ring(idle, ex, [&](io_uring_sqe* sqe) {
                io_uring_prep_accept(sqe, listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
            });
            if (fd < 0) {
                ++failures;
                ++closed;
                continue;
            }
            ex.spawn(connection(fd));
        }
    }

    // While sockets are open, an alarm stays registered: the reactor then sleeps in the ring
    // (a ring timeout), which a socket completion ends at once.
    fill_task<> keep_alive() {
        while (closed < clients)
            co_await ex.get_reactor().alarm(clk.now().after(dur_ns::from_ms(5)));
    }
};

int serve_uring(uring_idle& idle, int listen_fd, int clients, const wait_plan& plan) {
    sim_device dev;
    const auto bell_owner = std::make_shared<doorbell>();
    doorbell& bell = *bell_owner;
    fill_executor ex;
    idle.set_doorbell(&bell);
    uring_server srv{idle, ex, dev, bell_owner, plan, clients, {}, {}, 0, 0, 0};
    ex.spawn(srv.acceptor(listen_fd));
    ex.spawn(srv.keep_alive());
    auto stats = ex.run(idle);
    if (!stats.has_value()) {
        std::fprintf(stderr, "executor: %s\n", stats.error().message().c_str());
        return 1;
    }
    std::printf("served %d requests on %d connections; %s; parks via %s: %llu futex parks, %llu "
                "ring sleeps; executor: %llu parks, %llu sleeps\n",
                srv.served, clients, idle.describe().c_str(), idle.park_path().c_str(),
                static_cast<unsigned long long>(idle.futex_parks()),
                static_cast<unsigned long long>(idle.ring_sleeps()),
                static_cast<unsigned long long>(stats.value().parks),
                static_cast<unsigned long long>(stats.value().sleeps));
    return srv.failures == 0 ? 0 : 1;
}

// ---------------------------------------------------------------------------------------------
// naive and gpu-reactor: blocking sockets, one connection after another.

int serve_blocking(executor_kind kind, int listen_fd, int clients, const wait_plan& plan) {
    sim_device dev;
    point_table<int> table;
    const std_clock clk;
    std_idle idle;
    int served = 0;
    int failures = 0;
    for (int c = 0; c < clients; ++c) {
        const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) return 1;
        auto stream_handle = dev.make_stream();
        sim_stream& stream = *stream_handle;
        std::string pending;
        char buf[256];
        for (;;) {
            const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
            if (n <= 0) break;
            pending.append(buf, static_cast<std::size_t>(n));
            std::size_t eol;
            while ((eol = pending.find('\n')) != std::string::npos) {
                const std::uint64_t us = std::strtoull(pending.substr(0, eol).c_str(), nullptr, 10);
                pending.erase(0, eol + 1);
                const std::uint64_t seq = stream.enqueue(dur_ns::from_us(us));
                bool ok = false;
                if (kind == executor_kind::naive) {
                    ok = wait_blocking(stream, plan, table, 0).has_value();
                } else {
                    fill_executor ex;
                    std::optional<std::uint64_t> sleep;
                    if (plan.predict()) sleep = table.sleep_ns(0, *plan.predict());
                    auto task = [&]() -> fill_task<> {
                        auto r = co_await fill_wait(ex.get_reactor(), stream, plan, sleep, clk);
                        ok = r.has_value();
                        if (ok && plan.predict() && r.value().outcome)
                            table.observe(0, *plan.predict(), *r.value().outcome);
                    };
                    ex.spawn(task());
                    ok = ex.run(idle).has_value() && ok;
                }
                if (!ok) {
                    ++failures;
                    continue;
                }
                const std::string out = answer_for(us, seq);
                if (::send(fd, out.data(), out.size(), MSG_NOSIGNAL) !=
                    static_cast<ssize_t>(out.size()))
                    ++failures;
                ++served;
            }
        }
        ::close(fd);
    }
    std::printf("served %d requests on %d connections, one after another\n", served, clients);
    return failures == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
    options opt;
    if (!parse_args(argc, argv, opt)) {
        std::fprintf(stderr, "usage: uring_server [--executor naive|gpu-reactor|io-uring] "
                             "[--strict] [--port N] [--clients N] [--requests N] [--fail-ring]\n");
        return 2;
    }
    const auto kind = parse_executor_kind(opt.executor);
    if (!kind.has_value()) {
        std::fprintf(stderr, "error [%d]: %s\n", kind.error().code().value(),
                     kind.error().message().c_str());
        return 2;
    }
    // The host's capabilities: io-uring needs a ring (probed by making one); the std host runs
    // gpu-reactor and naive everywhere (example/common/executor_select.hpp).
    const auto resolved =
        examples::select_executor(kind.value(), opt.strict, opt.fail_ring, stdout);
    if (!resolved.has_value()) return 3;
    const executor_kind runs = resolved.value().kind;
    const wait_plan plan = wait_plan::parse(plan_text).value();

    std::uint16_t port = opt.port;
    const int listen_fd = listen_loopback(port);
    if (listen_fd < 0) {
        std::fprintf(stderr, "cannot listen on 127.0.0.1:%u: %s\n", unsigned(opt.port),
                     std::strerror(errno));
        return 1;
    }

    std::optional<uring_idle> idle;
    if (runs == executor_kind::io_uring) {
        auto made = examples::make_ring(opt.fail_ring);
        if (!made.has_value()) { // resolved a moment ago; a second ring may still be refused
            std::fprintf(stderr, "error [%d]: %s\n", made.error().code().value(),
                         made.error().message().c_str());
            return 1;
        }
        idle.emplace(std::move(made).value());
        std::printf("executor: %s, parks via %s\n", idle->describe().c_str(),
                    idle->park_path().c_str());
    } else {
        std::printf("executor: %s\n", std::string(to_string(runs)).c_str());
    }
    std::printf("plan: %s\nlistening on 127.0.0.1:%u\n", plan.label().c_str(), unsigned(port));
    std::fflush(stdout);

    std::atomic<int> client_failures{0};
    std::vector<std::thread> client_threads;
    for (int c = 0; c < opt.clients; ++c)
        client_threads.emplace_back([&, c] {
            if (!run_client(port, c, opt.requests)) ++client_failures;
        });

    const int rc = runs == executor_kind::io_uring
                       ? serve_uring(*idle, listen_fd, opt.clients, plan)
                       : serve_blocking(runs, listen_fd, opt.clients, plan);
    for (auto& t : client_threads)
        t.join();
    ::close(listen_fd);
    const bool ok = rc == 0 && client_failures.load() == 0;
    std::printf("%s: %d client(s) checked, %d failed\n", ok ? "ok" : "FAILED", opt.clients,
                client_failures.load());
    return ok ? 0 : 1;
}
