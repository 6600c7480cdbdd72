// The input convention of the stream fuzz targets (RESP parser, WebSocket
// frames): byte 0 says how many cut points (0-7), the next bytes place them,
// and the rest is the stream, which the target feeds whole and split at the
// cuts to check that the split changes nothing.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace ringcast::fuzz {

struct SplitInput {
  std::string_view stream;
  std::vector<std::size_t> cuts;  // sorted offsets into `stream`
};

// nullopt when the input is too short for its own cut count.
inline std::optional<SplitInput> split_input(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return std::nullopt;
  const std::size_t ncuts = data[0] % 8;
  if (size < 1 + ncuts) return std::nullopt;
  SplitInput in{std::string_view(reinterpret_cast<const char*>(data) + 1 + ncuts, size - 1 - ncuts), {}};
  for (std::size_t i = 0; i < ncuts; ++i) {
    in.cuts.push_back(in.stream.empty() ? 0 : data[1 + i] % (in.stream.size() + 1));
  }
  std::sort(in.cuts.begin(), in.cuts.end());
  return in;
}

// Calls feed(piece) for each piece of the stream between the cuts, in order,
// until it returns false.
template <class Feed>
void for_each_piece(const SplitInput& in, Feed&& feed) {
  std::size_t start = 0;
  for (std::size_t i = 0; i <= in.cuts.size(); ++i) {
    const std::size_t end = i < in.cuts.size() ? in.cuts[i] : in.stream.size();
    if (!feed(in.stream.substr(start, end - start))) return;
    start = end;
  }
}

}  // namespace ringcast::fuzz
