// Helpers for ring-top's tests: running a command to completion, a small JSON
// reader and a reader of the SGR attributes tmux's `capture-pane -e` emits.
// Temporary directories, polling and child processes come from tests/common.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "child_process.hpp"
#include "eventually.hpp"
#include "temp_dir.hpp"

namespace ringcast::top::test {

using namespace std::chrono_literals;

using ringcast::test::ChildProcess;
using ringcast::test::eventually;
using ringcast::test::TempDir;

// What run() saw of a finished command.
struct Output {
  int exit_code = -1;  // 128 + signal when killed (after the deadline, by run())
  std::string out;
  std::string err;
};

// Runs argv to completion (SIGKILL after 60 s) with stdout and stderr
// captured. env_set: "NAME=value" entries added; env_unset: names removed.
inline Output run(const std::vector<std::string>& argv, const std::vector<std::string>& env_set = {},
                  const std::vector<std::string>& env_unset = {}) {
  ChildProcess c =
      ChildProcess::spawn(argv, {.err = ringcast::test::Stream::kPipe, .env_set = env_set, .env_unset = env_unset});
  std::optional<int> status = c.wait_exit(ringcast::test::deadline_in(60s));
  if (!status) status = c.stop(SIGKILL);
  return {ringcast::test::exit_code(status), c.stdout_text(), c.stderr_text()};
}

inline std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < s.size()) {
    const std::size_t nl = s.find('\n', start);
    if (nl == std::string::npos) {
      lines.push_back(s.substr(start));
      break;
    }
    lines.push_back(s.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

// --- ring-top's JSON output, parsed -----------------------------------------

// nullopt unless `text` is exactly one valid JSON value.
inline std::optional<nlohmann::json> parse_json(std::string_view text) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

// --- what tmux's capture-pane -e shows ---------------------------------------

struct CellAttr {
  bool bold = false;
  bool dim = false;
  bool underline = false;
  bool reverse = false;
  int fg = -1;  // -1: default colour; 0..255 otherwise
  [[nodiscard]] bool plain() const { return !bold && !dim && !underline && !reverse && fg < 0; }
};

struct ScreenRow {
  std::string text;
  std::vector<CellAttr> attrs;  // one per character of text
};

// Interprets the SGR sequences of `capture-pane -p -e` output. tmux writes
// each change relative to the previous cell, across line ends, so the state
// carries from one row to the next.
inline std::vector<ScreenRow> parse_sgr_capture(const std::string& captured) {
  std::vector<ScreenRow> rows(1);
  CellAttr cur;
  for (std::size_t i = 0; i < captured.size(); ++i) {
    const char c = captured[i];
    if (c == '\n') {
      rows.emplace_back();
      continue;
    }
    if (c == '\x1b') {
      if (i + 1 < captured.size() && captured[i + 1] == '[') {
        std::size_t j = i + 2;
        while (j < captured.size() && (std::isdigit(static_cast<unsigned char>(captured[j])) != 0 ||
                                       captured[j] == ';' || captured[j] == ':')) {
          ++j;
        }
        if (j < captured.size() && captured[j] == 'm') {
          std::vector<int> params;
          std::string num;
          for (std::size_t k = i + 2; k <= j; ++k) {
            if (k == j || captured[k] == ';' || captured[k] == ':') {
              params.push_back(num.empty() ? 0 : std::stoi(num));
              num.clear();
            } else {
              num += captured[k];
            }
          }
          for (std::size_t p = 0; p < params.size(); ++p) {
            const int v = params[p];
            if (v == 0) cur = CellAttr{};
            else if (v == 1) cur.bold = true;
            else if (v == 2) cur.dim = true;
            else if (v == 4) cur.underline = true;
            else if (v == 7) cur.reverse = true;
            else if (v == 22) cur.bold = cur.dim = false;
            else if (v == 24) cur.underline = false;
            else if (v == 27) cur.reverse = false;
            else if (v >= 30 && v <= 37) cur.fg = v - 30;
            else if (v >= 90 && v <= 97) cur.fg = v - 90 + 8;
            else if (v == 39) cur.fg = -1;
            else if (v == 38 && p + 2 < params.size() && params[p + 1] == 5) {
              cur.fg = params[p + 2];
              p += 2;
            } else if (v == 38 && p + 4 < params.size() && params[p + 1] == 2) {
              cur.fg = 256;  // a true colour: just "not default"
              p += 4;
            } else if ((v == 48 || v == 58) && p + 1 < params.size()) {
              p += params[p + 1] == 5 ? 2U : 4U;  // background / underline colour: ignored
            }
          }
        }
        i = j;
        continue;
      }
      // Any other escape (OSC and the like): skip to its terminator.
      std::size_t j = i + 1;
      while (j < captured.size() && captured[j] != '\x07' && captured[j] != '\n' &&
             !(captured[j] == '\\' && captured[j - 1] == '\x1b')) {
        ++j;
      }
      i = j;
      continue;
    }
    rows.back().text += c;
    rows.back().attrs.push_back(cur);
  }
  return rows;
}

}  // namespace ringcast::top::test
