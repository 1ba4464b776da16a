//
// example/demo/demo.cpp: gpu-async-demo, a TCP server whose every request awaits device work.
//
// The server runs on one io_context (127.0.0.1). Each request launches work on the simulated
// device (one stream per connection: the item takes --work-us, then the stream stores its
// sequence number into its completion line and rings the reactor's doorbell) and awaits it with
// the gpu_completion_port, then replies. A built-in load generator (client connections over
// loopback, on a thread of its own) drives it for --duration seconds, prints a progress line
// once a second, and ends with a table: requests/s, request latency, completion-to-handler
// latency (from the device's store to the server's handler running; the work item records the
// time just before the store) and the server's CPU use.
//
// Run with --help for the options. Exit codes: 0 done, 1 a run-time failure, 2 a usage error.
//
#include "../../bench/common/stats.hpp"

#include <gpu_async/core/wait_plan.hpp>
#include <gpu_async/device/sim_device.hpp>
#include <gpu_async/gpu_completion_port.hpp>
#include <gpu_async/reactor_service.hpp>
#include <gpu_async/run_fill.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/json.hpp>
#include <boost/program_options.hpp>

#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace asio = boost::asio;
namespace po = boost::program_options;
using asio::ip::tcp;
using gpu_async::bench::now_ns;

constexpr int exit_usage = 2;

// ---------------------------------------------------------------------------------------------
// Options

enum class wait_mode { service, fill, plan };

struct options {
    double duration_s = 10;
    unsigned connections = 16;
    unsigned work_us = 100;
    std::string wait = "service";
    wait_mode mode = wait_mode::service;
    std::optional<gpu_async::wait_plan> plan;
    unsigned port = 0;
    bool server_only = false;
    bool client_only = false;
    std::string connect;
    asio::ip::address connect_address;
    std::string device = "sim";
    bool json = false;
};

struct usage_error {
    std::string message;
};

po::options_description describe(options& o) {
    po::options_description d("gpu-async-demo options");
    // clang-format off
    d.add_options()
        ("help,h", "print this help and exit")
        ("duration", po::value(&o.duration_s)->default_value(10),
         "seconds the load generator runs (server-only: seconds the server runs), 0.1..3600")
        ("connections", po::value(&o.connections)->default_value(16),
         "client connections, 1..1024")
        ("work-us", po::value(&o.work_us)->default_value(100),
         "device work per request, in microseconds, 0..1000000")
        ("wait", po::value(&o.wait)->default_value("service"),
         "wait strategy: service (io_context::run, the reactor's watcher thread), fill "
         "(run_fill on the server thread), plan:<plan> (the plan-driven wait, e.g. "
         "plan:flag:park_us=100,backstop_us=1000)")
        ("port", po::value(&o.port)->default_value(0),
         "server port on 127.0.0.1 (0: any free port)")
        ("server-only", po::bool_switch(&o.server_only), "run only the server")
        ("client-only", po::bool_switch(&o.client_only),
         "run only the load generator against --connect")
        ("connect", po::value(&o.connect), "host:port of the server (loopback only) for --client-only")
        ("device", po::value(&o.device)->default_value("sim"),
         "device: sim (the simulated device) or cuda (not available in this build)")
        ("json", po::bool_switch(&o.json), "print the results as JSON (progress goes to stderr)");
    // clang-format on
    return d;
}

