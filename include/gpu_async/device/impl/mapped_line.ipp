// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/device/impl/mapped_line.ipp: definitions of mapped_line.
//
#ifndef GPU_ASYNC_IMPL_MAPPED_LINE_IPP
#define GPU_ASYNC_IMPL_MAPPED_LINE_IPP

#include <gpu_async/device/mapped_line.hpp>
#include <gpu_async/wait/detail/ranked_mutex.hpp>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace gpu_async {

namespace detail {

/// One doorbell's registration with one driver table: made by the first line that attaches the
/// doorbell, undone when the last one closes.
struct doorbell_registration {
    const line_driver* driver = nullptr;
    std::shared_ptr<doorbell> bell; ///< kept alive while registered
    int device = -1;                ///< the registering device, whose domain is retained
    void* domain = nullptr;
    std::size_t users = 0;
};

/// Every live registration, and those whose unregistration failed (kept, never freed).
struct doorbell_registry {
    ranked_mutex mutex{lock_rank::doorbell_registrations};
    std::vector<std::unique_ptr<doorbell_registration>> live;
    std::vector<std::unique_ptr<doorbell_registration>> leaked;
};

inline doorbell_registry& doorbells() noexcept {
    static doorbell_registry registry;
    return registry;
}

/// A line's probe and its health query (watch_line_health): queries the probe in the line's
/// domain and, at the first answer that is a fault, faults every slot of the line. Lives on the
/// heap (the registry keeps its address while the line moves) and holds nothing that changes while
/// it is watched, so its query may run on any thread.
class mapped_line_health final : public line_health {
public:
    mapped_line_health(const line_driver& driver, void* domain, void* probe) noexcept
        : driver_(&driver)
        , domain_(domain)
        , probe_(probe) {}

    void query(const completion_line& line) noexcept override {
        if (faulted_.load(std::memory_order_acquire)) return; // sticky: told once
        const driver_status st = driver_->query_probe(driver_->self, domain_, probe_);
        // Healthy, or another call failed (nothing is known): nothing to tell.
        if (st.ok() || st.call != nullptr) return;
        faulted_.store(true, std::memory_order_release);
        // The whole domain faulted: every stream storing into the line's slots is of it.
        for (std::size_t i = 0; i < line_words; ++i)
            fault_slot(line, *slot_id::at(i));
    }

    void* probe() const noexcept { return probe_; }

private:
    const line_driver* driver_;
    void* domain_;
    void* probe_;
    std::atomic<bool> faulted_{false};
};

inline void* doorbell_host(const doorbell_registration& r) noexcept {
    return static_cast<void*>(&r.bell->line());
}

/// Unregisters and releases the registration's domain once it has no user; returns the first
/// failure. A failed unregistration moves the registration to the leaked list (the memory may
/// still be registered: the doorbell is never freed then). Holds the registry's lock.
inline std::optional<std::pair<driver_op, driver_status>>
end_registration_locked(doorbell_registry& reg, doorbell_registration* r) noexcept {
    auto it =
        std::find_if(reg.live.begin(), reg.live.end(), [r](const auto& p) { return p.get() == r; });
    std::unique_ptr<doorbell_registration> owned = std::move(*it);
    reg.live.erase(it);
    const line_driver& d = *r->driver;
    const driver_status unreg = d.unregister_host(d.self, r->domain, doorbell_host(*r));
    if (!unreg.ok() && !unreg.done) {
        try {
            reg.leaked.push_back(std::move(owned));
        } catch (...) {
            static_cast<void>(owned.release()); // leak it outright: never free registered memory
        }
        return std::pair{driver_op::unregister_host, unreg};
    }
    // Unregistered (even when only the restore after it failed): the reference may go.
    const driver_status rel = d.release_domain(d.self, r->device, r->domain);
    if (!unreg.ok()) return std::pair{driver_op::unregister_host, unreg};
    if (!rel.ok()) return std::pair{driver_op::release_domain, rel};
    return std::nullopt;
}

/// The live registration of `bell` with the driver table `d` into `r`, else a new one: its own
/// reference on `device`'s domain (it must outlive the registration, which may outlive the line
/// that made it) and the doorbell's line registered. Holds the registry's lock.
inline std::optional<coded_error> find_or_register_locked(doorbell_registry& reg,
                                                          const line_driver& d,
                                                          const std::shared_ptr<doorbell>& bell,
                                                          int device, doorbell_registration*& r) {
    for (const auto& p : reg.live)
        if (p->driver == &d && p->bell == bell) r = p.get();
    if (r != nullptr) return std::nullopt;
    auto made = std::make_unique<doorbell_registration>();
    made->driver = &d;
    made->bell = bell;
    made->device = device;
    reg.live.reserve(reg.live.size() + 1); // no allocation may fail once registered
    if (const driver_status st = d.retain_domain(d.self, device, &made->domain); !st.ok())
        return driver_error(d, driver_op::retain_domain, st);
    if (const driver_status st =
            d.register_host(d.self, made->domain, doorbell_host(*made), sizeof(completion_line));
        !st.ok()) {
        if (st.done) {
            // Registered, but the restore after it failed: undo it as a last user would
            // (a failed unregistration leaks it, with its reference).
            reg.live.push_back(std::move(made)); // reserved above: cannot throw
            static_cast<void>(end_registration_locked(reg, reg.live.back().get()));
        } else {
            static_cast<void>(d.release_domain(d.self, device, made->domain));
        }
        return driver_error(d, driver_op::register_host, st);
    }
    reg.live.push_back(std::move(made));
    r = reg.live.back().get();
    return std::nullopt;
}

/// Gives back what a line's creation took, in reverse order, when a later step fails, and returns
/// `error`. The page is freed here only before any store could have been enqueued on it, so no
/// settle is needed.
inline coded_error unwind_line(const line_driver& driver, int device, void* domain, void* page,
                               coded_error error) {
    bool released = page == nullptr;
    if (page != nullptr) {
        const driver_status st = driver.free_page(driver.self, domain, page);
        released = st.ok() || st.done; // freed, even if the restore after it failed
    }
    // A page that could not be freed keeps its domain alive: leak the reference with it.
    if (released) static_cast<void>(driver.release_domain(driver.self, device, domain));
    return error;
}

} // namespace detail

