// ring-top: flags, the ncurses loop and the scripted (--once, --json) loop.
// Everything that decides what is shown lives in src/top (model, renderer);
// this file only maps keys in and styles out. See docs/ring-top.md.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "guarded_main.hpp"
#include "parse_flags.hpp"
#include "stop_signals.hpp"
#include <fmt/format.h>

// Real functions instead of curses.h's function-like macros: its refresh()
// and timeout() macros would rewrite Monitor::refresh() and friends.
#define NCURSES_NOMACROS
#include <curses.h>

#include "top/model.hpp"
#include "top/render.hpp"

namespace {

using ringcast::top::Action;
using ringcast::top::Frame;
using ringcast::top::Key;
using ringcast::top::Monitor;
using ringcast::top::RingPresence;
using ringcast::top::Snapshot;
using ringcast::top::Style;
using ringcast::top::ViewState;
using SteadyClock = std::chrono::steady_clock;

// The longest the interactive loop waits in getch, so a signal that ncurses
// swallowed (it restarts its select) is still noticed promptly.
constexpr int kMaxWaitMs = 250;
constexpr double kMaxDelaySeconds = 86400;

struct Settings {
  std::vector<std::string> paths;
  double delay_s = 1.0;
  std::size_t iterations = 0;  // 0: until quit
  bool once = false;
  bool json = false;
  bool no_color = false;
  double behind_pct = 50.0;
};

// --- ncurses ---------------------------------------------------------------

enum Pair : short { kPairHeader = 1, kPairBehind, kPairDead, kPairGone, kPairLow, kPairMid, kPairHigh };

attr_t pair_attr(short pair) { return static_cast<attr_t>(COLOR_PAIR(pair)); }

attr_t style_attr(Style s, bool colour) {
  if (!colour) {
    // Monochrome: the textual markers carry the meaning; attributes add weight.
    switch (s) {
      case Style::kTitle:
      case Style::kHeader:
      case Style::kBehind:
      case Style::kWarn:
      case Style::kBarHigh:
        return A_BOLD;
      case Style::kDead:
        return A_BOLD | A_UNDERLINE;
      case Style::kSelected:
        return A_REVERSE;
      case Style::kGone:
      case Style::kDim:
        return A_DIM;
      default:
        return A_NORMAL;
    }
  }
  switch (s) {
    case Style::kTitle:
      return A_BOLD;
    case Style::kHeader:
      return pair_attr(kPairHeader) | A_BOLD;
    case Style::kSelected:
      return A_REVERSE;
    case Style::kBehind:
      return pair_attr(kPairBehind) | A_BOLD;
    case Style::kDead:
    case Style::kWarn:
      return pair_attr(kPairDead) | A_BOLD;
    case Style::kGone:
      return pair_attr(kPairGone);
    case Style::kBarLow:
      return pair_attr(kPairLow);
    case Style::kBarMid:
      return pair_attr(kPairMid);
    case Style::kBarHigh:
      return pair_attr(kPairHigh) | A_BOLD;
    case Style::kDim:
      return A_DIM;
    default:
      return A_NORMAL;
  }
}

void draw(const Frame& frame, bool colour) {
  ::erase();
  int y = 0;
  for (const auto& line : frame.lines) {
    const attr_t base = style_attr(line.style, colour);
    ::move(y, 0);
    for (const auto& span : line.spans) {
      attr_t a = style_attr(span.style, colour);
      // A span's own colour replaces the line's; other attributes add up.
      a = (a & A_COLOR) != 0 ? (base & ~A_COLOR) | a : base | a;
      ::attrset(static_cast<int>(a));
      ::addnstr(span.text.c_str(), static_cast<int>(span.text.size()));
    }
    ++y;
  }
  ::attrset(A_NORMAL);
  ::refresh();
}

Key key_from(int ch) {
  switch (ch) {
    case KEY_UP:
    case 'k':
      return Key::kUp;
    case KEY_DOWN:
    case 'j':
      return Key::kDown;
    case KEY_PPAGE:
      return Key::kPageUp;
    case KEY_NPAGE:
      return Key::kPageDown;
    case KEY_HOME:
    case 'g':
      return Key::kHome;
    case KEY_END:
    case 'G':
      return Key::kEnd;
    case '\n':
    case '\r':
    case ' ':
    case KEY_ENTER:
      return Key::kEnter;
    case '+':
    case '=':
      return Key::kLonger;
    case '-':
    case '_':
      return Key::kShorter;
    case 's':
      return Key::kSort;
    case 'h':
    case '?':
      return Key::kHelp;
    case 'q':
    case 'Q':
      return Key::kQuit;
    case 27:
      return Key::kEscape;
    default:
      return Key::kOther;
  }
}

int run_interactive(Monitor& monitor, const Settings& settings) {
  // Installed before ncurses starts, so it leaves them alone: a signal ends
  // the loop and endwin() restores the terminal.
  ringcast::tools::catch_stop_signals({SIGINT, SIGTERM, SIGHUP});
  // newterm, unlike initscr, returns NULL instead of exiting on an unknown TERM.
  SCREEN* screen = ::newterm(nullptr, stdout, stdin);
  if (screen == nullptr) {
    fmt::print(stderr, "ring-top: cannot use terminal type '{}'; try --once or --json\n",
               std::getenv("TERM") != nullptr ? std::getenv("TERM") : "");
    return 1;
  }
  // The terminal is restored however the loop ends, an exception included.
  struct Screen {
    SCREEN* screen;
    ~Screen() {
      ::endwin();
      ::delscreen(screen);
    }
  } restore{screen};
  ::cbreak();
  ::noecho();
  ::keypad(stdscr, TRUE);
  ::curs_set(0);
  ::set_escdelay(25);
  const char* no_color_env = std::getenv("NO_COLOR");
  // https://no-color.org: any non-empty NO_COLOR disables colour.
  const bool colour = !settings.no_color && (no_color_env == nullptr || *no_color_env == '\0') && ::has_colors();
  if (colour) {
    ::start_color();
    ::use_default_colors();
    ::init_pair(kPairHeader, COLOR_CYAN, -1);
    ::init_pair(kPairBehind, COLOR_YELLOW, -1);
    ::init_pair(kPairDead, COLOR_RED, -1);
    ::init_pair(kPairGone, COLOR_MAGENTA, -1);
    ::init_pair(kPairLow, COLOR_GREEN, -1);
    ::init_pair(kPairMid, COLOR_YELLOW, -1);
    ::init_pair(kPairHigh, COLOR_RED, -1);
  }

  ViewState view;
  view.interval_s = std::max(settings.delay_s, ringcast::top::kMinInteractiveInterval);
  auto interval = [&] {
    return std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(view.interval_s));
  };
  Snapshot snap = monitor.refresh();
  ringcast::top::sync_view(view, snap);
  std::size_t frames = 1;
  SteadyClock::time_point last = SteadyClock::now();
  SteadyClock::time_point next = last + interval();
  while (!ringcast::tools::stop_requested()) {
    draw(ringcast::top::render_screen(snap, view, LINES, COLS), colour);
    if (settings.iterations != 0 && frames >= settings.iterations) break;
    const auto now = SteadyClock::now();
    if (now < next) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count();
      ::timeout(static_cast<int>(std::min<long long>(ms + 1, kMaxWaitMs)));
      const int ch = ::getch();
      if (ch == KEY_RESIZE) continue;  // LINES/COLS are updated: draw again
      if (ch != ERR) {
        const Action a = ringcast::top::handle_key(view, key_from(ch), snap);
        if (a == Action::kQuit) break;
        if (a == Action::kReschedule) next = last + interval();
        continue;
      }
      if (SteadyClock::now() < next) continue;
    }
    snap = monitor.refresh();
    ringcast::top::sync_view(view, snap);
    ++frames;
    last = SteadyClock::now();
    next = last + interval();
  }
  return 0;
}

