// Fits the process's open-file limit to --max-connections, as redis-server
// does at start-up (adjustOpenFilesLimit): a broker tool that may accept
// 10,000 clients should not stop accepting at ~1,000 because the shell's soft
// limit is 1024. The soft limit is raised toward max_connections + a reserve
// (listeners, the history store, NATS, logs), never above the hard limit; if
// the hard limit is too low, max_connections is lowered to fit and the tool
// says so. Tools only: the broker library never changes process limits, an
// embedder sizes its own.
#pragma once

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "ringcast/broker/config.hpp"

namespace ringcast::tools {

// Descriptors kept for everything but client connections.
inline constexpr rlim_t kReservedDescriptors = 64;

// Returns a warning for stderr when max_connections had to be lowered.
inline std::optional<std::string> fit_descriptor_limit(broker::BrokerConfig& cfg) {
  struct rlimit lim {};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0)
    return fmt::format("cannot read the open-file limit: {}", std::strerror(errno));
  const rlim_t needed = static_cast<rlim_t>(cfg.max_connections) + kReservedDescriptors;
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < needed) {
    struct rlimit raised = lim;
    raised.rlim_cur = lim.rlim_max == RLIM_INFINITY ? needed : std::min(needed, lim.rlim_max);
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
  }
  if (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= needed) return std::nullopt;
  const std::size_t fits = lim.rlim_cur > kReservedDescriptors * 2
                               ? static_cast<std::size_t>(lim.rlim_cur - kReservedDescriptors)
                               : static_cast<std::size_t>(lim.rlim_cur / 2);
  const std::string message = fmt::format(
      "the open-file limit is {} (hard limit {}), too low for --max-connections {} plus {} reserved descriptors: "
      "serving at most {} clients; raise the hard limit (ulimit -Hn, systemd LimitNOFILE=) for more",
      lim.rlim_cur, lim.rlim_max == RLIM_INFINITY ? std::string("unlimited") : std::to_string(lim.rlim_max),
      cfg.max_connections, kReservedDescriptors, fits);
  cfg.max_connections = fits;
  return message;
}

}  // namespace ringcast::tools
