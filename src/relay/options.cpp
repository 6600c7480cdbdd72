// Parsing of relay routes and addresses; names of states and errors.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "invalid_config.hpp"
#include "ringcast/error.hpp"
#include "ringcast/relay/relay.hpp"

namespace ringcast::relay {

tl::expected<RingRoute, RelayError> parse_ring_route(std::string_view spec) {
  const auto eq = spec.rfind('=');
  if (eq == std::string_view::npos) {
    return invalid_config(fmt::format("--ring '{}': expected PATH=CHANNEL or PATH=PREFIX*", spec));
  }
  RingRoute r;
  r.path = std::string(spec.substr(0, eq));
  r.name = std::string(spec.substr(eq + 1));
  if (r.path.empty()) return invalid_config(fmt::format("--ring '{}': empty ring path", spec));
  if (!r.name.empty() && r.name.back() == '*') {
    r.topic_in_payload = true;
    r.name.pop_back();  // the prefix; may be empty ("PATH=*": the topic is the whole channel)
  } else if (r.name.empty()) {
    return invalid_config(fmt::format("--ring '{}': empty channel (use PATH=* for topic-in-payload)", spec));
  }
  return r;
}

tl::expected<NatsRingIngressRoute, RelayError> parse_nats_ring_route(std::string_view spec) {
  const auto eq = spec.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == spec.size()) {
    return invalid_config(fmt::format("--nats-in '{}': expected SUBJECT=RING_PATH", spec));
  }
  return NatsRingIngressRoute{std::string(spec.substr(0, eq)), std::string(spec.substr(eq + 1))};
}

tl::expected<NatsBrokerIngressRoute, RelayError> parse_nats_broker_route(std::string_view spec) {
  const auto eq = spec.find('=');
  NatsBrokerIngressRoute r;
  r.subject = std::string(spec.substr(0, eq));
  if (eq != std::string_view::npos) r.channel = std::string(spec.substr(eq + 1));
  if (r.subject.empty() || (eq != std::string_view::npos && r.channel.empty())) {
    return invalid_config(fmt::format("--nats-in '{}': expected SUBJECT or SUBJECT=CHANNEL", spec));
  }
  return r;
}

tl::expected<HostPort, RelayError> parse_host_port(std::string_view s) {
  HostPort hp;
  std::string_view port_text = s;
  if (!s.empty() && s.front() == '[') {
    const auto close = s.find(']');
    if (close == std::string_view::npos || close + 1 >= s.size() || s[close + 1] != ':') {
      return invalid_config(fmt::format("'{}': expected [IPv6]:PORT", s));
    }
    hp.host = std::string(s.substr(1, close - 1));
    port_text = s.substr(close + 2);
  } else if (const auto colon = s.rfind(':'); colon != std::string_view::npos) {
    if (colon > 0) hp.host = std::string(s.substr(0, colon));
    port_text = s.substr(colon + 1);
  }
  unsigned value = 0;
  const auto* end = port_text.data() + port_text.size();
  const auto r = std::from_chars(port_text.data(), end, value);
  if (port_text.empty() || r.ec != std::errc() || r.ptr != end || value > 65535) {
    return invalid_config(fmt::format("'{}': expected HOST:PORT with a port 0..65535", s));
  }
  hp.port = static_cast<std::uint16_t>(value);
  return hp;
}

std::string_view to_string(RingState s) noexcept {
  switch (s) {
    case RingState::kWaitingForRing:
      return "waiting_for_ring";
    case RingState::kWaitingForProducer:
      return "waiting_for_producer";
    case RingState::kRelaying:
      return "relaying";
    case RingState::kStopped:
      return "stopped";
    case RingState::kFailed:
      return "failed";
  }
  return "unknown";
}

std::string RelayError::message() const {
  std::string_view what = "error";
  switch (code) {
    case Code::kInvalidConfig:
      what = "invalid configuration";
      break;
    case Code::kBroker:
      return error_message("broker", detail, 0);  // the broker's message names its errno
    case Code::kNats:
      what = "nats";
      break;
    case Code::kThread:
      what = "thread";
      break;
    case Code::kMetrics:
      what = "metrics";
      break;
    case Code::kRing:
      what = "ring";
      break;
  }
  return error_message(what, detail, sys_errno);
}

}  // namespace ringcast::relay
