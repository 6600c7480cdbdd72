// One WebSocket subscriber of the load generator, in either server's dialect:
//   kPopSub: ringcast-broker's JSON frames. Sends
//            {"type":"auth","token":...} (when a token is given) and
//            {"type":"subscribe","topic":...}, waits for "subscribed"; each
//            delivery is one text frame {"type":"message",...,"payload":"<stamp>..."}.
//   kPopSubOwn: ringcast-broker in PopSub's own dialect (no subprotocol
//            offered): the same frames, but a subscribe is QoS 1 and gets no
//            reply, so a ping follows it; the broker handles a connection's
//            frames in order, so its pong confirms the subscribe. Idle use
//            only: its deliveries would be owed acks this reader never sends.
//   kNats:   nats-server's WebSocket listener, NATS protocol inside frames.
//            Sends CONNECT {"verbose":false,"pedantic":false}, SUB <topic> 1 and
//            PING, waits for the PONG (the server handles a connection's
//            commands in order, so the SUB is in place); deliveries are
//            "MSG <topic> 1 <n>\r\n<payload>\r\n", any number per frame and split
//            across frames anywhere. A PING is answered with PONG.
// The hot path (feed) parses frame headers and, per message, the 34-byte stamp
// at the start of the payload (stamp.hpp): it counts deliveries, sequence
// gaps and reorderings, and records latency into the reader's histogram.
// Copies per message: at most the frame's first bytes up to the end of the
// stamp (PopSub), or the MSG line when it is split across reads (NATS).
//
// Thread safety: none; one thread owns a Subscriber at a time (the set-up
// thread, then the reader thread, handed over by std::thread's start).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "byte_stream.hpp"
#include "deadline.hpp"
#include "fd_io.hpp"
#include "histogram.hpp"
#include "stamp.hpp"
#include "ws_client.hpp"

namespace ringcast::bench::ws {

enum class Dialect { kPopSub, kPopSubOwn, kNats };

// What one subscriber saw.
struct Tally {
  std::uint64_t received = 0;   // messages with a readable stamp
  std::uint64_t gaps = 0;       // sequence numbers skipped (lost in the middle)
  std::uint64_t reordered = 0;  // sequence numbers at or below one already seen
  std::uint64_t next_seq = 0;   // the sequence number expected next
};

class Subscriber {
 public:
  // `fd`: a connected socket, owned (closed) by the caller. `latency`: where
  // delivery latencies go (may be null).
  Subscriber(Dialect dialect, int fd, LatencyHistogram* latency)
      : Subscriber(dialect, std::make_unique<PlainStream>(fd), latency) {}
  // Over `io` (plain or TLS, byte_stream.hpp); its fd is still the caller's to close.
  Subscriber(Dialect dialect, std::unique_ptr<ByteStream> io, LatencyHistogram* latency)
      : dialect_(dialect), io_(std::move(io)), latency_(latency) {}

  // Blocking: upgrades, subscribes to `topic` and waits until the server
  // confirms it. False with `error` set otherwise.
  bool subscribe(int port, std::string_view topic, const std::optional<std::string>& token, test::Deadline deadline,
                 std::string& error) {
    std::string rest;
    if (!upgrade(*io_, port, rest, error, deadline, dialect_ != Dialect::kPopSubOwn)) return false;
    std::string out;
    if (dialect_ != Dialect::kNats) {
      if (token) out += client_frame(Opcode::kText, R"({"type":"auth","token":")" + *token + R"("})");
      out += client_frame(Opcode::kText, R"({"type":"subscribe","topic":")" + std::string(topic) + R"("})");
      if (dialect_ == Dialect::kPopSubOwn) out += client_frame(Opcode::kPing, "subscribed");
    } else {
      out = client_frame(Opcode::kText, "CONNECT {\"verbose\":false,\"pedantic\":false}\r\nSUB " + std::string(topic) +
                                            " 1\r\nPING\r\n");
    }
    if (!send_all(*io_, out)) {
      error = "cannot send the subscribe request";
      return false;
    }
    if (!feed(rest.data(), rest.size(), 0)) return fail(error);
    while (!confirmed_) {
      std::string in;
      if (read_some(*io_, in, deadline) <= 0) {
        error = error_.empty() ? "no subscribe confirmation" : error_;
        return false;
      }
      if (!feed(in.data(), in.size(), 0)) return fail(error);
    }
    return true;
  }