// Checks the values; throws usage_error.
void validate(options& o) {
    if (!(o.duration_s >= 0.1 && o.duration_s <= 3600))
        throw usage_error{"--duration must be between 0.1 and 3600 seconds"};
    if (o.connections < 1 || o.connections > 1024)
        throw usage_error{"--connections must be between 1 and 1024"};
    if (o.work_us > 1'000'000) throw usage_error{"--work-us must be at most 1000000"};
    if (o.port > 65535) throw usage_error{"--port must be at most 65535"};
    if (o.server_only && o.client_only)
        throw usage_error{"--server-only and --client-only exclude each other"};
    if (o.device != "sim" && o.device != "cuda")
        throw usage_error{"--device must be sim or cuda, not '" + o.device + "'"};
    if (o.wait == "service") {
        o.mode = wait_mode::service;
    } else if (o.wait == "fill") {
        o.mode = wait_mode::fill;
    } else if (o.wait.rfind("plan:", 0) == 0) {
        auto parsed = gpu_async::wait_plan::parse(std::string_view(o.wait).substr(5));
        if (!parsed) throw usage_error{"--wait: " + parsed.error().message()};
        o.mode = wait_mode::plan;
        o.plan = *parsed;
    } else {
        throw usage_error{"--wait must be service, fill or plan:<plan>, not '" + o.wait + "'"};
    }
    if (!o.connect.empty() && !o.client_only)
        throw usage_error{"--connect is only for --client-only"};
    if (o.client_only) {
        std::string host = "127.0.0.1";
        std::string port_text;
        if (o.connect.empty()) {
            if (o.port == 0) throw usage_error{"--client-only needs --connect host:port"};
            port_text = std::to_string(o.port);
        } else {
            const auto colon = o.connect.rfind(':');
            if (colon == std::string::npos || colon + 1 == o.connect.size())
                throw usage_error{"--connect must be host:port"};
            host = o.connect.substr(0, colon);
            port_text = o.connect.substr(colon + 1);
            if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
                host = host.substr(1, host.size() - 2);
            if (host == "localhost") host = "127.0.0.1";
        }
        boost::system::error_code ec;
        o.connect_address = asio::ip::make_address(host, ec);
        if (ec) throw usage_error{"--connect: '" + host + "' is not an IP address or localhost"};
        if (!o.connect_address.is_loopback())
            throw usage_error{"--connect is restricted to loopback addresses (127.0.0.0/8, ::1)"};
        if (port_text.empty() || port_text.size() > 5 ||
            port_text.find_first_not_of("0123456789") != std::string::npos)
            throw usage_error{"--connect: bad port '" + port_text + "'"};
        const unsigned long p = std::stoul(port_text);
        if (p == 0 || p > 65535) throw usage_error{"--connect: bad port '" + port_text + "'"};
        o.port = static_cast<unsigned>(p);
    }
}

// ---------------------------------------------------------------------------------------------
// Messages: 16 bytes each way. Request: {id, 0}. Reply: {id, completion-to-handler ns}.

using message = std::array<std::uint64_t, 2>;

// ---------------------------------------------------------------------------------------------
// Server

class server {
public:
    server(const options& o)
        : opts_(o)
        , device_(gpu_async::sim_device::options{1, false})
        , port_(ctx_)
        , acceptor_(ctx_, tcp::endpoint(asio::ip::address_v4::loopback(),
                                        static_cast<unsigned short>(o.port))) {}

    unsigned short port() const { return acceptor_.local_endpoint().port(); }

    void start() {
        asio::co_spawn(ctx_, accept_loop(), asio::detached);
        thread_ = std::thread([this] { main(); });
    }

    void stop() {
        ctx_.stop();
        if (thread_.joinable()) thread_.join();
    }

    ~server() { stop(); }

    std::uint64_t served() const { return served_.load(std::memory_order_relaxed); }
    // Read after stop().
    const std::vector<std::uint64_t>& c2h() const { return c2h_; }
    std::uint64_t thread_cpu_ns() const { return thread_cpu_ns_.load(); }
    // The device workers' CPU so far (read while the device lives).
    std::uint64_t device_cpu_ns() const { return device_threads_.total_ns(); }
    const std::string& error() const { return error_; }

private:
    void main() {
        const std::uint64_t cpu0 = gpu_async::bench::thread_cpu_ns();
        try {
            if (opts_.mode == wait_mode::fill)
                gpu_async::run_fill(ctx_);
            else
                ctx_.run();
        } catch (const std::exception& e) {
            error_ = e.what();
        }
        thread_cpu_ns_.store(gpu_async::bench::thread_cpu_ns() - cpu0);
    }

    asio::awaitable<void> accept_loop() {
        for (;;) {
            auto [ec, socket] =
                co_await acceptor_.async_accept(asio::as_tuple(asio::use_awaitable));
            if (ec) co_return;
            asio::co_spawn(ctx_, session(std::move(socket)), asio::detached);
        }
    }

