// The settings schema of the long-running tools (ringcast-broker,
// ringcast-relay): one table entry per setting, in the spirit of redis
// config.c's table. An entry names the setting (the long flag without its
// dashes, which is also its config-file key and, as RINGCAST_NAME, its
// environment variable; settings.hpp), says how its text becomes a member of
// the configuration struct and how that member is written back, and carries
// the help text. Its default is never written down: it is the member's value
// in the struct the entry is registered with (a fresh BrokerConfig{}, ...).
//
// Values are normalized as they are parsed ("5MB" becomes "5mb", a bare
// --ack-timeout 5 becomes "5s"), so --print-config writes what the
// configuration holds, with units, and reads back to the same configuration.
//
// Old names. An entry may keep the name a setting had before the units rule
// (--max-stall-ms beside --max-stall): the old name is a flag, variable and
// key of its own in the "Old names" group of --help, and its bare numbers keep
// their old unit (--max-stall-ms 200 is --max-stall 200ms). Giving both names
// of one setting, at any level, is a usage error; --print-config writes the
// new name only.
//
// Checks that relate settings to each other live in the configuration's
// validate() (broker::validate for BrokerConfig), not here: an entry only
// parses its own value.
#pragma once

#include <charconv>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "ringcast/broker/config.hpp"

namespace ringcast::tools {

// The --help group of the old names of settings (settings.hpp leaves them out
// of --print-config).
inline constexpr std::string_view kOldNamesGroup = "Old names (aliases kept working)";

template <class Config>
struct Setting {
  enum class Kind : std::uint8_t {
    kValue,  // one value, parsed by `parse` and written back by `format`
    kFlag,   // a flag without a value, bound to a bool member
    kList,   // repeatable, every value kept in a std::vector<std::string> member
  };
  std::string name;  // "hard-limit"
  std::string help;
  std::string type_name;  // shown in --help: SIZE, DURATION, ...
  Kind kind = Kind::kValue;
  // kValue: the text into the member; a value is what is wrong with the text.
  std::function<std::optional<std::string>(Config&, const std::string&)> parse;
  // kValue: the member as text `parse` reads back ("32mb", "200ms"); empty
  // when it has no value (an unset port).
  std::function<std::string(const Config&)> format;
  std::function<bool&(Config&)> flag;                      // kFlag
  std::function<std::vector<std::string>&(Config&)> list;  // kList
  char delimiter = '\0';                                   // kList: splits one value into several
  bool existing_file = false;                              // the value names a file that must exist
  bool show_default = true;                                // false: the default depends on other settings
  std::string old_name;                                    // "max-stall-ms": the name before the units rule, if any
  std::string old_unit;                                    // "ms": what a bare number given to old_name means
};

// --- entries, one factory per kind of value ---------------------------------
// `get` is a generic lambda returning the member, `[](auto& c) -> auto& {
// return c.queue_limits.hard_bytes; }` (RINGCAST_MEMBER below), so that one
// accessor serves a const and a mutable configuration.

// The accessor of one member, `RINGCAST_MEMBER(queue_limits.hard_bytes)`, for
// the tables' `get`.
#define RINGCAST_MEMBER(path) \
  [](auto& c) -> auto& { return c.path; }

namespace schema {

// A whole number of type T and nothing else (from_chars fails on overflow), or nullopt.
template <class T>
std::optional<T> parse_whole(const std::string& text) {
  T value{};
  const auto r = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || r.ec != std::errc() || r.ptr != text.data() + text.size()) return std::nullopt;
  return value;
}

template <class Config>
Setting<Config> make(std::string name, std::string help, std::string type_name) {
  Setting<Config> s;
  s.name = std::move(name);
  s.help = std::move(help);
  s.type_name = std::move(type_name);
  return s;
}

template <class Config, class Get>
Setting<Config> size(std::string name, Get get, std::string help) {
  Setting<Config> s = make<Config>(std::move(name), std::move(help), "SIZE");
  s.parse = [get](Config& c, const std::string& text) -> std::optional<std::string> {
    const auto bytes = broker::parse_size(text);
    using T = std::remove_reference_t<decltype(get(c))>;
    if (!bytes || *bytes > static_cast<std::size_t>(std::numeric_limits<T>::max())) {
      return "'" + text + "': expected a size such as 4096, 64kb, 32mb, 1gb";
    }
    get(c) = static_cast<T>(*bytes);
    return std::nullopt;
  };
  s.format = [get](const Config& c) { return broker::format_size(static_cast<std::size_t>(get(c))); };
  return s;
}

// A duration within [min, max]; a bare number as `bare` says.
template <class Config, class Get>
Setting<Config> duration(std::string name, Get get, std::string help,
                         broker::BareDuration bare = broker::BareDuration::kRefused,
                         std::chrono::milliseconds min = std::chrono::milliseconds(0),
                         std::chrono::milliseconds max = std::chrono::milliseconds::max()) {
  Setting<Config> s = make<Config>(std::move(name), std::move(help), "DURATION");
  s.parse = [get, bare, min, max](Config& c, const std::string& text) -> std::optional<std::string> {
    const auto d = broker::parse_duration(text, bare);
    if (!d) {
      return "'" + text + "': expected a duration such as 250ms, 30s, 15m, 24h, 7d" +
             (bare == broker::BareDuration::kSeconds ? " (bare: seconds)" : " (or 0)");
    }
    if (*d < min) return "'" + text + "': at least " + broker::format_duration(min);
    if (*d > max) return "'" + text + "': at most " + broker::format_duration(max);
    using D = std::remove_reference_t<decltype(get(c))>;
    get(c) = std::chrono::duration_cast<D>(*d);
    return std::nullopt;
  };
  s.format = [get](const Config& c) {
    return broker::format_duration(std::chrono::duration_cast<std::chrono::milliseconds>(get(c)));
  };
  return s;
}

// A whole number of the member's type within [min, max].
template <class Config, class Get,
          class T = std::remove_reference_t<decltype(std::declval<Get>()(std::declval<Config&>()))>>
Setting<Config> number(std::string name, Get get, std::string help, T min = std::numeric_limits<T>::min(),
                       T max = std::numeric_limits<T>::max()) {
  Setting<Config> s = make<Config>(std::move(name), std::move(help), "INT");
  s.parse = [get, min, max](Config& c, const std::string& text) -> std::optional<std::string> {
    const auto value = parse_whole<T>(text);
    if (!value || *value < min || *value > max) {
      return "'" + text + "': expected a whole number from " + std::to_string(min) + " to " + std::to_string(max);
    }
    get(c) = *value;
    return std::nullopt;
  };
  s.format = [get](const Config& c) { return std::to_string(get(c)); };
  return s;
}

// A TCP port held in a std::optional<std::uint16_t> member: no default, off unless given.
template <class Config, class Get>
Setting<Config> optional_port(std::string name, Get get, std::string help) {
  Setting<Config> s = make<Config>(std::move(name), std::move(help), "PORT");
  s.parse = [get](Config& c, const std::string& text) -> std::optional<std::string> {
    const auto value = parse_whole<std::uint16_t>(text);
    if (!value) return "'" + text + "': expected a port from 0 to 65535";
    get(c) = *value;
    return std::nullopt;
  };
  s.format = [get](const Config& c) { return get(c) ? std::to_string(*get(c)) : std::string(); };
  return s;
}

template <class Config, class Get>
Setting<Config> text(std::string name, Get get, std::string help, std::string type_name = "TEXT") {
  Setting<Config> s = make<Config>(std::move(name), std::move(help), std::move(type_name));
  s.parse = [get](Config& c, const std::string& value) -> std::optional<std::string> {
    get(c) = value;
    return std::nullopt;
  };
  s.format = [get](const Config& c) { return std::string(get(c)); };
  return s;
}

// A path to a file that must exist.
template <class Config, class Get>
Setting<Config> file(std::string name, Get get, std::string help) {
  Setting<Config> s = text<Config>(std::move(name), get, std::move(help));  // CLI::ExistingFile adds ":FILE"
  s.existing_file = true;
  return s;
}

// One of a few names: `parse_name` gives the member's value or nullopt,
// `name_of` its name; `choices` is what the error lists.
template <class Config, class Get, class Parse, class Name>
Setting<Config> choice(std::string name, Get get, std::string help, Parse parse_name, Name name_of,
                       std::string choices) {
  Setting<Config> s = make<Config>(std::move(name), std::move(help), "NAME");
  s.parse = [get, parse_name, choices](Config& c, const std::string& text) -> std::optional<std::string> {
    const auto value = parse_name(text);
    if (!value) return "'" + text + "': expected " + choices;
    get(c) = *value;
    return std::nullopt;
  };
  s.format = [get, name_of](const Config& c) { return std::string(name_of(get(c))); };
  return s;
}

template <class Config, class Get>
Setting<Config> flag(std::string name, Get get, std::string help) {
  Setting<Config> s = make<Config>(std::move(name), std::move(help), "");
  s.kind = Setting<Config>::Kind::kFlag;
  s.flag = [get](Config& c) -> bool& { return get(c); };
  return s;
}

// Repeatable; with a `delimiter`, one value may also hold several ("a,b").
template <class Config, class Get>
Setting<Config> list(std::string name, Get get, std::string help, char delimiter = '\0') {
  Setting<Config> s = make<Config>(std::move(name), std::move(help), "TEXT");
  s.kind = Setting<Config>::Kind::kList;
  s.delimiter = delimiter;
  s.list = [get](Config& c) -> std::vector<std::string>& { return get(c); };
  return s;
}

// The entry, also reachable by its old name, whose bare numbers mean `old_unit`.
template <class Config>
Setting<Config> with_old_name(Setting<Config> s, std::string old_name, std::string old_unit) {
  s.old_name = std::move(old_name);
  s.old_unit = std::move(old_unit);
  return s;
}

}  // namespace schema