GPU_ASYNC_DECL coded_error driver_error(const line_driver& driver, driver_op op,
                                        driver_status status) {
    const char* call = status.call != nullptr ? status.call : driver.call_name(op);
    const char* name =
        driver.status_name != nullptr ? driver.status_name(driver.self, status.status) : nullptr;
    return coded_error(errc::driver_status,
                       {std::string(call), std::string(name != nullptr ? name : "unknown"),
                        std::to_string(status.status)});
}

GPU_ASYNC_DECL result<mapped_line> mapped_line::create(const line_driver& driver,
                                                       mapped_line_options options) {
    int device = -1;
    const driver_status st = driver.current_device(driver.self, &device);
    if (!st.ok()) return driver_error(driver, driver_op::current_device, st);
    if (device < 0)
        return coded_error(errc::no_domain,
                           {std::string(driver.backend) +
                            ": the calling thread has no current context to own a line"});
    return create_on(driver, device, options);
}

GPU_ASYNC_DECL result<mapped_line> mapped_line::create_on(const line_driver& driver, int device,
                                                          mapped_line_options options) {
    using detail::unwind_line;
    // 1. The domain first: it must outlive the page.
    void* domain = nullptr;
    if (const driver_status st = driver.retain_domain(driver.self, device, &domain); !st.ok())
        return driver_error(driver, driver_op::retain_domain, st);

    // 2. One whole page, nothing else in it.
    void* page = nullptr;
    if (const driver_status st = driver.alloc_page(driver.self, domain, page_bytes, &page);
        !st.ok())
        // Allocated when only the restore after it failed: freed before the domain goes.
        return unwind_line(driver, device, domain, st.done ? page : nullptr,
                           driver_error(driver, driver_op::alloc_page, st));
    if (page == nullptr || reinterpret_cast<std::uintptr_t>(page) % alignof(completion_line) != 0)
        return unwind_line(
            driver, device, domain, page,
            coded_error(errc::backend, {std::string(driver.call_name(driver_op::alloc_page)) +
                                        " returned a page that is null or not 64-byte aligned"}));

    // 3. Its device address.
    std::uint64_t address = 0;
    if (const driver_status st = driver.device_pointer(driver.self, domain, page, &address);
        !st.ok())
        return unwind_line(driver, device, domain, page,
                           driver_error(driver, driver_op::device_pointer, st));
    return start_line(driver, device, domain, page, address, options);
}