    asio::awaitable<void> session(tcp::socket socket) {
        boost::system::error_code opt_ec;
        socket.set_option(tcp::no_delay(true), opt_ec);
        gpu_async::sim_stream& stream = device_.make_stream();
        stream.set_doorbell(&port_.bell());
        // Where the work item records the time just before its store (shared with the item, so
        // an item still queued when the session ends writes to live memory).
        auto store_at = std::make_shared<std::atomic<std::uint64_t>>(0);
        const auto work = gpu_async::dur_ns::from_us(opts_.work_us);
        message msg{};
        for (;;) {
            auto [rec, n] = co_await asio::async_read(socket, asio::buffer(msg),
                                                      asio::as_tuple(asio::use_awaitable));
            if (rec || n != sizeof msg) co_return;
            const std::uint64_t seq = stream.enqueue(
                [store_at, this] {
                    device_threads_.add_self();
                    store_at->store(now_ns(), std::memory_order_relaxed);
                },
                work);
            boost::system::error_code wec;
            if (opts_.mode == wait_mode::plan) {
                auto [e, report] = co_await port_.async_wait(stream, *opts_.plan, "request",
                                                             asio::as_tuple(asio::use_awaitable));
                wec = e;
            } else {
                auto [e] = co_await port_.async_wait(stream.descriptor_for(seq),
                                                     asio::as_tuple(asio::use_awaitable));
                wec = e;
            }
            if (wec) co_return;
            const std::uint64_t now = now_ns();
            const std::uint64_t stored = store_at->load(std::memory_order_relaxed);
            const std::uint64_t c2h = now > stored ? now - stored : 0;
            c2h_.push_back(c2h);
            served_.fetch_add(1, std::memory_order_relaxed);
            msg[1] = c2h;
            auto [wrec, wn] = co_await asio::async_write(socket, asio::buffer(msg),
                                                         asio::as_tuple(asio::use_awaitable));
            if (wrec || wn != sizeof msg) co_return;
        }
    }

    const options& opts_;
    asio::io_context ctx_;
    gpu_async::bench::thread_cpu_set device_threads_;
    gpu_async::sim_device device_;
    gpu_async::gpu_completion_port port_;
    tcp::acceptor acceptor_;
    std::thread thread_;
    std::vector<std::uint64_t> c2h_; // server thread only, until stop()
    std::atomic<std::uint64_t> served_{0};
    std::atomic<std::uint64_t> thread_cpu_ns_{0};
    std::string error_;
};

// ---------------------------------------------------------------------------------------------
// Load generator

class client {
public:
    client(const options& o, tcp::endpoint ep)
        : opts_(o)
        , endpoint_(ep) {}

    void start(std::uint64_t end_ns) {
        end_ns_ = end_ns;
        for (unsigned i = 0; i < opts_.connections; ++i)
            asio::co_spawn(ctx_, connection(i), asio::detached);
        thread_ = std::thread([this] {
            const std::uint64_t cpu0 = gpu_async::bench::thread_cpu_ns();
            // Bounded: the connections end at end_ns; a silent server is given 5 s more.
            const auto left = std::chrono::nanoseconds(end_ns_ - now_ns());
            ctx_.run_for(left + std::chrono::seconds(5));
            if (!ctx_.stopped()) timed_out_ = true;
            cpu_ns_.store(gpu_async::bench::thread_cpu_ns() - cpu0);
        });
    }

    void join() {
        if (thread_.joinable()) thread_.join();
    }
    ~client() { join(); }

