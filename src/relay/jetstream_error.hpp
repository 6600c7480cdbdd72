// The text of a failed JetStream call, for logs and start-up errors: the
// step, libnats' status, the JetStream error code when there is one, and
// libnats' last error text for this thread.
#pragma once

#include <string>
#include <string_view>

#include <nats/nats.h>

namespace ringcast::relay {

[[nodiscard]] std::string jetstream_error(std::string_view step, natsStatus s, jsErrCode jerr);

}  // namespace ringcast::relay
