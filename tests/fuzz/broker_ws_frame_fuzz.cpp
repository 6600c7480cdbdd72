// libFuzzer target for the WebSocket frame decoder (src/broker/ws/frame_decoder.hpp).
//
// Differential: the decoder must produce the same events and the same error
// whether the input arrives whole or split at fuzzer-chosen points (invariant
// 1), and every event must keep the decoder's promises: messages within the
// size limit, text valid UTF-8, control payloads at most 125 bytes, close codes
// valid, nothing after a close or an error. The same bytes, split the same
// way, then run through an upgraded WebSocket session beside a subscriber.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "broker/ws/frame_decoder.hpp"
#include "broker/ws/utf8.hpp"
#include "split_input.hpp"
#include "ws_fuzz_support.hpp"

namespace {

using ringcast::broker::ws::FrameDecoder;
using Status = FrameDecoder::Status;

constexpr std::size_t kMaxMessage = 4096;

struct Event {
  Status status;
  std::string payload;
  int code;
  bool operator==(const Event&) const = default;
};

std::vector<Event> decode(const ringcast::fuzz::SplitInput& in, bool whole) {
  FrameDecoder d(kMaxMessage);
  std::vector<Event> out;
  bool ended = false;
  const ringcast::fuzz::SplitInput one{in.stream, {}};
  ringcast::fuzz::for_each_piece(whole ? one : in, [&](std::string_view piece) {
    for (;;) {
      const Status st = d.decode(piece);
      if (st == Status::kNeedMore) {
        if (!piece.empty()) std::abort();  // kNeedMore consumes everything
        break;
      }
      if (ended) std::abort();  // invariant 3: nothing after a close or an error
      int code = 0;
      switch (st) {
        case Status::kText:
          if (!ringcast::broker::ws::is_valid_utf8(d.payload())) std::abort();
          [[fallthrough]];
        case Status::kBinary:
          if (d.payload().size() > kMaxMessage) std::abort();
          break;
        case Status::kPing:
        case Status::kPong:
          if (d.payload().size() > FrameDecoder::kMaxControl) std::abort();
          break;
        case Status::kClose:
          code = d.close_code();
          if (code != FrameDecoder::kNoStatus && !FrameDecoder::valid_close_code(d.close_code())) std::abort();
          ended = true;
          break;
        case Status::kError:
          code = static_cast<int>(d.error_code());
          if (d.error().empty()) std::abort();
          ended = true;
          break;
        case Status::kNeedMore:
          break;
      }
      out.push_back({st, std::string(st == Status::kError ? d.error() : d.payload()), code});
    }
    return true;
  });
  if (d.retained_bytes() > std::max(kMaxMessage, FrameDecoder::kMaxRetained) * 2) std::abort();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto in = ringcast::fuzz::split_input(data, size);
  if (!in) return 0;
  if (decode(*in, true) != decode(*in, false)) std::abort();

  namespace f = ringcast::broker::ws::fuzz;
  (void)f::listener();
  auto s = f::upgraded_session();
  ringcast::fuzz::for_each_piece(*in, [&](std::string_view piece) {
    const auto r = s->on_input(piece);
    f::drain(*s);
    f::drain(f::listener());
    return r != ringcast::broker::Client::InputResult::kClose;
  });
  s->detach();
  return 0;
}
