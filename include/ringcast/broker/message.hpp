// One pub/sub message as a publisher hands it to the broker: views of bytes the
// caller owns until the publish call returns.
#pragma once

#include <cstdint>
#include <string_view>

namespace ringcast::broker {

struct Message {
  std::string_view channel;
  std::string_view payload;
  // 1: QoS 1 (docs/guarantees.md): subscribers that subscribed at QoS 1 owe an
  // ack for it and get it again until they do. 0: fire and forget.
  std::uint8_t qos = 0;
  // The publisher's own id for the message (PopSub's "message_id"; UTF-8), or
  // empty: none. PopSub's dialect delivers it as the message's id, the others
  // show the broker's per-channel id (docs/broker.md, "PopSub's frames and
  // ringcast's"). Not stored in history.
  std::string_view message_id = {};
};

}  // namespace ringcast::broker
