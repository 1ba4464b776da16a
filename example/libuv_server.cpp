// SPDX-License-Identifier: BSL-1.0
//
// example/libuv_server.cpp: a libuv loop serving TCP that awaits simulated GPU work through a
// file descriptor: the fd notifier's eventfd under a uv_poll_t, beside libuv's own sockets.
//
// Each request ("<id> <n>\n") launches an item on the simulated device that computes n * n into
// the request's result; when the notifier (one eventfd, watched by uv_poll for readability) says
// the work completed, the server replies "<id> <n * n>\n", reading the result the device wrote.
// The program is its own load: --clients libuv connections in the same loop, each sending
// --requests requests one after another and checking every reply (the ids in order, the square
// right). Then it shows the two other ways a wait ends, still through uv_poll: a cancelled
// request, and the watcher stopping with a request pending (the fd then stays readable; the
// entry says errc::shut_down). A uv timer bounds the run: if it fires first, the run fails.
// Exits 0 when every check passed: as many completions as items launched, every reply right,
// both demonstrations seen, and every handle closed (uv_loop_close succeeds).
//
//     example_libuv_server [--clients N] [--requests N] [--work-us N]
//
// Linux only (eventfd); needs libuv (Debian: libuv1-dev).
//
#include <gpu_async/core/error.hpp>
#include <gpu_async/device/sim_device.hpp>
#include <gpu_async/host/std_host.hpp>
#include <gpu_async/host/wait_fd.hpp>

#include <poll.h>
#include <uv.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <vector>

