// The text of INFO, built from what the core returns (BrokerStats,
// ConnectionStats, its configuration and its components' counters) plus the
// embedder's InfoProvider.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "broker/core/broker_core.hpp"

namespace ringcast::broker {

// INFO text for `section` ("", "all", "default", "everything", "server",
// "clients", "stats", "pubsub", "auth", "tls", "qos1", "drops", "history");
// unknown sections give "".
[[nodiscard]] std::string info_text(BrokerCore& core, std::string_view section);
// INFO text for a command's section list: the core's sections plus the
// embedder's provider (called outside every broker lock).
[[nodiscard]] std::string info_reply(BrokerCore& core, std::span<const std::string> sections);

}  // namespace ringcast::broker
