// ring-top's interactive screen in a real terminal: ring-top runs inside a
// detached tmux session (its own server socket), the test sends keys and reads
// the pane back, with attributes, the way a person would see it.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "live_ring.hpp"
#include "top_test_support.hpp"

namespace ringcast::top {
namespace {

using namespace std::chrono_literals;
using test::CellAttr;
using test::ChildProcess;
using test::eventually;
using test::LiveRing;
using test::parse_sgr_capture;
using test::run;
using test::ScreenRow;
using test::TempDir;

// How often a test looks at the pane: every look runs a tmux client.
constexpr auto kTmuxStep = 20ms;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// One tmux server with one session running one command. The server runs in
// the foreground (-D) as this process's ChildProcess, not as a daemon: it dies
// with the test even when the test is killed, and its panes die with it (their
// terminal hangs up). It is stopped (and with it the command) when this goes
// away. Its socket lives in a directory of its own, removed with this (tmux
// leaves its socket behind when it exits).
class Tmux {
 public:
  Tmux() = default;
  Tmux(const Tmux&) = delete;
  Tmux& operator=(const Tmux&) = delete;
  ~Tmux() { (void)server_.stop(); }  // SIGTERM: tmux ends its sessions and exits

  // Starts `command` (a shell command line) in an 80x24 pane by default.
  bool start(const std::string& command, int cols = 80, int rows = 24) {
    // -f /dev/null: no user configuration; remain-on-exit off (default), so
    // the session ends when ring-top exits. The panes inherit the server's
    // environment: no TMUX, no NO_COLOR.
    server_ = ChildProcess::spawn({"/usr/bin/tmux", "-S", socket_, "-f", "/dev/null", "-D"},
                                  {.out = ringcast::test::Stream::kDiscard, .env_unset = {"TMUX", "NO_COLOR"}});
    // A client that finds no server starts a daemon one: create the session
    // only once this server answers (list-sessions never starts a server).
    const auto answers = [&] { return tmux({"list-sessions"}).exit_code == 0; };
    if (!server_.running() || !eventually(answers, 20s, kTmuxStep)) return false;
    return tmux({"new-session", "-d", "-s", "top", "-x", std::to_string(cols), "-y", std::to_string(rows), command})
               .exit_code == 0;
  }
  [[nodiscard]] std::string capture(bool attributes = false) const {
    std::vector<std::string> args = {"capture-pane", "-p", "-t", "top"};
    if (attributes) args.insert(args.begin() + 2, "-e");
    return tmux(args).out;
  }
  void keys(const std::string& key) const { (void)tmux({"send-keys", "-t", "top", key}); }
  [[nodiscard]] bool running() const { return tmux({"has-session", "-t", "top"}).exit_code == 0; }
  void resize(int cols, int rows) const {
    (void)tmux({"resize-window", "-t", "top", "-x", std::to_string(cols), "-y", std::to_string(rows)});
  }
  // Polls the pane until pred(text) holds; returns the last capture.
  template <class Pred>
  std::string wait_for(Pred pred) const {
    std::string last;
    eventually(
        [&] {
          last = capture();
          return pred(last);
        },
        20s, kTmuxStep);
    return last;
  }
  std::string wait_for_text(const std::string& needle) const {
    return wait_for([&](const std::string& s) { return contains(s, needle); });
  }
  // Polls the pane with its attributes until pred(rows) holds (a capture can
  // land in the middle of a redraw); returns the last capture's rows.
  template <class Pred>
  std::vector<ScreenRow> wait_for_rows(Pred pred) const {
    std::vector<ScreenRow> last;
    eventually(
        [&] {
          last = parse_sgr_capture(capture(true));
          return pred(last);
        },
        20s, kTmuxStep);
    return last;
  }

 private:
  [[nodiscard]] test::Output tmux(std::vector<std::string> args) const {
    args.insert(args.begin(), {"/usr/bin/tmux", "-S", socket_});
    return run(args, {}, {"TMUX"});
  }
  TempDir dir_;
  std::string socket_ = dir_.file("tmux");
  ChildProcess server_;
};

// The row of `rows` containing `needle`, and the attribute at its first character.
struct Found {
  int row = -1;
  CellAttr attr;
};
Found find(const std::vector<ScreenRow>& rows, const std::string& needle) {
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto pos = rows[i].text.find(needle);
    if (pos != std::string::npos) return {static_cast<int>(i), rows[i].attrs.at(pos)};
  }
  return {};
}

int row_of(const std::string& screen, const std::string& needle) {
  const auto lines = test::split_lines(screen);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (contains(lines[i], needle)) return static_cast<int>(i);
  }
  return -1;
}

class RingTopScreenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(live_.start());
    CreateOptions idle;
    idle.claim_producer = false;
    ASSERT_TRUE(BroadcastRing::create(live_.dir.file("zz-idle"), 16, idle));
  }
  std::string command(const std::string& flags = "", bool exec = true) const {
    return std::string(exec ? "exec " : "") + RING_TOP_EXE + " -d 0.2 " + flags + " " + live_.dir.path();
  }
  // Waits until ring-top shows the live ring's three consumers.
  std::string wait_ready(const Tmux& t) const {
    return t.wait_for([](const std::string& s) {
      return contains(s, "slow-reader") && contains(s, "fast-reader") && contains(s, "DEAD");
    });
  }
  LiveRing live_;
};

TEST_F(RingTopScreenTest, SlowConsumerIsHighlightedInColourAndTheFastOneIsNot) {
  Tmux t;
  ASSERT_TRUE(t.start(command()));
  const std::string screen = wait_ready(t);
  ASSERT_TRUE(contains(screen, "BEHIND")) << screen;
  const auto rows = t.wait_for_rows([](const std::vector<ScreenRow>& r) {
    const Found slow = find(r, "slow-reader");
    const Found dead = find(r, "DEAD");
    return slow.attr.bold && slow.attr.fg == 3 && dead.attr.bold && dead.attr.fg == 1 &&
           find(r, "fast-reader").attr.plain() && find(r, "> ticks").attr.reverse;
  });
  const Found slow = find(rows, "slow-reader");
  const Found dead = find(rows, "DEAD");
  const Found fast = find(rows, "fast-reader");
  ASSERT_GE(slow.row, 0);
  ASSERT_GE(dead.row, 0);
  ASSERT_GE(fast.row, 0);
  EXPECT_TRUE(slow.attr.bold);
  EXPECT_EQ(slow.attr.fg, 3) << "yellow";
  EXPECT_TRUE(dead.attr.bold);
  EXPECT_EQ(dead.attr.fg, 1) << "red";
  EXPECT_TRUE(fast.attr.plain());
  // The selected ring is in reverse video, marked "> ".
  const Found selected = find(rows, "> ticks");
  ASSERT_GE(selected.row, 0) << screen;
  EXPECT_TRUE(selected.attr.reverse);
}

TEST_F(RingTopScreenTest, SortByLagPutsTheSlowConsumerFirstAndTheFastOneLast) {
  Tmux t;
  ASSERT_TRUE(t.start(command()));
  std::string screen = wait_ready(t);
  ASSERT_TRUE(contains(screen, "sort: index")) << screen;
  // Index order: slow (0), fast (1), dead (2).
  EXPECT_LT(row_of(screen, "slow-reader"), row_of(screen, "fast-reader"));
  EXPECT_LT(row_of(screen, "fast-reader"), row_of(screen, "DEAD"));
  t.keys("s");
  // Lag order: slow (40), dead (16), fast (0). Waiting for the order as well
  // as the title: a capture may land between the two being drawn.
  auto lag_order = [](const std::string& s) {
    return contains(s, "sort: lag") && row_of(s, "slow-reader") < row_of(s, "DEAD") &&
           row_of(s, "DEAD") < row_of(s, "fast-reader");
  };
  screen = t.wait_for(lag_order);
  EXPECT_TRUE(lag_order(screen)) << screen;
  t.keys("s");
  EXPECT_TRUE(contains(t.wait_for_text("sort: rate"), "sort: rate"));
}

