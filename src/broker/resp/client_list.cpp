#include "broker/resp/client_list.hpp"

#include <string_view>

#include <fmt/format.h>

namespace ringcast::broker {

std::string client_line(const ConnectionStats& c) {
  // resp=: the RESP version ("2", "3"), or "ws" for a WebSocket client: the
  // protocol label without its "resp".
  std::string_view resp = c.protocol;
  if (resp.starts_with("resp")) resp.remove_prefix(4);
  return fmt::format(
      "id={} addr={} name={} age={} sub={} psub={} ssub={} resp={} omem={} oqueue={} policy={} "
      "dropped-hard={} dropped-soft={} dropped-disconnect={} conflated={} loss-notices={}\n",
      c.id, c.peer, c.name, c.age_seconds, c.channels, c.patterns, c.shard_channels, resp, c.queued_bytes,
      c.queued_frames, to_string(c.policy), c.dropped_hard_limit, c.dropped_soft_limit, c.dropped_disconnect,
      c.conflated, c.loss_notices);
}

std::string client_list(std::span<const ConnectionStats> clients) {
  std::string out;
  for (const ConnectionStats& c : clients) out += client_line(c);
  return out;
}

}  // namespace ringcast::broker
