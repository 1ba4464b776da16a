// SPDX-License-Identifier: BSL-1.0
//
// example/demo/demo.cpp: gpu-async-demo, a TCP server whose every request awaits device work.
//
// The server runs on one thread (127.0.0.1). Each request launches work on the device (one
// stream per connection) and awaits it, then replies. A built-in load generator (client
// connections over loopback, on a thread of its own) drives it for --duration seconds, prints a
// progress line once a second, and ends with a table: requests/s, request latency,
// completion-to-handler latency (from the device's store to the server's handler running; the
// simulated device's work item records the time just before the store) and the server's CPU use.
//
// HTTP (--http): the server speaks HTTP/1.1 through Boost.Beast instead of the 16-byte messages,
// with keep-alive. GET /work?us=N (N microseconds, 0..1000000; default --work-us) launches the
// work on the connection's stream, awaits it as the executor and --wait say, and answers 200 with
// JSON: the version, the request's number, work_us, device, executor, wait, and times_ns since
// the request was read (received 0, launched: when the launch call returned, completed: the
// device's store, null on cuda and vulkan; handler: when the server's code resumed), and
// completion_to_handler_ns. Other paths answer 404, other methods 405, a bad N 400, each with
// {"error": ...}. With --server-only it serves until SIGINT or SIGTERM (unless --duration says
// otherwise) for curl, ab or wrk, printing its URL first; the summary counts the HTTP responses,
// those not 2xx and the connections (scripts/ci/http.sh checks them against ab's counts).
// Without, the built-in load generator speaks HTTP too. gpu-reactor and naive only.
//
// Devices (--device):
//   sim   the simulated device: an item of --work-us, then the stream stores its sequence number
//         into its completion line (and rings the port's or the ring's doorbell).
//   cuda  a real CUDA device (device 0, its primary context; the driver is loaded at run time,
//         <gpu_async/device/cuda.hpp>): each request is a cuMemsetD8Async of a device buffer
//         sized from --work-us (1 MiB per microsecond, at most 1 GiB; none for 0) on the
//         connection's stream, then the stream's store of its sequence number into a slot of a
//         cuda_line (cuStreamWriteValue64), or, for plan-driven waits, a cuda_source over the
//         stream. Without a driver, device or capability the demo prints one coded error
//         ("error [10]: libcuda.so.1 is unavailable: ...") and exits 1. Completion-to-handler
//         latency is not measured there: the host cannot see when the device stored.
//   vulkan a real Vulkan device of the demo's own (<gpu_async/device/vulkan.hpp>, the loader
//         found at run time; Mesa's lavapipe where there is no GPU): each request is a compute
//         submission of the spin shader (bench/common/vulkan_spin.comp) looping for --work-us
//         (calibrated at start) that signals the connection's timeline semaphore, then a
//         vulkan_line's store behind that value (await_semaphore), or, for plan-driven waits, a
//         vulkan_source over the semaphore. Without a loader or a capable device: one coded
//         error, exit 1. Completion-to-handler latency is not measured, as on cuda.
//
// Executors (--executor, resolved at start-up through gpu_async::resolve() along io-uring ->
// gpu-reactor -> naive; a fallback prints its coded warning, --strict refuses instead):
//   gpu-reactor  (default) Asio sockets on an io_context; each request awaits the device with
//                the gpu_completion_port: --wait service (io_context::run, the reactor's watcher
//                thread), fill (run_fill: the server thread is the FILL executor idling on the
//                reactor) or plan:<plan> (the port's plan-driven wait over the stream's source).
//   naive        Asio sockets on an io_context; the server thread awaits each request's device
//                work inline with the std host's blocking wait (gpu_async::wait_blocking: the
//                wait machine on the calling thread) with the plan of --wait plan:<plan> or the
//                recommended one. The whole server stalls during each wait: requests are served one
//                at a time, which is what naive means.
//   io-uring     one thread, one ring: the FILL executor on `uring_idle` (deadline sleeps are
//                ring timeouts, parks are futex waits on the doorbell where the kernel has them)
//                and the server's sockets (accept, recv, send, close) on the same ring, as
//                example/uring_server.cpp does; each request is a fill_wait with the plan of
//                --wait plan:<plan> or the recommended one.
//
// SIGINT or SIGTERM (an Asio signal_set) ends the run early: the load generator stops, the
// server stops, and the summary of the run so far is printed as at the end of --duration.
//
// Run with --help for the options. Exit codes: 0 done (also when stopped by SIGINT or SIGTERM),
// 1 a run-time failure (a missing device, a refused strict executor), 2 a usage error (one line
// naming it, then a hint to --help).
//
#include "../../bench/common/stats.hpp"
#include "../../bench/common/vulkan_spin.hpp"
#include "../common/executor_select.hpp"

#include <gpu_async/core/estimator.hpp>
#include <gpu_async/core/wait_plan.hpp>
#include <gpu_async/device/cuda.hpp>
#include <gpu_async/device/sim_device.hpp>
#include <gpu_async/device/vulkan.hpp>
#include <gpu_async/fill/executor_kind.hpp>
#include <gpu_async/fill/fill_executor.hpp>
#include <gpu_async/gpu_completion_port.hpp>
#include <gpu_async/host/std_host.hpp>
#include <gpu_async/run_fill.hpp>
#include <gpu_async/version.hpp>
#include <gpu_async/wait/doorbell.hpp>

#if GPU_ASYNC_HAS_LIBURING
#include "../common/uring_ops.hpp"

#include <gpu_async/fill/uring_host.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#endif

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>
#include <boost/program_options.hpp>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace po = boost::program_options;
using asio::ip::tcp;
using gpu_async::executor_kind;
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
    std::string device_name; // a real device's own name, once opened
    bool json = false;
    bool http = false;
    bool until_signal = false; // --duration 0 (server-only): serve until SIGINT or SIGTERM
    std::string executor = "gpu-reactor";
    bool strict = false;
    bool fail_ring = false;
    // Derived: the kind asked, the kind that runs (after resolution), the plan of the naive and
    // io-uring waits, and the wait as the table names it.
    executor_kind requested = executor_kind::fill;
    executor_kind runs = executor_kind::fill;
    gpu_async::wait_plan inline_plan = gpu_async::wait_plan::recommended();
    std::string wait_label = "service";
};

struct usage_error {
    std::string message;
};

// Wide enough that no option's text is broken inside a word; the examples are printed verbatim
// after the options (--help).
constexpr unsigned help_width = 100;

constexpr const char* help_examples =
    "Examples:\n"
    "  gpu-async-demo                                       server + load generator, 10 s\n"
    "  gpu-async-demo --wait fill --duration 5              run_fill on the server thread\n"
    "  gpu-async-demo --wait plan:flag:park_us=100,backstop_us=1000\n"
    "  gpu-async-demo --executor io-uring --strict          refuse rather than fall back\n"
    "  gpu-async-demo --json --duration 2                   JSON summary on stdout\n"
    "  gpu-async-demo --server-only --port 5555 --duration 60\n"
    "  gpu-async-demo --client-only --connect 127.0.0.1:5555 --duration 10\n"
    "  gpu-async-demo --http --server-only --port 8080     HTTP until Ctrl-C; then, elsewhere:\n"
    "  curl 'http://127.0.0.1:8080/work?us=250'             250 us of GPU work; timings as JSON\n"
    "  ab -k -l -n 2000 -c 8 'http://127.0.0.1:8080/work?us=20'\n"
    "  wrk -c 8 -d 5 'http://127.0.0.1:8080/work?us=20'\n"
    "  gpu-async-demo --http --duration 5                   HTTP with the built-in load generator\n"
    "\n"
    "SIGINT (Ctrl-C) or SIGTERM stops a run early and prints the summary so far.\n";

