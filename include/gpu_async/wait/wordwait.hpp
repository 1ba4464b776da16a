// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief Parking the calling thread on a completion line, in user mode.
///
/// `word_wait` is a capability: the only way to get one is `word_wait::probe()` (or
/// `word_wait::portable()`, which always runs the portable path), so an instruction the probe did
/// not confirm can never execute: there is no public constructor to forge one with.
///
/// | path     | target                                   | arm      | wait                      |
/// |----------|------------------------------------------|----------|---------------------------|
/// | umwait   | x86-64, CPUID.(7,0):ECX[5] WAITPKG       | UMONITOR | UMWAIT C0.1, TSC deadline |
/// | monitorx | x86-64, CPUID.80000001H:ECX[29] MONITORX | MONITORX | MWAITX with its timer     |
/// | wfet     | aarch64, AT_HWCAP2 bit 31 (FEAT_WFxT)    | LDXR     | WFET, counter deadline    |
/// | wfe      | aarch64, AT_HWCAP bit 2 (event stream)   | LDXR     | WFE (event stream ~100us) |
/// | fallback | everywhere                               | -        | pause-spin ~2us, yield    |
///
/// `park(line, done, bound)` arms the monitor on the line, re-checks `done()`, and only then waits,
/// so a store that lands between the check and the wait ends the wait at once (the monitor saw
/// it). It loops (arm, check, wait) until `done()` holds or `bound` has passed, and returns
/// `done()`. Each single hardware wait is itself bounded by the time left:
///  - UMWAIT: TSC deadline now + min(left in ns, the OS cap read from
///    /sys/devices/system/cpu/umwait_control/max_time, 100000 ticks by default). The TSC of every
///    WAITPKG CPU runs at 1 GHz or more, so `left` ns as ticks never overshoots `left`.
///  - MWAITX: its timer (EBX, P0 cycles, again at 1 GHz or more) is set to min(left ns, 2^32-1).
///  - WFET: a deadline on CNTVCT_EL0 computed from CNTFRQ_EL0.
///  - WFE: has no timer of its own; the path exists only where the kernel runs the timer event
///    stream (HWCAP_EVTSTRM), which wakes WFE about every 100 us, so each wait ends within that.
///
/// Any wake (a store to another word of the line, an interrupt, the OS cap) just re-runs the loop.
///
/// aarch64 reservation granule: the exclusive monitor LDXR opens covers CTR_EL0.ERG bytes, read by
/// the probe. A 64-byte line needs ERG >= 64 so that a store to any of its eight words clears the
/// reservation: the line is 64-byte aligned and granules are naturally aligned powers of two, so a
/// granule of 64 bytes or more contains the whole line. A granule larger than 64 bytes also covers
/// neighbouring memory: stores there wake the park spuriously, which the loop absorbs (it re-checks
/// `done()` and waits again), so the path stays correct, it only wakes more often. A granule below
/// 64 bytes could miss a store to another word, so the probe refuses WFE and WFET then.
///
/// Slack: a park returns at most one wait quantum after its bound (UMWAIT's OS cap, ~100 us of
/// event stream for WFE, one scheduler quantum for the fallback's yield), plus scheduling delay.
/// Scheduling delay on a loaded machine dominates (tens of ms at 4x overload on a 2-core VM);
/// the tests allow bound + 200 ms.
///
/// The environment variable GPU_ASYNC_WORD_WAIT=fallback makes probe() choose the portable path
/// (it can only take a path away, never grant one).
#ifndef GPU_ASYNC_WAIT_WORDWAIT_HPP
#define GPU_ASYNC_WAIT_WORDWAIT_HPP

#include <gpu_async/core/detail/config.hpp>

#include <gpu_async/core/completion_line.hpp>
#include <gpu_async/core/time.hpp>
#include <gpu_async/core/wait_tuning.hpp>
#include <gpu_async/wait/detail/mono_clock.hpp>
#include <gpu_async/wait/detail/spin.hpp>
#include <gpu_async/wait/detail/wordwait_arm.hpp>
#include <gpu_async/wait/detail/wordwait_x86.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