    std::uint64_t done() const { return done_.load(std::memory_order_relaxed); }
    // After join():
    const std::vector<std::uint64_t>& latency() const { return latency_; }
    const std::vector<std::uint64_t>& c2h() const { return c2h_; }
    std::uint64_t cpu_ns() const { return cpu_ns_.load(); }
    std::uint64_t failed_connections() const { return failed_.load(); }
    bool timed_out() const { return timed_out_; }
    std::string first_error() const { return first_error_; }

private:
    asio::awaitable<void> connection(unsigned index) {
        tcp::socket socket(ctx_);
        auto [cec] = co_await socket.async_connect(endpoint_, asio::as_tuple(asio::use_awaitable));
        if (cec) {
            fail(cec);
            co_return;
        }
        boost::system::error_code opt_ec;
        socket.set_option(tcp::no_delay(true), opt_ec);
        message msg{};
        std::uint64_t id = static_cast<std::uint64_t>(index) << 40;
        while (now_ns() < end_ns_) {
            msg = {++id, 0};
            const std::uint64_t t0 = now_ns();
            auto [wec, wn] = co_await asio::async_write(socket, asio::buffer(msg),
                                                        asio::as_tuple(asio::use_awaitable));
            if (wec || wn != sizeof msg) {
                fail(wec);
                co_return;
            }
            auto [rec, rn] = co_await asio::async_read(socket, asio::buffer(msg),
                                                       asio::as_tuple(asio::use_awaitable));
            if (rec || rn != sizeof msg || msg[0] != id) {
                fail(rec);
                co_return;
            }
            latency_.push_back(now_ns() - t0);
            c2h_.push_back(msg[1]);
            done_.fetch_add(1, std::memory_order_relaxed);
        }
        boost::system::error_code ignored;
        socket.shutdown(tcp::socket::shutdown_both, ignored);
    }

    void fail(const boost::system::error_code& ec) {
        if (failed_.fetch_add(1) == 0)
            first_error_ = ec ? ec.message() : std::string("short read/write or wrong reply");
    }

    const options& opts_;
    tcp::endpoint endpoint_;
    asio::io_context ctx_{1};
    std::thread thread_;
    std::uint64_t end_ns_ = 0;
    std::vector<std::uint64_t> latency_, c2h_; // client thread only, until join()
    std::atomic<std::uint64_t> done_{0};
    std::atomic<std::uint64_t> failed_{0};
    std::atomic<std::uint64_t> cpu_ns_{0};
    bool timed_out_ = false;
    std::string first_error_;
};

// ---------------------------------------------------------------------------------------------
// Reporting

struct results {
    double wall_s = 0;
    std::uint64_t requests = 0;
    gpu_async::bench::summary latency, c2h;
    bool have_latency = false, have_c2h = false, have_server_cpu = false;
    double server_thread_cpu = 0; // s per s
    double server_side_cpu = 0;   // s per s (server thread + reactor watcher)
    double device_cpu = 0;        // s per s
    double client_cpu = 0;        // s per s
    double process_cpu = 0;       // s per s
    std::uint64_t failed_connections = 0;
    std::string first_error;
};

std::string mode_text(const options& o) {
    if (o.server_only) return "server-only";
    if (o.client_only) return "client-only";
    return "server + load generator";
}

void print_table(const options& o, const results& r, unsigned short port) {
    auto us = [](double ns) { return gpu_async::bench::format_ns(ns); };
    std::printf("\ngpu-async-demo: %s on 127.0.0.1:%u, device sim, wait %s\n", mode_text(o).c_str(),
                static_cast<unsigned>(port), o.wait.c_str());
    if (o.server_only)
        std::printf("  %u us of device work per request, %.1f s\n\n", o.work_us, r.wall_s);
    else
        std::printf("  %u connections, %u us of device work per request, %.1f s\n\n", o.connections,
                    o.work_us, r.wall_s);
    std::printf("  %-44s %s\n", "metric", "value");
    std::printf("  %-44s %s\n", "--------------------------------------------", "-------------");
    std::printf("  %-44s %.0f\n", "requests/s",
                r.wall_s > 0 ? static_cast<double>(r.requests) / r.wall_s : 0.0);
    if (r.have_latency) {
        std::printf("  %-44s %s\n", "request latency p50", us(r.latency.p50).c_str());
        std::printf("  %-44s %s\n", "request latency p99", us(r.latency.p99).c_str());
    }
    if (r.have_c2h) {
        std::printf("  %-44s %s\n", "completion-to-handler latency p50", us(r.c2h.p50).c_str());
        std::printf("  %-44s %s\n", "completion-to-handler latency p99", us(r.c2h.p99).c_str());
    }
    if (r.have_server_cpu) {
        std::printf("  %-44s %.3f s/s\n", "server thread CPU (io_context)", r.server_thread_cpu);
        std::printf("  %-44s %.3f s/s\n", "reactor CPU (server thread + watcher)",
                    r.server_side_cpu);
        std::printf("  %-44s %.3f s/s\n", "simulated device CPU (not counted above)", r.device_cpu);
    }
    if (!o.server_only) std::printf("  %-44s %.3f s/s\n", "load generator CPU", r.client_cpu);
    std::printf("  %-44s %.3f s/s\n", "whole process CPU", r.process_cpu);
    if (r.failed_connections != 0)
        std::printf("  %-44s %llu (%s)\n", "failed connections",
                    static_cast<unsigned long long>(r.failed_connections), r.first_error.c_str());
    std::printf("\n  CPU in seconds per second of wall time. Completion-to-handler: from the "
                "device's store\n  (time taken by the work item just before it) to the server's "
                "handler running.\n");
}

