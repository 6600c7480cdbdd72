// A strict reader of Prometheus text exposition (format 0.0.4) for tests: it
// checks what a scraper relies on and returns the samples.
//  * Every line is "# HELP name text", "# TYPE name counter|gauge|...", or a
//    sample "name{label="value",...} value" (labels optional).
//  * Names match [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]*;
//    label values are quoted with \\, \" and \n escapes.
//  * A family's HELP and TYPE come once each, before its samples, and its
//    samples are contiguous; no series (name + labels) appears twice.
//  * Values parse as doubles (NaN and +Inf included).
#pragma once

#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ringcast::test {

struct PrometheusSample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // in order, unescaped
  double value = 0;
};

struct PrometheusText {
  std::vector<PrometheusSample> samples;
  std::map<std::string, std::string> types;  // family -> "counter", "gauge", ...
  std::string error;                         // empty when the text is well formed

  [[nodiscard]] bool ok() const { return error.empty(); }
  // The value of the series `name` whose labels include every given pair.
  [[nodiscard]] std::optional<double> value(std::string_view name,
                                            const std::vector<std::pair<std::string, std::string>>& labels = {}) const {
    for (const PrometheusSample& s : samples) {
      if (s.name != name) continue;
      bool all = true;
      for (const auto& want : labels) {
        bool found = false;
        for (const auto& have : s.labels) found = found || have == want;
        all = all && found;
      }
      if (all) return s.value;
    }
    return std::nullopt;
  }
  [[nodiscard]] bool has_family(std::string_view name) const { return types.count(std::string(name)) > 0; }
};

namespace detail {

inline bool is_name(std::string_view s, bool colon_ok) {
  if (s.empty()) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon_ok && c == ':');
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

}  // namespace detail

inline PrometheusText parse_prometheus(std::string_view text) {
  PrometheusText out;
  std::set<std::string> helped;
  std::set<std::string> finished;  // families whose samples ended
  std::set<std::string> series;
  std::string current;  // family of the previous sample
  auto fail = [&out](std::size_t line_no, const std::string& why, std::string_view line) {
    if (out.error.empty()) out.error = "line " + std::to_string(line_no) + ": " + why + ": '" + std::string(line) + "'";
  };
  std::size_t line_no = 0;
  while (!text.empty() && out.error.empty()) {
    const auto nl = text.find('\n');
    if (nl == std::string_view::npos) {
      fail(line_no + 1, "the text does not end with a newline", text);
      break;
    }
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    ++line_no;
    if (line.empty()) continue;
    if (line.front() == '#') {
      std::istringstream in{std::string(line)};
      std::string hash, kind, name, rest;
      in >> hash >> kind >> name;
      std::getline(in, rest);
      if (kind != "HELP" && kind != "TYPE") continue;  // other comments are allowed
      if (!detail::is_name(name, true)) {
        fail(line_no, "bad metric name", line);
      } else if (kind == "HELP") {
        if (!helped.insert(name).second) fail(line_no, "second HELP", line);
        if (out.types.count(name) > 0) fail(line_no, "HELP after TYPE", line);
      } else {
        const std::string type = rest.empty() ? rest : rest.substr(1);
        if (type != "counter" && type != "gauge" && type != "histogram" && type != "summary" && type != "untyped") {
          fail(line_no, "bad TYPE", line);
        }
        if (helped.count(name) == 0) fail(line_no, "TYPE without HELP before it", line);
        if (!out.types.emplace(name, type).second) fail(line_no, "second TYPE", line);
      }
      continue;
    }
    PrometheusSample s;
    std::size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    s.name = std::string(line.substr(0, i));
    if (!detail::is_name(s.name, true)) {
      fail(line_no, "bad metric name", line);
      break;
    }
    std::string series_key = s.name;
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        const auto eq = line.find('=', i);
        if (eq == std::string_view::npos || eq + 1 >= line.size() || line[eq + 1] != '"') {
          fail(line_no, "bad label", line);
          break;
        }
        std::string label(line.substr(i, eq - i));
        if (!detail::is_name(label, false)) fail(line_no, "bad label name", line);
        std::string value;
        std::size_t j = eq + 2;
        for (; j < line.size() && line[j] != '"'; ++j) {
          if (line[j] == '\\' && j + 1 < line.size()) {
            const char e = line[++j];
            if (e != '\\' && e != '"' && e != 'n') fail(line_no, "bad escape in a label value", line);
            value += e == 'n' ? '\n' : e;
          } else {
            value += line[j];
          }
        }
        if (j >= line.size()) {
          fail(line_no, "unterminated label value", line);
          break;
        }
        series_key += "\x1f" + label + "=" + value;
        s.labels.emplace_back(std::move(label), std::move(value));
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size()) {
        fail(line_no, "unterminated labels", line);
        break;
      }
      ++i;  // '}'
    }
    if (i >= line.size() || line[i] != ' ') {
      fail(line_no, "no value", line);
      break;
    }
    const std::string value_text(line.substr(i + 1));
    char* end = nullptr;
    s.value = std::strtod(value_text.c_str(), &end);
    if (value_text.empty() || end != value_text.c_str() + value_text.size()) {
      fail(line_no, "bad value", line);
      break;
    }
    // Our families have no histogram/summary suffixes: a sample's family is its name.
    const std::string& family = s.name;
    if (out.types.count(family) == 0) fail(line_no, "sample before its family's TYPE", line);
    if (family != current) {
      if (!current.empty()) finished.insert(current);
      if (finished.count(family) > 0) fail(line_no, "the family's samples are not contiguous", line);
      current = family;
    }
    if (!series.insert(series_key).second) fail(line_no, "a series appears twice", line);
    out.samples.push_back(std::move(s));
  }
  return out;
}

}  // namespace ringcast::test