namespace gpu_async {

/// The ways a thread can park on a line.
enum class word_wait_path : std::uint8_t { umwait, monitorx, wfe, wfet, fallback };

/// Number of `word_wait_path` values.
inline constexpr std::size_t word_wait_path_count = 5;

/// Stable lower-case name of a path ("umwait", "monitorx", "wfe", "wfet", "fallback").
constexpr std::string_view to_string(word_wait_path p) noexcept {
    switch (p) {
    case word_wait_path::umwait:
        return "umwait";
    case word_wait_path::monitorx:
        return "monitorx";
    case word_wait_path::wfe:
        return "wfe";
    case word_wait_path::wfet:
        return "wfet";
    case word_wait_path::fallback:
        return "fallback";
    }
    return "unknown";
}

/// What the probe found for one path.
struct word_wait_path_report {
    word_wait_path path = word_wait_path::fallback;
    bool available = false;
    std::string why_not; ///< empty when available; else why the path cannot run here
};

namespace detail {

/// The portable park: pause-spin for up to wait_tuning::spin, then yield, until `done()` or
/// `deadline`. Returns `done()`.
template <class Pred>
bool fallback_park(Pred& done, mono_ns deadline) {
    return spin_then_sleep(done, default_wait_tuning.spin, deadline, dur_ns::max(), [&](dur_ns) {
        std::this_thread::yield();
        return static_cast<bool>(done());
    });
}

// The hardware park loops: arm, re-check, wait, until `done()` or `deadline` (the mono clock). Each
// executes an instruction only the probe may vouch for: word_wait::park calls them only on the path
// its probe confirmed. (The aarch64 test calls park_wfe directly under qemu-user, where WFE always
// exists and returns at once.)

#if GPU_ASYNC_WORDWAIT_X86
namespace x86 {

template <class Pred>
bool park_umwait(const completion_line& line, Pred& done, mono_ns deadline,
                 std::uint64_t max_ticks) {
    for (;;) {
        umonitor(&line);
        if (done()) return true;
        const mono_ns now = mono_now();
        if (now >= deadline) return static_cast<bool>(done());
        const std::uint64_t left = deadline.since(now).ns;
        umwait(rdtsc() + (left < max_ticks ? left : max_ticks));
    }
}

template <class Pred>
bool park_monitorx(const completion_line& line, Pred& done, mono_ns deadline) {
    for (;;) {
        monitorx(&line);
        if (done()) return true;
        const mono_ns now = mono_now();
        if (now >= deadline) return static_cast<bool>(done());
        const std::uint64_t left = deadline.since(now).ns;
        constexpr std::uint64_t max_timer = std::numeric_limits<std::uint32_t>::max();
        mwaitx(static_cast<std::uint32_t>(left < max_timer ? left : max_timer));
    }
}

} // namespace x86
#endif

#if GPU_ASYNC_WORDWAIT_ARM
namespace arm {

template <class Pred>
bool park_wfe(const completion_line& line, Pred& done, mono_ns deadline) {
    for (;;) {
        ldxr(&line.words[0]);
        if (done()) {
            clrex();
            return true;
        }
        if (mono_now() >= deadline) {
            clrex();
            return static_cast<bool>(done());
        }
        wfe();
    }
}

template <class Pred>
bool park_wfet(const completion_line& line, Pred& done, mono_ns deadline, std::uint64_t cntfrq) {
    for (;;) {
        ldxr(&line.words[0]);
        if (done()) {
            clrex();
            return true;
        }
        const mono_ns now = mono_now();
        if (now >= deadline) {
            clrex();
            return static_cast<bool>(done());
        }
        // At most one second per wait keeps left * cntfrq within 64 bits.
        const std::uint64_t left = min(deadline.since(now), dur_ns::from_ms(1000)).ns;
        wfet(read_cntvct() + left * cntfrq / 1000000000u + 1);
    }
}

} // namespace arm
#endif

} // namespace detail

/// The word-wait capability. Obtain it from `probe()`; it is immutable and shared.
class word_wait {
public:
    word_wait(const word_wait&) = delete;
    word_wait& operator=(const word_wait&) = delete;