po::options_description describe(options& o) {
    po::options_description d("gpu-async-demo options", help_width, help_width / 2);
    // clang-format off
    d.add_options()
        ("help,h", "print this help and exit")
        ("duration", po::value(&o.duration_s)->default_value(10),
         "seconds the load generator runs (server-only: seconds the server runs), 0.1..3600; "
         "0 with --server-only: until SIGINT (the default for --http --server-only)")
        ("connections", po::value(&o.connections)->default_value(16),
         "client connections, 1..1024")
        ("work-us", po::value(&o.work_us)->default_value(100),
         "device work per request, in microseconds, 0..1000000 (cuda: a memset of 1 MiB per "
         "microsecond, at most 1 GiB; vulkan: a shader loop calibrated to it)")
        ("executor", po::value(&o.executor)->default_value("gpu-reactor"),
         "how the server awaits the device, resolved at start along io-uring -> gpu-reactor -> "
         "naive (a fallback prints a coded warning): gpu-reactor (Asio sockets; the "
         "gpu_completion_port with --wait), naive (Asio sockets; the server thread blocks in "
         "the std host's wait on each request, with the --wait plan or the recommended one), "
         "io-uring (one thread, one ring: the FILL executor on uring_idle with the sockets on "
         "the same ring; the --wait plan or the recommended one)")
        ("strict", po::bool_switch(&o.strict),
         "refuse (exit 1, coded error) instead of falling back when --executor is unavailable")
        ("fail-ring", po::bool_switch(&o.fail_ring),
         "test hook: io_uring ring creation fails (EPERM, as seccomp would), so io-uring falls "
         "back (or, with --strict, is refused)")
        ("wait", po::value(&o.wait)->default_value("service"),
         "wait strategy: service (io_context::run, the reactor's watcher thread), fill "
         "(run_fill on the server thread), plan:<plan> (the plan-driven wait; see the examples); "
         "service and fill are for gpu-reactor only")
        ("port", po::value(&o.port)->default_value(0),
         "server port on 127.0.0.1 (0: any free port)")
        ("server-only", po::bool_switch(&o.server_only), "run only the server")
        ("client-only", po::bool_switch(&o.client_only),
         "run only the load generator against --connect")
        ("connect", po::value(&o.connect), "host:port of the server (loopback only) for --client-only")
        ("device", po::value(&o.device)->default_value("sim"),
         "device: sim (the simulated device), cuda (CUDA device 0) or vulkan (a Vulkan device, "
         "lavapipe where there is no GPU: each request a compute submission); cuda and vulkan "
         "exit 1 with a coded error where no driver or device exists")
        ("json", po::bool_switch(&o.json),
         "print the results as JSON (progress goes to stderr): times in integer nanoseconds, "
         "with the library version")
        ("http", po::bool_switch(&o.http),
         "speak HTTP/1.1 (Boost.Beast) instead of the demo's 16-byte messages: GET /work?us=N "
         "launches N us of device work (default: --work-us), awaits it, and answers with its "
         "timings as JSON; keep-alive. With --server-only, drive it with curl, ab or wrk; else "
         "the built-in load generator speaks HTTP too. Executors gpu-reactor and naive");
    // clang-format on
    return d;
}

