#include "broker/queue/wire_format.hpp"

#include "broker/util/clock.hpp"

namespace ringcast::broker {

FrameRef encode_message(WireFormat f, std::string_view channel, std::string_view payload) {
  const Message m{channel, payload};
  return wire_codec(f).encode(DeliveryRun{DeliveryKind::kMessage, {}, {&m, 1}, 0, wall_clock_ms()});
}

}  // namespace ringcast::broker
