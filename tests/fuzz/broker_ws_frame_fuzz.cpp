// libFuzzer target for the WebSocket frame decoder (src/broker/ws/frame_decoder.hpp).
//
// Differential: the decoder must produce the same events and the same error
// whether the input arrives whole or split at fuzzer-chosen points (invariant
// 1), and every event must keep the decoder's promises: messages within the
// size limit, text valid UTF-8, control payloads at most 125 bytes, close codes
// valid, nothing after a close or an error.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "broker/ws/frame_decoder.hpp"
#include "broker/ws/utf8.hpp"

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

std::vector<Event> decode(std::string_view input, const std::vector<std::size_t>& cuts) {
  FrameDecoder d(kMaxMessage);
  std::vector<Event> out;
  bool ended = false;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= cuts.size(); ++i) {
    const std::size_t end = i < cuts.size() ? cuts[i] : input.size();
    std::string_view piece = input.substr(start, end - start);
    start = end;
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
  }
  if (d.retained_bytes() > std::max(kMaxMessage, FrameDecoder::kMaxRetained) * 2) std::abort();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // First byte: how many cut points; the cuts come from the next bytes.
  if (size == 0) return 0;
  const std::size_t ncuts = data[0] % 8;
  if (size < 1 + ncuts) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1 + ncuts, size - 1 - ncuts);
  std::vector<std::size_t> cuts;
  for (std::size_t i = 0; i < ncuts; ++i) cuts.push_back(input.empty() ? 0 : data[1 + i] % (input.size() + 1));
  std::sort(cuts.begin(), cuts.end());
  if (decode(input, {}) != decode(input, cuts)) std::abort();
  return 0;
}
