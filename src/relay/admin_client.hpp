// A blocking, deadline-bounded RESP2 round trip to the relay's own broker, used
// to read per-connection statistics (CLIENT LIST) for /metrics until the broker
// offers them through its API (docs/relay.md, "Per-connection statistics").
//
// Thread safety: free functions; each call uses its own socket.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ringcast::relay {

// The name the admin connection gives itself, so its own line can be skipped.
inline constexpr std::string_view kAdminClientName = "ringcast-relay-admin";

// Connects to host:port (a wildcard bind address is reached through loopback),
// authenticates if `password` is non-empty, names itself kAdminClientName and
// returns CLIENT LIST's body. nullopt on any error or when `timeout` passes.
[[nodiscard]] std::optional<std::string> fetch_client_list(const std::string& host, std::uint16_t port,
                                                           const std::string& password,
                                                           std::chrono::milliseconds timeout);

// One CLIENT LIST line as key -> value ("id", "addr", "name", "omem", ...).
using ClientFields = std::map<std::string, std::string, std::less<>>;
[[nodiscard]] std::vector<ClientFields> parse_client_list(std::string_view body);

}  // namespace ringcast::relay
