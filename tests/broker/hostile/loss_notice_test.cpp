// QoS 1 loss notices (issue 40, "weaker points"; docs/guarantees.md, "QoS 1
// loss notices"). The attack, by an unlucky client as much as a hostile one:
// a QoS 1 subscriber under drop-oldest that does not read while a publisher
// floods its channel. Its waiting list overflows and every dropped delivery
// owed it a notice that no policy drops; one notice per lost delivery filled
// its queue past the hard limit and the broker disconnected it for its own
// loss notices. Now a run of losses is one notice naming its range.
#include <sys/socket.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

// The kernel send buffers (`ss -m`'s skmem tb) of the established TCP
// sockets on local port `port`: the broker's ends of its connections there.
std::vector<std::uint64_t> send_buffers(std::uint16_t port) {
  const std::string command = "ss -tmnH state established '( sport = :" + std::to_string(port) + " )'";
  std::vector<std::uint64_t> out;
  FILE* ss = ::popen(command.c_str(), "r");
  if (ss == nullptr) return out;
  std::string text;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, ss)) > 0;) text.append(buf, n);
  ::pclose(ss);
  for (std::size_t at = text.find(",tb"); at != std::string::npos; at = text.find(",tb", at + 3)) {
    out.push_back(std::stoull(text.substr(at + 3)));
  }
  return out;
}

TEST(LossNoticeTest, FloodedQosOneSubscriberIsNotDisconnectedByItsOwnLossNotices) {
  Broker b({"--overflow-policy", "drop-oldest", "--hard-limit", "64kb", "--soft-limit", "0", "--pace-bytes", "0",
            "--max-in-flight", "4", "--ack-timeout", "1h", "--send-buffer", "64kb"});
  WsClient sub(b.ws_port());
  ASSERT_TRUE(sub.send_json({{"type", "subscribe"}, {"topic", "t"}, {"qos", 1}}));
  const auto ok = sub.read_json();
  ASSERT_TRUE(ok && (*ok)["type"] == "subscribed");

  // QoS 1 publishes while the subscriber reads nothing: 4 are in flight,
  // 64 KB of them wait, the rest are dropped. One notice per drop must come
  // to more than what lies between the broker's queue and the subscriber,
  // else a broker that sent one per drop would pass: the hard limit, the
  // broker's send buffer (--send-buffer 64kb: the kernel doubles it, at
  // most) and the subscriber's receive buffer (it reads nothing, so the
  // kernel does not grow it). Twice that many publishes: about 6,000 (left
  // to the kernel's autotuning, the send buffer grew to tcp_wmem's 4 MB and
  // the check took 90,000).
  // kNoticeBytes: no notice frame is smaller (the JSON envelope and the text
  // "window-dropped topic=t message_id=N total=D" without their numbers).
  constexpr std::uint64_t kNoticeBytes = 100, kHardLimit = 64 * 1024, kSendBuffer = 2 * 64 * 1024;
  int receive_buffer = 0;
  socklen_t len = sizeof receive_buffer;
  ASSERT_EQ(::getsockopt(sub.fd(), SOL_SOCKET, SO_RCVBUF, &receive_buffer, &len), 0);
  const std::uint64_t between = kHardLimit + kSendBuffer + static_cast<std::uint64_t>(receive_buffer);
  WsClient pub(b.ws_port());
  constexpr int kBatch = 200;
  const int batches = static_cast<int>(2 * between / kNoticeBytes / kBatch + 1);
  const std::string frame = ws::test::client_frame(
      json{{"type", "publish"}, {"topic", "t"}, {"payload", "0123456789abcdef"}, {"qos", 1}}.dump());
  std::string batch;
  for (int i = 0; i < kBatch; ++i) batch += frame;
  for (int n = 0; n < batches; ++n) {
    ASSERT_TRUE(pub.send_raw(batch));
    for (int i = 0; i < kBatch; ++i) {
      const auto r = pub.read_json();
      ASSERT_TRUE(r && (*r)["type"] == "puback") << "publish " << n * kBatch + i;
    }
  }
  // The flood would have grown a send buffer left to the kernel's autotuning.
  const std::vector<std::uint64_t> buffers = send_buffers(b.ws_port());
  ASSERT_EQ(buffers.size(), 2u) << "ss (iproute2) did not show the broker's two connections";
  for (const std::uint64_t bytes : buffers) EXPECT_LE(bytes, kSendBuffer) << "--send-buffer was not applied";
  // Every drop happened inside a publish, before its puback.
  const std::optional<std::string> dropped_text = b.info_field("qos1_window_dropped");
  ASSERT_TRUE(dropped_text.has_value());
  const std::uint64_t dropped = std::stoull(*dropped_text);
  ASSERT_GT(dropped * kNoticeBytes, between)
      << dropped << " drops: either they stopped early (the subscriber was disconnected during the flood) or the "
      << "flood is too small for one notice per drop to overflow " << between << " bytes of queue and buffers";

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