  // Feeds bytes read from the socket at `now_ns` (steady clock). False if the
  // stream broke the protocol or the server refused something (error()).
  bool feed(const char* p, std::size_t n, std::int64_t now_ns) {
    now_ns_ = now_ns;
    if (!frames_.feed(p, n, *this)) error_ = "bad frame from the server";
    return error_.empty();
  }

  [[nodiscard]] int fd() const { return io_->fd(); }
  // Where the reader reads deliveries from (decrypting, over TLS).
  [[nodiscard]] ByteStream& io() { return *io_; }
  [[nodiscard]] const Tally& tally() const { return tally_; }
  [[nodiscard]] const std::string& error() const { return error_; }

  // FrameReader's sink.
  void begin(Opcode op, bool /*fin*/, std::uint64_t length) {
    op_ = op;
    head_len_ = 0;
    if (op == Opcode::kClose) error_ = "the server closed the WebSocket";
    (void)length;
  }
  void data(const char* p, std::size_t n) {
    if (op_ == Opcode::kPing) {
      ping_.append(p, n);
    } else if (op_ == Opcode::kText || op_ == Opcode::kBinary || op_ == Opcode::kContinuation) {
      if (dialect_ == Dialect::kNats) {
        nats(p, n);
      } else if (head_len_ == 0 && payload_at_ > 0 && n >= head_want_ && known_delivery(p)) {
        head_len_ = kDone;  // the usual case: the stamp was read in place
      } else if (head_len_ < head_want_) {
        const std::size_t take = std::min(n, head_want_ - head_len_);
        std::memcpy(head_ + head_len_, p, take);
        head_len_ += take;
      }
    }
  }
  void end() {
    if (op_ == Opcode::kPing) {
      (void)send_all(*io_, client_frame(Opcode::kPong, ping_));
      ping_.clear();
    } else if (op_ == Opcode::kPong && dialect_ == Dialect::kPopSubOwn) {
      confirmed_ = true;
    } else if (dialect_ != Dialect::kNats && head_len_ != kDone && (op_ == Opcode::kText || op_ == Opcode::kBinary)) {
      popsub_frame();
    }
  }

 private:
  static constexpr std::size_t kHead = 256;
  static constexpr std::size_t kDone = SIZE_MAX;  // head_len_: this frame is counted

  bool fail(std::string& error) const {
    error = error_;
    return false;
  }

  void delivered(const char* stamp) {
    std::uint64_t seq = 0;
    std::int64_t sent = 0;
    if (!read_stamp(stamp, seq, sent)) {
      error_ = "a delivery without the publisher's stamp";
      return;
    }
    ++tally_.received;
    if (seq == tally_.next_seq) {
      ++tally_.next_seq;
    } else if (seq > tally_.next_seq) {
      tally_.gaps += seq - tally_.next_seq;
      tally_.next_seq = seq + 1;
    } else {
      ++tally_.reordered;
    }
    if (latency_ != nullptr && now_ns_ >= sent) latency_->record(static_cast<std::uint64_t>(now_ns_ - sent));
  }

  // If `frame` (at least head_want_ bytes) is a delivery laid out as the first
  // one was, counts it (true).
  bool known_delivery(const char* frame) {
    if (std::memcmp(frame + payload_at_ - payload_key_.size(), payload_key_.data(), payload_key_.size()) != 0) {
      return false;
    }
    delivered(frame + payload_at_);
    return true;
  }

  // Where the string value of `"key"` starts in `json` (whitespace allowed
  // around the colon), or npos. Good enough for the server's flat objects.
  static std::size_t string_value(std::string_view json, std::string_view key) {
    std::size_t at = 0;
    while ((at = json.find(key, at)) != std::string_view::npos) {
      const std::size_t k = at;
      at += key.size();
      if (k == 0 || json[k - 1] != '"' || at >= json.size() || json[at] != '"') continue;
      std::size_t v = at + 1;
      while (v < json.size() && (json[v] == ' ' || json[v] == ':')) ++v;
      if (v < json.size() && json[v] == '"') return v + 1;
    }
    return std::string_view::npos;
  }

