// RESP deliveries: the `message`, `pmessage` and `smessage` frames of a run in
// RESP2 (arrays) and RESP3 (pushes), and their conflation key. The RESP rows of
// the wire-format table (src/broker/wire_formats.cpp).
#pragma once

#include <string_view>

#include "broker/queue/frame.hpp"
#include "broker/queue/wire_format.hpp"

namespace ringcast::broker::resp {

// One frame per message of `run`, in order: *3 / >3, "message", channel,
// payload; *4 / >4, "pmessage", pattern, channel, payload; or *3 / >3,
// "smessage", channel, payload. Ids and timestamps are not sent (RESP frames
// are Redis's). Droppable.
[[nodiscard]] FrameRef encode_resp2_run(const DeliveryRun& run);
[[nodiscard]] FrameRef encode_resp3_run(const DeliveryRun& run);

// The conflation key of a RESP message frame: its bytes up to the end of the
// channel (type, kind, pattern for a pmessage, channel), so `message`, each
// pattern's `pmessage` and `smessage` frames of one channel are conflated apart.
// A frame that is not one of those is its own key.
[[nodiscard]] std::string_view conflation_key(std::string_view frame) noexcept;

}  // namespace ringcast::broker::resp
