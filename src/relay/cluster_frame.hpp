// One message between the nodes of a cluster as the NATS link carries it
// (docs/cluster.md, "The frame"), and the NATS subject it travels on.
//
// The frame is a 32-byte header, then the channel, the publisher's message id
// (PopSub's message_id; may be empty) and the payload, back to back. Every
// integer is little-endian (the header is copied as it is in memory; see the
// static_assert on the byte order).
//
//   offset  size  field
//        0     1  version: kClusterFrameVersion
//        1     1  space: 0 a PUBLISH channel, 1 an SPUBLISH shard channel
//        2     1  qos: 0 or 1 (Message::qos)
//        3     1  flags: bit 0 (kMoreChunks) a later chunk of this message
//                 follows; the other bits 0
//        4     4  channel length
//        8     8  origin: the sending node's id, drawn at random when it starts
//       16     8  seq: the message's number among the origin's messages on
//                 this channel in this space (1, 2, 3, ...): the receiver's
//                 duplicate and gap check; every chunk of a message has its seq
//       24     4  message id length
//       28     4  chunk: this frame's place among its message's chunks (0, 1,
//                 2, ...); 0 for a message in one frame
//       32        channel, message id, payload (a chunk's: its slice of it)
//
// A message whose frame would exceed the NATS server's max_payload travels as
// chunks: frames of the same seq, channel and message id, each carrying the
// next slice of the payload, the last without kMoreChunks. One node's frames
// on one subject arrive in the order sent (NATS keeps a connection's order),
// so the receiver appends them; a chunk out of place means one was lost.
//
// A run of one node's messages on one channel may leave as one NATS message,
// a bundle (so NATS routes, and every node takes in, one message per run, not
// one per message; docs/cluster.md, "The frame"):
//
//   offset  size  field
//        0     1  version: kClusterBundleVersion
//        1     3  zero
//        4     4  count: the frames that follow (at least 2)
//        8        count times: the frame's length (4 bytes), then the frame
//
// Its frames are whole messages (never chunks), in seq order.
//
// The subject: `<prefix>.c.<token>` for a channel, `<prefix>.s.<token>` for a
// shard channel, `<prefix>.h.<token>` for a retained channel's message on its
// way into the cluster's history stream (docs/cluster.md, "History"). The token is the channel itself when it is 1 to
// kVerbatimTokenMax bytes of printable ASCII without '.', '*', '>' and does
// not start with '#', so `nats sub 'ringcast.c.*'` reads as the channels do;
// any other channel travels on '#' and the 16 hex digits of the FNV-1a hash
// of its bytes (bounded length, no byte NATS reserves). Two channels that
// share a hashed token share a subject: the receiver publishes each message on
// the channel its frame names, so a collision costs traffic, never a
// misdelivery.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace ringcast::relay {

inline constexpr std::uint8_t kClusterFrameVersion = 2;  // 2: chunks
inline constexpr std::uint8_t kClusterBundleVersion = 3;
inline constexpr std::uint8_t kMoreChunks = 1;
inline constexpr std::size_t kClusterBundleHeader = 8;
inline constexpr std::size_t kClusterBundleEntryHeader = 4;  // a frame's length
inline constexpr std::size_t kVerbatimTokenMax = 128;

struct ClusterFrameHeader {
  std::uint8_t version;
  std::uint8_t space;
  std::uint8_t qos;
  std::uint8_t flags;
  std::uint32_t channel_len;
  std::uint64_t origin;
  std::uint64_t seq;
  std::uint32_t message_id_len;
  std::uint32_t chunk;
};
static_assert(std::endian::native == std::endian::little, "the frame's header is copied as it is in memory");
static_assert(sizeof(ClusterFrameHeader) == 32);
static_assert(offsetof(ClusterFrameHeader, version) == 0);
static_assert(offsetof(ClusterFrameHeader, space) == 1);
static_assert(offsetof(ClusterFrameHeader, qos) == 2);
static_assert(offsetof(ClusterFrameHeader, flags) == 3);
static_assert(offsetof(ClusterFrameHeader, channel_len) == 4);
static_assert(offsetof(ClusterFrameHeader, origin) == 8);
static_assert(offsetof(ClusterFrameHeader, seq) == 16);
static_assert(offsetof(ClusterFrameHeader, message_id_len) == 24);
static_assert(offsetof(ClusterFrameHeader, chunk) == 28);

// A decoded frame: views into the bytes it was decoded from.
struct ClusterFrame {
  bool shard = false;
  std::uint8_t qos = 0;
  std::uint64_t origin = 0;
  std::uint64_t seq = 0;
  std::string_view channel;
  std::string_view message_id;
  std::string_view payload;
  std::uint32_t chunk = 0;  // see the header's table
  bool more = false;        // kMoreChunks
};

// The fixed part of `f`'s frame: what every chunk repeats (header, channel,
// message id).
[[nodiscard]] inline std::size_t cluster_frame_overhead(const ClusterFrame& f) noexcept {
  return sizeof(ClusterFrameHeader) + f.channel.size() + f.message_id.size();
}

// Replaces `out` with the frame of `f`. Allocates only when `out` is too small.
void encode_cluster_frame(const ClusterFrame& f, std::string& out);
// The frame in `bytes`, or nullopt if they are not one of this version (too
// short, lengths past the end, unknown version or space).
[[nodiscard]] std::optional<ClusterFrame> decode_cluster_frame(std::string_view bytes) noexcept;

// Replaces `out` with an empty bundle; append_to_cluster_bundle adds `f`'s
// frame to it. Allocate only when `out` is too small.
void begin_cluster_bundle(std::string& out);
void append_to_cluster_bundle(const ClusterFrame& f, std::string& out);
// The frames of a NATS message: the one frame it is, or a bundle's, in
// order. Returns false if some of it is not a frame (then fn saw those
// before it, and nothing after).
template <class Fn>
bool for_each_cluster_frame(std::string_view bytes, Fn&& fn) {
  if (bytes.empty() || static_cast<std::uint8_t>(bytes[0]) != kClusterBundleVersion) {
    const auto f = decode_cluster_frame(bytes);
    if (f) fn(*f);
    return f.has_value();
  }
  std::uint32_t count = 0;
  if (bytes.size() < kClusterBundleHeader) return false;
  std::memcpy(&count, bytes.data() + 4, sizeof count);
  bytes.remove_prefix(kClusterBundleHeader);
  for (std::uint32_t i = 0; i < count; ++i) {
    std::uint32_t len = 0;
    if (bytes.size() < kClusterBundleEntryHeader) return false;
    std::memcpy(&len, bytes.data(), sizeof len);
    bytes.remove_prefix(kClusterBundleEntryHeader);
    if (len > bytes.size()) return false;
    const auto f = decode_cluster_frame(bytes.substr(0, len));
    if (!f || f->more || f->chunk != 0) return false;
    fn(*f);
    bytes.remove_prefix(len);
  }
  return bytes.empty();
}

// The subject spaces, named by their second token.
enum class SubjectSpace : char { kChannel = 'c', kShard = 's', kHistory = 'h' };

// Replaces `out` with the subject `channel` travels on in `space`
// (NUL-terminated by std::string, for libnats). Allocates only when `out` is
// too small.
void cluster_subject(std::string_view prefix, SubjectSpace space, std::string_view channel, std::string& out);
// The subject every channel of `space` matches, `<prefix>.<space>.*`: a node
// with pattern subscribers takes in every channel's messages; the history
// stream holds every retained channel's.
[[nodiscard]] std::string cluster_wildcard(std::string_view prefix, SubjectSpace space);

}  // namespace ringcast::relay
