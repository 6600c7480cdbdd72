// Flag parsing shared by every tool: CLI11's messages, with one exit status for
// every usage error (2, like the tools' own usage errors and most Unix tools)
// instead of CLI11's per-error codes (105 for a bad value, 106 for a missing
// flag, ...), so that scripts can tell "you called me wrong" from a failure.
#pragma once

#include <optional>

#include <CLI/CLI.hpp>

namespace ringcast::tools {

inline constexpr int kUsageExit = 2;

// Parses argv into `app`. nullopt: run the tool. A value: the tool should exit
// with it at once, CLI11 having printed the help (0) or the error (kUsageExit).
inline std::optional<int> parse_flags(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kUsageExit;
  }
}

}  // namespace ringcast::tools
