// Drawing ring-top's snapshot, with no terminal involved.
//
// render_screen lays a Snapshot out as a Frame: at most `rows` lines of at most
// `cols` characters, each a run of styled spans. tools/ring-top maps the styles
// onto ncurses attributes (colour, or bold/underline/reverse without colour)
// and draws the spans; tests read the Frame directly. Every highlight also has
// a textual marker (BEHIND, DEAD, GONE, BLOCKED, the "> " of the selected
// ring), so the screen reads the same in monochrome, in a log and to a screen
// reader. Text is plain ASCII: it survives any locale and any ssh client.
//
// ViewState holds what the person at the keyboard chose (selection, expanded
// rings, sort key, interval, help); handle_key changes it. All of it is plain
// data: none of these functions blocks, allocates more than the output, or
// touches a ring.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "top/model.hpp"

namespace ringcast::top {

enum class SortKey : std::uint8_t {
  index,  // consumer id order
  lag,    // largest lag first
  rate,   // slowest receive rate first (unknown rates last)
};
[[nodiscard]] std::string_view to_string(SortKey key) noexcept;

enum class Style : std::uint8_t {
  plain,
  title,     // the summary line
  header,    // column headings
  selected,  // the selected ring's row
  behind,    // a consumer at or above the behind threshold
  dead,      // a consumer whose owner died without unregistering
  gone,      // a ring whose file went away
  warn,      // BLOCKED, a dead producer
  bar_low,   // fill bar below 50%
  bar_mid,   // fill bar 50% to 90%
  bar_high,  // fill bar 90% and above
  dim,       // the empty part of a bar, footers
};

struct Span {
  std::string text;
  Style style = Style::plain;  // drawn over the line's style
};

struct Line {
  Style style = Style::plain;
  std::vector<Span> spans;
  [[nodiscard]] std::string text() const;
};

struct Frame {
  std::vector<Line> lines;
  [[nodiscard]] std::string text() const;  // lines joined with '\n'
};

struct ViewState {
  SortKey sort = SortKey::index;
  std::uint64_t selected = 0;      // RingView::id; 0 before any ring was seen
  std::string selected_path;       // to reselect a replaced ring at the same path
  std::set<std::string> expanded;  // paths of the rings showing their consumers
  bool first_ring_seen = false;    // the first ring shown is expanded once
  bool help = false;
  double interval_s = 1.0;  // refresh interval
  std::size_t scroll = 0;   // first body line shown; kept by render_screen
};

// Interactive refresh intervals that +/- step through (seconds).
inline constexpr double kIntervalSteps[] = {0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60};
inline constexpr double kMinInteractiveInterval = 0.1;

enum class Key : std::uint8_t {
  other,
  up,
  down,
  page_up,
  page_down,
  home,
  end,
  enter,
  longer,
  shorter,
  sort,
  help,
  quit,
  escape,
};
enum class Action : std::uint8_t {
  none,        // nothing changed
  redraw,      // the view changed; draw the same snapshot again
  reschedule,  // the interval changed; redraw and re-time the next refresh
  quit,
};

// Keeps the selection on a ring that exists (the nearest one when it went
// away) and expands the first ring ever shown, so one ring needs no keys.
void sync_view(ViewState& view, const Snapshot& snap);
// Applies one key. Needs the snapshot on screen to move the selection.
Action handle_key(ViewState& view, Key key, const Snapshot& snap);

// Consumers of `ring` in `key` order (stable: ties keep index order).
[[nodiscard]] std::vector<ConsumerView> sorted_consumers(const RingView& ring, SortKey key);

// The interactive screen: title, column headings, rings (the selected one
// marked), consumers of expanded rings, footer. Scrolls view.scroll so the
// selected ring stays visible. rows/cols below 1 give an empty frame.
[[nodiscard]] Frame render_screen(const Snapshot& snap, ViewState& view, int rows, int cols);

// The --once text: like the screen in 80 columns, every ring expanded, no
// selection, no footer, no height limit. Ends with a newline.
[[nodiscard]] std::string render_text(const Snapshot& snap, SortKey sort, double interval_s);

// One JSON object on one line (ends with a newline); rates unknown are null.
// Documented field by field in docs/ring-top.md.
[[nodiscard]] std::string render_json(const Snapshot& snap, double interval_s);

// Formatting helpers, exposed for tests.
[[nodiscard]] std::string format_count(std::uint64_t value, std::size_t width);  // 1234567 or 1.23M
[[nodiscard]] std::string format_rate(const std::optional<double>& per_second);  // "-", 12.5, 10.0k
[[nodiscard]] std::string format_age(double seconds, bool lower_bound);          // 0.3s, 12s, 3m04s

}  // namespace ringcast::top
