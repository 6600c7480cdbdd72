// Gap detection across NATS (docs/scale-out.md, "Sequence headers", normative).
//
// The relay's NATS publishes carry two headers:
//   Ringcast-Source: <host>:<ring path>@<instance>   the stream and the ring file it comes from
//   Ringcast-Seq:    <n>                              the position of the message's last slot in
//                                                     that ring (decimal, from 0): its position, when
//                                                     it takes one slot
// <instance> is the ring file's identity (device and inode, hex: "803.1a2b"),
// so a ring recreated at the same path is a new instance of the same stream.
// A message that takes several slots (over 52 bytes), or follows slots that
// held no message (a padding), adds
//   Ringcast-From:   <f>                              it accounts for positions f .. n (f < n)
// A batch (`--nats-batch`) adds
//   Ringcast-Count:  <k>                              the NATS message holds ring messages n .. n+k-1
//                                                     (one slot each)
// A relay numbers the messages it publishes, so that a gap counts messages
// and not slots (issue 29):
//   Ringcast-Msg:    <run>.<m>                        <run>: the publishing relay's run (hex, new
//                                                     at each open of the ring); <m>: how many
//                                                     messages this run published before this one
// and a probe (credit window, docs/scale-out.md) is an empty message with
//   Ringcast-Probe:  1                                accounts for positions up to n and messages
//                                                     below m, delivers nothing
// Every ingress feeds each message's header values to a ContinuityChecker,
// which keeps the last position accounted for per stream and counts what is
// missing.
//
// Thread safety: none. One checker belongs to one delivery thread (libnats
// delivers one subscription's messages on one thread, in order).
//
// Invariants
//  1. For each stream, last_seq is the highest sequence accepted since the
//     stream's current instance was first seen.
//  2. lost = sum over every gap of the messages missing: m - last_msg - 1 when
//     the message and the last one accepted carry a Ringcast-Msg of the same
//     run; else (no numbers, or a new relay run) from - last_seq - 1 (from =
//     seq without a Ringcast-From): positions, which are messages on a ring of
//     one slot per message. A message older than or equal to last_seq (a
//     redelivery or a reordering) is a duplicate and never moves last_seq
//     back.
//  3. A new instance (restart, recreated ring) resets the stream's baseline
//     without counting a gap: what the old instance published after its last
//     delivered message is unknowable here, and its new sequences start over.
//  4. check() allocates only the first time it sees a stream, or a new
//     instance of one; at most max_sources streams are tracked, later ones are
//     counted as untracked (delivered, not checked).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace ringcast::relay {

inline constexpr const char* kSourceHeader = "Ringcast-Source";
inline constexpr const char* kSeqHeader = "Ringcast-Seq";
inline constexpr const char* kCountHeader = "Ringcast-Count";
inline constexpr const char* kFromHeader = "Ringcast-From";
inline constexpr const char* kMsgHeader = "Ringcast-Msg";
inline constexpr const char* kProbeHeader = "Ringcast-Probe";
// No Ringcast-Msg: gaps count positions.
inline constexpr std::uint64_t kNoMsg = ~std::uint64_t{0};

// A Ringcast-Msg value: "<run hex>.<m decimal>". False when malformed.
[[nodiscard]] bool parse_msg_number(const char* text, std::uint32_t& run, std::uint64_t& m) noexcept;
// A publisher's `from` argument meaning "no Ringcast-From": the message
// accounts for its own position only (from = seq).
inline constexpr std::uint64_t kFromSeq = ~std::uint64_t{0};

// The two parts of a Ringcast-Source value: everything before the last '@',
// and what follows it (empty when there is no '@').
struct SourceName {
  std::string_view stream;
  std::string_view instance;
};
[[nodiscard]] SourceName split_source(std::string_view source) noexcept;

// "<host>:<path>@<dev hex>.<ino hex>": the Ringcast-Source value for a ring file.
[[nodiscard]] std::string format_source(std::string_view host, std::string_view path, std::uint64_t dev,
                                        std::uint64_t ino);

