// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/wait/detail/wordwait_arm.hpp: aarch64 exclusive monitor (LDXR), WFE, WFET and the
// system registers the word wait reads (CTR_EL0, CNTVCT_EL0, CNTFRQ_EL0), as inline assembly.
//
// LDXR, WFE, CLREX and the register reads exist on every ARMv8-A core. WFET (FEAT_WFxT) does not:
// never call wfet() unless the probe (word_wait::probe()) saw HWCAP2_WFXT.
//
#ifndef GPU_ASYNC_WAIT_DETAIL_WORDWAIT_ARM_HPP
#define GPU_ASYNC_WAIT_DETAIL_WORDWAIT_ARM_HPP

#include <cstddef>
#include <cstdint>

#if defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#define GPU_ASYNC_WORDWAIT_ARM 1
#else
#define GPU_ASYNC_WORDWAIT_ARM 0
#endif

namespace gpu_async::detail::arm {

/// AT_HWCAP bit 2: the kernel runs the timer event stream (a WFE wake about every 100 us).
inline constexpr unsigned long hwcap_evtstrm = 1ul << 2;
/// AT_HWCAP2 bit 31: FEAT_WFxT (WFET, WFIT).
inline constexpr unsigned long hwcap2_wfxt = 1ul << 31;

/// The exclusive reservation granule in bytes from a CTR_EL0 value: ERG (bits 23:20) is log2 of
/// the granule in 4-byte words; 0 means "not reported", which the architecture bounds by 2 KiB.
constexpr std::size_t reservation_granule_bytes(std::uint64_t ctr_el0) noexcept {
    const unsigned erg = static_cast<unsigned>((ctr_el0 >> 20) & 0xf);
    return erg == 0 ? std::size_t{2048} : std::size_t{4} << erg;
}

#if GPU_ASYNC_WORDWAIT_ARM

inline std::uint64_t read_ctr_el0() noexcept {
    std::uint64_t v = 0;
    asm volatile("mrs %0, ctr_el0" : "=r"(v));
    return v;
}

inline std::uint64_t read_cntvct() noexcept {
    std::uint64_t v = 0;
    asm volatile("isb\n\tmrs %0, cntvct_el0" : "=r"(v) : : "memory");
    return v;
}

inline std::uint64_t read_cntfrq() noexcept {
    std::uint64_t v = 0;
    asm volatile("mrs %0, cntfrq_el0" : "=r"(v));
    return v;
}

/// LDXR: loads `*addr` and opens an exclusive reservation on its granule. A store by another
/// observer to the granule clears the reservation, which sends this core a WFE wake event.
inline std::uint64_t ldxr(const void* addr) noexcept {
    std::uint64_t v = 0;
    asm volatile("ldxr %0, [%1]" : "=r"(v) : "r"(addr) : "memory");
    return v;
}

/// CLREX: drops the reservation.
inline void clrex() noexcept {
    asm volatile("clrex" : : : "memory");
}

/// WFE: waits for an event (a cleared reservation, the event stream, SEV, an interrupt).
inline void wfe() noexcept {
    asm volatile("wfe" : : : "memory");
}

/// WFET Xt: WFE with a deadline on the virtual counter. FEAT_WFxT only. Encoded as an
/// instruction word (0xD5031000 | Rt, Rt = x0) so the assembler needs no ARMv8.7 support.
inline void wfet(std::uint64_t deadline_cntvct) noexcept {
    register std::uint64_t x0 asm("x0") = deadline_cntvct;
    asm volatile(".inst 0xd5031000" : : "r"(x0) : "memory");
}

/// A spin hint.
inline void yield_hint() noexcept {
    asm volatile("yield" : : : "memory");
}

#endif // GPU_ASYNC_WORDWAIT_ARM

} // namespace gpu_async::detail::arm

#endif // GPU_ASYNC_WAIT_DETAIL_WORDWAIT_ARM_HPP