TEST_F(RingTopScreenTest, WithoutColourHighlightsStayAsAttributesAndWords) {
  for (const bool by_env : {false, true}) {
    SCOPED_TRACE(by_env ? "NO_COLOR=1" : "--no-color");
    Tmux t;
    ASSERT_TRUE(t.start(by_env ? "NO_COLOR=1 " + command() : command("--no-color")));
    ASSERT_TRUE(contains(wait_ready(t), "BEHIND"));
    const auto rows = t.wait_for_rows([](const std::vector<ScreenRow>& r) {
      return find(r, "slow-reader").attr.bold && find(r, "DEAD").attr.underline && find(r, "fast-reader").attr.plain();
    });
    for (const ScreenRow& row : rows) {
      for (const CellAttr& a : row.attrs) ASSERT_EQ(a.fg, -1) << "coloured cell in: " << row.text;
    }
    const Found slow = find(rows, "slow-reader");
    ASSERT_GE(slow.row, 0);
    EXPECT_TRUE(slow.attr.bold);
    const Found dead = find(rows, "DEAD");
    ASSERT_GE(dead.row, 0);
    EXPECT_TRUE(dead.attr.bold && dead.attr.underline);
    EXPECT_TRUE(find(rows, "fast-reader").attr.plain());
  }
}

TEST_F(RingTopScreenTest, ArrowsAndEnterExpandAnotherRingAndHelpToggles) {
  Tmux t;
  ASSERT_TRUE(t.start(command()));
  ASSERT_TRUE(contains(wait_ready(t), "> ticks"));
  t.keys("Down");
  std::string screen = t.wait_for_text("> zz-idle");
  ASSERT_TRUE(contains(screen, "> zz-idle")) << screen;
  EXPECT_FALSE(contains(screen, "producer none"));
  t.keys("Enter");
  auto expanded = [](const std::string& s) {
    return row_of(s, "producer none") >= 0 && row_of(s, "producer none") == row_of(s, "> zz-idle") + 1;
  };
  screen = t.wait_for(expanded);
  ASSERT_TRUE(expanded(screen)) << screen;
  t.keys("h");
  auto help_shown = [](const std::string& s) { return contains(s, "Keys") && !contains(s, "slow-reader"); };
  screen = t.wait_for(help_shown);
  EXPECT_TRUE(help_shown(screen)) << screen;
  t.keys("h");
  EXPECT_TRUE(contains(t.wait_for_text("slow-reader"), "slow-reader"));
  t.keys("+");
  EXPECT_TRUE(contains(t.wait_for_text("every 0.5s"), "every 0.5s"));
}

TEST_F(RingTopScreenTest, RemovedRingIsShownGoneAndQuitEndsTheTool) {
  Tmux t;
  // Not exec'd: the shell records ring-top's exit status (a sanitizer report
  // or a crash on the way out would make it non-zero).
  const std::string status_file = live_.dir.file("exit-status");
  ASSERT_TRUE(t.start(command("", false) + "; echo $? > " + status_file));
  ASSERT_TRUE(contains(wait_ready(t), "zz-idle"));
  ASSERT_EQ(::unlink(live_.dir.file("zz-idle").c_str()), 0);
  const std::string screen = t.wait_for_text("GONE");
  EXPECT_TRUE(contains(screen, "GONE")) << screen;
  EXPECT_TRUE(contains(screen, "(1 gone)")) << screen;
  EXPECT_TRUE(t.running());
  t.keys("q");
  EXPECT_TRUE(eventually([&] { return !t.running(); }, 20s, kTmuxStep)) << "ring-top did not quit on q";
  std::ifstream status(status_file);
  std::string code;
  EXPECT_TRUE(std::getline(status, code));
  EXPECT_EQ(code, "0");
}

TEST_F(RingTopScreenTest, FollowsTheTerminalSize) {
  Tmux t;
  ASSERT_TRUE(t.start(command(), 80, 24));
  ASSERT_TRUE(contains(wait_ready(t), "fast-reader"));
  t.resize(60, 12);
  const std::string small = t.wait_for([](const std::string& s) {
    const auto lines = test::split_lines(s);
    // Both ends drawn: a capture can land in the middle of the redraw.
    return lines.size() <= 12 && !lines.empty() && lines.front().rfind("ring-top", 0) == 0 &&
           lines.back().rfind("h help", 0) == 0;
  });
  const auto lines = test::split_lines(small);
  ASSERT_LE(lines.size(), 12U) << small;
  for (const auto& l : lines) EXPECT_LE(l.size(), 60U) << l;
  EXPECT_EQ(lines.front().rfind("ring-top", 0), 0U) << small;
  EXPECT_EQ(lines.back().rfind("h help", 0), 0U) << small;
  EXPECT_TRUE(t.running());
}

}  // namespace
}  // namespace ringcast::top
