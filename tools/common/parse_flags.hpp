// Flag parsing shared by every tool: one exit status for every usage error (2,
// like the tools' own usage errors and most Unix tools) instead of CLI11's
// per-error codes (105 for a bad value, 106 for a missing flag, ...), so that
// scripts can tell "you called me wrong" from a failure; and one message
// format, which names the program, the one argument that is wrong, the nearest
// valid spelling and where the help is:
//
//   ringcast sub: unknown flag '--cnt'; did you mean '--count'? (ringcast sub --help lists the flags)
//
// CLI11's own text for an unknown flag lists every argument it could not
// place, valid ones too (`ringcast sub --cnt 3 x.ring` blamed x.ring, which
// the 3 had pushed out of PATH), and an unknown subcommand read as "A
// subcommand is required".
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

namespace ringcast::tools {

inline constexpr int kUsageExit = 2;

// Edits (insert, delete, replace, swap two neighbours) from a to b.
[[nodiscard]] inline std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// The name in `names` nearest to `word`, if near enough to be a typo of it:
// at most a third of its letters, and at least two, edited.
[[nodiscard]] inline std::optional<std::string> nearest(std::string_view word, const std::vector<std::string>& names) {
  std::optional<std::string> best;
  std::size_t best_distance = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (const std::string& name : names) {
    if (const std::size_t d = edit_distance(word, name); d < best_distance) {
      best = name;
      best_distance = d;
    }
  }
  return best;
}

// The subcommand whose arguments the user was typing: the innermost one given.
[[nodiscard]] inline const CLI::App& innermost(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands()) return innermost(*sub);
  return app;
}

// "ringcast sub": the program and the subcommands down to `app`.
[[nodiscard]] inline std::string command_name(const CLI::App& app, std::string_view program) {
  const CLI::App* parent = app.get_parent();
  return parent == nullptr ? std::string(program) : command_name(*parent, program) + " " + app.get_name();
}

// The message for the usage error `e` (any CLI11 ParseError but a help
// request) when `program` parsed `app`.
[[nodiscard]] inline std::string usage_message(const CLI::App& app, const CLI::ParseError& e,
                                               std::string_view program) {
  const CLI::App& at = innermost(app);
  const std::string command = command_name(at, program);
  const std::string help =
      fmt::format("({} --help lists the {})", command, at.get_subcommands({}).empty() ? "flags" : "commands and flags");
  std::vector<std::string> extras = app.remaining(/*recurse=*/true);
  // A flag that is not one comes first: it may have pushed a valid argument
  // out of its place, and that one is then an extra too.
  const auto flag =
      std::find_if(extras.begin(), extras.end(), [](const std::string& s) { return s.size() > 1 && s[0] == '-'; });
  if (flag != extras.end()) {
    const std::string name = flag->substr(0, flag->find('='));
    std::vector<std::string> names;
    for (const CLI::Option* opt : at.get_options()) {
      for (const std::string& l : opt->get_lnames()) names.push_back("--" + l);
      for (const std::string& s : opt->get_snames()) names.push_back("-" + s);
    }
    const auto guess = nearest(name, names);
    return fmt::format("{}: unknown flag '{}'{} {}", command, name,
                       guess ? fmt::format("; did you mean '{}'?", *guess) : ";", help);
  }
  std::vector<std::string> commands;
  for (const CLI::App* sub : at.get_subcommands({})) commands.push_back(sub->get_name());
  if (!commands.empty() && at.get_subcommands().empty()) {
    const std::string list = fmt::format("the commands are {}", fmt::join(commands, ", "));
    if (extras.empty()) return fmt::format("{}: no command given; {} {}", command, list, help);
    const auto guess = nearest(extras.front(), commands);
    return fmt::format("{}: unknown command '{}'; {} {}", command, extras.front(),
                       guess ? fmt::format("did you mean '{}'?", *guess) : list + ".", help);
  }
  if (!extras.empty()) return fmt::format("{}: unexpected argument '{}' {}", command, extras.front(), help);
  return fmt::format("{}: {} {}", command, e.what(), help);
}

// Parses argv into `app`. nullopt: run the tool. A value: the tool should exit
// with it at once, having printed the help (0) or the usage error
// (kUsageExit). The program's name is argv[0]'s last component.
inline std::optional<int> parse_flags(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help (or --help-all)
    const std::string_view argv0 = argc > 0 ? argv[0] : "";
    const std::string_view program = argv0.substr(argv0.rfind('/') + 1);
    fmt::print(stderr, "{}\n", usage_message(app, e, program));
    return kUsageExit;
  }
}

}  // namespace ringcast::tools