    /// Probes the CPU and OS once (thread-safe, cached) and returns the capability for the best
    /// path this machine has: umwait, then monitorx, on x86-64; wfet, then wfe, on aarch64; else
    /// the portable fallback.
    GPU_ASYNC_DECL static const word_wait& probe() noexcept;

    /// A capability that always runs the portable fallback (for comparison and for hosts that
    /// must not use the hardware wait). Its `paths()` are the probe's findings.
    GPU_ASYNC_DECL static const word_wait& portable() noexcept;

    /// The path `park` runs.
    word_wait_path path() const noexcept { return path_; }

    /// Human text of that path, e.g. "fallback (pause-spin, then yield)".
    GPU_ASYNC_DECL std::string_view name() const noexcept;

    /// Every path, indexed by `word_wait_path`: available or not, and why not.
    const std::array<word_wait_path_report, word_wait_path_count>& paths() const noexcept {
        return paths_;
    }

    /// The probe's finding for one path.
    const word_wait_path_report& report(word_wait_path p) const noexcept {
        return paths_[static_cast<std::size_t>(p)];
    }

    /// aarch64: the exclusive reservation granule in bytes (CTR_EL0.ERG); 0 on other targets.
    std::size_t reservation_granule() const noexcept { return granule_; }

    /// One line per path: "umwait: unavailable: CPUID...", "fallback: available (running)".
    GPU_ASYNC_DECL std::string describe() const;

    /// Parks the calling thread on `line` until `done()` returns true or `bound` has passed,
    /// and returns `done()`. Arms the monitor, re-checks `done()`, then waits, in a loop; any
    /// store to the line ends the current wait. `done` must be cheap and must not block; it is
    /// called at least once, and is the only authority for the return value.
    template <class Pred>
    bool park(const completion_line& line, Pred&& done, dur_ns bound) const {
        if (done()) return true;
        const mono_ns deadline = detail::mono_now().after(bound);
        switch (path_) {
#if GPU_ASYNC_WORDWAIT_X86
        case word_wait_path::umwait:
            return detail::x86::park_umwait(line, done, deadline, umwait_max_ticks_);
        case word_wait_path::monitorx:
            return detail::x86::park_monitorx(line, done, deadline);
#endif
#if GPU_ASYNC_WORDWAIT_ARM
        case word_wait_path::wfe:
            return detail::arm::park_wfe(line, done, deadline);
        case word_wait_path::wfet:
            return detail::arm::park_wfet(line, done, deadline, cntfrq_);
#endif
        default:
            return detail::fallback_park(done, deadline);
        }
    }

private:
    struct probe_tag {};
    // The probe itself (wait/impl/wordwait.ipp): fills paths_ and chooses path_.
    GPU_ASYNC_DECL explicit word_wait(probe_tag) noexcept;
    // One architecture's paths (the others are refused as not built for).
    void probe_x86();
    void probe_arm();
    void grant(word_wait_path p);
    void refuse(word_wait_path p, std::string why);
    // A copy of `found`'s findings that runs `p` (which `found` reported available).
    word_wait(const word_wait& found, word_wait_path p) noexcept
        : path_(p)
        , paths_(found.paths_)
        , umwait_max_ticks_(found.umwait_max_ticks_)
        , cntfrq_(found.cntfrq_)
        , granule_(found.granule_) {}

    word_wait_path path_ = word_wait_path::fallback;
    std::array<word_wait_path_report, word_wait_path_count> paths_{};
    std::uint64_t umwait_max_ticks_ = 100000;
    std::uint64_t cntfrq_ = 0;
    std::size_t granule_ = 0;
};

} // namespace gpu_async

#if GPU_ASYNC_HEADER_ONLY
#include <gpu_async/wait/impl/wordwait.ipp>
#endif

#endif // GPU_ASYNC_WAIT_WORDWAIT_HPP