// --- scripted ----------------------------------------------------------------

// The exit status of a scripted run: 1 when a named ring is not live at the end.
int report_named_gone(const Snapshot& snap) {
  int status = 0;
  for (const auto& r : snap.rings) {
    if (!r.named || r.state != RingPresence::kGone) continue;
    bool replaced_by_live = false;
    for (const auto& other : snap.rings) {
      if (other.path == r.path && other.state == RingPresence::kLive) replaced_by_live = true;
    }
    if (replaced_by_live) continue;
    fmt::print(stderr, "ring-top: {}: gone: {}\n", r.path, r.gone_reason);
    status = 1;
  }
  return status;
}

int run_scripted(Monitor& monitor, const Settings& settings, bool json, std::size_t iterations) {
  const auto delay = std::chrono::duration<double>(settings.delay_s);
  Snapshot snap = monitor.refresh();
  for (std::size_t i = 0; (iterations == 0 || i < iterations) && !ringcast::tools::stop_requested(); ++i) {
    // Rates need two samples: the first output comes one interval after start.
    if (settings.delay_s > 0) {
      std::this_thread::sleep_for(delay);
      snap = monitor.refresh();
    } else if (i > 0) {
      snap = monitor.refresh();
    }
    if (json) {
      fmt::print("{}", ringcast::top::render_json(snap, settings.delay_s));
    } else {
      if (i > 0) fmt::print("\n");
      fmt::print("{}", ringcast::top::render_text(snap, ringcast::top::SortKey::kIndex, settings.delay_s));
    }
    std::fflush(stdout);
  }
  return report_named_gone(snap);
}

