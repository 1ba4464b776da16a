// SPDX-License-Identifier: BSL-1.0
// The separately compiled unit of gpu_async (target gpu_async::compiled).
#include <gpu_async/src.hpp>
