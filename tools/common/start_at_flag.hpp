// `--from oldest|latest`: where a tool's ring consumer starts
// (BroadcastRing::register_consumer). Shared by `ringcast sub` and
// ringcast-relay so both spell and document it the same way. `what` ends the
// help's sentence "only messages published after ...".
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "ringcast/broadcast_ring.hpp"

namespace ringcast::tools {

inline CLI::Option* add_start_at_option(CLI::App& app, StartAt& start, const std::string& what) {
  return app
      .add_option_function<std::string>(
          "--from", [&start](const std::string& v) { start = v == "oldest" ? StartAt::kOldest : StartAt::kLatest; },
          "latest (default): only messages published after " + what +
              "; oldest: first the messages still in the ring (what its last capacity slots hold), then live "
              "ones. History overwritten before it is read is reported as lapped")
      ->check(CLI::IsMember({"latest", "oldest"}))
      ->type_name("FROM");
}

}  // namespace ringcast::tools
