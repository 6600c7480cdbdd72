// GET /metrics on the WebSocket port: the broker's Prometheus text, behind the
// rules of the data it shows (docs/security.md, "Operators' surfaces").
//
// The text names every connection (peer address, token subject) and every
// retained channel, so it is readable by exactly those who could read every
// channel: anyone when the broker asks no authentication; otherwise a request
// with `Authorization: Bearer <credential>` where the credential is the
// password (--requirepass) or a valid token (--token-secret) whose grant has
// no `subscribe` claim (every channel). Refusals: 401 with WWW-Authenticate
// (no or wrong credential), 403 (a valid token restricted to some channels);
// each counted in AuthStats as an AUTH refusal of the same kind would be.
//
// Thread safety: the handler may be called from any I/O thread concurrently
// (it reads the configuration and renders with BrokerCore::metrics_text()).
#pragma once

#include "broker/ws/http_upgrade.hpp"

namespace ringcast::broker {
class BrokerCore;
}

namespace ringcast::broker::ws {

// The handler of /metrics; `core` must outlive it.
[[nodiscard]] HttpRoutes::Handler metrics_route(BrokerCore& core);

}  // namespace ringcast::broker::ws
