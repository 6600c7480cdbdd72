// Finding ringcast rings on disk for ring-top.
//
// A file is a ring when its first bytes carry kMagic and kLayoutVersion
// (include/ringcast/layout.hpp). Discovery only reads those 12 bytes through
// pread: it never maps, locks or writes a file, so scanning a directory full of
// other programs' shared memory cannot disturb them.
//
// Thread safety: free functions with no shared state; any thread may call them.
#pragma once

#include <string>
#include <vector>

namespace ringcast::top {

// Where `ring-top` looks when given no argument: POSIX shared memory on Linux.
inline constexpr const char* kDefaultRingDir = "/dev/shm";

// True when `path` is a regular file (symlinks are not followed) whose header
// names a ring of this layout version. False for anything else, including
// files we may not read, FIFOs and sockets (opened non-blocking, never read),
// files still being initialised (magic 0) and rings of another layout version.
// Never fails loudly: discovery ignores what it cannot recognise.
[[nodiscard]] bool is_ring_file(const std::string& path) noexcept;

// The rings directly inside `dir` (not recursive), sorted by path. An
// unreadable or missing directory yields an empty list.
[[nodiscard]] std::vector<std::string> discover_rings(const std::string& dir);

}  // namespace ringcast::top