// Registers every entry of `table` on `app` as a long option writing into
// `cfg` (which must outlive parsing), with the value `cfg` holds now as its
// default, and the entry's old name beside it.
template <class Config>
void add_settings(CLI::App& app, const std::vector<Setting<Config>>& table, Config& cfg) {
  for (const Setting<Config>& s : table) {
    const std::string flag_name = "--" + s.name;
    CLI::Option* opt = nullptr;
    switch (s.kind) {
      case Setting<Config>::Kind::kFlag:
        opt = app.add_flag(flag_name, s.flag(cfg), s.help);
        break;
      case Setting<Config>::Kind::kList:
        opt = app.add_option(flag_name, s.list(cfg), s.help);
        if (s.delimiter != '\0') {
          opt->delimiter(s.delimiter);
        } else {
          opt->take_all();
        }
        break;
      case Setting<Config>::Kind::kValue: {
        auto parse = s.parse;
        auto format = s.format;
        // The callback gets the text the transform below has already parsed.
        opt = app.add_option_function<std::string>(
            flag_name, [parse, &cfg](const std::string& text) { (void)parse(cfg, text); }, s.help);
        opt->transform(CLI::Validator(
            [parse, format](std::string& text) -> std::string {
              Config scratch{};
              if (auto wrong = parse(scratch, text)) return *wrong;
              text = format(scratch);
              return {};
            },
            ""));
        if (s.show_default) opt->default_str(s.format(cfg));
        break;
      }
    }
    if (s.existing_file) opt->check(CLI::ExistingFile);
    if (!s.type_name.empty()) opt->type_name(s.type_name);
    if (s.old_name.empty()) continue;
    // The old name hands its value, with its old unit, to the new name.
    const std::string old_flag = "--" + s.old_name;
    const std::string unit = s.old_unit;
    app.add_option_function<std::string>(
           old_flag,
           [opt, old_flag, unit](const std::string& text) {
             if (opt->count() > 0) {
               throw CLI::ValidationError(old_flag, "the old name of " + opt->get_name() + "; give only one of them");
             }
             const bool bare = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
             opt->add_result(bare ? text + unit : text);
             opt->run_callback();
           },
           "Old name of " + flag_name + " (bare numbers: " + unit + ")")
        ->type_name(s.type_name)
        ->group(std::string(kOldNamesGroup));
  }
}

}  // namespace ringcast::tools
