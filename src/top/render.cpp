#include "top/render.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <span>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ringcast/layout.hpp"

namespace ringcast::top {
namespace {

// Column widths of an 80-column screen. A wider terminal gives its extra
// columns to the ring name, up to kMaxNameWidth.
constexpr std::size_t kBaseCols = 80;
constexpr std::size_t kNameWidth = 20;
constexpr std::size_t kMaxNameWidth = 48;
constexpr std::size_t kBarWidth = 8;
constexpr std::size_t kProcessWidth = 12;

std::string fit(std::string_view s, std::size_t width) {
  if (s.size() <= width) return std::string(s);
  if (width == 0) return {};
  // '~' marks the cut, as some shells abbreviate paths.
  return std::string(s.substr(0, width - 1)) + "~";
}

// Ring files often share a prefix and differ at the end (ringcast-demo-4242.ring,
// ringcast-demo-4343.ring): a cut name keeps both ends.
std::string fit_middle(std::string_view s, std::size_t width) {
  if (s.size() <= width) return std::string(s);
  if (width < 5) return fit(s, width);
  const std::size_t tail = (width - 1) / 2;
  const std::size_t head = width - 1 - tail;
  return std::string(s.substr(0, head)) + "~" + std::string(s.substr(s.size() - tail));
}

std::string format_interval(double s) { return s < 10 ? fmt::format("{:.1f}s", s) : fmt::format("{:.0f}s", s); }

std::string format_pct(double pct) {
  if (pct >= 1000) return ">999%";
  return fmt::format("{:.1f}%", pct);
}

Style bar_style(double fill) {
  if (fill >= 0.9) return Style::kBarHigh;
  if (fill >= 0.5) return Style::kBarMid;
  return Style::kBarLow;
}

std::string ring_state_word(const RingView& r) {
  if (r.state == RingPresence::kGone) return "GONE";
  if (r.blocked) return "BLOCKED";
  return r.drained ? "drained" : "pending";
}

void clip(Line& line, std::size_t cols) {
  std::size_t used = 0;
  for (auto it = line.spans.begin(); it != line.spans.end(); ++it) {
    if (used + it->text.size() > cols) {
      it->text.resize(cols - used);
      line.spans.erase(std::next(it), line.spans.end());
      return;
    }
    used += it->text.size();
  }
}

Line text_line(std::string s, Style style = Style::kPlain) {
  Line l;
  l.style = style;
  l.spans.push_back({std::move(s), Style::kPlain});
  return l;
}

struct Widths {
  std::size_t name = kNameWidth;
};

Widths widths_for(std::size_t cols) {
  Widths w;
  if (cols > kBaseCols) w.name = std::min(kMaxNameWidth, kNameWidth + (cols - kBaseCols));
  return w;
}

Line ring_header(const Widths& w) {
  return text_line(fmt::format("  {:<{}} {:>7} {:>7} {:>7} {:<10} {:>4} {:>5} {:<7}", "RING", w.name, "CAP", "MSGS/s",
                               "BYTES/s", " FILL", "", "CONS", "STATE"),
                   Style::kHeader);
}

// Cursors, lags and their rates count positions (slots): on a ring whose
// messages may take several, the rate column says so.
Line consumer_header(const RingView& r) {
  return text_line(
      fmt::format("    {:>2} {:>7} {:<{}} {:<6} {:>11} {:>9} {:>6} {:>7} {:>7}", "#", "PID", "PROCESS", kProcessWidth,
                  "STATE", "CURSOR", "LAG", "LAG%", r.max_message > kMaxPayload ? "SLOTS/s" : "RECV/s", "IDLE"),
      Style::kHeader);
}

Line ring_row(const RingView& r, bool selected, bool marker, const Widths& w) {
  Line l;
  const bool gone = r.state == RingPresence::kGone;
  l.style = selected ? Style::kSelected : (gone ? Style::kGone : Style::kPlain);
  const std::string mark = marker && selected ? "> " : "  ";
  const std::string name = fmt::format("{}{:<{}} ", mark, fit_middle(r.name, w.name), w.name);
  if (gone) {
    l.spans.push_back({fmt::format("{}{:>7} {:>7} {:>7} {:<10} {:>4} {:>5} ", name,
                                   r.capacity > 0 ? format_count(r.capacity, 7) : "-", "-", "-", "", "", "-"),
                       Style::kPlain});
    l.spans.push_back({"GONE", Style::kGone});
    return l;
  }
  l.spans.push_back({fmt::format("{}{:>7} {:>7} {:>7} [", name, format_count(r.capacity, 7), format_rate(r.push_rate),
                                 format_rate(r.byte_rate)),
                     Style::kPlain});
  const auto filled = static_cast<std::size_t>(std::lround(r.fill * static_cast<double>(kBarWidth)));
  const std::size_t hashes = std::min(kBarWidth, r.fill > 0 && filled == 0 ? std::size_t{1} : filled);
  l.spans.push_back({std::string(hashes, '#'), bar_style(r.fill)});
  l.spans.push_back({std::string(kBarWidth - hashes, '.'), Style::kDim});
  l.spans.push_back(
      {fmt::format("] {:>3.0f}% {:>5} ", r.fill * 100.0, fmt::format("{}/{}", r.active_consumers, kMaxConsumers)),
       Style::kPlain});
  l.spans.push_back({ring_state_word(r), r.blocked ? Style::kWarn : Style::kPlain});
  return l;
}

Line ring_detail(const RingView& r) {
  if (r.state == RingPresence::kGone) {
    return text_line(fmt::format("    gone: {}", r.gone_reason), Style::kGone);
  }
  // drained and blocked are the ring row's STATE; this line adds the producer
  // and the ring's mode.
  // The words are ringcast info's (to_string(ProducerState)); dead in capitals,
  // as a dead consumer is.
  Line l;
  if (r.producer == ProducerState::kNone || r.producer == ProducerState::kLeft) {
    l.spans.push_back({fmt::format("    producer {}", to_string(r.producer)), Style::kPlain});
  } else {
    l.spans.push_back({fmt::format("    producer {} {} ", r.producer_pid,
                                   r.producer_process.empty() ? "-" : fit(r.producer_process, kProcessWidth)),
                       Style::kPlain});
    if (r.producer == ProducerState::kLive) {
      // "waiting": asleep in push_wait, i.e. blocked until a consumer moves.
      l.spans.push_back({r.producer_sleeping ? "waiting" : "alive", Style::kPlain});
    } else {
      // A live producer can be caught mid-write; a dead one left the slot torn
      // until the next producer repairs it.
      l.spans.push_back({r.half_written_slot ? "DEAD mid-write" : "DEAD", Style::kWarn});
    }
  }
  std::string mode = r.lossy ? "lossy" : "blocking";
  if (r.wakeups) mode += ", wakeups";
  // Consumers can sleep in recv_wait on every ring, not only wakeups rings.
  if (r.sleeping_consumers > 0) mode += fmt::format(" ({} asleep)", r.sleeping_consumers);
  l.spans.push_back({"  " + mode, Style::kPlain});
  return l;
}

// What the producer has published, where it is (positions count slots) and
// the largest message the ring takes.
Line traffic_line(const RingView& r) {
  return text_line(fmt::format("    messages {} ({})  position {}  max message {}", format_count(r.messages, 11),
                               format_bytes(r.payload_bytes), format_count(r.producer_seq, 11),
                               format_size(r.max_message)));
}

// Shown under the detail line only when the producer reported loss before it:
// a NATS ingress saw gaps in its source's sequence (docs/scale-out.md).
Line upstream_line(const RingView& r) {
  return text_line(
      fmt::format("    upstream lost {} in {} gap{} (before the producer)", format_count(r.upstream_lost, 11),
                  format_count(r.upstream_gaps, 11), r.upstream_gaps == 1 ? "" : "s"),
      Style::kWarn);
}

Line consumer_row(const ConsumerView& c) {
  const char* state = !c.alive ? "DEAD" : (c.behind ? "BEHIND" : "alive");
  const std::string process = c.process.empty() ? "-" : fit(c.process, kProcessWidth);
  Line l = text_line(fmt::format("    {:>2} {:>7} {:<{}} {:<6} {:>11} {:>9} {:>6} {:>7} {:>7}", c.index, c.pid, process,
                                 kProcessWidth, state, format_count(c.cursor, 11), format_count(c.lag, 9),
                                 format_pct(c.lag_pct), format_rate(c.recv_rate),
                                 format_age(c.since_advance_s, c.since_advance_is_lower_bound)));
  l.style = !c.alive ? Style::kDead : (c.behind ? Style::kBehind : Style::kPlain);
  return l;
}

Line title_line(const Snapshot& snap, SortKey sort, double interval_s, std::size_t cols) {
  std::size_t consumers = 0;
  std::size_t dead = 0;
  std::size_t behind = 0;
  std::size_t gone = 0;
  for (const RingView& r : snap.rings) {
    consumers += r.active_consumers;
    dead += r.dead_consumers;
    behind += r.behind_consumers;
    if (r.state == RingPresence::kGone) ++gone;
  }
  std::string s = fmt::format("ring-top  {} ring{}", snap.rings.size(), snap.rings.size() == 1 ? "" : "s");
  if (gone > 0) s += fmt::format(" ({} gone)", gone);
  s += fmt::format("  {} consumer{}  {} dead  {} behind", consumers, consumers == 1 ? "" : "s", dead, behind);
  std::string tail = fmt::format("  every {}  sort: {}", format_interval(interval_s), to_string(sort));
  if (s.size() + tail.size() > cols) {
    tail = fmt::format("  {}  sort: {}", format_interval(interval_s), to_string(sort));
  }
  return text_line(s + tail, Style::kTitle);
}

std::string watched_text(const Snapshot& snap) {
  std::string s;
  for (const std::string& w : snap.watched) {
    if (!s.empty()) s += ", ";
    s += w;
  }
  return s;
}

// The lines of every ring; [first, last] of the selected ring's block.
struct Body {
  std::vector<Line> lines;
  std::size_t sel_first = 0;
  std::size_t sel_last = 0;
  bool has_selection = false;
};

Body build_body(const Snapshot& snap, const ViewState* view, SortKey sort, const Widths& w) {
  Body b;
  if (snap.rings.empty()) {
    b.lines.push_back(text_line(fmt::format("  no ringcast rings under {}", watched_text(snap))));
    return b;
  }
  for (const RingView& r : snap.rings) {
    const bool selected = view != nullptr && r.id == view->selected;
    const bool expanded = view == nullptr || view->expanded.count(r.path) != 0;
    if (selected) {
      b.has_selection = true;
      b.sel_first = b.lines.size();
    }
    b.lines.push_back(ring_row(r, selected, view != nullptr, w));
    if (expanded) {
      b.lines.push_back(ring_detail(r));
      if (r.state == RingPresence::kLive) b.lines.push_back(traffic_line(r));
      if (r.state == RingPresence::kLive && r.upstream_gaps > 0) b.lines.push_back(upstream_line(r));
      if (r.state == RingPresence::kLive && !r.consumers.empty()) {
        b.lines.push_back(consumer_header(r));
        for (const ConsumerView& c : sorted_consumers(r, sort)) b.lines.push_back(consumer_row(c));
      }
    }
    if (selected) b.sel_last = b.lines.size() - 1;
  }
  return b;
}

std::vector<Line> help_lines(const Snapshot& snap, const ViewState& view) {
  std::vector<std::string> text = {
      "",
      "  ring-top shows every ringcast ring, read-only: it never registers a",
      "  consumer and never writes to a ring.",
      "",
      "  Keys",
      "    up/down, k/j     select a ring      PgUp/PgDn, Home/End  jump",
      "    Enter, space     expand or collapse the selected ring",
      "    s                sort consumers: index, lag (largest first),",
      "                     rate (slowest first)",
      fmt::format("    + / -            refresh less / more often (now every {})", format_interval(view.interval_s)),
      "    h, ?             show or hide this help   (Esc hides it)",
      "    q                quit",
      "",
      "  Columns",
      "    MSGS/s  messages published per second; BYTES/s: their payload bytes",
      "    FILL    lag of the slowest consumer as a share of the capacity",
      "    STATE   BLOCKED: the producer waits for the slowest consumer;",
      "            drained: every consumer has read everything; GONE: file went away",
      fmt::format("    BEHIND  lag at or above {:.0f}% of capacity; DEAD: owner died while registered",
                  snap.behind_pct),
      "    IDLE    time since the cursor last moved (\">\": not seen moving yet)",
      "    CURSOR, LAG, RECV/s count positions: 64-byte slots, one per message of",
      "            up to 52 bytes, more for a longer one (SLOTS/s on such rings)",
  };
  std::vector<Line> lines;
  lines.reserve(text.size());
  for (std::string& t : text) lines.push_back(text_line(std::move(t)));
  return lines;
}

}  // namespace

std::string_view to_string(SortKey key) noexcept {
  switch (key) {
    case SortKey::kIndex:
      return "index";
    case SortKey::kLag:
      return "lag";
    case SortKey::kRate:
      return "rate";
  }
  return "index";
}

std::string Line::text() const {
  std::string s;
  for (const Span& span : spans) s += span.text;
  return s;
}

std::string Frame::text() const {
  std::string s;
  for (const Line& l : lines) {
    std::string t = l.text();
    t.erase(t.find_last_not_of(' ') + 1);  // padding is for the screen, not for logs
    s += t;
    s += '\n';
  }
  return s;
}

namespace {

// `value` (at least 1000) in three significant digits and a power-of-1000
// unit, the first of `units` being thousands: 1.23k, 45.6 MB, 789G.
std::string three_digits(double value, std::span<const char* const> units, std::string_view sep) {
  double x = value / 1000.0;
  std::size_t unit = 0;
  while (x >= 999.5 && unit + 1 < units.size()) {
    x /= 1000.0;
    ++unit;
  }
  if (x < 9.995) return fmt::format("{:.2f}{}{}", x, sep, units[unit]);
  if (x < 99.95) return fmt::format("{:.1f}{}{}", x, sep, units[unit]);
  return fmt::format("{:.0f}{}{}", x, sep, units[unit]);
}

}  // namespace

std::string format_count(std::uint64_t value, std::size_t width) {
  std::string plain = fmt::format("{}", value);
  if (plain.size() <= width) return plain;
  static constexpr const char* kUnits[] = {"k", "M", "G", "T", "P", "E"};
  return three_digits(static_cast<double>(value), kUnits, "");
}

std::string format_rate(const std::optional<double>& per_second) {
  if (!per_second || !std::isfinite(*per_second)) return "-";
  double x = *per_second;
  if (x < 1000.0) return fmt::format("{:.1f}", x);
  static constexpr const char* kUnits[] = {"k", "M", "G", "T"};
  std::size_t unit = 0;
  x /= 1000.0;
  while (x >= 999.95 && unit + 1 < std::size(kUnits)) {
    x /= 1000.0;
    ++unit;
  }
  if (x >= 999.95) return ">999T";  // beyond any real ring; keeps the column width
  return fmt::format("{:.1f}{}", x, kUnits[unit]);
}

std::string format_bytes(std::uint64_t bytes) {
  if (bytes < 1000) return fmt::format("{} B", bytes);
  static constexpr const char* kUnits[] = {"kB", "MB", "GB", "TB", "PB", "EB"};
  return three_digits(static_cast<double>(bytes), kUnits, " ");
}

std::string format_size(std::uint64_t bytes) {
  if (bytes >= (std::uint64_t{1} << 30) && bytes % (std::uint64_t{1} << 30) == 0) {
    return fmt::format("{} GiB", bytes >> 30);
  }
  if (bytes >= (std::uint64_t{1} << 20) && bytes % (std::uint64_t{1} << 20) == 0) {
    return fmt::format("{} MiB", bytes >> 20);
  }
  if (bytes >= (std::uint64_t{1} << 10) && bytes % (std::uint64_t{1} << 10) == 0) {
    return fmt::format("{} KiB", bytes >> 10);
  }
  return fmt::format("{} B", bytes);
}

std::string format_age(double seconds, bool lower_bound) {
  const char* prefix = lower_bound ? ">" : "";
  if (seconds < 0) seconds = 0;
  if (seconds < 10) return fmt::format("{}{:.1f}s", prefix, seconds);
  if (seconds < 60) return fmt::format("{}{:.0f}s", prefix, std::floor(seconds));
  const auto s = static_cast<std::uint64_t>(seconds);
  if (s < 3600) return fmt::format("{}{}m{:02}s", prefix, s / 60, s % 60);
  if (s < 86400) return fmt::format("{}{}h{:02}m", prefix, s / 3600, (s % 3600) / 60);
  if (s < std::uint64_t{100} * 86400) return fmt::format("{}{}d{:02}h", prefix, s / 86400, (s % 86400) / 3600);
  return fmt::format("{}{}d", prefix, s / 86400);
}

std::vector<ConsumerView> sorted_consumers(const RingView& ring, SortKey key) {
  std::vector<ConsumerView> out = ring.consumers;
  std::sort(out.begin(), out.end(), [](const ConsumerView& a, const ConsumerView& b) { return a.index < b.index; });
  if (key == SortKey::kLag) {
    std::stable_sort(out.begin(), out.end(),
                     [](const ConsumerView& a, const ConsumerView& b) { return a.lag > b.lag; });
  } else if (key == SortKey::kRate) {
    std::stable_sort(out.begin(), out.end(), [](const ConsumerView& a, const ConsumerView& b) {
      if (a.recv_rate.has_value() != b.recv_rate.has_value()) return a.recv_rate.has_value();
      return a.recv_rate.has_value() && *a.recv_rate < *b.recv_rate;
    });
  }
  return out;
}

void sync_view(ViewState& view, const Snapshot& snap) {
  if (snap.rings.empty()) return;
  if (!view.first_ring_seen) {
    view.first_ring_seen = true;
    view.selected = snap.rings.front().id;
    view.selected_path = snap.rings.front().path;
    view.expanded.insert(view.selected_path);
    return;
  }
  for (const RingView& r : snap.rings) {
    if (r.id == view.selected) return;
  }
  // The selected ring is no longer listed: take the first ring at or after
  // its path (its replacement, when it was replaced), else the last ring.
  const RingView* pick = &snap.rings.back();
  for (const RingView& r : snap.rings) {
    if (r.path >= view.selected_path) {
      pick = &r;
      break;
    }
  }
  view.selected = pick->id;
  view.selected_path = pick->path;
}

Action handle_key(ViewState& view, Key key, const Snapshot& snap) {
  auto select_at = [&](std::ptrdiff_t delta, bool absolute) {
    if (snap.rings.empty()) return Action::kNone;
    std::ptrdiff_t pos = 0;
    for (std::size_t i = 0; i < snap.rings.size(); ++i) {
      if (snap.rings[i].id == view.selected) pos = static_cast<std::ptrdiff_t>(i);
    }
    const auto last = static_cast<std::ptrdiff_t>(snap.rings.size()) - 1;
    pos = std::clamp(absolute ? delta : pos + delta, std::ptrdiff_t{0}, last);
    const RingView& r = snap.rings[static_cast<std::size_t>(pos)];
    if (r.id == view.selected) return Action::kNone;
    view.selected = r.id;
    view.selected_path = r.path;
    return Action::kRedraw;
  };
  constexpr std::ptrdiff_t kPage = 5;
  switch (key) {
    case Key::kQuit:
      return Action::kQuit;
    case Key::kHelp:
      view.help = !view.help;
      return Action::kRedraw;
    case Key::kEscape:
      if (!view.help) return Action::kNone;
      view.help = false;
      return Action::kRedraw;
    case Key::kSort:
      view.sort = view.sort == SortKey::kIndex ? SortKey::kLag
                  : view.sort == SortKey::kLag ? SortKey::kRate
                                               : SortKey::kIndex;
      return Action::kRedraw;
    case Key::kLonger:
      for (const double step : kIntervalSteps) {
        if (step > view.interval_s + 1e-9) {
          view.interval_s = step;
          return Action::kReschedule;
        }
      }
      return Action::kNone;
    case Key::kShorter: {
      double best = 0;
      for (const double step : kIntervalSteps) {
        if (step < view.interval_s - 1e-9) best = step;
      }
      if (best < kMinInteractiveInterval) return Action::kNone;
      view.interval_s = best;
      return Action::kReschedule;
    }
    case Key::kUp:
      return select_at(-1, false);
    case Key::kDown:
      return select_at(1, false);
    case Key::kPageUp:
      return select_at(-kPage, false);
    case Key::kPageDown:
      return select_at(kPage, false);
    case Key::kHome:
      return select_at(0, true);
    case Key::kEnd:
      return select_at(static_cast<std::ptrdiff_t>(snap.rings.size()), true);
    case Key::kEnter: {
      if (snap.rings.empty() || view.selected_path.empty()) return Action::kNone;
      if (view.expanded.erase(view.selected_path) == 0) view.expanded.insert(view.selected_path);
      return Action::kRedraw;
    }
    case Key::kOther:
      return Action::kNone;
  }
  return Action::kNone;
}

Frame render_screen(const Snapshot& snap, ViewState& view, int rows, int cols) {
  Frame f;
  if (rows < 1 || cols < 1) return f;
  const auto nrows = static_cast<std::size_t>(rows);
  const auto ncols = static_cast<std::size_t>(cols);
  const Widths w = widths_for(ncols);

  f.lines.push_back(title_line(snap, view.sort, view.interval_s, ncols));
  std::vector<Line> body;
  std::string footer_extra;
  if (view.help) {
    body = help_lines(snap, view);
  } else {
    f.lines.push_back(ring_header(w));
    Body b = build_body(snap, &view, view.sort, w);
    // Rows left for the body: all but the title, the headings and the footer.
    const std::size_t fixed = f.lines.size() + 1;
    const std::size_t avail = nrows > fixed ? nrows - fixed : 0;
    if (b.has_selection && avail > 0) {
      if (b.sel_first < view.scroll) {
        view.scroll = b.sel_first;
      } else if (b.sel_last >= view.scroll + avail) {
        // Show the whole block if it fits, else start at the ring's row.
        view.scroll = std::min(b.sel_first, b.sel_last + 1 - avail);
      }
    }
    const std::size_t max_scroll = b.lines.size() > avail ? b.lines.size() - avail : 0;
    view.scroll = std::min(view.scroll, max_scroll);
    const std::size_t end = std::min(b.lines.size(), view.scroll + avail);
    for (std::size_t i = view.scroll; i < end; ++i) body.push_back(std::move(b.lines[i]));
    if (view.scroll > 0 || end < b.lines.size()) {
      footer_extra = fmt::format("  [{}-{}/{}]", view.scroll + 1, end, b.lines.size());
    }
  }
  for (Line& l : body) {
    if (f.lines.size() + 1 >= nrows) break;
    f.lines.push_back(std::move(l));
  }
  if (nrows > 1) {
    // The footer sits on the last row, like top's and htop's.
    while (f.lines.size() + 1 < nrows) f.lines.push_back(Line{});
    f.lines.push_back(
        text_line("h help  q quit  s sort  +/- interval  up/down select  enter expand" + footer_extra, Style::kDim));
  }
  if (f.lines.size() > nrows) f.lines.resize(nrows);
  for (Line& l : f.lines) clip(l, ncols);
  return f;
}

std::string render_text(const Snapshot& snap, SortKey sort, double interval_s) {
  // Logs and scripts want whole names: the name column grows to the longest
  // one (up to kMaxNameWidth), so lines pass 80 columns only for long names.
  std::size_t longest = 0;
  for (const RingView& r : snap.rings) longest = std::max(longest, r.name.size());
  const std::size_t cols = kBaseCols + (longest > kNameWidth ? longest - kNameWidth : 0);
  const Widths w = widths_for(cols);
  Frame f;
  f.lines.push_back(title_line(snap, sort, interval_s, cols));
  f.lines.push_back(ring_header(w));
  Body b = build_body(snap, nullptr, sort, w);
  for (Line& l : b.lines) {
    clip(l, cols);  // a safety net: every column is sized to fit
    f.lines.push_back(std::move(l));
  }
  return f.text();
}

namespace {

// A rate or age that may be unknown (or non-finite): null in the JSON.
nlohmann::ordered_json number_or_null(const std::optional<double>& x) {
  if (!x || !std::isfinite(*x)) return nullptr;
  return *x;
}

}  // namespace

std::string render_json(const Snapshot& snap, std::optional<double> interval_s) {
  using Json = nlohmann::ordered_json;  // ordered: keys in the documented order
  Json rings = Json::array();
  for (const RingView& r : snap.rings) {
    Json ring = {{"id", r.id},
                 {"path", r.path},
                 {"name", r.name},
                 {"named", r.named},
                 {"state", r.state == RingPresence::kLive ? "live" : "gone"},
                 {"capacity", r.capacity}};
    if (r.state == RingPresence::kGone) {
      ring["gone_reason"] = r.gone_reason;
      rings.push_back(std::move(ring));
      continue;
    }
    Json consumers = Json::array();
    for (const ConsumerView& c : r.consumers) {
      consumers.push_back({{"index", c.index},
                           {"pid", c.pid},
                           {"process", c.process},
                           {"alive", c.alive},
                           {"cursor", c.cursor},
                           {"lag", c.lag},
                           {"lag_pct", number_or_null(c.lag_pct)},
                           {"recv_rate", number_or_null(c.recv_rate)},
                           {"since_advance_s", number_or_null(c.since_advance_s)},
                           {"since_advance_is_lower_bound", c.since_advance_is_lower_bound},
                           {"behind", c.behind}});
    }
    ring.update(Json{{"lossy", r.lossy},
                     {"wakeups", r.wakeups},
                     {"max_message", r.max_message},
                     {"producer_seq", r.producer_seq},
                     {"producer_pid", r.producer_pid},
                     {"producer_alive", r.producer_alive},
                     {"producer_state", to_string(r.producer)},
                     {"producer_process", r.producer_process},
                     {"half_written_slot", r.half_written_slot},
                     {"producer_sleeping", r.producer_sleeping},
                     {"sleeping_consumers", r.sleeping_consumers},
                     {"upstream_lost", r.upstream_lost},
                     {"upstream_gaps", r.upstream_gaps},
                     {"messages", r.messages},
                     {"payload_bytes", r.payload_bytes},
                     {"push_rate", number_or_null(r.push_rate)},
                     {"byte_rate", number_or_null(r.byte_rate)},
                     {"max_lag", r.max_lag},
                     {"fill", number_or_null(r.fill)},
                     {"active_consumers", r.active_consumers},
                     {"dead_consumers", r.dead_consumers},
                     {"behind_consumers", r.behind_consumers},
                     {"blocked", r.blocked},
                     {"drained", r.drained},
                     {"consumers", std::move(consumers)}});
    rings.push_back(std::move(ring));
  }
  const Json out = {{"interval_s", number_or_null(interval_s)},
                    {"behind_pct", number_or_null(snap.behind_pct)},
                    {"watched", snap.watched},
                    {"rings", std::move(rings)}};
  // One line; bytes that are not UTF-8 (a process name is whatever the kernel
  // holds) are replaced rather than failing the whole snapshot.
  return out.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace ringcast::top
