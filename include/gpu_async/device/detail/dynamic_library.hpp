// SPDX-License-Identifier: BSL-1.0
//
// gpu_async/device/detail/dynamic_library.hpp: opening a vendor library by name at run time.
//
// Libraries are opened once and never closed (a GPU driver must not be unloaded while the
// process may still run its threads or its exit handlers).
//
#ifndef GPU_ASYNC_DEVICE_DETAIL_DYNAMIC_LIBRARY_HPP
#define GPU_ASYNC_DEVICE_DETAIL_DYNAMIC_LIBRARY_HPP

#include <dlfcn.h>

#include <string>

namespace gpu_async::detail {

/// dlopen(name, RTLD_NOW | RTLD_LOCAL); on failure null and `why` holds dlerror()'s text.
inline void* open_library(const char* name, std::string& why) {
    void* handle = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        const char* e = ::dlerror();
        why = e != nullptr ? e : "dlopen failed";
    }
    return handle;
}

/// dlsym(handle, name), or null.
inline void* library_symbol(void* handle, const char* name) noexcept {
    return ::dlsym(handle, name);
}

} // namespace gpu_async::detail

#endif // GPU_ASYNC_DEVICE_DETAIL_DYNAMIC_LIBRARY_HPP
