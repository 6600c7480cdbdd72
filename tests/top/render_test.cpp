// The renderer (src/top/render.hpp) on hand-built snapshots: layout limits,
// markers and styles, sorting, keys, --once text and JSON. No terminal.
#include "top/render.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "ringcast/layout.hpp"
#include "top_test_support.hpp"

namespace ringcast::top {
namespace {

ConsumerView consumer(std::uint32_t index, std::uint64_t lag, std::optional<double> rate, bool alive = true,
                      bool behind = false) {
  ConsumerView c;
  c.index = index;
  c.pid = 1000 + index;
  c.process = alive ? "reader-" + std::to_string(index) : "";
  c.alive = alive;
  c.cursor = 5000 - lag;
  c.lag = lag;
  c.lag_pct = 100.0 * static_cast<double>(lag) / 1024;
  c.recv_rate = rate;
  c.since_advance_s = 0.5;
  c.since_advance_is_lower_bound = false;
  c.behind = behind;
  return c;
}

RingView ring(std::uint64_t id, const std::string& name, std::vector<ConsumerView> consumers = {}) {
  RingView r;
  r.id = id;
  r.path = "/dev/shm/" + name;
  r.name = name;
  r.capacity = 1024;
  r.producer_seq = 5000;
  r.producer_pid = 42;
  r.producer_alive = true;
  r.producer = ProducerState::kLive;
  r.producer_process = "ticker";
  r.push_rate = 100.0;
  r.byte_rate = 5200.0;
  r.max_message = 52;
  r.messages = 5000;
  r.payload_bytes = 260000;
  for (const auto& c : consumers) {
    r.max_lag = std::max(r.max_lag, c.lag);
    ++r.active_consumers;
    if (!c.alive) ++r.dead_consumers;
    if (c.behind) ++r.behind_consumers;
  }
  r.fill = static_cast<double>(r.max_lag) / 1024;
  r.drained = r.max_lag == 0;
  r.consumers = std::move(consumers);
  return r;
}

// ticks: a fast consumer (0), a slow one (1) and a dead one (2).
Snapshot sample_snapshot() {
  Snapshot s;
  s.watched = {"/dev/shm"};
  s.rings.push_back(
      ring(1, "ticks", {consumer(0, 0, 100.0), consumer(1, 600, 20.0, true, true), consumer(2, 300, 0.0, false)}));
  s.rings.push_back(ring(2, "trades", {consumer(0, 1, 50.0)}));
  return s;
}

const Line* find_line(const Frame& f, const std::string& needle) {
  for (const Line& l : f.lines) {
    if (l.text().find(needle) != std::string::npos) return &l;
  }
  return nullptr;
}

std::size_t line_index(const Frame& f, const std::string& needle) {
  for (std::size_t i = 0; i < f.lines.size(); ++i) {
    if (f.lines[i].text().find(needle) != std::string::npos) return i;
  }
  return f.lines.size();
}

TEST(RenderTest, SlowAndDeadConsumersAreMarkedAndHighlighted) {
  Snapshot s = sample_snapshot();
  ViewState view;
  sync_view(view, s);
  const Frame f = render_screen(s, view, 24, 80);
  const Line* slow = find_line(f, "reader-1");
  const Line* dead = find_line(f, "DEAD");
  const Line* fast = find_line(f, "reader-0");
  ASSERT_TRUE(slow && dead && fast) << f.text();
  EXPECT_NE(slow->text().find("BEHIND"), std::string::npos);
  EXPECT_EQ(slow->style, Style::kBehind);
  EXPECT_EQ(dead->style, Style::kDead);
  EXPECT_NE(dead->text().find(" - "), std::string::npos);  // no process name for a dead owner
  EXPECT_NE(fast->text().find("alive"), std::string::npos);
  EXPECT_EQ(fast->style, Style::kPlain);
  EXPECT_NE(f.lines[0].text().find("4 consumers  1 dead"), std::string::npos) << f.lines[0].text();
  EXPECT_NE(f.lines[0].text().find("1 behind"), std::string::npos);
}

TEST(RenderTest, FirstRingIsSelectedAndExpandedOthersCollapsed) {
  Snapshot s = sample_snapshot();
  ViewState view;
  sync_view(view, s);
  const Frame f = render_screen(s, view, 24, 80);
  const Line* ticks = find_line(f, "> ticks");
  ASSERT_NE(ticks, nullptr) << f.text();
  EXPECT_EQ(ticks->style, Style::kSelected);
  EXPECT_NE(find_line(f, "producer 42 ticker alive  blocking"), nullptr) << f.text();
  EXPECT_NE(find_line(f, "  trades"), nullptr);
  // trades is collapsed: only ticks' three consumers are listed.
  std::size_t consumer_rows = 0;
  for (const Line& l : f.lines) consumer_rows += l.text().find("reader-") != std::string::npos ? 1U : 0U;
  EXPECT_EQ(consumer_rows, 2U);  // reader-0 and reader-1; the dead one shows "-"
}

TEST(RenderTest, ArrowsMoveTheSelectionAndEnterTogglesExpansion) {
  Snapshot s = sample_snapshot();
  ViewState view;
  sync_view(view, s);
  EXPECT_EQ(handle_key(view, Key::kDown, s), Action::kRedraw);
  EXPECT_EQ(view.selected, 2U);
  EXPECT_EQ(handle_key(view, Key::kDown, s), Action::kNone);  // already the last
  EXPECT_EQ(handle_key(view, Key::kEnter, s), Action::kRedraw);
  Frame f = render_screen(s, view, 24, 80);
  EXPECT_NE(find_line(f, "> trades"), nullptr) << f.text();
  EXPECT_NE(find_line(f, "reader-0"), nullptr);
  EXPECT_EQ(handle_key(view, Key::kUp, s), Action::kRedraw);
  EXPECT_EQ(handle_key(view, Key::kEnter, s), Action::kRedraw);  // collapse ticks
  f = render_screen(s, view, 24, 80);
  EXPECT_EQ(find_line(f, "BEHIND"), nullptr) << f.text();
  EXPECT_EQ(handle_key(view, Key::kEnd, s), Action::kRedraw);
  EXPECT_EQ(view.selected, 2U);
  EXPECT_EQ(handle_key(view, Key::kHome, s), Action::kRedraw);
  EXPECT_EQ(view.selected, 1U);
}

TEST(RenderTest, SortCyclesIndexLagAndRate) {
  Snapshot s = sample_snapshot();
  ViewState view;
  sync_view(view, s);
  auto order = [&] {
    const Frame f = render_screen(s, view, 24, 80);
    return std::vector<std::size_t>{line_index(f, "reader-0"), line_index(f, "reader-1"), line_index(f, "DEAD")};
  };
  auto o = order();
  EXPECT_LT(o[0], o[1]);
  EXPECT_LT(o[1], o[2]);
  EXPECT_EQ(handle_key(view, Key::kSort, s), Action::kRedraw);
  EXPECT_EQ(view.sort, SortKey::kLag);
  EXPECT_NE(render_screen(s, view, 24, 80).lines[0].text().find("sort: lag"), std::string::npos);
  o = order();  // lag 600, 300, 0
  EXPECT_LT(o[1], o[2]);
  EXPECT_LT(o[2], o[0]);
  handle_key(view, Key::kSort, s);
  EXPECT_EQ(view.sort, SortKey::kRate);
  o = order();  // rate 0 (dead), 20, 100
  EXPECT_LT(o[2], o[1]);
  EXPECT_LT(o[1], o[0]);
  handle_key(view, Key::kSort, s);
  EXPECT_EQ(view.sort, SortKey::kIndex);
}

TEST(RenderTest, UnknownRatesSortLast) {
  RingView r = ring(1, "r", {consumer(0, 0, std::nullopt), consumer(1, 0, 5.0), consumer(2, 0, 1.0)});
  const auto sorted = sorted_consumers(r, SortKey::kRate);
  ASSERT_EQ(sorted.size(), 3U);
  EXPECT_EQ(sorted[0].index, 2U);
  EXPECT_EQ(sorted[1].index, 1U);
  EXPECT_EQ(sorted[2].index, 0U);
}

TEST(RenderTest, PlusAndMinusStepTheIntervalWithinBounds) {
  Snapshot s;
  ViewState view;
  view.interval_s = 1.0;
  EXPECT_EQ(handle_key(view, Key::kLonger, s), Action::kReschedule);
  EXPECT_DOUBLE_EQ(view.interval_s, 2.0);
  EXPECT_EQ(handle_key(view, Key::kShorter, s), Action::kReschedule);
  EXPECT_EQ(handle_key(view, Key::kShorter, s), Action::kReschedule);
  EXPECT_DOUBLE_EQ(view.interval_s, 0.5);
  handle_key(view, Key::kShorter, s);
  handle_key(view, Key::kShorter, s);
  EXPECT_DOUBLE_EQ(view.interval_s, 0.1);
  EXPECT_EQ(handle_key(view, Key::kShorter, s), Action::kNone);
  view.interval_s = 60;
  EXPECT_EQ(handle_key(view, Key::kLonger, s), Action::kNone);
  view.interval_s = 0.3;  // from -d: steps to the neighbours
  handle_key(view, Key::kLonger, s);
  EXPECT_DOUBLE_EQ(view.interval_s, 0.5);
}

TEST(RenderTest, HelpListsTheKeysAndQuitQuits) {
  Snapshot s = sample_snapshot();
  ViewState view;
  EXPECT_EQ(handle_key(view, Key::kHelp, s), Action::kRedraw);
  const Frame f = render_screen(s, view, 24, 80);
  for (const char* needle : {"Keys", "sort", "quit", "+ / -", "Enter"}) {
    EXPECT_NE(f.text().find(needle), std::string::npos) << needle;
  }
  EXPECT_EQ(handle_key(view, Key::kEscape, s), Action::kRedraw);
  EXPECT_FALSE(view.help);
  EXPECT_EQ(handle_key(view, Key::kQuit, s), Action::kQuit);
}

TEST(RenderTest, ScreenFitsEightyByTwentyFourWithFullRings) {
  Snapshot s;
  s.watched = {"/dev/shm"};
  for (std::uint64_t id = 1; id <= 4; ++id) {
    std::vector<ConsumerView> cs;
    for (std::uint32_t i = 0; i < kMaxConsumers; ++i) cs.push_back(consumer(i, i * 10, 1.0 * i));
    s.rings.push_back(ring(id, "ring-" + std::to_string(id), cs));
  }
  ViewState view;
  sync_view(view, s);
  for (const RingView& r : s.rings) view.expanded.insert(r.path);
  for (std::uint64_t pick = 1; pick <= 4; ++pick) {
    view.selected = pick;
    const Frame f = render_screen(s, view, 24, 80);
    ASSERT_LE(f.lines.size(), 24U);
    for (const Line& l : f.lines) EXPECT_LE(l.text().size(), 80U) << l.text();
    EXPECT_NE(find_line(f, "> ring-" + std::to_string(pick)), nullptr) << f.text();
    EXPECT_NE(f.lines.back().text().find("q quit"), std::string::npos);
  }
}

TEST(RenderTest, ExtremeValuesStayInsideEightyColumns) {
  ConsumerView c = consumer(15, std::numeric_limits<std::uint64_t>::max(), 1e15, true, true);
  c.pid = 4194304;
  c.process = "a-very-long-process-name";
  c.cursor = std::numeric_limits<std::uint64_t>::max();
  c.lag_pct = 1e6;
  c.since_advance_s = 1e9;
  c.since_advance_is_lower_bound = true;
  RingView r = ring(1, "an-extremely-long-ring-name-that-goes-on", {c});
  r.capacity = kMaxCapacity;
  r.producer_seq = std::numeric_limits<std::uint64_t>::max();
  r.push_rate = 1e18;
  r.byte_rate = 1e30;
  r.messages = std::numeric_limits<std::uint64_t>::max();
  r.payload_bytes = std::numeric_limits<std::uint64_t>::max();
  r.max_message = layout::max_message_for(kMaxCapacity) - 1;  // not a whole KiB: printed in bytes
  r.producer_pid = 4194304;
  r.producer = ProducerState::kDead;
  r.producer_process = "a-very-long-producer-name";
  r.half_written_slot = true;
  r.wakeups = true;
  r.producer_sleeping = true;
  r.sleeping_consumers = 16;
  r.upstream_lost = std::numeric_limits<std::uint64_t>::max();
  r.upstream_gaps = std::numeric_limits<std::uint64_t>::max();
  r.fill = 1.0;
  r.blocked = true;
  Snapshot s;
  s.rings = {r};
  // Text keeps the whole name: its column grows by what the name needs.
  const std::string text = render_text(s, SortKey::kIndex, 3600);
  EXPECT_NE(text.find(r.name), std::string::npos) << text;
  for (const std::string& line : test::split_lines(text)) {
    EXPECT_LE(line.size(), 80U + r.name.size() - 20U) << "[" << line << "]";
  }
  r.name = "short";
  s.rings = {r};
  for (const std::string& line : test::split_lines(render_text(s, SortKey::kIndex, 3600))) {
    EXPECT_LE(line.size(), 80U) << "[" << line << "]";
  }
  ViewState view;
  sync_view(view, s);
  for (const Line& l : render_screen(s, view, 24, 80).lines) EXPECT_LE(l.text().size(), 80U);
}

TEST(RenderTest, TinyTerminalsNeverOverflow) {
  Snapshot s = sample_snapshot();
  ViewState view;
  sync_view(view, s);
  for (int rows = 0; rows <= 6; ++rows) {
    for (int cols = 0; cols <= 30; cols += 5) {
      const Frame f = render_screen(s, view, rows, cols);
      EXPECT_LE(f.lines.size(), static_cast<std::size_t>(std::max(rows, 0)));
      for (const Line& l : f.lines) EXPECT_LE(l.text().size(), static_cast<std::size_t>(cols));
    }
  }
}

TEST(RenderTest, WideTerminalGivesLongNamesRoom) {
  Snapshot s;
  s.rings = {ring(1, "market-data-equities-level2")};
  ViewState view;
  sync_view(view, s);
  EXPECT_EQ(find_line(render_screen(s, view, 24, 80), "market-data-equities-level2"), nullptr);
  EXPECT_NE(find_line(render_screen(s, view, 24, 120), "market-data-equities-level2"), nullptr);
}

TEST(RenderTest, LongNamesAreCutInTheMiddleSoTheirEndsStayApart) {
  Snapshot s;
  s.rings = {ring(1, "ringcast-demo-10168.ring"), ring(2, "ringcast-demo-10169.ring")};
  ViewState view;
  sync_view(view, s);
  const Frame f = render_screen(s, view, 24, 80);
  const Line* a = find_line(f, "68.ring");
  const Line* b = find_line(f, "69.ring");
  ASSERT_TRUE(a && b) << f.text();
  EXPECT_NE(a, b);
  EXPECT_NE(a->text().find("ringcast-d"), std::string::npos) << a->text();
  EXPECT_NE(a->text().find('~'), std::string::npos) << a->text();
}

TEST(RenderTest, TitleDropsWordsBeforeItIsCut) {
  Snapshot s = sample_snapshot();
  for (std::uint32_t i = 3; i < 16; ++i) s.rings[0].consumers.push_back(consumer(i, 0, 1.0));
  s.rings[0].active_consumers = 16;
  s.rings.push_back(RingView{});
  s.rings.back().state = RingPresence::kGone;
  s.rings.back().id = 3;
  ViewState view;
  sync_view(view, s);
  const std::string title = render_screen(s, view, 24, 80).lines.at(0).text();
  EXPECT_NE(title.find("sort: index"), std::string::npos) << title;
  EXPECT_EQ(title.find("every"), std::string::npos) << title;
}

TEST(RenderTest, SleepingProducerShowsAsWaitingAndSleepersAreCounted) {
  Snapshot s = sample_snapshot();
  s.rings[0].wakeups = true;
  s.rings[0].producer_sleeping = true;
  s.rings[0].sleeping_consumers = 2;
  const std::string text = render_text(s, SortKey::kIndex, 1.0);
  EXPECT_NE(text.find("producer 42 ticker waiting  blocking, wakeups (2 asleep)"), std::string::npos) << text;
  // Any ring can have sleepers, not only one created with wakeups.
  Snapshot plain = s;
  plain.rings[0].wakeups = false;
  const std::string plain_text = render_text(plain, SortKey::kIndex, 1.0);
  EXPECT_NE(plain_text.find("producer 42 ticker waiting  blocking (2 asleep)"), std::string::npos) << plain_text;
  const auto json = test::parse_json(render_json(s, 1.0));
  ASSERT_TRUE(json);
  EXPECT_TRUE(json->at("rings").at(0).at("producer_sleeping").get<bool>());
  EXPECT_DOUBLE_EQ(json->at("rings").at(0).at("sleeping_consumers").get<double>(), 2);
}

TEST(RenderTest, UpstreamLossShowsOnItsOwnLineOnlyWhenThereWasAGap) {
  Snapshot s = sample_snapshot();
  EXPECT_EQ(render_text(s, SortKey::kIndex, 1.0).find("upstream"), std::string::npos);
  s.rings[0].upstream_lost = 7;
  s.rings[0].upstream_gaps = 2;
  const std::string text = render_text(s, SortKey::kIndex, 1.0);
  EXPECT_NE(text.find("upstream lost 7 in 2 gaps (before the producer)"), std::string::npos) << text;
  const auto json = test::parse_json(render_json(s, 1.0));
  ASSERT_TRUE(json);
  EXPECT_DOUBLE_EQ(json->at("rings").at(0).at("upstream_lost").get<double>(), 7);
  EXPECT_DOUBLE_EQ(json->at("rings").at(0).at("upstream_gaps").get<double>(), 2);
}

TEST(RenderTest, GoneRingShowsGoneAndItsReason) {
  Snapshot s = sample_snapshot();
  s.rings[1] = RingView{};
  s.rings[1].id = 2;
  s.rings[1].name = "trades";
  s.rings[1].path = "/dev/shm/trades";
  s.rings[1].state = RingPresence::kGone;
  s.rings[1].gone_reason = "replaced";
  const std::string text = render_text(s, SortKey::kIndex, 1.0);
  EXPECT_NE(text.find("GONE"), std::string::npos) << text;
  EXPECT_NE(text.find("gone: replaced"), std::string::npos) << text;
  EXPECT_NE(text.find("(1 gone)"), std::string::npos) << text;
  ViewState view;
  sync_view(view, s);
  const Frame f = render_screen(s, view, 24, 80);
  const Line* row = find_line(f, "trades");
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->style, Style::kGone);
}

TEST(RenderTest, SelectionMovesToTheReplacementOfASelectedRing) {
  Snapshot s = sample_snapshot();
  ViewState view;
  sync_view(view, s);
  handle_key(view, Key::kDown, s);  // trades (id 2)
  s.rings[1].id = 7;                // replaced: new id, same path
  sync_view(view, s);
  EXPECT_EQ(view.selected, 7U);
}

TEST(RenderTest, TextListsEveryRingExpandedWithoutSelection) {
  const std::string text = render_text(sample_snapshot(), SortKey::kIndex, 1.0);
  EXPECT_EQ(text.find("> "), std::string::npos);
  EXPECT_NE(text.find("reader-0"), std::string::npos);
  EXPECT_NE(text.find("trades"), std::string::npos);
  EXPECT_NE(text.find("BEHIND"), std::string::npos);
  EXPECT_NE(text.find("DEAD"), std::string::npos);
  EXPECT_EQ(text.find("q quit"), std::string::npos);
  EXPECT_EQ(text.back(), '\n');
}

TEST(RenderTest, EmptySnapshotSaysWhereItLooked) {
  Snapshot s;
  s.watched = {"/dev/shm"};
  EXPECT_NE(render_text(s, SortKey::kIndex, 1.0).find("no ringcast rings under /dev/shm"), std::string::npos);
}

TEST(RenderTest, JsonIsOneValidObjectWithEveryField) {
  Snapshot s = sample_snapshot();
  s.rings[0].consumers[0].process = "quote\"and\\slash\n";
  s.rings[1].push_rate.reset();
  const std::string text = render_json(s, 0.5);
  ASSERT_EQ(text.back(), '\n');
  ASSERT_EQ(text.find('\n'), text.size() - 1);  // one line
  const auto json = test::parse_json(text);
  ASSERT_TRUE(json) << text;
  const nlohmann::json& j = *json;
  EXPECT_DOUBLE_EQ(j.at("interval_s").get<double>(), 0.5);
  EXPECT_EQ(j.at("watched").at(0).get<std::string>(), "/dev/shm");
  const nlohmann::json& ticks = j.at("rings").at(0);
  EXPECT_EQ(ticks.at("name").get<std::string>(), "ticks");
  EXPECT_EQ(ticks.at("state").get<std::string>(), "live");
  EXPECT_DOUBLE_EQ(ticks.at("capacity").get<double>(), 1024);
  EXPECT_DOUBLE_EQ(ticks.at("push_rate").get<double>(), 100);
  EXPECT_DOUBLE_EQ(ticks.at("max_lag").get<double>(), 600);
  EXPECT_FALSE(ticks.at("blocked").get<bool>());
  EXPECT_FALSE(ticks.at("drained").get<bool>());
  EXPECT_DOUBLE_EQ(ticks.at("dead_consumers").get<double>(), 1);
  EXPECT_EQ(ticks.at("consumers").size(), 3U);
  EXPECT_EQ(ticks.at("consumers").at(0).at("process").get<std::string>(), "quote\"and\\slash\n");
  EXPECT_TRUE(ticks.at("consumers").at(1).at("behind").get<bool>());
  EXPECT_FALSE(ticks.at("consumers").at(2).at("alive").get<bool>());
  for (const char* key :
       {"index", "pid", "cursor", "lag", "lag_pct", "recv_rate", "since_advance_s", "since_advance_is_lower_bound"}) {
    EXPECT_TRUE(ticks.at("consumers").at(0).contains(key)) << key;
  }
  EXPECT_TRUE(j.at("rings").at(1).at("push_rate").is_null());
  EXPECT_DOUBLE_EQ(ticks.at("byte_rate").get<double>(), 5200);
  EXPECT_EQ(ticks.at("max_message").get<std::uint64_t>(), 52U);
  EXPECT_EQ(ticks.at("messages").get<std::uint64_t>(), 5000U);
  EXPECT_EQ(ticks.at("payload_bytes").get<std::uint64_t>(), 260000U);
}

TEST(RenderTest, RingRowShowsMessagesAndBytesPerSecondAndTheDetailTheMaxMessage) {
  Snapshot s = sample_snapshot();
  RingView& r = s.rings[0];
  r.push_rate = 250.0;
  r.byte_rate = 16.4e6;  // 250 messages/s of 64 KiB
  r.max_message = 64 * 1024;
  r.messages = 1234;
  r.payload_bytes = 80'871'424;
  r.producer_seq = 1'264'850;  // positions count slots: a 64 KiB message takes 1025
  ViewState view;
  sync_view(view, s);
  const Frame f = render_screen(s, view, 24, 80);
  EXPECT_NE(find_line(f, "MSGS/s BYTES/s"), nullptr) << f.text();
  const Line* row = find_line(f, "> ticks");
  ASSERT_NE(row, nullptr) << f.text();
  EXPECT_NE(row->text().find("  250.0   16.4M ["), std::string::npos) << row->text();
  EXPECT_NE(find_line(f, "    messages 1234 (80.9 MB)  position 1264850  max message 64 KiB"), nullptr) << f.text();
  // Its consumers move by slots, not messages: their rate column says so.
  EXPECT_NE(find_line(f, "LAG% SLOTS/s"), nullptr) << f.text();
  EXPECT_EQ(find_line(f, "RECV/s"), nullptr) << f.text();
  // The same in --once text; a collapsed ring shows only its row.
  const std::string text = render_text(s, SortKey::kIndex, 1.0);
  EXPECT_NE(text.find("max message 64 KiB"), std::string::npos) << text;
  EXPECT_NE(text.find("max message 52 B"), std::string::npos) << text;  // trades
}

TEST(RenderTest, ByteAndSizeFormattersUseTheirUnits) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(999), "999 B");
  EXPECT_EQ(format_bytes(1000), "1.00 kB");
  EXPECT_EQ(format_bytes(80'871'424), "80.9 MB");
  EXPECT_EQ(format_bytes(999'999), "1.00 MB");
  EXPECT_LE(format_bytes(std::numeric_limits<std::uint64_t>::max()).size(), 7U);
  EXPECT_EQ(format_size(52), "52 B");
  EXPECT_EQ(format_size(64 * 1024), "64 KiB");
  EXPECT_EQ(format_size(1 << 20), "1 MiB");
  EXPECT_EQ(format_size(std::uint64_t{1} << 30), "1 GiB");
  EXPECT_EQ(format_size(131056), "131056 B");
}

TEST(RenderTest, FormattersKeepTheirWidth) {
  EXPECT_EQ(format_count(123, 7), "123");
  EXPECT_EQ(format_count(1234567, 7), "1234567");
  EXPECT_EQ(format_count(12345678, 7), "12.3M");
  EXPECT_EQ(format_count(1073741824, 7), "1.07G");
  EXPECT_LE(format_count(std::numeric_limits<std::uint64_t>::max(), 7).size(), 7U);
  EXPECT_EQ(format_rate(std::nullopt), "-");
  EXPECT_EQ(format_rate(12.34), "12.3");
  EXPECT_EQ(format_rate(12345.0), "12.3k");
  EXPECT_EQ(format_age(3.5, false), "3.5s");
  EXPECT_EQ(format_age(42.9, true), ">42s");
  EXPECT_EQ(format_age(125, false), "2m05s");
  EXPECT_EQ(format_age(7260, false), "2h01m");
  EXPECT_EQ(format_age(90000, false), "1d01h");
}

}  // namespace
}  // namespace ringcast::top
