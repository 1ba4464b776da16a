// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/wait/detail/wordwait_x86.hpp: x86-64 CPUID probing and the UMONITOR/UMWAIT and
// MONITORX/MWAITX instructions, as inline assembly so the build needs no -mwaitpkg.
//
// Never call the instruction wrappers unless the probe (word_wait::probe()) confirmed the CPU has
// the instruction: on a CPU without it they raise SIGILL.
//
#ifndef GPU_ASYNC_WAIT_DETAIL_WORDWAIT_X86_HPP
#define GPU_ASYNC_WAIT_DETAIL_WORDWAIT_X86_HPP

#include <cstdint>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define GPU_ASYNC_WORDWAIT_X86 1
#include <cpuid.h>
#else
#define GPU_ASYNC_WORDWAIT_X86 0
#endif

namespace gpu_async::detail::x86 {

#if GPU_ASYNC_WORDWAIT_X86

struct cpuid_regs {
    std::uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

/// CPUID leaf `leaf`, subleaf `sub`; false when the leaf is above the CPU's maximum.
inline bool cpuid(std::uint32_t leaf, std::uint32_t sub, cpuid_regs& r) noexcept {
    const std::uint32_t max = __get_cpuid_max(leaf & 0x80000000u, nullptr);
    if (max < leaf) return false;
    __cpuid_count(leaf, sub, r.eax, r.ebx, r.ecx, r.edx);
    return true;
}

/// Reads the time-stamp counter.
inline std::uint64_t rdtsc() noexcept {
    std::uint32_t lo = 0, hi = 0;
    asm volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return (std::uint64_t{hi} << 32) | lo;
}

/// UMONITOR: arms the address-range monitor on the cache line holding `addr`. WAITPKG only.
inline void umonitor(const void* addr) noexcept {
    asm volatile("umonitor %0" : : "r"(addr) : "memory");
}

/// UMWAIT until a store to the monitored line, an interrupt, the TSC reaching `deadline_tsc`, or
/// the OS limit (IA32_UMWAIT_CONTROL). Asks for C0.1 (the lighter state, the faster wake).
/// Returns true when the OS limit ended the wait (CF set). WAITPKG only.
inline bool umwait(std::uint64_t deadline_tsc) noexcept {
    const std::uint32_t lo = static_cast<std::uint32_t>(deadline_tsc);
    const std::uint32_t hi = static_cast<std::uint32_t>(deadline_tsc >> 32);
    const std::uint32_t control = 1; // bit 0 set: C0.1
    bool os_limit = false;
    asm volatile("umwait %3" : "=@ccc"(os_limit) : "a"(lo), "d"(hi), "r"(control) : "memory");
    return os_limit;
}

/// MONITORX: arms the monitor on the line holding `addr` (EAX address, ECX/EDX zero). AMD
/// MONITORX only. Encoded as bytes: 0F 01 FA.
inline void monitorx(const void* addr) noexcept {
    asm volatile(".byte 0x0f, 0x01, 0xfa" : : "a"(addr), "c"(0u), "d"(0u) : "memory");
}

/// MWAITX with its timer enabled (ECX bit 1): waits for a store to the monitored line, an
/// interrupt, or `cycles` cycles of the timer (EBX). EAX 0xF0: stay in C0. AMD MONITORX only.
/// Encoded as bytes: 0F 01 FB.
inline void mwaitx(std::uint32_t cycles) noexcept {
    asm volatile(".byte 0x0f, 0x01, 0xfb" : : "a"(0xf0u), "b"(cycles), "c"(2u) : "memory");
}

#endif // GPU_ASYNC_WORDWAIT_X86

} // namespace gpu_async::detail::x86

#endif // GPU_ASYNC_WAIT_DETAIL_WORDWAIT_X86_HPP
