// SPDX-License-Identifier: BSL-1.0
/// @file
/// @brief The library's version, the same as the CMake package's
/// (find_package(gpu_async 0.1) and the Debian package read it from here).
///
/// Preprocessor only, so any layer may include it.
#ifndef GPU_ASYNC_VERSION_HPP
#define GPU_ASYNC_VERSION_HPP

/// The major version: an incompatible change of the API or of the registry's meaning.
#define GPU_ASYNC_VERSION_MAJOR 0
/// The minor version: new features; while the major version is 0, possibly incompatible.
#define GPU_ASYNC_VERSION_MINOR 1
/// The patch version: fixes only.
#define GPU_ASYNC_VERSION_PATCH 0

/// The version as one number, as BOOST_VERSION writes it: major * 100000 + minor * 100 + patch
/// (100 for 0.1.0), usable in `#if`.
#define GPU_ASYNC_VERSION 100

/// The version as text, "major.minor.patch".
#define GPU_ASYNC_VERSION_STRING "0.1.0"

#endif // GPU_ASYNC_VERSION_HPP