enum class Continuity : std::uint8_t {
  kInOrder,      // from = last + 1
  kFirst,        // first message of a stream (or of a new instance): the baseline
  kGap,          // from > last + 1: `lost` positions never arrived
  kRestart,      // a new instance of a known stream: baseline reset, no gap counted
  kDuplicate,    // seq <= last: already seen (or overtaken); the caller may drop it
  kUnsequenced,  // no (or unparsable) headers: not checked
  kUntracked,    // a new stream beyond max_sources: not checked
};
[[nodiscard]] std::string_view to_string(Continuity c) noexcept;

struct ContinuityResult {
  Continuity kind = Continuity::kInOrder;
  std::uint64_t lost = 0;  // > 0 only for gap: positions (messages, from a ring of one slot per message)
  // Of a batch: how many leading messages were already seen (a redelivery
  // that overlaps); the caller delivers the rest. For a duplicate, all of them.
  std::uint64_t skip = 0;
  // Deliver (some of) it? False only for duplicates.
  [[nodiscard]] bool deliver() const noexcept { return kind != Continuity::kDuplicate; }
};

struct ContinuityStats {
  std::uint64_t sources = 0;   // streams tracked now
  std::uint64_t checked = 0;   // messages with valid headers (every kind but unsequenced/untracked)
  std::uint64_t gaps = 0;      // gap events
  std::uint64_t lost = 0;      // positions missing in those gaps (messages, from rings of one slot per message)
  std::uint64_t restarts = 0;  // new instances of known streams
  std::uint64_t duplicates = 0;
  std::uint64_t unsequenced = 0;  // messages without usable headers
  std::uint64_t untracked = 0;
};

class ContinuityChecker {
 public:
  explicit ContinuityChecker(std::size_t max_sources = 4096) : max_sources_(max_sources) {}

  // Checks `count` (>= 1) consecutive messages from `source` (a
  // Ringcast-Source value) starting at sequence `seq`, one position each.
  // Empty `source`: unsequenced. Statistics count messages (duplicates,
  // unsequenced) and gap events.
  ContinuityResult check(std::string_view source, std::uint64_t seq, std::uint64_t count = 1) {
    return check_from(source, seq, seq, count);
  }
  // The same for a message (or batch) that accounts for positions `from`
  // (<= seq) through seq + count - 1: a message of several slots, or one
  // after a padding (Ringcast-From).
  // `run`/`msg`: the Ringcast-Msg of the (first) message (msg = kNoMsg: none).
  ContinuityResult check_from(std::string_view source, std::uint64_t from, std::uint64_t seq, std::uint64_t count,
                              std::uint32_t run = 0, std::uint64_t msg = kNoMsg);
  // The same from the raw header values (`count` null: 1; `from` null: seq;
  // `msg` null or malformed: no number);
  // null or unparsable source/seq, a count of 0 or a from past seq: unsequenced.
  ContinuityResult check_headers(const char* source, const char* seq, const char* count = nullptr,
                                 const char* from = nullptr, const char* msg = nullptr);
  // A probe (Ringcast-Probe): the source published everything up to position
  // `seq` and messages below `msg`. Anything of that not seen yet is a gap
  // (counted, returned as kGap); otherwise kInOrder (or kDuplicate for a
  // probe older than what was seen). Nothing is delivered.
  ContinuityResult check_probe(const char* source, const char* seq, const char* msg);

  [[nodiscard]] const ContinuityStats& stats() const noexcept { return stats_; }

 private:
  struct Stream {
    std::string instance;
    std::uint64_t last = 0;
    std::uint32_t run = 0;            // Ringcast-Msg run of the last accepted message
    std::uint64_t next_msg = kNoMsg;  // its number + its count: the next expected; kNoMsg: unknown
  };
  // Messages lost between the stream's last and a message at positions from..
  // with number run.msg (invariant 2).
  static std::uint64_t missing(const Stream& s, std::uint64_t from, std::uint32_t run, std::uint64_t msg) noexcept;
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  const std::size_t max_sources_;
  std::unordered_map<std::string, Stream, Hash, std::equal_to<>> streams_;
  ContinuityStats stats_;
};

}  // namespace ringcast::relay
