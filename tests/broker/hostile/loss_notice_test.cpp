// QoS 1 loss notices (issue 40, "weaker points"; docs/guarantees.md, "QoS 1
// loss notices"). The attack, by an unlucky client as much as a hostile one:
// a QoS 1 subscriber under drop-oldest that does not read while a publisher
// floods its channel. Its waiting list overflows and every dropped delivery
// owed it a notice that no policy drops; one notice per lost delivery filled
// its queue past the hard limit and the broker disconnected it for its own
// loss notices. Now a run of losses is one notice naming its range.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "hostile_support.hpp"
#include "ws_client.hpp"

namespace ringcast::broker::hostile {
namespace {

using nlohmann::json;
using ws::test::WsClient;

// `key=<n>` in a notice's text; nullopt if absent.
std::optional<std::uint64_t> field(std::string_view text, std::string_view key) {
  std::string k(" ");
  k.append(key).append("=");
  const auto at = text.find(k);
  if (at == std::string_view::npos) return std::nullopt;
  return std::stoull(std::string(text.substr(at + k.size())));
}

TEST(LossNoticeTest, FloodedQosOneSubscriberIsNotDisconnectedByItsOwnLossNotices) {
  Broker b({"--overflow-policy", "drop-oldest", "--hard-limit", "64kb", "--soft-limit", "0", "--pace-bytes", "0",
            "--max-in-flight", "4", "--ack-timeout", "1h"});
  WsClient sub(b.ws_port());
  ASSERT_TRUE(sub.send_json({{"type", "subscribe"}, {"topic", "t"}, {"qos", 1}}));
  const auto ok = sub.read_json();
  ASSERT_TRUE(ok && (*ok)["type"] == "subscribed");

  // 150,000 QoS 1 publishes while the subscriber reads nothing: 4 are in
  // flight, 64 KB of them wait, the rest are dropped. One notice per drop
  // would be about 20 MB, more than the hard limit plus what the kernel's
  // socket buffers hold.
  WsClient pub(b.ws_port());
  constexpr int kBatches = 750, kBatch = 200;
  const std::string frame = ws::test::client_frame(
      json{{"type", "publish"}, {"topic", "t"}, {"payload", "0123456789abcdef"}, {"qos", 1}}.dump());
  std::string batch;
  for (int i = 0; i < kBatch; ++i) batch += frame;
  for (int n = 0; n < kBatches; ++n) {
    ASSERT_TRUE(pub.send_raw(batch));
    for (int i = 0; i < kBatch; ++i) {
      const auto r = pub.read_json();
      ASSERT_TRUE(r && (*r)["type"] == "puback") << "publish " << n * kBatch + i;
    }
  }
  // Every drop happened inside a publish, before its puback.
  const std::optional<std::string> dropped_text = b.info_field("qos1_window_dropped");
  ASSERT_TRUE(dropped_text.has_value());
  const std::uint64_t dropped = std::stoull(*dropped_text);
  ASSERT_GT(dropped, 100000u) << "the drops stopped early: the subscriber was disconnected during the flood";

  // The subscriber reads: its deliveries, then notices whose counts add up to
  // every drop, each once, without the connection ending.
  std::uint64_t told = 0, notices = 0, messages = 0, widest = 0;
  while (told < dropped) {
    const auto j = sub.read_json();
    ASSERT_TRUE(j.has_value()) << "the subscriber was disconnected after " << notices << " notices telling " << told
                               << " of " << dropped << " drops";
    if ((*j)["topic"] != "__ringcast__:loss") {
      ++messages;
      continue;
    }
    const std::string text = (*j)["payload"];
    ASSERT_EQ(text.rfind("window-dropped topic=t message_id=", 0), 0u) << text;
    const std::uint64_t count = field(text, "count").value_or(1);
    if (count > 1) {
      EXPECT_LE(*field(text, "message_id") + count - 1, *field(text, "last_message_id")) << text;
    }
    told += count;
    widest = std::max(widest, count);
    ++notices;
  }
  EXPECT_EQ(told, dropped);
  EXPECT_EQ(messages, 4u);
  // Notices go out as fast as the subscriber reads them; what it does not
  // read meanwhile coalesces (the socket's buffers filled long before the
  // flood ended).
  EXPECT_LT(notices, dropped) << "losses were not coalesced";
  EXPECT_GT(widest, 1u);
  std::printf("%llu drops told by %llu notices (widest %llu)\n", static_cast<unsigned long long>(dropped),
              static_cast<unsigned long long>(notices), static_cast<unsigned long long>(widest));
  // Still connected and served: a subscribe is answered.
  ASSERT_TRUE(sub.send_json({{"type", "subscribe"}, {"topic", "u"}}));
  for (;;) {
    const auto j = sub.read_json();
    ASSERT_TRUE(j.has_value()) << "the subscriber was disconnected";
    if ((*j)["type"] == "subscribed") break;
  }
  EXPECT_TRUE(b.serves_canary());
}

}  // namespace
}  // namespace ringcast::broker::hostile
