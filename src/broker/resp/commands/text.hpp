// Text helpers the RESP command handlers share: case folding of command names
// and options, and the argument prefix Redis quotes in its error replies.
#pragma once

#include <string>
#include <string_view>

namespace ringcast::broker {

inline std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

inline std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

// printf's "%.*s" of a C string: stops at NUL and at `max` bytes.
inline std::string_view c_str_prefix(std::string_view s, std::size_t max) {
  s = s.substr(0, s.find('\0'));
  return s.substr(0, max);
}

}  // namespace ringcast::broker