void print_json(const options& o, const results& r, unsigned short port) {
    boost::json::object j;
    j["mode"] = mode_text(o);
    j["port"] = port;
    j["device"] = "sim";
    j["wait"] = o.wait;
    j["connections"] = o.connections;
    j["work_us"] = o.work_us;
    j["wall_s"] = r.wall_s;
    j["requests"] = r.requests;
    j["requests_per_s"] = r.wall_s > 0 ? static_cast<double>(r.requests) / r.wall_s : 0.0;
    if (r.have_latency)
        j["request_latency_ns"] = {{"p50", r.latency.p50},
                                   {"p90", r.latency.p90},
                                   {"p99", r.latency.p99},
                                   {"max", r.latency.max}};
    if (r.have_c2h)
        j["completion_to_handler_ns"] = {
            {"p50", r.c2h.p50}, {"p90", r.c2h.p90}, {"p99", r.c2h.p99}, {"max", r.c2h.max}};
    boost::json::object cpu;
    if (r.have_server_cpu) {
        cpu["server_thread"] = r.server_thread_cpu;
        cpu["reactor"] = r.server_side_cpu;
        cpu["device"] = r.device_cpu;
    }
    if (!o.server_only) cpu["load_generator"] = r.client_cpu;
    cpu["process"] = r.process_cpu;
    j["cpu_s_per_s"] = std::move(cpu);
    j["failed_connections"] = r.failed_connections;
    std::cout << boost::json::serialize(j) << '\n';
}

