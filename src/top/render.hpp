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
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "top/model.hpp"

namespace ringcast::top {

enum class SortKey : std::uint8_t {
  kIndex,  // consumer id order
  kLag,    // largest lag first
  kRate,   // slowest receive rate first (unknown rates last)
};
[[nodiscard]] std::string_view to_string(SortKey key) noexcept;

enum class Style : std::uint8_t {
  kPlain,
  kTitle,     // the summary line
  kHeader,    // column headings
  kSelected,  // the selected ring's row
  kBehind,    // a consumer at or above the behind threshold
  kDead,      // a consumer whose owner died without unregistering
  kGone,      // a ring whose file went away
  kWarn,      // BLOCKED, a dead producer
  kBarLow,    // fill bar below 50%
  kBarMid,    // fill bar 50% to 90%
  kBarHigh,   // fill bar 90% and above
  kDim,       // the empty part of a bar, footers
};

struct Span {
  std::string text;
  Style style = Style::kPlain;  // drawn over the line's style
};

struct Line {
  Style style = Style::kPlain;
  std::vector<Span> spans;
  [[nodiscard]] std::string text() const;
};

struct Frame {
  std::vector<Line> lines;
  [[nodiscard]] std::string text() const;  // lines joined with '\n'
};

struct ViewState {
  SortKey sort = SortKey::kIndex;
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
  kOther,
  kUp,
  kDown,
  kPageUp,
  kPageDown,
  kHome,
  kEnd,
  kEnter,
  kLonger,
  kShorter,
  kSort,
  kHelp,
  kQuit,
  kEscape,
};
enum class Action : std::uint8_t {
  kNone,        // nothing changed
  kRedraw,      // the view changed; draw the same snapshot again
  kReschedule,  // the interval changed; redraw and re-time the next refresh
  kQuit,
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

// One JSON object on one line (ends with a newline); rates unknown are null,
// and so is interval_s when there is none (ringcast info --json).
// Documented field by field in docs/ring-top.md.
[[nodiscard]] std::string render_json(const Snapshot& snap, std::optional<double> interval_s);

// Formatting helpers, exposed for tests.
[[nodiscard]] std::string format_count(std::uint64_t value, std::size_t width);  // 1234567 or 1.23M
[[nodiscard]] std::string format_rate(const std::optional<double>& per_second);  // "-", 12.5, 10.0k
[[nodiscard]] std::string format_age(double seconds, bool lower_bound);          // 0.3s, 12s, 3m04s
[[nodiscard]] std::string format_bytes(std::uint64_t bytes);  // 512 B, 1.23 kB, 45.6 MB (powers of 1000)
[[nodiscard]] std::string format_size(std::uint64_t bytes);   // 64 KiB, 1 MiB, 131056 B (exact)

}  // namespace ringcast::top
