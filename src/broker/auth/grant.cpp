#include "ringcast/broker/grant.hpp"

#include "broker/util/glob.hpp"

namespace ringcast::broker {

namespace {

bool any_match(const std::optional<std::vector<std::string>>& globs, std::string_view channel) noexcept {
  if (!globs) return true;
  for (const std::string& g : *globs) {
    if (glob_match(g, channel)) return true;
  }
  return false;
}

// Rules 1-3 of Grant::may_subscribe_pattern for one granted glob.
bool covers(std::string_view glob, std::string_view pattern) noexcept {
  if (glob == pattern) return true;
  const std::size_t pattern_literal = glob_literal_prefix(pattern);
  if (pattern_literal == pattern.size()) return glob_match(glob, pattern);
  const std::size_t glob_literal = glob_literal_prefix(glob);
  if (glob_literal + 1 != glob.size() || glob.back() != '*') return false;
  // Every channel the pattern matches starts with its literal prefix
  // (glob_literal_prefix), hence with the glob's, which is all the glob asks.
  return pattern.substr(0, pattern_literal).starts_with(glob.substr(0, glob_literal));
}

}  // namespace

bool Grant::may_subscribe(std::string_view channel) const noexcept { return any_match(subscribe, channel); }

bool Grant::may_subscribe_pattern(std::string_view pattern) const noexcept {
  if (!subscribe) return true;
  for (const std::string& g : *subscribe) {
    if (covers(g, pattern)) return true;
  }
  return false;
}

bool Grant::may_publish(std::string_view channel) const noexcept { return any_match(publish, channel); }

}  // namespace ringcast::broker
