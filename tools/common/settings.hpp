// Settings from a file or the environment for the long-running tools
// (ringcast-broker, ringcast-relay; docs/broker.md, "Settings"). Every long
// flag --some-flag can also come from
//  * the environment, as RINGCAST_SOME_FLAG (env_name), or
//  * the --config FILE (or $RINGCAST_CONFIG), as `some-flag = value` in the
//    TOML/INI subset CLI11 reads.
// Precedence, highest first: flag, environment, file, default.
//
// CLI11 2.1 reads the config file before the environment, and an option that
// has a value takes no other, so on its own it would let the file beat the
// environment. EnvFirstConfig drops the file's entries whose variable is set,
// which restores environment > file; it also turns a key that names no setting
// into an error (exit 2) instead of CLI11's default of ignoring it.
//
// parse_settings names the variables when it parses, for every option added
// by then, so a flag added later to a tool or to BrokerFlags gets its variable
// and its config key without further code.
#pragma once

#include <cctype>
#include <cstdlib>
#include <iostream>
#include <istream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "config_schema.hpp"
#include "parse_flags.hpp"

namespace ringcast::tools {

inline constexpr std::string_view kEnvPrefix = "RINGCAST_";

// "--hard-limit" or "hard-limit" -> "RINGCAST_HARD_LIMIT": the prefix, then the
// long name without its dashes, upper case, '-' as '_'.
[[nodiscard]] inline std::string env_name(std::string_view long_name) {
  while (!long_name.empty() && long_name.front() == '-') long_name.remove_prefix(1);
  std::string out(kEnvPrefix);
  for (const char c : long_name) {
    out += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return out;
}

// A variable counts as set when it is non-empty, as CLI11 reads it.
[[nodiscard]] inline bool env_is_set(const std::string& name) {
  const char* value = name.empty() ? nullptr : std::getenv(name.c_str());
  return value != nullptr && *value != '\0';
}

// Options whose value is a secret, which --print-config leaves out: a name that
// says password or secret, unless it names a file (--requirepass-file, where
// secrets are better kept).
[[nodiscard]] inline bool is_secret(const CLI::Option& opt) {
  const std::string name = opt.get_single_name();
  const bool names_file = name.size() >= 5 && name.compare(name.size() - 5, 5, "-file") == 0;
  const bool says_secret =
      name == "requirepass" || name.find("password") != std::string::npos || name.find("secret") != std::string::npos;
  return says_secret && !names_file;
}

// CLI11's TOML/INI reader, with environment > file and unknown keys refused.
class EnvFirstConfig : public CLI::ConfigTOML {
 public:
  explicit EnvFirstConfig(const CLI::App& app) : app_(app) {}

  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override {
    std::vector<CLI::ConfigItem> kept;
    for (CLI::ConfigItem& item : CLI::ConfigTOML::from_config(input)) {
      const CLI::Option* opt = item.parents.empty() ? app_.get_option_no_throw("--" + item.name) : nullptr;
      if (!item.parents.empty()) {
        throw CLI::ConfigError(file() + ": unknown section '[" + item.parents.front() +
                               "]' (settings go at the top level, `flag-name = value`)");
      }
      if (opt == nullptr || !opt->get_configurable()) {
        throw CLI::ConfigError(file() + ": unknown setting '" + item.name +
                               "' (settings are the long flags without their dashes, see --help)");
      }
      if (env_is_set(opt->get_envname())) continue;  // the environment beats the file
      kept.push_back(std::move(item));
    }
    return kept;
  }

 private:
  std::string file() const {
    const CLI::Option* config = app_.get_config_ptr();
    if (config != nullptr && !config->results().empty()) return config->results().front();
    return config != nullptr ? config->get_default_str() : std::string("config file");
  }

  const CLI::App& app_;
};

// Adds --config and --print-config to `app`, names a RINGCAST_ variable for
// every configurable option that has none yet, and parses argv as parse_flags
// does (nullopt: run the tool; a value: exit with it). With --print-config it
// prints the effective settings as a config file (without secrets) and
// returns 0. A missing or unreadable file, or a key that names no setting, is
// a usage error (kUsageExit).
inline std::optional<int> parse_settings(CLI::App& app, int argc, char** argv) {
  const std::string config_env = env_name("config");
  const bool config_from_env = env_is_set(config_env);
  app.set_config("--config", config_from_env ? std::getenv(config_env.c_str()) : "",
                 "Read settings from this TOML/INI file, one `flag-name = value` per line; flags and "
                 "RINGCAST_* variables override it (docs/broker.md, \"Settings\")",
                 config_from_env)
      ->envname(config_env)
      ->type_name("FILE")
      ->group(app.get_help_ptr()->get_group());
  bool print = false;
  app.add_flag("--print-config", print,
               "Print the effective settings (flags > RINGCAST_* variables > --config file > defaults) "
               "as a config file, without secrets, and exit")
      ->configurable(false)
      ->group(app.get_help_ptr()->get_group());
  if (CLI::Option* help = app.get_help_ptr()) help->configurable(false);
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_configurable() && opt->get_envname().empty() && !opt->get_lnames().empty()) {
      opt->envname(env_name(opt->get_lnames().front()));
    }
  }
  app.config_formatter(std::make_shared<EnvFirstConfig>(app));
  app.allow_config_extras(CLI::config_extras_mode::error);
  if (app.get_footer().empty()) {
    app.footer(
        "Every flag can also be set in the --config file (`hard-limit = \"64mb\"`) or in the environment, "
        "prefixed RINGCAST_ (RINGCAST_HARD_LIMIT=64mb); a flag beats the environment, which beats the file.");
  }
  if (const auto exit_status = parse_flags(app, argc, argv)) return exit_status;
  if (!print) return std::nullopt;
  // Left out: secrets, options without a value or a default (an empty value
  // would not read back: `requirepass-file = ""` names no file), and the old
  // names of settings, whose values their new names print (config_schema.hpp).
  for (CLI::Option* opt : app.get_options()) {
    const bool unset = opt->count() == 0 && opt->get_default_str().empty() && opt->get_expected_min() > 0;
    if (is_secret(*opt) || unset || opt->get_group() == kOldNamesGroup) opt->configurable(false);
  }
  std::cout << app.config_to_str(/*default_also=*/true, /*write_description=*/true);
  return 0;
}

}  // namespace ringcast::tools