  // A whole PopSub frame's first bytes are in head_. Deliveries keep the
  // payload at one offset (the fields before it have fixed values), so once
  // found it is checked with one compare of the key before it instead of
  // searched for.
  void popsub_frame() {
    const std::string_view head(head_, head_len_);
    if (payload_at_ > 0 && head_len_ >= head_want_ && known_delivery(head_)) return;
    const std::size_t type = string_value(head, "type");
    const std::string_view type_value = type == std::string_view::npos ? std::string_view{} : head.substr(type);
    if (type_value.substr(0, 8) == "message\"") {
      const std::size_t at = string_value(head, "payload");
      if (at == std::string_view::npos || head_len_ < at + kStampBytes) {
        error_ = "a delivery without its payload in the first " + std::to_string(kHead) + " bytes";
        return;
      }
      payload_at_ = at;
      const std::size_t key = head.rfind("\"payload\"", at);
      payload_key_.assign(head.substr(key, at - key));
      head_want_ = payload_at_ + kStampBytes;
      delivered(head_ + payload_at_);
    } else if (type_value.substr(0, 11) == "subscribed\"") {
      confirmed_ = true;
    } else if (type_value.substr(0, 6) == "error\"") {
      error_ = "server error: " + std::string(head);
    }
    // "authenticated" and anything else: nothing to do.
  }

  // NATS protocol bytes, in the order they came.
  void nats(const char* p, std::size_t n) {
    while (n > 0) {
      if (msg_left_ > 0) {  // inside a MSG payload (and its trailing CRLF)
        const std::size_t take = std::min<std::size_t>(n, msg_left_);
        if (stamp_len_ < kStampBytes) {
          const std::size_t s = std::min(take, kStampBytes - stamp_len_);
          std::memcpy(stamp_ + stamp_len_, p, s);
          stamp_len_ += s;
        }
        p += take;
        n -= take;
        msg_left_ -= take;
        if (msg_left_ == 0) delivered(stamp_);
        continue;
      }
      const auto* nl = static_cast<const char*>(std::memchr(p, '\n', n));
      if (nl == nullptr) {
        line_.append(p, n);
        return;
      }
      const std::size_t len = static_cast<std::size_t>(nl - p) + 1;
      if (line_.empty()) {
        nats_line(std::string_view(p, len));
      } else {
        line_.append(p, len);
        nats_line(line_);
        line_.clear();
      }
      p += len;
      n -= len;
    }
  }

  void nats_line(std::string_view line) {
    if (line.substr(0, 4) == "MSG ") {
      // MSG <subject> <sid> [reply-to] <#bytes>\r\n: the size is the last field.
      std::size_t end = line.size();
      while (end > 0 && (line[end - 1] == '\r' || line[end - 1] == '\n')) --end;
      std::size_t begin = end;
      while (begin > 0 && line[begin - 1] >= '0' && line[begin - 1] <= '9') --begin;
      std::uint64_t size = 0;
      for (std::size_t i = begin; i < end; ++i) size = size * 10 + static_cast<std::uint64_t>(line[i] - '0');
      if (size < kStampBytes) {
        error_ = "a delivery shorter than the stamp";
        return;
      }
      msg_left_ = size + 2;
      stamp_len_ = 0;
    } else if (line.substr(0, 4) == "PING") {
      (void)send_all(*io_, client_frame(Opcode::kText, "PONG\r\n"));
    } else if (line.substr(0, 4) == "PONG") {
      confirmed_ = true;
    } else if (line.substr(0, 4) == "-ERR") {
      error_ = "server error: " + std::string(line.substr(0, line.size() - 2));
    }
    // INFO and +OK: nothing to do.
  }

  Dialect dialect_;
  std::unique_ptr<ByteStream> io_;
  LatencyHistogram* latency_;
  FrameReader frames_;
  Tally tally_;
  std::string error_;
  std::int64_t now_ns_ = 0;
  bool confirmed_ = false;
  Opcode op_ = Opcode::kContinuation;
  std::string ping_;  // a ping's payload, echoed in the pong
  // PopSub: a frame's first bytes.
  char head_[kHead] = {};
  std::size_t head_len_ = 0;
  std::size_t head_want_ = kHead;
  std::size_t payload_at_ = 0;  // offset of the payload in a delivery frame, once seen
  std::string payload_key_;     // the bytes from "payload" to that offset, as the server wrote them
  // NATS: a control line split across reads, and the MSG being read.
  std::string line_;
  std::uint64_t msg_left_ = 0;
  char stamp_[kStampBytes] = {};
  std::size_t stamp_len_ = 0;
};

}  // namespace ringcast::bench::ws
