// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/impl/mapped_line.ipp: definitions of mapped_line.
//
#ifndef GPU_ASYNC_IMPL_MAPPED_LINE_IPP
#define GPU_ASYNC_IMPL_MAPPED_LINE_IPP

#include <gpu_async/device/mapped_line.hpp>

#include <new>
#include <string>

namespace gpu_async {

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
    // 1. The domain first: it must outlive the page.
    void* domain = nullptr;
    if (const driver_status st = driver.retain_domain(driver.self, device, &domain); !st.ok())
        return driver_error(driver, driver_op::retain_domain, st);

    // Gives back what was taken, in reverse order, when a later step fails. The page is freed
    // here only before any store could have been enqueued on it, so no settle is needed.
    auto unwind = [&](void* page, coded_error error) -> coded_error {
        bool released = page == nullptr;
        if (page != nullptr) released = driver.free_page(driver.self, domain, page).ok();
        // A page that could not be freed keeps its domain alive: leak the reference with it.
        if (released) static_cast<void>(driver.release_domain(driver.self, device, domain));
        return error;
    };

    // 2. One whole page, nothing else in it.
    void* page = nullptr;
    if (const driver_status st = driver.alloc_page(driver.self, domain, page_bytes, &page);
        !st.ok())
        return unwind(nullptr, driver_error(driver, driver_op::alloc_page, st));
    if (page == nullptr || reinterpret_cast<std::uintptr_t>(page) % alignof(completion_line) != 0)
        return unwind(page, coded_error(errc::backend,
                                        {std::string(driver.call_name(driver_op::alloc_page)) +
                                         " returned a page that is null or not 64-byte aligned"}));

    // 3. Its device address.
    std::uint64_t address = 0;
    if (const driver_status st = driver.device_pointer(driver.self, domain, page, &address);
        !st.ok())
        return unwind(page, driver_error(driver, driver_op::device_pointer, st));

    mapped_line out;
    out.driver_ = &driver;
    out.page_ = page;
    out.line_ = ::new (page) completion_line();
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
    const std::uint64_t next = sequence_[i] + 1; // wraps modulo 2^64
    if (const driver_status st =
            driver_->write_value64(driver_->self, stream, device_address(slot), next);
        !st.ok())
        return driver_error(*driver_, driver_op::write_value64, st);
    sequence_[i] = next;
    stream_[i] = stream;
    return memory_descriptor(*line_, slot, next);
}

GPU_ASYNC_DECL std::optional<mapped_line::close_failure> mapped_line::close_quietly() noexcept {
    if (line_ == nullptr) return std::nullopt;
    // Every reactor ends its waits on the line and stops reading it, whatever happens next: the
    // line is gone for the host from here on, freed or leaked.
    retire_line(*line_);
    const line_driver& d = *driver_;
    std::optional<close_failure> failure;
    if (const driver_status st = d.settle(d.self, domain_); !st.ok()) {
        // A store may still be pending: never free under it. Leak the page and the reference.
        failure = close_failure{driver_op::settle, st};
    } else if (const driver_status fst = d.free_page(d.self, domain_, page_); !fst.ok()) {
        // The page may still be live in the domain: keep the domain alive with it.
        failure = close_failure{driver_op::free_page, fst};
    } else if (const driver_status rst = d.release_domain(d.self, device_, domain_); !rst.ok()) {
        failure = close_failure{driver_op::release_domain, rst};
    }
    leaked_ = failure.has_value() && failure->op != driver_op::release_domain;
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
