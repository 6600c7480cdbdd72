#include "cluster_frame.hpp"

#include <cstring>

#include <fmt/format.h>

namespace ringcast::relay {

namespace {

// FNV-1a, 64 bits: a few lines, stable across builds and hosts, and enough
// to spread channel names over subjects (collisions cost traffic only; see
// the header). Not a security boundary: who may publish where is the
// broker's permission check, on every node.
std::uint64_t fnv1a(std::string_view bytes) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

bool verbatim_token(std::string_view channel) noexcept {
  if (channel.empty() || channel.size() > kVerbatimTokenMax || channel.front() == '#') return false;
  for (const char c : channel) {
    if (c <= ' ' || c > '~' || c == '.' || c == '*' || c == '>') return false;
  }
  return true;
}

// Appends f's frame to `out`.
void append_cluster_frame(const ClusterFrame& f, std::string& out) {
  const ClusterFrameHeader h{kClusterFrameVersion,
                             static_cast<std::uint8_t>(f.shard ? 1 : 0),
                             f.qos,
                             static_cast<std::uint8_t>(f.more ? kMoreChunks : 0),
                             static_cast<std::uint32_t>(f.channel.size()),
                             f.origin,
                             f.seq,
                             static_cast<std::uint32_t>(f.message_id.size()),
                             f.chunk};
  const std::size_t at = out.size();
  out.resize(at + cluster_frame_overhead(f) + f.payload.size());
  char* p = out.data() + at;
  std::memcpy(p, &h, sizeof h);
  p += sizeof h;
  // An empty view may hold a null pointer, which memcpy must not be given.
  for (const std::string_view part : {f.channel, f.message_id, f.payload}) {
    if (!part.empty()) std::memcpy(p, part.data(), part.size());
    p += part.size();
  }
}

}  // namespace

void encode_cluster_frame(const ClusterFrame& f, std::string& out) {
  out.clear();
  append_cluster_frame(f, out);
}

void begin_cluster_bundle(std::string& out) {
  out.assign(kClusterBundleHeader, '\0');
  out[0] = static_cast<char>(kClusterBundleVersion);
}

void append_to_cluster_bundle(const ClusterFrame& f, std::string& out) {
  const auto len = static_cast<std::uint32_t>(cluster_frame_overhead(f) + f.payload.size());
  std::uint32_t count = 0;
  std::memcpy(&count, out.data() + 4, sizeof count);
  ++count;
  std::memcpy(out.data() + 4, &count, sizeof count);
  out.append(reinterpret_cast<const char*>(&len), sizeof len);
  append_cluster_frame(f, out);
}

std::optional<ClusterFrame> decode_cluster_frame(std::string_view bytes) noexcept {
  ClusterFrameHeader h;
  if (bytes.size() < sizeof h) return std::nullopt;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (h.version != kClusterFrameVersion || h.space > 1 || h.qos > 1 || (h.flags & ~kMoreChunks) != 0) {
    return std::nullopt;
  }
  const std::size_t rest = bytes.size() - sizeof h;
  if (h.channel_len > rest || h.message_id_len > rest - h.channel_len) return std::nullopt;
  ClusterFrame f;
  f.shard = h.space == 1;
  f.qos = h.qos;
  f.origin = h.origin;
  f.seq = h.seq;
  f.chunk = h.chunk;
  f.more = (h.flags & kMoreChunks) != 0;
  f.channel = bytes.substr(sizeof h, h.channel_len);
  f.message_id = bytes.substr(sizeof h + h.channel_len, h.message_id_len);
  f.payload = bytes.substr(sizeof h + h.channel_len + h.message_id_len);
  return f;
}

void cluster_subject(std::string_view prefix, SubjectSpace space, std::string_view channel, std::string& out) {
  out.assign(prefix);
  out += '.';
  out += static_cast<char>(space);
  out += '.';
  if (verbatim_token(channel)) {
    out += channel;
    return;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  const std::uint64_t h = fnv1a(channel);
  out += '#';
  for (int shift = 60; shift >= 0; shift -= 4) out += kHex[(h >> shift) & 0xf];
}

std::string cluster_wildcard(std::string_view prefix, SubjectSpace space) {
  return fmt::format("{}.{}.*", prefix, static_cast<char>(space));
}

}  // namespace ringcast::relay
