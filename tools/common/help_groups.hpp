// --help in groups, most used first, for the tools with many flags
// (ringcast-broker, ringcast-relay). CLI11 prints the groups in the order their
// first option was added, which is the order of the settings tables; this
// prints them in the order the tool lists them, and a flag no group names
// under "Other options" after them.
#pragma once

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

namespace ringcast::tools {

struct HelpGroup {
  std::string title;
  // "--port", or "--tls-*" for every flag whose name starts "--tls-".
  std::vector<std::string> flags;
};

inline constexpr std::string_view kOtherOptionsGroup = "Other options";

// CLI11's formatter with the groups in a fixed order.
class GroupedFormatter : public CLI::Formatter {
 public:
  explicit GroupedFormatter(std::vector<std::string> order) : order_(std::move(order)) {}

  // CLI11's make_help, with grouped() for its make_groups (not virtual in 2.1).
  std::string make_help(const CLI::App* app, std::string name, CLI::AppFormatMode mode) const override {
    if (mode == CLI::AppFormatMode::Sub) return make_expanded(app);
    return make_description(app) + make_usage(app, std::move(name)) + make_positionals(app) + grouped(app, mode) +
           make_subcommands(app, mode) + "\n" + make_footer(app);
  }

 private:
  std::string grouped(const CLI::App* app, CLI::AppFormatMode mode) const {
    std::vector<std::string> groups = order_;
    for (const std::string& g : app->get_groups()) {
      if (std::find(groups.begin(), groups.end(), g) == groups.end()) groups.push_back(g);
    }
    std::ostringstream out;
    for (const std::string& group : groups) {
      const auto opts = app->get_options([&](const CLI::Option* opt) {
        return opt->get_group() == group && opt->nonpositional() &&
               (mode != CLI::AppFormatMode::Sub || app->get_help_ptr() != opt);
      });
      if (!opts.empty()) out << make_group(group, false, opts);
    }
    return out.str();
  }

  std::vector<std::string> order_;
};

// Puts every option of `app` in the first of `groups` that names it (options
// already in a group of their own, such as the old names, keep it), and has
// --help print the groups in this order. The help flag joins the first group.
// Call after the options are added.
inline void set_help_groups(CLI::App& app, const std::vector<HelpGroup>& groups) {
  const std::string default_group = app.get_help_ptr()->get_group();
  const auto names = [](const CLI::Option& opt, const std::string& flag) {
    for (const std::string& l : opt.get_lnames()) {
      const std::string name = "--" + l;
      if (flag.back() == '*' ? name.rfind(flag.substr(0, flag.size() - 1), 0) == 0 : name == flag) return true;
    }
    return false;
  };
  std::vector<std::string> order;
  for (const HelpGroup& g : groups) order.push_back(g.title);
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_group() != default_group || !opt->nonpositional()) continue;
    std::string title(kOtherOptionsGroup);
    for (const HelpGroup& g : groups) {
      if (std::any_of(g.flags.begin(), g.flags.end(), [&](const std::string& f) { return names(*opt, f); })) {
        title = g.title;
        break;
      }
    }
    opt->group(title);
  }
  app.get_help_ptr()->group(order.front());
  app.formatter(std::make_shared<GroupedFormatter>(std::move(order)));
}

}  // namespace ringcast::tools