// Checks the values; throws usage_error. `wait_given`: --wait was on the command line;
// `duration_given`: --duration was.
void validate(options& o, bool wait_given, bool duration_given) {
    // An HTTP server for curl, ab or wrk runs until it is stopped, unless told how long.
    if (o.http && o.server_only && !duration_given) o.duration_s = 0;
    if (o.duration_s == 0 && o.server_only)
        o.until_signal = true;
    else if (!(o.duration_s >= 0.1 && o.duration_s <= 3600))
        throw usage_error{"--duration must be between 0.1 and 3600 seconds (0: until SIGINT, "
                          "with --server-only)"};
    if (o.connections < 1 || o.connections > 1024)
        throw usage_error{"--connections must be between 1 and 1024"};
    if (o.work_us > 1'000'000) throw usage_error{"--work-us must be at most 1000000"};
    if (o.port > 65535) throw usage_error{"--port must be at most 65535"};
    if (o.server_only && o.client_only)
        throw usage_error{"--server-only and --client-only exclude each other"};
    if (o.device != "sim" && o.device != "cuda" && o.device != "vulkan")
        throw usage_error{"--device must be sim, cuda or vulkan, not '" + o.device + "'"};
    const auto kind = gpu_async::parse_executor_kind(o.executor);
    if (!kind.has_value())
        throw usage_error{"--executor: error [" + std::to_string(kind.error().code().value()) +
                          "]: " + kind.error().message()};
    o.requested = kind.value();
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
    if (o.http && !o.client_only && o.requested == executor_kind::io_uring)
        throw usage_error{"--http serves through Asio: --executor gpu-reactor or naive, not "
                          "io-uring"};
    if (wait_given && o.mode != wait_mode::plan && o.requested != executor_kind::fill)
        throw usage_error{"--wait " + o.wait +
                          " is for --executor gpu-reactor; naive and io-uring take --wait "
                          "plan:<plan> (default: the recommended plan)"};
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

// After resolution: what runs, and the wait it runs.
void settle(options& o, executor_kind runs) {
    o.runs = runs;
    if (runs == executor_kind::fill) {
        o.wait_label = o.wait;
    } else {
        o.inline_plan = o.plan.value_or(gpu_async::wait_plan::recommended());
        o.wait_label = "plan:" + o.inline_plan.label();
    }
}

// What waits for the device, named as the README's glossary names it, with what it is, in words:
// the executor kind (--executor), but for the reactor service's watcher thread (gpu-reactor's
// default wait, --wait service), which is not the FILL executor that gpu-reactor names.
std::string executor_words(executor_kind k, wait_mode mode) {
    const std::string name(gpu_async::to_string(k));
    if (k == executor_kind::naive) return name + " (a plain blocking wait, for comparison)";
    if (k == executor_kind::io_uring)
        return name + " (the library's GPU-aware executor on a Linux io_uring ring)";
    if (mode == wait_mode::service)
        return "service (the reactor service: its watcher thread wakes the io_context)";
    return name + " (the library's GPU-aware executor)";
}

// The wait (--wait) in words.
std::string wait_words(const options& o) {
    if (o.runs == executor_kind::fill && o.mode == wait_mode::service)
        return "service (a watcher thread sees the GPU finish)";
    if (o.runs == executor_kind::fill && o.mode == wait_mode::fill)
        return "fill (the server thread checks the GPU between requests)";
    return o.wait_label + " (each wait follows this plan)";
}

// The first line a server prints: what runs, in the words of a reader who knows neither Asio nor
// this library, then the executor kind (--executor), named and explained, and the wait (--wait).
// E.g. "a TCP server on one thread answers many requests at once; each runs work on a simulated
// GPU, and a watcher thread wakes the server when it is done. Executor: service (the reactor
// service: its watcher thread wakes the io_context), wait: service". A fallback names the kind
// asked.
std::string run_description(const options& o) {
    const std::string server =
        std::string(o.http ? "an HTTP/1.1 server" : "a TCP server") + " on one thread";
    const std::string gpu = o.device == "cuda"     ? "CUDA GPU 0"
                            : o.device == "vulkan" ? "the Vulkan device " + o.device_name
                                                   : "a simulated GPU";
    const std::string many = server + " answers many requests at once; each runs work on " + gpu;
    std::string what;
    if (o.runs == executor_kind::naive)
        what = server + " waits for each request's work on " + gpu +
               " before it reads the next, so it answers one request at a time";
    else if (o.runs == executor_kind::io_uring)
        what = many + ", and one Linux io_uring ring tells the server of sockets and finished work";
    else if (o.mode == wait_mode::fill)
        what = many + ", and the server thread itself looks for finished work between requests";
    else if (o.mode == wait_mode::plan)
        what = many + ", and the server waits for it as its wait plan says (spin, sleep or park)";
    else
        what = many + ", and a watcher thread wakes the server when it is done";
    std::string kind = executor_words(o.runs, o.mode);
    if (o.runs != o.requested)
        kind += " instead of " + std::string(gpu_async::to_string(o.requested));
    return what + ". Executor: " + kind + ", wait: " + o.wait_label;
}

// ---------------------------------------------------------------------------------------------
// Messages: 16 bytes each way. Request: {id, 0}. Reply: {id, completion-to-handler ns}.

using message = std::array<std::uint64_t, 2>;

// --http: what a request asks for. GET /work?us=N (or /work: --work-us) is N microseconds of
// device work, 0..1000000; other parameters are ignored. Anything else: an error status and
// its text.
struct http_route {
    http::status status = http::status::ok;
    unsigned work_us = 0;
    std::string error;
};

http_route route_http(const http::request<http::string_body>& req, unsigned default_us) {
    const std::string_view target(req.target().data(), req.target().size());
    const auto q = target.find('?');
    if (target.substr(0, q) != "/work")
        return {http::status::not_found, 0, "no such resource; try GET /work?us=100"};
    if (req.method() != http::verb::get)
        return {http::status::method_not_allowed, 0, "/work takes GET"};
    http_route r{http::status::ok, default_us, {}};
    std::string_view query = q == std::string_view::npos ? "" : target.substr(q + 1);
    while (!query.empty()) {
        const auto amp = query.find('&');
        const std::string_view param = query.substr(0, amp);
        query = amp == std::string_view::npos ? "" : query.substr(amp + 1);
        if (param.substr(0, 3) != "us=") continue;
        const std::string_view v = param.substr(3);
        if (v.empty() || v.size() > 7 || v.find_first_not_of("0123456789") != v.npos ||
            std::stoul(std::string(v)) > 1'000'000)
            return {http::status::bad_request, 0,
                    "us must be a whole number of microseconds, 0..1000000"};
        r.work_us = static_cast<unsigned>(std::stoul(std::string(v)));
    }
    return r;
}

std::string http_error_body(const std::string& why) {
    return boost::json::serialize(boost::json::object{{"error", why}}) + "\n";
}

// ---------------------------------------------------------------------------------------------
// Devices. A lane is one connection's stream: launch(us) enqueues a request's work; mark() a store
// of the stream's next sequence number behind it (its descriptor); source() the stream as a
// completion_source (plan-driven waits arm it themselves); stored_at() when the device stored
// (0: unknown).

// The simulated device's lane.
class sim_lane {
public:
    sim_lane(gpu_async::sim_stream& stream, gpu_async::bench::thread_cpu_set& device_threads)
        : stream_(&stream)
        , device_threads_(&device_threads) {}

    // An item of `work_us` microseconds.
    std::optional<gpu_async::coded_error> launch(unsigned work_us) {
        // Shared with the item, so an item still queued when the session ends writes to live
        // memory.
        seq_ = stream_->enqueue(
            [store_at = store_at_, threads = device_threads_] {
                threads->add_self();
                store_at->store(now_ns(), std::memory_order_relaxed);
            },
            gpu_async::dur_ns::from_us(work_us));
        return std::nullopt;
    }
    gpu_async::result<gpu_async::memory_descriptor> mark() { return stream_->descriptor_for(seq_); }
    gpu_async::sim_stream& source() { return *stream_; }
    std::uint64_t stored_at() const { return store_at_->load(std::memory_order_relaxed); }

private:
    gpu_async::sim_stream* stream_;
    gpu_async::bench::thread_cpu_set* device_threads_;
    std::shared_ptr<std::atomic<std::uint64_t>> store_at_ =
        std::make_shared<std::atomic<std::uint64_t>>(0);
    std::uint64_t seq_ = 0;
};

// CUDA device 0: its primary context, a device buffer the requests set, and the lines whose
// slots the connections' streams store into (eight per line, slots reused). Opened on the main
// thread (the context is made current there); the server thread makes it current on itself.
// Slots are taken and given back on the server thread only.
class cuda_env {
public:
    static constexpr std::size_t bytes_per_us = std::size_t{1} << 20;
    static constexpr std::size_t max_bytes = std::size_t{1} << 30;

    static gpu_async::result<std::unique_ptr<cuda_env>> open(unsigned work_us) {
        using gpu_async::coded_error;
        using gpu_async::errc;
        namespace cuda = gpu_async::cuda;
        auto loaded = gpu_async::cuda_driver::load();
        if (!loaded.has_value()) return loaded.error();
        const gpu_async::cuda_driver& drv = *loaded.value();
        const cuda::entry_points& a = drv.api();
        if (a.stream_create == nullptr || a.stream_destroy == nullptr || a.mem_alloc == nullptr ||
            a.mem_free == nullptr || a.memset_d8_async == nullptr)
            return coded_error(errc::unavailable,
                               {"the CUDA driver's stream and memory calls",
                                "cuStreamCreate, cuStreamDestroy, cuMemAlloc, cuMemFree or "
                                "cuMemsetD8Async is missing"});
        int count = 0;
        if (const auto st = a.device_get_count(&count); st != cuda::success)
            return drv.error("cuDeviceGetCount", st);
        if (count == 0)
            return coded_error(errc::unavailable, {"a CUDA device", "cuDeviceGetCount found none"});
        std::unique_ptr<cuda_env> env(new cuda_env(drv));
        if (const auto st = a.device_get(&env->device_, 0); st != cuda::success)
            return drv.error("cuDeviceGet", st);
        if (auto e = drv.check_device(env->device_)) return *e;
        if (const auto st = a.device_primary_ctx_retain(&env->context_, env->device_);
            st != cuda::success)
            return drv.error("cuDevicePrimaryCtxRetain", st);
        env->retained_ = true;
        if (const auto st = a.ctx_set_current(env->context_); st != cuda::success)
            return drv.error("cuCtxSetCurrent", st);
        env->bytes_ = std::min(max_bytes, static_cast<std::size_t>(work_us) * bytes_per_us);
        if (env->bytes_ != 0)
            if (const auto st = a.mem_alloc(&env->buffer_, env->bytes_); st != cuda::success)
                return drv.error("cuMemAlloc", st);
        return env;
    }

    cuda_env(const cuda_env&) = delete;
    cuda_env& operator=(const cuda_env&) = delete;

    ~cuda_env() {
        lines_.clear(); // each synchronizes the context, frees its page, releases the context
        if (buffer_ != 0) static_cast<void>(driver_->api().mem_free(buffer_));
        if (retained_) static_cast<void>(driver_->api().device_primary_ctx_release(device_));
    }

    const gpu_async::cuda_driver& driver() const { return *driver_; }
    std::size_t bytes() const { return bytes_; }
    gpu_async::cuda::deviceptr_t buffer() const { return buffer_; }

    // Makes the context current on the calling thread.
    std::optional<gpu_async::coded_error> make_current() const {
        if (const auto st = driver_->api().ctx_set_current(context_);
            st != gpu_async::cuda::success)
            return driver_->error("cuCtxSetCurrent", st);
        return std::nullopt;
    }

    // A free slot (a new line when every slot of the lines made so far is taken).
    gpu_async::result<unsigned> take_slot() {
        if (!free_.empty()) {
            const unsigned n = free_.back();
            free_.pop_back();
            return n;
        }
        const unsigned n = next_++;
        if (n / gpu_async::line_words >= lines_.size()) {
            auto line = gpu_async::cuda_line::create_on(*driver_, 0);
            if (!line.has_value()) {
                --next_;
                return line.error();
            }
            lines_.push_back(std::make_unique<gpu_async::cuda_line>(std::move(line).value()));
        }
        return n;
    }
    void give_back(unsigned n) { free_.push_back(n); }

    gpu_async::cuda_line& line_of(unsigned n) { return *lines_[n / gpu_async::line_words]; }
    static gpu_async::slot_id slot_of(unsigned n) {
        return *gpu_async::slot_id::at(n % gpu_async::line_words);
    }

private:
    explicit cuda_env(const gpu_async::cuda_driver& drv)
        : driver_(&drv) {}

    const gpu_async::cuda_driver* driver_;
    gpu_async::cuda::device_t device_ = 0;
    gpu_async::cuda::context_t context_ = nullptr;
    bool retained_ = false;
    gpu_async::cuda::deviceptr_t buffer_ = 0;
    std::size_t bytes_ = 0;
    std::vector<std::unique_ptr<gpu_async::cuda_line>> lines_;
    std::vector<unsigned> free_;
    unsigned next_ = 0;
};

// A connection's CUDA stream and slot. Made and destroyed on the server thread (or, for a
// session destroyed with its io_context, the main thread: the context is current on both).
class cuda_lane {
public:
    static gpu_async::result<std::unique_ptr<cuda_lane>> make(cuda_env& env) {
        namespace cuda = gpu_async::cuda;
        auto slot = env.take_slot();
        if (!slot.has_value()) return slot.error();
        std::unique_ptr<cuda_lane> lane(new cuda_lane(env, slot.value()));
        const auto& a = env.driver().api();
        if (const auto st = a.stream_create(&lane->stream_, cuda::stream_non_blocking);
            st != cuda::success) {
            lane->stream_ = nullptr;
            return env.driver().error("cuStreamCreate", st);
        }
        auto source = gpu_async::cuda_source::create(env.line_of(lane->slot_),
                                                     cuda_env::slot_of(lane->slot_), lane->stream_);
        if (!source.has_value()) return source.error();
        lane->source_.emplace(std::move(source).value());
        return lane;
    }

    cuda_lane(const cuda_lane&) = delete;
    cuda_lane& operator=(const cuda_lane&) = delete;

    ~cuda_lane() {
        const auto& a = env_->driver().api();
        if (stream_ != nullptr) {
            // Every store of the slot lands before the slot is given to another stream.
            static_cast<void>(a.stream_synchronize(stream_));
            source_.reset();
            static_cast<void>(a.stream_destroy(stream_));
        }
        env_->give_back(slot_);
    }

    // A memset of 1 MiB per microsecond of `work_us`, at most the buffer (sized from --work-us).
    std::optional<gpu_async::coded_error> launch(unsigned work_us) {
        const std::size_t bytes =
            std::min(env_->bytes(), static_cast<std::size_t>(work_us) * cuda_env::bytes_per_us);
        if (bytes == 0) return std::nullopt;
        const auto st = env_->driver().api().memset_d8_async(env_->buffer(), 0x5a, bytes, stream_);
        if (st != gpu_async::cuda::success) return env_->driver().error("cuMemsetD8Async", st);
        return std::nullopt;
    }
    gpu_async::result<gpu_async::memory_descriptor> mark() {
        return env_->line_of(slot_).store(cuda_env::slot_of(slot_), stream_);
    }
    gpu_async::cuda_source& source() { return *source_; }
    std::uint64_t stored_at() const { return 0; }

private:
    cuda_lane(cuda_env& env, unsigned slot)
        : env_(&env)
        , slot_(slot) {}

    cuda_env* env_;
    unsigned slot_;
    gpu_async::cuda::stream_t stream_ = nullptr;
    std::optional<gpu_async::cuda_source> source_;
};

// A Vulkan device of the demo's own, the spin shader calibrated on it, one command pool, and the
// lines whose slots the connections store into (eight per line, slots reused). Each connection
// takes a slot, a timeline semaphore and a command buffer, and gives them back when it ends; the
// semaphores and command buffers are destroyed only with the environment, after the device went
// idle, since a line's batch may still wait on a semaphore after its connection is gone. Used on
// the server thread only (and the main thread once the server has stopped).
class vulkan_env {
public:
    // What a connection holds: its slot, its semaphore (signalled at `value` by its last
    // submission) and its command buffer.
    struct lane_objects {
        unsigned slot = 0;
        gpu_async::vulkan::semaphore_t semaphore{};
        std::uint64_t value = 0;
        gpu_async::vulkan::command_buffer_t command_buffer{};
    };

    static gpu_async::result<std::unique_ptr<vulkan_env>> open() {
        namespace vk = gpu_async::vulkan;
        auto loader = gpu_async::vulkan_loader::load();
        if (!loader.has_value()) return loader.error();
        auto device = gpu_async::vulkan_device::create(*loader.value());
        if (!device.has_value()) return device.error();
        std::unique_ptr<vulkan_env> env(new vulkan_env(std::move(device).value()));
        env->spin_.emplace(*env->device_);
        if (auto e = env->spin_->open()) return *e;
        vk::command_pool_create_info info{};
        info.flags = vk::command_pool_create_reset_command_buffer_bit;
        info.queue_family_index = env->device_->queue_family();
        if (const auto r = env->api().create_command_pool(env->dev(), &info, nullptr, &env->pool_);
            r != vk::success)
            return env->device_->error("vkCreateCommandPool", r);
        return env;
    }

    vulkan_env(const vulkan_env&) = delete;
    vulkan_env& operator=(const vulkan_env&) = delete;

    ~vulkan_env() {
        lines_.clear(); // each retires its waits and awaits its stores before its memory goes
        static_cast<void>(api().device_wait_idle(dev()));
        for (const lane_objects& l : free_) {
            api().destroy_semaphore(dev(), l.semaphore, nullptr);
            api().free_command_buffers(dev(), pool_, 1, &l.command_buffer);
        }
        if (pool_ != gpu_async::vulkan::command_pool_t{})
            api().destroy_command_pool(dev(), pool_, nullptr);
        spin_.reset();
    }

    gpu_async::vulkan_device& device() { return *device_; }
    const gpu_async::bench::vulkan_spin& spin() const { return *spin_; }
    const gpu_async::vulkan::device_api& api() const { return device_->api(); }
    gpu_async::vulkan::device_t dev() const { return device_->device(); }

    // A connection's objects: given back ones, once their last submission has run (its command
    // buffer is then no longer pending), or new ones (a new line when every slot is taken).
    gpu_async::result<lane_objects> take() {
        namespace vk = gpu_async::vulkan;
        if (!free_.empty()) {
            lane_objects l = free_.back();
            vk::semaphore_wait_info wait{};
            wait.semaphore_count = 1;
            wait.semaphores = &l.semaphore;
            wait.values = &l.value;
            if (const auto r = api().wait_semaphores(dev(), &wait, 10'000'000'000ull);
                r != vk::success)
                return device_->error("vkWaitSemaphores", r);
            free_.pop_back();
            return l;
        }
        lane_objects l;
        l.slot = next_;
        if (l.slot / gpu_async::line_words >= lines_.size()) {
            auto line = gpu_async::vulkan_line::create(*device_);
            if (!line.has_value()) return line.error();
            lines_.push_back(std::make_unique<gpu_async::vulkan_line>(std::move(line).value()));
        }
        vk::semaphore_type_create_info type{};
        type.semaphore_type = vk::semaphore_type_timeline;
        vk::semaphore_create_info sem_info{};
        sem_info.next = &type;
        if (const auto r = api().create_semaphore(dev(), &sem_info, nullptr, &l.semaphore);
            r != vk::success)
            return device_->error("vkCreateSemaphore", r);
        vk::command_buffer_allocate_info alloc{};
        alloc.command_pool = pool_;
        alloc.command_buffer_count = 1;
        if (const auto r = api().allocate_command_buffers(dev(), &alloc, &l.command_buffer);
            r != vk::success) {
            api().destroy_semaphore(dev(), l.semaphore, nullptr);
            return device_->error("vkAllocateCommandBuffers", r);
        }
        ++next_;
        return l;
    }
    void give_back(const lane_objects& l) { free_.push_back(l); }

    gpu_async::vulkan_line& line_of(unsigned n) { return *lines_[n / gpu_async::line_words]; }
    static gpu_async::slot_id slot_of(unsigned n) {
        return *gpu_async::slot_id::at(n % gpu_async::line_words);
    }

private:
    explicit vulkan_env(std::unique_ptr<gpu_async::vulkan_device> device)
        : device_(std::move(device)) {}

    std::unique_ptr<gpu_async::vulkan_device> device_; // before all that uses it
    std::optional<gpu_async::bench::vulkan_spin> spin_;
    gpu_async::vulkan::command_pool_t pool_{};
    std::vector<std::unique_ptr<gpu_async::vulkan_line>> lines_;
    std::vector<lane_objects> free_;
    unsigned next_ = 0;
};

// A connection's Vulkan lane: each request is one submission of the spin shader that signals the
// lane's timeline semaphore at its next value; the store is the line's batch that awaits it.
class vulkan_lane {
public:
    static gpu_async::result<std::unique_ptr<vulkan_lane>> make(vulkan_env& env) {
        auto objects = env.take();
        if (!objects.has_value()) return objects.error();
        std::unique_ptr<vulkan_lane> lane(new vulkan_lane(env, objects.value()));
        auto source = gpu_async::vulkan_source::create(
            env.line_of(lane->o_.slot), vulkan_env::slot_of(lane->o_.slot), lane->o_.semaphore);
        if (!source.has_value()) return source.error();
        lane->source_.emplace(std::move(source).value());
        lane->source_->set_target(lane->o_.value);
        return lane;
    }

    vulkan_lane(const vulkan_lane&) = delete;
    vulkan_lane& operator=(const vulkan_lane&) = delete;
    ~vulkan_lane() { env_->give_back(o_); }

    // The spin shader for `work_us`, recorded afresh (the lane's last submission has run: it
    // was awaited) and submitted signalling the semaphore at the next value.
    std::optional<gpu_async::coded_error> launch(unsigned work_us) {
        namespace vk = gpu_async::vulkan;
        const auto& a = env_->api();
        const vk::command_buffer_t cb = o_.command_buffer;
        if (const auto r = a.reset_command_buffer(cb, 0); r != vk::success)
            return env_->device().error("vkResetCommandBuffer", r);
        vk::command_buffer_begin_info begin{};
        begin.flags = vk::command_buffer_usage_one_time_submit_bit;
        if (const auto r = a.begin_command_buffer(cb, &begin); r != vk::success)
            return env_->device().error("vkBeginCommandBuffer", r);
        env_->spin().record(cb, work_us);
        if (const auto r = a.end_command_buffer(cb); r != vk::success)
            return env_->device().error("vkEndCommandBuffer", r);
        const std::uint64_t value = o_.value + 1;
        vk::timeline_semaphore_submit_info timeline{};
        timeline.signal_semaphore_value_count = 1;
        timeline.signal_semaphore_values = &value;
        vk::submit_info info{};
        info.next = &timeline;
        info.command_buffer_count = 1;
        info.command_buffers = &cb;
        info.signal_semaphore_count = 1;
        info.signal_semaphores = &o_.semaphore;
        if (const auto r = env_->device().submit(1, &info); r != vk::success)
            return env_->device().error("vkQueueSubmit", r);
        o_.value = value;
        source_->set_target(value);
        return std::nullopt;
    }
    gpu_async::result<gpu_async::memory_descriptor> mark() {
        return env_->line_of(o_.slot).await_semaphore(vulkan_env::slot_of(o_.slot), o_.semaphore,
                                                      o_.value);
    }
    gpu_async::vulkan_source& source() { return *source_; }
    std::uint64_t stored_at() const { return 0; }

private:
    vulkan_lane(vulkan_env& env, const vulkan_env::lane_objects& o)
        : env_(&env)
        , o_(o) {}

    vulkan_env* env_;
    vulkan_env::lane_objects o_;
    std::optional<gpu_async::vulkan_source> source_;
};

// ---------------------------------------------------------------------------------------------
// Servers: the common part (what run() reads) and one class per way of serving.

class server {
public:
    server(const options& o, cuda_env* cuda, vulkan_env* vulkan)
        : opts_(o)
        , cuda_(cuda)
        , vulkan_(vulkan) {}
    virtual ~server() = default;

    virtual unsigned short port() const = 0;
    virtual void start() = 0;
    virtual void stop() = 0;
    // The label of what runs (read after stop()).
    virtual std::string label() const { return std::string(gpu_async::to_string(opts_.runs)); }
    // The same in words, for the summary (read after stop()).
    virtual std::string label_words() const { return executor_words(opts_.runs, opts_.mode); }

    // Requests whose device work was awaited and answered.
    std::uint64_t served() const { return served_.load(std::memory_order_relaxed); }
    // --http: responses handed to the socket (any status), those not 2xx, connections accepted.
    std::uint64_t http_responses() const { return http_responses_.load(); }
    std::uint64_t http_not_2xx() const { return http_not_2xx_.load(); }
    std::uint64_t connections() const { return connections_.load(); }
    // Read after stop().
    const std::vector<std::uint64_t>& c2h() const { return c2h_; }
    std::uint64_t thread_cpu_ns() const { return thread_cpu_ns_.load(); }
    // The simulated device workers' CPU so far (read while the device lives).
    std::uint64_t device_cpu_ns() const { return device_threads_.total_ns(); }
    const std::string& error() const { return error_; }

protected:
    // On the server thread: the first failure is kept (the run then exits 1).
    void fail(std::string why) {
        if (error_.empty()) error_ = std::move(why);
    }

    // On the server thread: a request was answered; `stored` is when the device stored (0:
    // unknown), `now` when the handler ran. Returns the completion-to-handler latency.
    std::uint64_t record(std::uint64_t stored, std::uint64_t now = now_ns()) {
        const std::uint64_t c2h = stored != 0 && now > stored ? now - stored : 0;
        if (stored != 0) c2h_.push_back(c2h);
        served_.fetch_add(1, std::memory_order_relaxed);
        return c2h;
    }

    const options& opts_;
    cuda_env* cuda_;
    vulkan_env* vulkan_;
    gpu_async::bench::thread_cpu_set device_threads_;
    gpu_async::point_table<int> table_; // server thread only
    std::vector<std::uint64_t> c2h_;    // server thread only, until stop()
    std::atomic<std::uint64_t> served_{0};
    std::atomic<std::uint64_t> http_responses_{0};
    std::atomic<std::uint64_t> http_not_2xx_{0};
    std::atomic<std::uint64_t> connections_{0};
    std::atomic<std::uint64_t> thread_cpu_ns_{0};
    std::string error_;
};

// gpu-reactor and naive: Asio sockets on one io_context.
class asio_server final : public server {
public:
    asio_server(const options& o, cuda_env* cuda, vulkan_env* vulkan)
        : server(o, cuda, vulkan)
        , device_(gpu_async::sim_device::options{1, false})
        , acceptor_(ctx_, tcp::endpoint(asio::ip::address_v4::loopback(),
                                        static_cast<unsigned short>(o.port))) {
        if (o.runs == executor_kind::fill) port_.emplace(ctx_);
    }

    unsigned short port() const override { return acceptor_.local_endpoint().port(); }

    void start() override {
        asio::co_spawn(ctx_, accept_loop(), asio::detached);
        thread_ = std::thread([this] { main(); });
    }

    void stop() override {
        ctx_.stop();
        if (thread_.joinable()) thread_.join();
    }

    ~asio_server() override { stop(); }

private:
    void main() {
        const std::uint64_t cpu0 = gpu_async::bench::thread_cpu_ns();
        try {
            if (cuda_ != nullptr)
                if (auto e = cuda_->make_current()) throw std::runtime_error(e->message());
            if (opts_.runs == executor_kind::fill && opts_.mode == wait_mode::fill)
                gpu_async::run_fill(ctx_);
            else
                ctx_.run();
        } catch (const std::exception& e) {
            fail(e.what());
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
        connections_.fetch_add(1);
        boost::system::error_code opt_ec;
        socket.set_option(tcp::no_delay(true), opt_ec);
        if (cuda_ != nullptr) {
            auto lane = cuda_lane::make(*cuda_);
            if (!lane.has_value()) {
                fail(lane.error().message());
                co_return;
            }
            co_await serve_either(socket, *lane.value());
        } else if (vulkan_ != nullptr) {
            auto lane = vulkan_lane::make(*vulkan_);
            if (!lane.has_value()) {
                fail(lane.error().message());
                co_return;
            }
            co_await serve_either(socket, *lane.value());
        } else {
            auto stream_handle = device_.make_stream();
            gpu_async::sim_stream& stream = *stream_handle;
            if (port_) stream.set_doorbell(port_->shared_bell());
            sim_lane lane(stream, device_threads_);
            co_await serve_either(socket, lane);
        }
    }

    template <class Lane>
    asio::awaitable<void> serve_either(tcp::socket& socket, Lane& lane) {
        if (opts_.http)
            co_await serve_http(socket, lane);
        else
            co_await serve(socket, lane);
    }

    // Launches `work_us` of device work on the lane and awaits it, as the executor and --wait
    // say; `*launched` (if given) is when the launch returned. False when the session should
    // end: a failure (kept by fail()) or the server stopping.
    template <class Lane>
    asio::awaitable<bool> launch_and_await(Lane& lane, unsigned work_us,
                                           std::uint64_t* launched = nullptr) {
        if (auto e = lane.launch(work_us)) {
            fail(e->message());
            co_return false;
        }
        if (launched != nullptr) *launched = now_ns();
        if (opts_.runs == executor_kind::naive) {
            // The blocking wait, inline: the io_context thread waits here.
            const auto r = gpu_async::wait_blocking(lane.source(), opts_.inline_plan, table_, 0);
            if (!r.has_value()) {
                fail("device wait: " + r.message());
                co_return false;
            }
        } else if (opts_.mode == wait_mode::plan) {
            auto [e, report] = co_await port_->async_wait(lane.source(), *opts_.plan, "request",
                                                          asio::as_tuple(asio::use_awaitable));
            if (e) {
                if (e != asio::error::operation_aborted) fail("device wait: " + e.message());
                co_return false;
            }
        } else {
            auto d = lane.mark();
            if (!d.has_value()) {
                fail(d.error().message());
                co_return false;
            }
            auto [e] = co_await port_->async_wait(d.value(), asio::as_tuple(asio::use_awaitable));
            if (e) co_return false;
        }
        co_return true;
    }

    // The demo's own protocol: 16-byte messages, one request at a time.
    template <class Lane>
    asio::awaitable<void> serve(tcp::socket& socket, Lane& lane) {
        message msg{};
        for (;;) {
            auto [rec, n] = co_await asio::async_read(socket, asio::buffer(msg),
                                                      asio::as_tuple(asio::use_awaitable));
            if (rec || n != sizeof msg) co_return;
            if (!co_await launch_and_await(lane, opts_.work_us)) co_return;
            msg[1] = record(lane.stored_at());
            auto [wrec, wn] = co_await asio::async_write(socket, asio::buffer(msg),
                                                         asio::as_tuple(asio::use_awaitable));
            if (wrec || wn != sizeof msg) co_return;
        }
    }

    // --http: HTTP/1.1 through Beast, keep-alive, one request at a time per connection (a
    // pipelined request waits its turn). GET /work?us=N runs N us of device work, awaits it and
    // answers with its timings (see http_work_reply); anything else gets an error status.
    template <class Lane>
    asio::awaitable<void> serve_http(tcp::socket& socket, Lane& lane) {
        beast::flat_buffer buffer;
        for (;;) {
            http::request<http::string_body> req;
            auto [rec, rn] =
                co_await http::async_read(socket, buffer, req, asio::as_tuple(asio::use_awaitable));
            if (rec) break; // the client closed, reset, or sent what is not HTTP
            const std::uint64_t received = now_ns();
            std::uint64_t launched = 0;
            http::response<http::string_body> res{http::status::ok, req.version()};
            res.set(http::field::server, "gpu-async-demo/" GPU_ASYNC_VERSION_STRING);
            res.set(http::field::content_type, "application/json");
            res.keep_alive(req.keep_alive());
            const http_route route = route_http(req, opts_.work_us);
            if (route.status != http::status::ok) {
                res.result(route.status);
                if (route.status == http::status::method_not_allowed)
                    res.set(http::field::allow, "GET");
                res.body() = http_error_body(route.error);
            } else if (!co_await launch_and_await(lane, route.work_us, &launched)) {
                res.result(http::status::internal_server_error);
                res.keep_alive(false);
                res.body() = http_error_body(error_.empty() ? "the server is stopping"
                                                            : "device work failed: " + error_);
            } else {
                const std::uint64_t handler = now_ns();
                const std::uint64_t stored = lane.stored_at();
                const std::uint64_t c2h = record(stored, handler);
                const auto since = [received](std::uint64_t t) -> boost::json::value {
                    if (t == 0) return nullptr;
                    return t > received ? t - received : 0;
                };
                boost::json::object j;
                j["version"] = GPU_ASYNC_VERSION_STRING;
                j["request"] = served();
                j["work_us"] = route.work_us;
                j["device"] = opts_.device;
                j["executor"] = gpu_async::to_string(opts_.runs);
                j["wait"] = opts_.wait_label;
                j["times_ns"] = boost::json::object{{"received", 0},
                                                    {"launched", since(launched)},
                                                    {"completed", since(stored)},
                                                    {"handler", since(handler)}};
                if (stored != 0)
                    j["completion_to_handler_ns"] = c2h;
                else
                    j["completion_to_handler_ns"] = nullptr;
                res.body() = boost::json::serialize(j) + "\n";
            }
            res.prepare_payload();
            // Counted when handed to the socket, so a client that has read every response finds
            // each counted however soon the server is stopped after.
            http_responses_.fetch_add(1);
            if (res.result_int() / 100 != 2) http_not_2xx_.fetch_add(1);
            auto [wec, wn] =
                co_await http::async_write(socket, res, asio::as_tuple(asio::use_awaitable));
            if (wec || !res.keep_alive()) break;
        }
        boost::system::error_code ignored;
        socket.shutdown(tcp::socket::shutdown_send, ignored);
    }

    // Destroyed in reverse: the port (its waits cancelled: the reactor watches no line of the
    // device after) before the device, the device before the io_context (whose reactor service
    // owns the doorbell the device's streams ring).
    asio::io_context ctx_;
    gpu_async::sim_device device_;
    std::optional<gpu_async::gpu_completion_port> port_;
    tcp::acceptor acceptor_;
    std::thread thread_;
};

#if GPU_ASYNC_HAS_LIBURING

// io-uring: one thread, one ring for the sockets and the device waits (FILL on uring_idle).
class ring_server final : public server {
public:
    ring_server(const options& o, cuda_env* cuda, vulkan_env* vulkan, gpu_async::uring_idle idle)
        : server(o, cuda, vulkan)
        , device_(gpu_async::sim_device::options{1, false})
        , idle_(std::move(idle)) {
        listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (listen_fd_ < 0)
            throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
        const int one = 1;
        ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        addr.sin_port = htons(static_cast<std::uint16_t>(o.port));
        socklen_t len = sizeof addr;
        if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
            ::listen(listen_fd_, 1024) != 0 ||
            ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
            const int err = errno;
            ::close(listen_fd_);
            throw std::runtime_error("cannot listen on 127.0.0.1:" + std::to_string(o.port) + ": " +
                                     std::strerror(err));
        }
        port_ = ntohs(addr.sin_port);
    }

    unsigned short port() const override { return port_; }

    void start() override {
        thread_ = std::thread([this] { main(); });
    }

    void stop() override {
        stop_.store(true);
        if (thread_.joinable()) thread_.join();
    }

    // E.g. "io-uring (failed ops: 0), parks via io_uring futex wait".
    std::string label() const override {
        return label_.empty() ? idle_.describe() + ", parks via " + idle_.park_path() : label_;
    }
    // E.g. "io-uring (the library's GPU-aware executor on a Linux io_uring ring; operations the
    // ring refused: 0; idle waits park via io_uring futex wait)".
    std::string label_words() const override {
        if (!words_.empty()) return words_;
        std::string w = executor_words(opts_.runs, opts_.mode);
        w.pop_back(); // its closing parenthesis
        return w + "; operations the ring refused: " + std::to_string(idle_.failed_ops()) +
               "; idle waits park via " + idle_.park_path() + ")";
    }

    ~ring_server() override {
        stop();
        ::close(listen_fd_);
    }

private:
    void main() {
        const std::uint64_t cpu0 = gpu_async::bench::thread_cpu_ns();
        std::optional<gpu_async::coded_error> cuda_error;
        if (cuda_ != nullptr) cuda_error = cuda_->make_current();
        if (cuda_error) {
            fail(cuda_error->message());
        } else {
            if (cuda_ == nullptr) idle_.set_doorbell(&bell_);
            ex_.spawn(acceptor());
            ex_.spawn(keep_alive());
            auto stats = ex_.run(idle_);
            if (!stats.has_value()) fail("executor: " + stats.error().message());
            label_ = idle_.describe() + ", parks via " + idle_.park_path();
            words_ = label_words();
            idle_.set_doorbell(nullptr);
        }
        thread_cpu_ns_.store(gpu_async::bench::thread_cpu_ns() - cpu0);
    }

    template <class Prep>
    auto on_ring(Prep prep) {
        return gpu_async::examples::on_ring(idle_, ex_, prep);
    }

    gpu_async::fill_task<> acceptor() {
        for (;;) {
            const int fd = co_await on_ring([this](io_uring_sqe* sqe) {
                io_uring_prep_accept(sqe, listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
            });
            if (fd < 0) {
                if (!stop_.load()) fail(std::string("accept: ") + std::strerror(-fd));
                break;
            }
            if (shut_) {
                ::close(fd);
                continue;
            }
            const int one = 1;
            ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            open_.insert(fd);
            ex_.spawn(connection(fd));
        }
        accepting_ = false;
    }

    // While the server runs, an alarm stays registered: the reactor then sleeps in the ring (a
    // ring timeout), which a socket completion ends at once. On stop it shuts the sockets down,
    // so the pending accept and receives end, and returns once every socket is closed.
    gpu_async::fill_task<> keep_alive() {
        while (accepting_ || !open_.empty()) {
            if (stop_.load() && !shut_) {
                shut_ = true;
                ::shutdown(listen_fd_, SHUT_RDWR);
                for (int fd : open_)
                    ::shutdown(fd, SHUT_RDWR);
            }
            co_await ex_.get_reactor().alarm(clk_.now().after(gpu_async::dur_ns::from_ms(5)));
        }
    }

    gpu_async::fill_task<> connection(int fd) {
        if (cuda_ != nullptr) {
            auto lane = cuda_lane::make(*cuda_);
            if (!lane.has_value())
                fail(lane.error().message());
            else
                co_await serve(fd, *lane.value());
        } else if (vulkan_ != nullptr) {
            auto lane = vulkan_lane::make(*vulkan_);
            if (!lane.has_value())
                fail(lane.error().message());
            else
                co_await serve(fd, *lane.value());
        } else {
            auto stream_handle = device_.make_stream();
            gpu_async::sim_stream& stream = *stream_handle;
            stream.set_doorbell(bell_owner_);
            sim_lane lane(stream, device_threads_);
            co_await serve(fd, lane);
        }
        co_await on_ring([fd](io_uring_sqe* sqe) { io_uring_prep_close(sqe, fd); });
        open_.erase(fd);
    }

    template <class Lane>
    gpu_async::fill_task<> serve(int fd, Lane& lane) {
        const gpu_async::wait_plan& plan = opts_.inline_plan;
        message msg{};
        char* const bytes = reinterpret_cast<char*>(msg.data());
        for (;;) {
            for (std::size_t got = 0; got < sizeof msg;) {
                const int n = co_await on_ring([&](io_uring_sqe* sqe) {
                    io_uring_prep_recv(sqe, fd, bytes + got, sizeof msg - got, 0);
                });
                if (n <= 0) co_return;
                got += static_cast<std::size_t>(n);
            }
            if (auto e = lane.launch(opts_.work_us)) {
                fail(e->message());
                co_return;
            }
            std::optional<std::uint64_t> sleep;
            if (plan.predict()) sleep = table_.sleep_ns(0, *plan.predict());
            const auto r =
                co_await gpu_async::fill_wait(ex_.get_reactor(), lane.source(), plan, sleep, clk_);
            if (!r.has_value()) {
                fail("device wait: " + r.message());
                co_return;
            }
            if (plan.predict() && r.value().outcome)
                table_.observe(0, *plan.predict(), *r.value().outcome);
            msg[1] = record(lane.stored_at());
            for (std::size_t sent = 0; sent < sizeof msg;) {
                const int n = co_await on_ring([&](io_uring_sqe* sqe) {
                    io_uring_prep_send(sqe, fd, bytes + sent, sizeof msg - sent, MSG_NOSIGNAL);
                });
                if (n <= 0) co_return;
                sent += static_cast<std::size_t>(n);
            }
        }
    }

    // Destroyed in reverse: the tasks, then the ring, then the device (its workers joined), then
    // the doorbell they and the ring's futex waits use.
    std::shared_ptr<gpu_async::doorbell> bell_owner_ = std::make_shared<gpu_async::doorbell>();
    gpu_async::doorbell& bell_ = *bell_owner_;
    gpu_async::sim_device device_;
    gpu_async::uring_idle idle_;
    gpu_async::fill_executor ex_;
    gpu_async::std_clock clk_;
    int listen_fd_ = -1;
    unsigned short port_ = 0;
    std::thread thread_;
    std::atomic<bool> stop_{false};
    bool shut_ = false;     // server thread only
    bool accepting_ = true; // server thread only
    std::set<int> open_;    // server thread only
    std::string label_;     // server thread, until stop()
    std::string words_;     // server thread, until stop()
};

#endif // GPU_ASYNC_HAS_LIBURING

// The server the options ask for (after resolution).
std::unique_ptr<server> make_server(const options& o, cuda_env* cuda, vulkan_env* vulkan) {
#if GPU_ASYNC_HAS_LIBURING
    if (o.runs == executor_kind::io_uring) {
        auto idle = gpu_async::examples::make_ring(o.fail_ring);
        // Resolved a moment ago; a second ring may still be refused.
        if (!idle.has_value()) throw std::runtime_error(idle.error().message());
        return std::make_unique<ring_server>(o, cuda, vulkan, std::move(idle).value());
    }
#endif
    return std::make_unique<asio_server>(o, cuda, vulkan);
}

// ---------------------------------------------------------------------------------------------
// Load generator

class client {
public:
    client(const options& o, tcp::endpoint ep)
        : opts_(o)
        , endpoint_(ep) {}

    void start(std::uint64_t end_ns) {
        end_ns_.store(end_ns, std::memory_order_relaxed);
        for (unsigned i = 0; i < opts_.connections; ++i)
            asio::co_spawn(ctx_, connection(i), asio::detached);
        thread_ = std::thread([this] {
            const std::uint64_t cpu0 = gpu_async::bench::thread_cpu_ns();
            // Bounded: the connections end at end_ns; a silent server is given 5 s more.
            const auto left = std::chrono::nanoseconds(end_ns_.load() - now_ns());
            ctx_.run_for(left + std::chrono::seconds(5));
            if (!ctx_.stopped()) timed_out_ = true;
            cpu_ns_.store(gpu_async::bench::thread_cpu_ns() - cpu0);
        });
    }

    void join() {
        if (thread_.joinable()) thread_.join();
    }
    ~client() { join(); }

    // Any thread: each connection ends after its request in flight.
    void stop_early() { end_ns_.store(now_ns(), std::memory_order_relaxed); }

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
        if (opts_.http)
            co_await http_requests(socket);
        else
            co_await requests(socket, index);
        boost::system::error_code ignored;
        socket.shutdown(tcp::socket::shutdown_both, ignored);
    }

    // The demo's own protocol: each reply echoes the request's id.
    asio::awaitable<void> requests(tcp::socket& socket, unsigned index) {
        message msg{};
        std::uint64_t id = static_cast<std::uint64_t>(index) << 40;
        while (now_ns() < end_ns_.load(std::memory_order_relaxed)) {
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
    }

    // --http: GET /work?us=<--work-us> over one keep-alive connection; each reply must be 200
    // with the JSON timings of that much work (its completion-to-handler time is recorded).
    asio::awaitable<void> http_requests(tcp::socket& socket) {
        http::request<http::empty_body> req{http::verb::get,
                                            "/work?us=" + std::to_string(opts_.work_us), 11};
        req.set(http::field::host,
                endpoint_.address().to_string() + ":" + std::to_string(endpoint_.port()));
        req.set(http::field::user_agent, "gpu-async-demo load generator");
        req.keep_alive(true);
        beast::flat_buffer buffer;
        while (now_ns() < end_ns_.load(std::memory_order_relaxed)) {
            const std::uint64_t t0 = now_ns();
            auto [wec, wn] =
                co_await http::async_write(socket, req, asio::as_tuple(asio::use_awaitable));
            if (wec) {
                fail(wec);
                co_return;
            }
            http::response<http::string_body> res;
            auto [rec, rn] =
                co_await http::async_read(socket, buffer, res, asio::as_tuple(asio::use_awaitable));
            if (rec) {
                fail(rec);
                co_return;
            }
            const std::uint64_t t1 = now_ns();
            boost::system::error_code jec;
            const boost::json::value body = boost::json::parse(res.body(), jec);
            const boost::json::object* j = jec ? nullptr : body.if_object();
            const boost::json::value* work = j != nullptr ? j->if_contains("work_us") : nullptr;
            const boost::json::value* c2h =
                j != nullptr ? j->if_contains("completion_to_handler_ns") : nullptr;
            if (res.result() != http::status::ok || work == nullptr || !work->is_int64() ||
                work->as_int64() != static_cast<std::int64_t>(opts_.work_us) || c2h == nullptr ||
                !res.keep_alive()) {
                fail({}, "HTTP " + std::to_string(res.result_int()) + ": " + res.body());
                co_return;
            }
            latency_.push_back(t1 - t0);
            c2h_.push_back(c2h->is_int64() ? static_cast<std::uint64_t>(c2h->as_int64()) : 0);
            done_.fetch_add(1, std::memory_order_relaxed);
        }
    }

    void fail(const boost::system::error_code& ec, std::string what = {}) {
        if (failed_.fetch_add(1) == 0)
            first_error_ = ec             ? ec.message()
                           : what.empty() ? std::string("short read/write or wrong reply")
                                          : std::move(what);
    }

    const options& opts_;
    tcp::endpoint endpoint_;
    asio::io_context ctx_{1};
    std::thread thread_;
    std::atomic<std::uint64_t> end_ns_{0};
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
    std::uint64_t wall_ns = 0;
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
    std::string executor;       // the label of what ran (server runs)
    std::string executor_words; // the same in words
    std::string stopped_by;     // "SIGINT" or "SIGTERM" when a signal ended the run
    // --http, server runs: responses sent (any status), those not 2xx, connections accepted.
    bool have_http = false;
    std::uint64_t http_responses = 0, http_not_2xx = 0, http_connections = 0;
};

std::string mode_text(const options& o) {
    if (o.server_only) return "server-only";
    if (o.client_only) return "client-only";
    return "server + load generator";
}

// What ran, in words: "a TCP server and the built-in load generator".
std::string mode_words(const options& o) {
    const std::string server = o.http ? "an HTTP/1.1 server" : "a TCP server";
    const std::string load =
        o.http ? "the built-in HTTP load generator" : "the built-in load generator";
    if (o.server_only) return server;
    if (o.client_only) return load + " against " + server;
    return server + " and " + load;
}

void print_table(const options& o, const results& r, unsigned short port) {
    auto us = [](double ns) { return gpu_async::bench::format_ns(ns); };
    auto row = [](const char* what, const std::string& value) {
        std::printf("  %-52s %s\n", what, value.c_str());
    };
    auto cpu = [&](const char* what, double s_per_s) {
        char text[48];
        std::snprintf(text, sizeof text, "%.1f %% of one core", 100 * s_per_s);
        row(what, text);
    };
    const std::string gpu = o.device == "cuda"     ? "CUDA GPU 0"
                            : o.device == "vulkan" ? "Vulkan device " + o.device_name
                                                   : "simulated GPU";
    std::printf("\ngpu-async-demo summary: %s on 127.0.0.1:%u, %s\n", mode_words(o).c_str(),
                static_cast<unsigned>(port), gpu.c_str());
    if (!o.client_only)
        std::printf("  executor: %s, wait: %s\n", r.executor_words.c_str(), wait_words(o).c_str());
    if (!r.stopped_by.empty() && o.until_signal)
        std::printf("  stopped by %s\n", r.stopped_by.c_str());
    else if (!r.stopped_by.empty())
        std::printf("  stopped early by %s (asked: %.1f s)\n", r.stopped_by.c_str(), o.duration_s);
    const std::string work =
        o.http && o.server_only
            ? "GPU work as each request asks (GET /work?us=N; N = " + std::to_string(o.work_us) +
                  " when not given)"
            : std::to_string(o.work_us) + " us of GPU work per request";
    if (o.server_only)
        std::printf("  %s, ran %.1f s\n\n", work.c_str(), r.wall_s);
    else
        std::printf("  %u client connections, %s, ran %.1f s\n\n", o.connections, work.c_str(),
                    r.wall_s);
    row("what", "value");
    row("----------------------------------------------------", "------------------");
    row("requests answered", std::to_string(r.requests));
    row("requests/s", std::to_string(std::llround(
                          r.wall_s > 0 ? static_cast<double>(r.requests) / r.wall_s : 0.0)));
    if (r.have_http) {
        row("HTTP responses sent (any status)", std::to_string(r.http_responses));
        row("HTTP responses not 2xx (errors)", std::to_string(r.http_not_2xx));
        row("HTTP connections accepted", std::to_string(r.http_connections));
    }
    if (r.have_latency) {
        row("request latency p50 (request sent to reply read)", us(r.latency.p50));
        row("request latency p99", us(r.latency.p99));
    }
    if (r.have_c2h) {
        row("completion-to-handler latency p50", us(r.c2h.p50));
        row("completion-to-handler latency p99", us(r.c2h.p99));
    }
    if (r.have_server_cpu) {
        cpu("CPU: server thread", r.server_thread_cpu);
        cpu(o.runs == executor_kind::fill && o.mode == wait_mode::service
                ? "CPU: server thread + the library's watcher thread"
                : "CPU: server thread + any helper thread",
            r.server_side_cpu);
        if (o.device == "sim")
            cpu("CPU: simulated GPU's threads (not counted above)", r.device_cpu);
    }
    if (!o.server_only) cpu("CPU: built-in load generator", r.client_cpu);
    cpu("CPU: whole process", r.process_cpu);
    if (r.failed_connections != 0)
        row("failed connections",
            std::to_string(r.failed_connections) + " (" + r.first_error + ")");
    std::printf("\n  CPU: how busy each part kept one core over the run (200 %% would be two whole "
                "cores).\n");
    if (o.device != "sim")
        std::printf("  Completion-to-handler latency is not measured on a real device: the "
                    "computer cannot see\n  when the device wrote its completion word.\n");
    else
        std::printf("  Completion-to-handler latency: from the GPU work finishing (the simulated "
                    "GPU notes the\n  time just before it writes its completion word) to the "
                    "server's code for that request\n  starting to run.\n");
}

// Nanoseconds as an integer.
std::uint64_t whole_ns(double ns) {
    return ns > 0 ? static_cast<std::uint64_t>(std::llround(ns)) : 0;
}

boost::json::object ns_summary(const gpu_async::bench::summary& s) {
    return {{"p50", whole_ns(s.p50)},
            {"p90", whole_ns(s.p90)},
            {"p99", whole_ns(s.p99)},
            {"max", whole_ns(s.max)}};
}

void print_json(const options& o, const results& r, unsigned short port) {
    boost::json::object j;
    j["version"] = GPU_ASYNC_VERSION_STRING;
    j["mode"] = mode_text(o);
    j["protocol"] = o.http ? "http" : "demo";
    j["port"] = port;
    j["device"] = o.device;
    if (!o.client_only) {
        j["executor_requested"] = gpu_async::to_string(o.requested);
        j["executor"] = r.executor;
        j["wait"] = o.wait_label;
    }
    j["connections"] = o.connections;
    j["work_us"] = o.work_us;
    j["wall_ns"] = r.wall_ns;
    if (!r.stopped_by.empty()) j["stopped_by"] = r.stopped_by;
    j["requests"] = r.requests;
    j["requests_per_s"] = r.wall_s > 0 ? static_cast<double>(r.requests) / r.wall_s : 0.0;
    if (r.have_latency) j["request_latency_ns"] = ns_summary(r.latency);
    if (r.have_c2h) j["completion_to_handler_ns"] = ns_summary(r.c2h);
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
    if (r.have_http)
        j["http"] = boost::json::object{{"responses", r.http_responses},
                                        {"not_2xx", r.http_not_2xx},
                                        {"connections", r.http_connections}};
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
        const double at = static_cast<double>(t - start_ns) / 1e9;
        if (o.until_signal)
            std::fprintf(out, "%s[%7.1f s] %10llu requests, %9.0f req/s%s", tty ? "\r" : "", at,
                         static_cast<unsigned long long>(c), rate, tty ? "  " : "\n");
        else
            std::fprintf(out, "%s[%5.1f / %.1f s] %10llu requests, %9.0f req/s%s", tty ? "\r" : "",
                         at, o.duration_s, static_cast<unsigned long long>(c), rate,
                         tty ? "  " : "\n");
        std::fflush(out);
        last = c;
        last_t = t;
    }
    if (tty) std::fputc('\n', out);
}

int run(const options& o, cuda_env* cuda, vulkan_env* vulkan) {
    results r;
    // SIGINT and SIGTERM end the run early; the progress loop polls for them.
    asio::io_context signal_ctx(1);
    asio::signal_set signals(signal_ctx, SIGINT, SIGTERM);
    int stop_signal = 0;
    signals.async_wait([&](const boost::system::error_code& ec, int signo) {
        if (!ec) stop_signal = signo;
    });
    const std::uint64_t main_cpu0 = gpu_async::bench::thread_cpu_ns();
    const std::uint64_t proc0 = gpu_async::bench::process_cpu_ns();
    const std::uint64_t start = now_ns();
    const std::uint64_t end = o.until_signal
                                  ? std::numeric_limits<std::uint64_t>::max()
                                  : start + static_cast<std::uint64_t>(o.duration_s * 1e9);

    std::unique_ptr<server> srv;
    std::unique_ptr<client> cli;
    unsigned short port = static_cast<unsigned short>(o.port);
    if (!o.client_only) {
        srv = make_server(o, cuda, vulkan);
        port = srv->port();
        srv->start();
        if (o.server_only) {
            FILE* info = o.json ? stderr : stdout;
            char how_long[64];
            if (o.until_signal)
                std::snprintf(how_long, sizeof how_long, "until SIGINT (Ctrl-C) or SIGTERM");
            else
                std::snprintf(how_long, sizeof how_long, "for %.1f s", o.duration_s);
            if (o.http)
                std::fprintf(info,
                             "gpu-async-demo: serving HTTP on http://127.0.0.1:%u/ %s; try: curl "
                             "'http://127.0.0.1:%u/work?us=%u'\n",
                             static_cast<unsigned>(port), how_long, static_cast<unsigned>(port),
                             o.work_us);
            else
                std::fprintf(info, "gpu-async-demo: serving on 127.0.0.1:%u %s\n",
                             static_cast<unsigned>(port), how_long);
            std::fflush(info);
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
        [&] {
            signal_ctx.poll();
            return stop_signal != 0 || (cli && cli->failed_connections() == o.connections);
        });
    if (stop_signal != 0) {
        r.stopped_by = stop_signal == SIGINT ? "SIGINT" : "SIGTERM";
        std::fprintf(stderr, "gpu-async-demo: %s after %.1f s: stopping, summary so far\n",
                     r.stopped_by.c_str(), static_cast<double>(now_ns() - start) / 1e9);
        if (cli) cli->stop_early();
    }
    if (cli) cli->join();
    const std::uint64_t device_cpu = srv ? srv->device_cpu_ns() : 0;
    if (srv) srv->stop();
    const std::uint64_t wall = now_ns() - start;
    const std::uint64_t proc = gpu_async::bench::process_cpu_ns() - proc0;
    const std::uint64_t main_cpu = gpu_async::bench::thread_cpu_ns() - main_cpu0;
    r.wall_ns = wall;
    r.wall_s = static_cast<double>(wall) / 1e9;
    const double w = static_cast<double>(wall);
    r.process_cpu = static_cast<double>(proc) / w;
    if (cli) {
        r.requests = cli->done();
        r.latency = gpu_async::bench::summarize(cli->latency());
        r.c2h = gpu_async::bench::summarize(cli->c2h());
        r.have_latency = r.requests > 0;
        r.have_c2h = r.requests > 0 && o.device == "sim";
        r.client_cpu = static_cast<double>(cli->cpu_ns()) / w;
        r.failed_connections = cli->failed_connections();
        r.first_error = cli->first_error();
    }
    if (srv) {
        r.executor = srv->label();
        r.executor_words = srv->label_words();
        r.have_http = o.http;
        r.http_responses = srv->http_responses();
        r.http_not_2xx = srv->http_not_2xx();
        r.http_connections = srv->connections();
        if (!cli) {
            r.requests = srv->served();
            r.c2h = gpu_async::bench::summarize(srv->c2h());
            r.have_c2h = !srv->c2h().empty();
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
    // A usage error: one line naming it, then where the options are.
    auto usage = [&](const std::string& why) {
        std::cerr << "gpu-async-demo: " << why
                  << "\nTry 'gpu-async-demo --help' for the options.\n";
        return exit_usage;
    };
    try {
        po::variables_map vm;
        const po::positional_options_description none; // no positional arguments
        po::store(po::command_line_parser(argc, argv).options(desc).positional(none).run(), vm);
        po::notify(vm);
        if (vm.count("help") != 0) {
            std::cout << "usage: gpu-async-demo [options]    (gpu_async "
                      << GPU_ASYNC_VERSION_STRING
                      << ")\n  With no options: a server and a load generator over loopback "
                         "for 10 s, then a table.\n\n"
                      << desc << '\n'
                      << help_examples;
            return 0;
        }
        validate(o, vm.count("wait") != 0 && !vm["wait"].defaulted(),
                 vm.count("duration") != 0 && !vm["duration"].defaulted());
    } catch (const po::error& e) {
        return usage(e.what());
    } catch (const usage_error& e) {
        return usage(e.message);
    } catch (const std::exception& e) {
        return usage(e.what());
    }
    // The server's device and executor, before anything starts. --device cuda without a driver,
    // device or capability: one coded line, exit 1. A strict executor the host cannot run: the
    // coded refusal, exit 1. A fallback: the coded warning, then the kind that runs.
    std::unique_ptr<cuda_env> cuda;
    std::unique_ptr<vulkan_env> vulkan;
    if (!o.client_only) {
        FILE* info = o.json ? stderr : stdout;
        if (o.device == "cuda") {
            auto env = cuda_env::open(o.work_us);
            if (!env.has_value()) {
                gpu_async::examples::print_coded(stderr, "gpu-async-demo: ", "error", env.error());
                return 1;
            }
            cuda = std::move(env).value();
        }
        if (o.device == "vulkan") {
            auto env = vulkan_env::open();
            if (!env.has_value()) {
                gpu_async::examples::print_coded(stderr, "gpu-async-demo: ", "error", env.error());
                return 1;
            }
            vulkan = std::move(env).value();
            o.device_name = "'" + vulkan->device().name() + "'";
        }
        const auto resolved = gpu_async::examples::select_executor(
            o.requested, o.strict, o.fail_ring, info, "gpu-async-demo: ");
        if (!resolved.has_value()) return 1;
        settle(o, resolved.value().kind);
        std::fprintf(info, "gpu-async-demo: %s\n", run_description(o).c_str());
        std::fflush(info);
    }
    try {
        return run(o, cuda.get(), vulkan.get());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "gpu-async-demo: %s\n", e.what());
        return 1;
    }
}