// Prints the progress line once a second until `end_ns` (or `stop()` says so).
template <class Count, class Stop>
void progress(const options& o, std::uint64_t start_ns, std::uint64_t end_ns, Count count,
              Stop stop) {
    FILE* out = o.json ? stderr : stdout;
    const bool tty = isatty(fileno(out)) != 0;
    std::uint64_t last = 0;
    std::uint64_t last_t = start_ns;
    while (now_ns() < end_ns && !stop()) {
        const std::uint64_t next = std::min(end_ns, last_t + 1'000'000'000u);
        while (now_ns() < next && !stop())
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        const std::uint64_t t = now_ns();
        const std::uint64_t c = count();
        const double dt = static_cast<double>(t - last_t) / 1e9;
        const double rate = dt > 0 ? static_cast<double>(c - last) / dt : 0;
        std::fprintf(out, "%s[%5.1f / %.1f s] %10llu requests, %9.0f req/s%s", tty ? "\r" : "",
                     static_cast<double>(t - start_ns) / 1e9, o.duration_s,
                     static_cast<unsigned long long>(c), rate, tty ? "  " : "\n");
        std::fflush(out);
        last = c;
        last_t = t;
    }
    if (tty) std::fputc('\n', out);
}

int run(const options& o) {
    results r;
    const std::uint64_t main_cpu0 = gpu_async::bench::thread_cpu_ns();
    const std::uint64_t proc0 = gpu_async::bench::process_cpu_ns();
    const std::uint64_t start = now_ns();
    const std::uint64_t end = start + static_cast<std::uint64_t>(o.duration_s * 1e9);

    std::unique_ptr<server> srv;
    std::unique_ptr<client> cli;
    unsigned short port = static_cast<unsigned short>(o.port);
    if (!o.client_only) {
        srv = std::make_unique<server>(o);
        port = srv->port();
        srv->start();
        if (o.server_only) {
            std::fprintf(o.json ? stderr : stdout,
                         "gpu-async-demo: serving on 127.0.0.1:%u for %.1f s\n",
                         static_cast<unsigned>(port), o.duration_s);
            std::fflush(o.json ? stderr : stdout);
        }
    }
    if (!o.server_only) {
        const auto addr =
            o.client_only ? o.connect_address : asio::ip::address(asio::ip::address_v4::loopback());
        cli = std::make_unique<client>(o, tcp::endpoint(addr, port));
        cli->start(end);
    }
    progress(
        o, start, end, [&] { return cli ? cli->done() : srv->served(); },
        [&] { return cli && cli->failed_connections() == o.connections; });
    if (cli) cli->join();
    const std::uint64_t device_cpu = srv ? srv->device_cpu_ns() : 0;
    if (srv) srv->stop();
    const std::uint64_t wall = now_ns() - start;
    const std::uint64_t proc = gpu_async::bench::process_cpu_ns() - proc0;
    const std::uint64_t main_cpu = gpu_async::bench::thread_cpu_ns() - main_cpu0;
    r.wall_s = static_cast<double>(wall) / 1e9;
    const double w = static_cast<double>(wall);
    r.process_cpu = static_cast<double>(proc) / w;
    if (cli) {
        r.requests = cli->done();
        r.latency = gpu_async::bench::summarize(cli->latency());
        r.c2h = gpu_async::bench::summarize(cli->c2h());
        r.have_latency = r.have_c2h = r.requests > 0;
        r.client_cpu = static_cast<double>(cli->cpu_ns()) / w;
        r.failed_connections = cli->failed_connections();
        r.first_error = cli->first_error();
    }
    if (srv) {
        if (!cli) {
            r.requests = srv->served();
            r.c2h = gpu_async::bench::summarize(srv->c2h());
            r.have_c2h = r.requests > 0;
        }
        r.have_server_cpu = true;
        r.server_thread_cpu = static_cast<double>(srv->thread_cpu_ns()) / w;
        r.device_cpu = static_cast<double>(device_cpu) / w;
        // The server side: the process less the load generator, the device and the main
        // thread; what remains is the server thread and the reactor's watcher thread.
        const std::uint64_t others = (cli ? cli->cpu_ns() : 0) + device_cpu + main_cpu;
        r.server_side_cpu = proc > others ? static_cast<double>(proc - others) / w : 0.0;
    }
    if (o.json)
        print_json(o, r, port);
    else
        print_table(o, r, port);
    if (srv && !srv->error().empty()) {
        std::fprintf(stderr, "gpu-async-demo: server failed: %s\n", srv->error().c_str());
        return 1;
    }
    if (cli && cli->timed_out()) {
        std::fprintf(stderr, "gpu-async-demo: the server stopped answering\n");
        return 1;
    }
    if (cli && r.requests == 0) {
        std::fprintf(stderr, "gpu-async-demo: no request completed (%s)\n",
                     r.first_error.empty() ? "no reply" : r.first_error.c_str());
        return 1;
    }
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    options o;
    const po::options_description desc = describe(o);
    auto usage = [&](const std::string& why) {
        std::cerr << "gpu-async-demo: " << why << "\n\nusage: gpu-async-demo [options]\n"
                  << desc << '\n';
        return exit_usage;
    };
    try {
        po::variables_map vm;
        const po::positional_options_description none; // no positional arguments
        po::store(po::command_line_parser(argc, argv).options(desc).positional(none).run(), vm);
        po::notify(vm);
        if (vm.count("help") != 0) {
            std::cout << "usage: gpu-async-demo [options]\n"
                      << "  With no options: a server and a load generator over loopback for 10 "
                         "s, then a table.\n\n"
                      << desc << '\n';
            return 0;
        }
        validate(o);
    } catch (const po::error& e) {
        return usage(e.what());
    } catch (const usage_error& e) {
        return usage(e.message);
    } catch (const std::exception& e) {
        return usage(e.what());
    }
    if (o.device == "cuda") {
        std::fprintf(stderr, "gpu-async-demo: --device cuda is not available in this build: the "
                             "demo runs on the simulated device only (--device sim)\n");
        return 1;
    }
    try {
        return run(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "gpu-async-demo: %s\n", e.what());
        return 1;
    }
}