GPU_ASYNC_DECL result<mapped_line> mapped_line::start_line(const line_driver& driver, int device,
                                                           void* domain, void* page,
                                                           std::uint64_t address,
                                                           const mapped_line_options& options) {
    using detail::unwind_line;
    // 4. The probe of the line's health query, where the table has the hooks.
    const bool probes = driver.make_probe != nullptr && driver.query_probe != nullptr &&
                        driver.drop_probe != nullptr;
    void* probe = nullptr;
    if (probes) {
        if (const driver_status st = driver.make_probe(driver.self, domain, &probe); !st.ok()) {
            // Made when only the restore after it failed: destroyed before the page goes.
            if (st.done) static_cast<void>(driver.drop_probe(driver.self, domain, probe));
            return unwind_line(driver, device, domain, page,
                               driver_error(driver, driver_op::make_probe, st));
        }
    }
    auto fail = [&](const char* what) -> coded_error {
        if (probes) static_cast<void>(driver.drop_probe(driver.self, domain, probe));
        return unwind_line(driver, device, domain, page, coded_error(errc::backend, {what}));
    };

    mapped_line out;
    out.driver_ = &driver;
    out.page_ = page;
    out.line_ = ::new (page) completion_line();
    try {
        out.generation_ = adopt_line(*out.line_); // retired by close(): its descriptors go stale
    } catch (...) {
        out.line_ = nullptr;
        return fail("no memory for the line's generation");
    }
    if (probes) {
        // 5. The health query, unregistered by close() before the line is retired.
        try {
            auto health = std::make_unique<detail::mapped_line_health>(driver, domain, probe);
            watch_line_health(*out.line_, *health);
            out.health_ = health.release();
        } catch (...) {
            out.line_ = nullptr;
            return fail("no memory for the line's health query");
        }
    }
    out.domain_ = domain;
    out.device_address_ = address;
    out.device_ = device;
    for (std::size_t i = 0; i < line_words; ++i) {
        out.line_->words[i].store(options.initial_sequence, std::memory_order_relaxed);
        out.sequence_[i] = options.initial_sequence;
    }
    return out;
}

GPU_ASYNC_DECL result<memory_descriptor> mapped_line::store(slot_id slot, void* stream) {
    if (line_ == nullptr)
        return coded_error(errc::backend, {"store on a closed or moved-from mapped_line"});
    void* stream_domain = nullptr;
    if (const driver_status st = driver_->stream_domain(driver_->self, stream, &stream_domain);
        !st.ok())
        return driver_error(*driver_, driver_op::stream_domain, st);
    if (stream_domain != domain_)
        return coded_error(errc::foreign_stream,
                           {std::string(driver_->backend) + " stream " + detail::hex(stream) +
                            " (the line is of device " + std::to_string(device_) + ")"});
    const std::size_t i = slot.index();
    if (stream != stream_[i] && !last(slot).is_complete())
        return coded_error(errc::backend,
                           {std::string(driver_->backend) + " stream " + detail::hex(stream) +
                            " cannot store to slot " + std::to_string(i) + " while stream " +
                            detail::hex(stream_[i]) + "'s store of " +
                            std::to_string(sequence_[i]) +
                            " has not landed (one stream per slot; nothing was enqueued)"});
    return enqueue(slot, stream, sequence_[i] + 1); // wraps modulo 2^64
}

GPU_ASYNC_DECL result<memory_descriptor> mapped_line::enqueue(slot_id slot, void* stream,
                                                              std::uint64_t next) {
    const std::size_t i = slot.index();
    const line_driver& d = *driver_;
    auto commit = [&] {
        sequence_[i] = next;
        stream_[i] = stream;
        return memory_descriptor(*line_, slot, next, generation_);
    };
    if (bell_ == nullptr) {
        if (const driver_status st = d.write_value64(d.self, stream, device_address(slot), next);
            !st.ok())
            return driver_error(d, driver_op::write_value64, st);
        return commit();
    }
    // The completion store, then the doorbell's device signal, in the same stream.
    const batch_store stores[2] = {{device_address(slot), next},
                                   {bell_address_, doorbell::device_signal}};
    if (d.batch_write64 != nullptr) {
        if (const driver_status st = d.batch_write64(d.self, stream, stores, 2); !st.ok())
            return driver_error(d, driver_op::batch_write64, st);
        return commit();
    }
    if (const driver_status st =
            d.write_value64(d.self, stream, stores[0].device_address, stores[0].value);
        !st.ok())
        return driver_error(d, driver_op::write_value64, st);
    const memory_descriptor done = commit(); // enqueued: the number is spent whatever follows
    if (const driver_status st =
            d.write_value64(d.self, stream, stores[1].device_address, stores[1].value);
        !st.ok())
        return driver_error(d, driver_op::write_value64, st);
    return done;
}

