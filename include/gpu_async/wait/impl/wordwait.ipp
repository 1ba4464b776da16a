// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/wait/impl/wordwait.ipp: the word-wait probe.
//
#ifndef GPU_ASYNC_IMPL_WORDWAIT_IPP
#define GPU_ASYNC_IMPL_WORDWAIT_IPP

#include <gpu_async/wait/wordwait.hpp>

#include <cstdlib>
#include <fstream>

#if GPU_ASYNC_WORDWAIT_ARM && defined(__linux__)
#include <sys/auxv.h>
#endif

namespace gpu_async {

namespace detail {

/// Reads one unsigned number from a sysfs file; false when it cannot.
inline bool read_sysfs_u64(const char* path, std::uint64_t& out) {
    std::ifstream in(path);
    std::uint64_t v = 0;
    if (!(in >> v)) return false;
    out = v;
    return true;
}

} // namespace detail

GPU_ASYNC_DECL void word_wait::grant(word_wait_path p) {
    paths_[static_cast<std::size_t>(p)].available = true;
    paths_[static_cast<std::size_t>(p)].why_not.clear();
}

GPU_ASYNC_DECL void word_wait::refuse(word_wait_path p, std::string why) {
    paths_[static_cast<std::size_t>(p)].available = false;
    paths_[static_cast<std::size_t>(p)].why_not = std::move(why);
}

GPU_ASYNC_DECL void word_wait::probe_x86() {
#if GPU_ASYNC_WORDWAIT_X86
    detail::x86::cpuid_regs r;
    if (!detail::x86::cpuid(7, 0, r))
        refuse(word_wait_path::umwait, "CPUID leaf 7 not supported");
    else if ((r.ecx & (1u << 5)) == 0)
        refuse(word_wait_path::umwait, "CPUID.(EAX=7,ECX=0):ECX[5] WAITPKG clear");
    else {
        grant(word_wait_path::umwait);
        std::uint64_t max_time = 0;
        // The kernel caps one UMWAIT (IA32_UMWAIT_CONTROL[31:2]); 0 means no cap.
        if (detail::read_sysfs_u64("/sys/devices/system/cpu/umwait_control/max_time", max_time) &&
            max_time != 0)
            umwait_max_ticks_ = max_time;
    }
    detail::x86::cpuid_regs e;
    if (!detail::x86::cpuid(0x80000001u, 0, e))
        refuse(word_wait_path::monitorx, "CPUID leaf 0x80000001 not supported");
    else if ((e.ecx & (1u << 29)) == 0)
        refuse(word_wait_path::monitorx, "CPUID.80000001H:ECX[29] MONITORX clear");
    else
        grant(word_wait_path::monitorx);
#else
    refuse(word_wait_path::umwait, "not an x86-64 build");
    refuse(word_wait_path::monitorx, "not an x86-64 build");
#endif
}

GPU_ASYNC_DECL void word_wait::probe_arm() {
#if GPU_ASYNC_WORDWAIT_ARM
    granule_ = detail::arm::reservation_granule_bytes(detail::arm::read_ctr_el0());
    cntfrq_ = detail::arm::read_cntfrq();
#if defined(__linux__)
    const unsigned long hwcap = ::getauxval(AT_HWCAP);
    const unsigned long hwcap2 = ::getauxval(AT_HWCAP2);
#else
    const unsigned long hwcap = 0;
    const unsigned long hwcap2 = 0;
#endif
    if (granule_ < line_bytes) {
        const std::string why = "CTR_EL0.ERG reservation granule is " + std::to_string(granule_) +
                                " bytes, below the 64-byte line: a store to another word could "
                                "leave the reservation standing";
        refuse(word_wait_path::wfe, why);
        refuse(word_wait_path::wfet, why);
        return;
    }
    if ((hwcap & detail::arm::hwcap_evtstrm) == 0)
        refuse(word_wait_path::wfe,
               "AT_HWCAP bit 2 EVTSTRM clear: no timer event stream to bound WFE");
    else
        grant(word_wait_path::wfe);
    if ((hwcap2 & detail::arm::hwcap2_wfxt) == 0)
        refuse(word_wait_path::wfet, "AT_HWCAP2 bit 31 WFXT clear");
    else if (cntfrq_ == 0)
        refuse(word_wait_path::wfet, "CNTFRQ_EL0 reads 0: no counter frequency");
    else
        grant(word_wait_path::wfet);
#else
    refuse(word_wait_path::wfe, "not an aarch64 build");
    refuse(word_wait_path::wfet, "not an aarch64 build");
#endif
}

// A failed allocation of a refusal's text would end the program here (noexcept): the texts are
// short and the probe runs once, at the first word wait.
GPU_ASYNC_DECL word_wait::word_wait(probe_tag) noexcept {
    for (std::size_t i = 0; i < word_wait_path_count; ++i)
        paths_[i].path = static_cast<word_wait_path>(i);
    grant(word_wait_path::fallback);
    probe_x86();
    probe_arm();
    for (word_wait_path p : {word_wait_path::umwait, word_wait_path::monitorx, word_wait_path::wfet,
                             word_wait_path::wfe}) {
        if (paths_[static_cast<std::size_t>(p)].available) {
            path_ = p;
            break;
        }
    }
    if (const char* env = std::getenv("GPU_ASYNC_WORD_WAIT");
        env != nullptr && std::string_view(env) == "fallback")
        path_ = word_wait_path::fallback;
}

GPU_ASYNC_DECL const word_wait& word_wait::probe() noexcept {
    static const word_wait found{probe_tag{}};
    return found;
}

GPU_ASYNC_DECL const word_wait& word_wait::portable() noexcept {
    static const word_wait fallback{probe(), word_wait_path::fallback};
    return fallback;
}

GPU_ASYNC_DECL std::string_view word_wait::name() const noexcept {
    switch (path_) {
    case word_wait_path::umwait:
        return "umwait (UMONITOR + UMWAIT C0.1, TSC deadline)";
    case word_wait_path::monitorx:
        return "monitorx (MONITORX + MWAITX with timer)";
    case word_wait_path::wfe:
        return "wfe (LDXR + WFE, event stream bound)";
    case word_wait_path::wfet:
        return "wfet (LDXR + WFET, counter deadline)";
    case word_wait_path::fallback:
        return "fallback (pause-spin, then yield)";
    }
    return "unknown";
}

GPU_ASYNC_DECL std::string word_wait::describe() const {
    std::string out;
    for (const word_wait_path_report& r : paths_) {
        out += to_string(r.path);
        if (r.available)
            out += r.path == path_ ? ": available (running)" : ": available";
        else
            out += ": unavailable: " + r.why_not;
        out += '\n';
    }
    return out;
}

} // namespace gpu_async

#endif // GPU_ASYNC_IMPL_WORDWAIT_IPP
