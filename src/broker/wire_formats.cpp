// The wire-format table (queue/wire_format.hpp): one codec per WireFormat, each
// owned by its transport. The core calls wire_codec() and includes no transport.
#include <array>

#include "broker/queue/wire_format.hpp"
#include "broker/resp/resp_delivery.hpp"
#include "broker/ws/json_delivery.hpp"

namespace ringcast::broker {

namespace {

// Indexed by WireFormat.
constexpr std::array<WireCodec, kWireFormatCount> kCodecs{
    WireCodec{resp::encode_resp2_run, resp::conflation_key},
    WireCodec{resp::encode_resp3_run, resp::conflation_key},
    WireCodec{ws::encode_json_run, ws::json_conflation_key},
    WireCodec{ws::encode_popsub_run, ws::json_conflation_key},
};
static_assert(static_cast<std::size_t>(WireFormat::kResp2) == 0 && static_cast<std::size_t>(WireFormat::kResp3) == 1 &&
              static_cast<std::size_t>(WireFormat::kJson) == 2 &&
              static_cast<std::size_t>(WireFormat::kPopSubJson) == 3);

}  // namespace

const WireCodec& wire_codec(WireFormat f) noexcept { return kCodecs[static_cast<std::size_t>(f)]; }

}  // namespace ringcast::broker