GPU_ASYNC_DECL std::optional<coded_error>
mapped_line::attach_doorbell(std::shared_ptr<doorbell> bell) {
    if (line_ == nullptr)
        return coded_error(errc::backend,
                           {"attach_doorbell on a closed or moved-from mapped_line"});
    if (bell == nullptr)
        return coded_error(errc::backend, {"attach_doorbell was given no doorbell"});
    if (bell_ != nullptr) {
        if (bell_->bell == bell) return std::nullopt;
        return coded_error(errc::backend,
                           {std::string(driver_->backend) + " line of device " +
                            std::to_string(device_) + " already has another doorbell attached"});
    }
    const line_driver& d = *driver_;
    if (d.register_host == nullptr || d.unregister_host == nullptr)
        return coded_error(errc::unavailable,
                           {std::string(d.call_name(driver_op::register_host)) + " and " +
                                d.call_name(driver_op::unregister_host),
                            std::string("the ") + d.backend + " driver lacks them"});
    detail::doorbell_registry& reg = detail::doorbells();
    std::lock_guard lk(reg.mutex);
    detail::doorbell_registration* r = nullptr;
    if (auto e = detail::find_or_register_locked(reg, d, bell, device_, r)) return e;
    std::uint64_t address = 0;
    if (const driver_status st =
            d.device_pointer(d.self, domain_, detail::doorbell_host(*r), &address);
        !st.ok()) {
        // Nothing of this line was enqueued against the registration: give a new one back.
        if (r->users == 0) static_cast<void>(detail::end_registration_locked(reg, r));
        return driver_error(d, driver_op::device_pointer, st);
    }
    ++r->users;
    r->bell->add_device_producer();
    bell_ = r;
    bell_address_ = address + doorbell::device_word * sizeof(std::uint64_t);
    return std::nullopt;
}

GPU_ASYNC_DECL std::shared_ptr<doorbell> mapped_line::attached_doorbell() const noexcept {
    return bell_ != nullptr ? bell_->bell : nullptr;
}

GPU_ASYNC_DECL std::optional<mapped_line::close_failure> mapped_line::close_quietly() noexcept {
    if (line_ == nullptr) return std::nullopt;
    // No health query of the line runs from here on (none may fault a retired line).
    if (health_ != nullptr) unwatch_line_health(*line_);
    // Every reactor ends its waits on the line and stops reading it, whatever happens next: the
    // line is gone for the host from here on, freed or leaked.
    retire_line(*line_);
    const line_driver& d = *driver_;
    std::optional<close_failure> failure;
    bool page_leaked = false;
    // A hook whose own call succeeded and only the restore after it failed (`done`) did its
    // work: the close goes on, and reports the restore's failure.
    const driver_status st = d.settle(d.self, domain_);
    const bool settled = st.ok() || st.done;
    if (!settled) {
        // A store may still be pending: never free or unregister under it. Leak the page, the
        // reference and the doorbell use.
        failure = close_failure{driver_op::settle, st};
        page_leaked = true;
    } else if (!st.ok()) {
        failure = close_failure{driver_op::settle, st};
    }
    if (health_ != nullptr) {
        // Nothing was ever enqueued on the probe: it goes even when the settle failed (the
        // domain is then leaked, alive). Forgotten whatever the destruction returned.
        const driver_status pst = d.drop_probe(d.self, domain_, health_->probe());
        if (!pst.ok() && !failure) failure = close_failure{driver_op::drop_probe, pst};
        delete health_;
        health_ = nullptr;
    }
    if (settled) {
        if (bell_ != nullptr) {
            // No store of this line is pending (settled): drop its use of the doorbell.
            detail::doorbell_registry& reg = detail::doorbells();
            std::lock_guard lk(reg.mutex);
            bell_->bell->remove_device_producer();
            if (--bell_->users == 0)
                if (auto f = detail::end_registration_locked(reg, bell_))
                    if (!failure) failure = close_failure{f->first, f->second};
        }
        const driver_status fst = d.free_page(d.self, domain_, page_);
        if (!fst.ok() && !failure) failure = close_failure{driver_op::free_page, fst};
        if (!fst.ok() && !fst.done) {
            // The page may still be live in the domain: keep the domain alive with it.
            page_leaked = true;
        } else if (const driver_status rst = d.release_domain(d.self, device_, domain_);
                   !rst.ok()) {
            if (!failure) failure = close_failure{driver_op::release_domain, rst};
        }
    }
    leaked_ = page_leaked;
    bell_ = nullptr;
    bell_address_ = 0;
    line_ = nullptr;
    page_ = nullptr;
    domain_ = nullptr;
    return failure;
}

GPU_ASYNC_DECL std::optional<coded_error> mapped_line::close() {
    const line_driver* d = driver_;
    const std::optional<close_failure> failure = close_quietly();
    if (!failure) return std::nullopt;
    return driver_error(*d, failure->op, failure->status);
}

} // namespace gpu_async

#endif // GPU_ASYNC_IMPL_MAPPED_LINE_IPP