// main's body; main turns an exception that escapes it into a message.
int run(int argc, char** argv) {
  Settings settings;
  CLI::App app{
      "ring-top: a live view of ringcast rings, their rates, and each consumer's lag and liveness.\n"
      "Maps rings read-only and never registers: watching does not perturb them.\n"
      "Keys: up/down select, enter expand, s sort, +/- interval, h help, q quit."};
  app.add_option("paths", settings.paths,
                 "ring files or directories to watch (default: every ring under /dev/shm); "
                 "a bare name is looked up in /dev/shm")
      ->type_name("PATH|DIR");
  // Bounded so that the interval always fits a steady_clock duration.
  const CLI::Validator seconds(
      [](std::string& value) -> std::string {
        char* end = nullptr;
        const double d = std::strtod(value.c_str(), &end);
        if (end == value.c_str() || *end != '\0' || !(d >= 0 && d <= kMaxDelaySeconds)) {
          return fmt::format("{} is not a number of seconds from 0 to {}", value, kMaxDelaySeconds);
        }
        return {};
      },
      "SECONDS");
  app.add_option("-d,--delay", settings.delay_s, "seconds between refreshes (default 1)")->check(seconds);
  auto* n_opt =
      app.add_option("-n,--iterations", settings.iterations, "stop after N refreshes (default: until q; 1 with --json)")
          ->check(CLI::Range(std::size_t{1}, std::size_t{1'000'000'000}));
  app.add_flag("--once", settings.once,
               "print one plain-text snapshot, taken after one interval (-d 0: at once, "
               "without rates), and exit")
      ->excludes(n_opt);
  app.add_flag("--json", settings.json, "print JSON snapshots (one object per line) instead");
  app.add_flag("--no-color", settings.no_color, "no colour (also when NO_COLOR is set)");
  app.add_option("--behind", settings.behind_pct,
                 "lag, in % of capacity, from which a consumer is shown BEHIND (default 50)")
      ->check(CLI::Range(0.0, 100.0));
  if (const auto exit_status = ringcast::tools::parse_flags(app, argc, argv)) return *exit_status;

  ringcast::top::MonitorOptions options;
  options.targets = settings.paths;
  options.behind_pct = settings.behind_pct;
  auto monitor = Monitor::create(std::move(options));
  if (!monitor) {
    for (const std::string& problem : monitor.error()) fmt::print(stderr, "ring-top: {}\n", problem);
    return 1;
  }
  if (settings.json) {
    return run_scripted(*monitor, settings, true, settings.iterations == 0 ? 1 : settings.iterations);
  }
  if (settings.once) return run_scripted(*monitor, settings, false, 1);
  // Not a terminal (a pipe, a file): plain text every interval, like top -b.
  if (::isatty(STDOUT_FILENO) == 0 || ::isatty(STDIN_FILENO) == 0) {
    return run_scripted(*monitor, settings, false, settings.iterations);
  }
  return run_interactive(*monitor, settings);
}

}  // namespace

int main(int argc, char** argv) {
  return ringcast::tools::guarded_main("ring-top", [&] { return run(argc, argv); });
}
