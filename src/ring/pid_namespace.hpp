// Which pid namespace a pid stored in the ring file belongs to: the inode
// number of /proc/self/ns/pid, written beside producer_pid and owner_pid
// (docs/layout.md), so that an observer in another namespace (another
// container) does not take them for pids of its own (docs/containers.md).
#pragma once

#include <cstdint>

namespace ringcast::detail {

// The calling process's pid namespace; 0 when /proc is not there to say.
std::uint64_t own_pid_namespace() noexcept;

// Whether a pid written with namespace `pidns` is a pid of the caller's
// namespace: yes when they match, and when either is unknown (0).
bool pid_namespace_is_ours(std::uint64_t pidns) noexcept;

}  // namespace ringcast::detail
