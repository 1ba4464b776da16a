// Uses the installed library: a descriptor completes, and a coded error reads as expected.
#include <gpu_async/gpu_async.hpp>

#include <boost/system/error_code.hpp>

#include <cstdio>

int main() {
    gpu_async::completion_line line;
    gpu_async::memory_descriptor d(line, *gpu_async::slot_id::at(3), 2);
    if (d.is_complete()) return 1;
    line.words[3].store(2, std::memory_order_release);
    if (!d.is_complete()) return 2;
    boost::system::error_code ec = gpu_async::errc::stalled;
    if (ec != gpu_async::errc::stalled) return 3;
    std::printf("consumer: descriptor completed; %s\n", ec.message().c_str());
    return 0;
}