namespace {

using gpu_async::fd_notifier;

void check_uv(int rc, const char* what) {
    if (rc < 0) {
        std::fprintf(stderr, "libuv_server: %s: %s\n", what, uv_strerror(rc));
        std::exit(1);
    }
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

// One end of a TCP connection, as libuv owns it: the handle, bytes in, whole lines out. Every
// handle's data points at its owner, which lives until the handle's close callback has run.
struct peer {
    uv_tcp_t tcp{};
    std::string in;

    // Takes the next whole line from `in` (without the newline), if there is one.
    bool next_line(std::string& line) {
        const auto nl = in.find('\n');
        if (nl == std::string::npos) return false;
        line.assign(in, 0, nl);
        in.erase(0, nl + 1);
        return true;
    }
};

// A write in flight: libuv needs the request and the bytes until its callback.
struct write_op {
    uv_write_t req{};
    std::string data;
};

void send_text(peer& p, std::string text) {
    auto* op = new write_op{};
    op->data = std::move(text);
    uv_buf_t buf = uv_buf_init(op->data.data(), static_cast<unsigned>(op->data.size()));
    check_uv(uv_write(&op->req, reinterpret_cast<uv_stream_t*>(&p.tcp), &buf, 1,
                      [](uv_write_t* req, int status) {
                          check_uv(status, "write");
                          delete reinterpret_cast<write_op*>(req);
                      }),
             "uv_write");
}

// Every read lands in one buffer: the loop has one thread, and each read callback consumes its
// bytes before the next read.
void alloc_buffer(uv_handle_t*, std::size_t, uv_buf_t* buf) {
    static char storage[64 * 1024];
    *buf = uv_buf_init(storage, sizeof storage);
}

void close_handle(uv_handle_t* h) {
    if (!uv_is_closing(h)) uv_close(h, nullptr);
}

// A request in flight on the server: what the device computes, and for whom. Shared with the
// device's item, so the item writes to live memory whenever it runs.
struct job {
    std::size_t connection = 0;
    std::uint64_t id = 0;
    std::uint64_t n = 0;
    std::uint64_t result = 0; // written by the device's item, read once the wait completed
};

struct app {
    options opt;
    uv_loop_t loop{};
    gpu_async::std_watcher watcher; // the reactor: one thread watches every line
    gpu_async::sim_device device{gpu_async::sim_device::options{.workers = 2}};
    fd_notifier notifier{watcher}; // one eventfd for every wait of this loop
    uv_poll_t notifier_poll{};     // libuv watches the eventfd for readability
    uv_timer_t deadline{};         // fails the run if it fires
    uv_tcp_t listener{};
    sockaddr_in addr{};

    // Server side: one connection per accepted socket, one device stream each.
    struct connection {
        peer p;
        app* owner = nullptr;
        std::size_t index = 0;
        gpu_async::sim_stream_handle stream;
    };
    std::vector<std::unique_ptr<connection>> conns;
    std::unordered_map<std::uint64_t, std::shared_ptr<job>> jobs; // by cookie
    std::uint64_t next_cookie = 0;
    std::uint64_t launched = 0;
    std::uint64_t completed = 0;

    // Client side.
    struct client {
        peer p;
        app* owner = nullptr;
        uv_connect_t connect{};
        std::size_t index = 0;
        std::uint64_t next = 0;     // the next request's id
        std::uint64_t answered = 0; // replies checked
    };
    std::vector<std::unique_ptr<client>> clients;
    int finished = 0;
    int failures = 0;
    std::uint64_t replies = 0; // checked by the clients

    // The demonstrations: a long item awaited twice, one wait cancelled, one pending when the
    // watcher stops.
    static constexpr std::uint64_t cancelled_cookie = std::uint64_t{1} << 63;
    static constexpr std::uint64_t stopped_cookie = cancelled_cookie | 1;
    gpu_async::sim_stream_handle long_stream;
    std::map<std::uint64_t, std::error_code> special;
    bool stopped = false;
    bool readable_after_stop = false;
    bool done = false;
    bool timed_out = false;

    static std::uint64_t value_of(std::size_t client, std::uint64_t id) {
        return client * 1000 + id + 1;
    }

    void send_request(client& c) {
        const std::uint64_t id = c.next++;
        send_text(c.p, std::to_string(id) + " " + std::to_string(value_of(c.index, id)) + "\n");
    }

    // A client's reply: "<id> <n * n>", the ids in the order sent.
    void on_reply(client& c, const std::string& line) {
        const std::uint64_t n = value_of(c.index, c.answered);
        const std::string want = std::to_string(c.answered) + " " + std::to_string(n * n);
        if (line != want) {
            std::fprintf(stderr, "libuv_server: client %zu: got '%s', want '%s'\n", c.index,
                         line.c_str(), want.c_str());
            ++failures;
        }
        ++replies;
        if (++c.answered < static_cast<std::uint64_t>(opt.requests))
            send_request(c);
        else if (++finished == opt.clients)
            start_demonstrations();
    }

    // A server connection's request: launch the work, and await it through the notifier.
    void on_request(connection& c, const std::string& line) {
        const auto space = line.find(' ');
        auto j = std::make_shared<job>();
        j->connection = c.index;
        j->id = std::stoull(line.substr(0, space));
        j->n = std::stoull(line.substr(space + 1));
        const std::uint64_t seq = c.stream->enqueue([j] { j->result = j->n * j->n; },
                                                    std::chrono::microseconds(opt.work_us));
        const std::uint64_t cookie = next_cookie++;
        jobs.emplace(cookie, std::move(j));
        notifier.watch(c.stream->descriptor_for(seq), cookie);
        ++launched;
    }

    // The notifier's fd is readable: some waits ended.
    void on_notifier() {
        std::vector<fd_notifier::entry> ended;
        notifier.drain(ended); // never blocks; the fd stops being readable when empty
        for (const fd_notifier::entry& e : ended) {
            if (e.cookie >> 63) { // a demonstration wait, not a request
                special[e.cookie] = e.error;
                continue;
            }
            const auto it = jobs.find(e.cookie);
            if (it == jobs.end()) {
                std::fprintf(stderr, "libuv_server: an entry for no request (cookie %llu)\n",
                             static_cast<unsigned long long>(e.cookie));
                ++failures;
                continue;
            }
            const std::shared_ptr<job> j = std::move(it->second);
            jobs.erase(it);
            if (e.error) {
                std::fprintf(stderr, "libuv_server: request %llu: %s\n",
                             static_cast<unsigned long long>(j->id), e.error.message().c_str());
                ++failures;
                continue;
            }
            ++completed; // the device wrote j->result before its store; it is visible now
            send_text(conns[j->connection]->p,
                      std::to_string(j->id) + " " + std::to_string(j->result) + "\n");
        }
        if (special.count(cancelled_cookie) != 0 && !stopped) {
            watcher.shutdown(); // the reactor goes away with one wait pending
            stopped = true;
        }
        if (special.size() == 2) {
            pollfd still{notifier.fd(), POLLIN, 0}; // readable for good, though drained
            readable_after_stop = ::poll(&still, 1, 0) == 1 && (still.revents & POLLIN) != 0;
            finish();
        }
    }

    void start_demonstrations() {
        long_stream = device.make_stream();
        long_stream->set_doorbell(watcher.shared_bell());
        const std::uint64_t seq = long_stream->enqueue(std::chrono::seconds(60));
        notifier.watch(long_stream->descriptor_for(seq), cancelled_cookie);
        notifier.watch(long_stream->descriptor_for(seq), stopped_cookie);
        notifier.cancel(cancelled_cookie); // its entry comes through uv_poll like any other
    }

    // Every check is in: close every handle, so uv_run returns.
    void finish() {
        done = true;
        uv_poll_stop(&notifier_poll);
        close_handle(reinterpret_cast<uv_handle_t*>(&notifier_poll));
        uv_timer_stop(&deadline);
        close_handle(reinterpret_cast<uv_handle_t*>(&deadline));
        close_handle(reinterpret_cast<uv_handle_t*>(&listener));
        for (auto& c : clients)
            close_handle(reinterpret_cast<uv_handle_t*>(&c->p.tcp));
        for (auto& c : conns)
            close_handle(reinterpret_cast<uv_handle_t*>(&c->p.tcp));
    }

    void on_accept() {
        auto c = std::make_unique<connection>();
        check_uv(uv_tcp_init(&loop, &c->p.tcp), "uv_tcp_init");
        check_uv(uv_accept(reinterpret_cast<uv_stream_t*>(&listener),
                           reinterpret_cast<uv_stream_t*>(&c->p.tcp)),
                 "uv_accept");
        c->owner = this;
        c->index = conns.size();
        c->stream = device.make_stream();
        c->stream->set_doorbell(watcher.shared_bell()); // seen at once, not polled
        c->p.tcp.data = c.get();
        check_uv(uv_read_start(reinterpret_cast<uv_stream_t*>(&c->p.tcp), alloc_buffer,
                               [](uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
                                   auto& me = *static_cast<connection*>(s->data);
                                   me.owner->on_server_read(me, n, buf);
                               }),
                 "uv_read_start");
        conns.push_back(std::move(c));
    }

    void on_server_read(connection& c, ssize_t n, const uv_buf_t* buf) {
        if (n < 0) { // the client went away
            close_handle(reinterpret_cast<uv_handle_t*>(&c.p.tcp));
            return;
        }
        c.p.in.append(buf->base, static_cast<std::size_t>(n));
        std::string line;
        while (c.p.next_line(line))
            on_request(c, line);
    }

    void on_client_read(client& c, ssize_t n, const uv_buf_t* buf) {
        if (n < 0) {
            std::fprintf(stderr, "libuv_server: client %zu: connection lost (%s)\n", c.index,
                         uv_strerror(static_cast<int>(n)));
            ++failures;
            close_handle(reinterpret_cast<uv_handle_t*>(&c.p.tcp));
            return;
        }
        c.p.in.append(buf->base, static_cast<std::size_t>(n));
        std::string line;
        while (c.p.next_line(line))
            on_reply(c, line);
    }

    void start_client(std::size_t i) {
        auto c = std::make_unique<client>();
        c->index = i;
        c->owner = this;
        check_uv(uv_tcp_init(&loop, &c->p.tcp), "uv_tcp_init");
        check_uv(uv_tcp_nodelay(&c->p.tcp, 1), "uv_tcp_nodelay");
        c->p.tcp.data = c.get();
        check_uv(uv_tcp_connect(
                     &c->connect, &c->p.tcp, reinterpret_cast<const sockaddr*>(&addr),
                     [](uv_connect_t* req, int status) {
                         check_uv(status, "connect");
                         auto& me = *static_cast<client*>(req->handle->data);
                         check_uv(uv_read_start(req->handle, alloc_buffer,
                                                [](uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
                                                    auto& cl = *static_cast<client*>(s->data);
                                                    cl.owner->on_client_read(cl, n, buf);
                                                }),
                                  "uv_read_start");
                         me.owner->send_request(me);
                     }),
                 "uv_tcp_connect");
        clients.push_back(std::move(c));
    }
};

} // namespace

int main(int argc, char** argv) {
    auto a = std::make_unique<app>();
    a->opt = parse(argc, argv);
    check_uv(uv_loop_init(&a->loop), "uv_loop_init");
    a->loop.data = a.get();

    // The notifier's eventfd in the loop, as any other descriptor.
    check_uv(uv_poll_init(&a->loop, &a->notifier_poll, a->notifier.fd()), "uv_poll_init");
    a->notifier_poll.data = a.get();
    check_uv(uv_poll_start(&a->notifier_poll, UV_READABLE,
                           [](uv_poll_t* h, int status, int) {
                               check_uv(status, "uv_poll");
                               static_cast<app*>(h->data)->on_notifier();
                           }),
             "uv_poll_start");

    // The bound: if this fires, something never ended.
    check_uv(uv_timer_init(&a->loop, &a->deadline), "uv_timer_init");
    a->deadline.data = a.get();
    check_uv(uv_timer_start(
                 &a->deadline,
                 [](uv_timer_t* t) {
                     auto& self = *static_cast<app*>(t->data);
                     std::fprintf(stderr,
                                  "libuv_server: timed out: %d of %d clients done, %llu of %llu "
                                  "items completed, %zu of 2 demonstrations\n",
                                  self.finished, self.opt.clients,
                                  static_cast<unsigned long long>(self.completed),
                                  static_cast<unsigned long long>(self.launched),
                                  self.special.size());
                     self.timed_out = true;
                     uv_stop(&self.loop);
                 },
                 20'000, 0),
             "uv_timer_start");

    // The server's listening socket, on a free port of the loopback address.
    check_uv(uv_tcp_init(&a->loop, &a->listener), "uv_tcp_init");
    check_uv(uv_ip4_addr("127.0.0.1", 0, &a->addr), "uv_ip4_addr");
    check_uv(uv_tcp_bind(&a->listener, reinterpret_cast<const sockaddr*>(&a->addr), 0),
             "uv_tcp_bind");
    a->listener.data = a.get();
    check_uv(uv_listen(reinterpret_cast<uv_stream_t*>(&a->listener), 128,
                       [](uv_stream_t* s, int status) {
                           check_uv(status, "listen");
                           static_cast<app*>(s->data)->on_accept();
                       }),
             "uv_listen");
    int len = sizeof a->addr;
    check_uv(uv_tcp_getsockname(&a->listener, reinterpret_cast<sockaddr*>(&a->addr), &len),
             "uv_tcp_getsockname");

    for (std::size_t i = 0; i < static_cast<std::size_t>(a->opt.clients); ++i)
        a->start_client(i);

    uv_run(&a->loop, UV_RUN_DEFAULT); // returns once every handle is closed (or on the timeout)
    if (a->timed_out) return 1;

    const std::uint64_t expected =
        static_cast<std::uint64_t>(a->opt.clients) * static_cast<std::uint64_t>(a->opt.requests);
    const bool cancel_ok = a->special.count(app::cancelled_cookie) != 0 &&
                           a->special[app::cancelled_cookie] == std::errc::operation_canceled;
    const bool stop_ok = a->special.count(app::stopped_cookie) != 0 &&
                         a->special[app::stopped_cookie] == gpu_async::errc::shut_down &&
                         a->notifier.error() == gpu_async::errc::shut_down;
    const bool loop_closed = uv_loop_close(&a->loop) == 0; // every handle closed
    std::printf("served %llu requests over %d libuv connections, %d us of device work each\n",
                static_cast<unsigned long long>(a->completed), a->opt.clients, a->opt.work_us);
    std::printf("items launched: %llu, completions: %llu, replies checked: %llu\n",
                static_cast<unsigned long long>(a->launched),
                static_cast<unsigned long long>(a->completed),
                static_cast<unsigned long long>(a->replies));
    std::printf("cancelled wait: %s\n", cancel_ok ? "operation_canceled" : "WRONG");
    std::printf("wait pending at the watcher's stop: %s\n", stop_ok ? "errc::shut_down" : "WRONG");
    std::printf("fd after the stop: %s\n", a->readable_after_stop ? "readable" : "WRONG");
    std::printf("loop closed: %s\n", loop_closed ? "yes" : "WRONG (a handle is still open)");

    const bool ok = a->done && a->failures == 0 && a->launched == expected &&
                    a->completed == expected && a->replies == expected && a->jobs.empty() &&
                    cancel_ok && stop_ok && a->readable_after_stop && loop_closed;
    std::printf("%s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
