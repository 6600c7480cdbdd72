// libFuzzer target for the broker's request path (docs/broker.md, "Limits").
//
// 1. Differential: the parser must produce the same commands and the same error
//    whether the input arrives whole or split at fuzzer-chosen points, and must
//    respect its limits, also the smaller ones before authentication.
// 2. The same bytes are executed by a RespSession against a private broker core, so
//    command handlers see arbitrary arguments (nothing may crash, leak or grow
//    without bound).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "broker/core/broker_core.hpp"
#include "broker/resp/request_parser.hpp"
#include "broker/resp/session.hpp"
#include "split_input.hpp"

namespace {

using ringcast::broker::BrokerConfig;
using ringcast::broker::BrokerCore;
using ringcast::broker::Client;
using ringcast::broker::FrameSpan;
using ringcast::broker::ParserLimits;
using ringcast::broker::RequestParser;
using ringcast::broker::RespSession;
using ringcast::broker::Waker;

constexpr ParserLimits kLimits{4096, 64};

struct Outcome {
  std::vector<std::vector<std::string>> commands;
  std::string error;
};

Outcome parse(const ringcast::fuzz::SplitInput& in, bool whole, bool authenticated) {
  RequestParser p(kLimits);
  p.set_authenticated(authenticated);
  Outcome out;
  const ringcast::fuzz::SplitInput one{in.stream, {}};
  ringcast::fuzz::for_each_piece(whole ? one : in, [&](std::string_view piece) {
    for (;;) {
      const auto st = p.parse(piece);
      if (st == RequestParser::Status::kCommand) {
        if (p.args().empty() || p.args().size() > kLimits.max_args) std::abort();
        for (const auto& a : p.args()) {
          // Inline arguments are bounded by the line limit instead.
          if (a.size() > kLimits.max_bulk_len && a.size() > RequestParser::kMaxLine) std::abort();
        }
        if (!authenticated) {  // the parser's invariant 4
          std::size_t bytes = 0;
          for (const auto& a : p.args()) bytes += a.size();
          if (p.args().size() > RequestParser::kMaxUnauthArgs || bytes > RequestParser::kMaxUnauthBytes) std::abort();
        }
        out.commands.emplace_back(p.args().begin(), p.args().end());
        continue;
      }
      if (st == RequestParser::Status::kError) {
        out.error = p.error();
        return false;
      }
      if (!piece.empty()) std::abort();  // kNeedMore must consume everything
      return true;
    }
  });
  return out;
}

class NullWaker final : public Waker {
 public:
  void wake() noexcept override {}
};
NullWaker g_waker;

class FuzzSession final : public RespSession {
 public:
  explicit FuzzSession(BrokerCore& core) : RespSession(core, "fuzz", g_waker) {}
  void drain() {
    std::vector<FrameSpan> out;
    for (;;) {
      const auto r = queue().pop_batch(SIZE_MAX, SIZE_MAX, out);
      if (r.frames == 0) break;
      queue().release(r.bytes);
      out.clear();
    }
  }
};

BrokerCore& core() {
  static BrokerCore* c = [] {
    BrokerConfig cfg;
    cfg.max_bulk_len = kLimits.max_bulk_len;
    cfg.max_args = kLimits.max_args;
    cfg.max_subscriptions = 64;
    cfg.queue_limits.hard_bytes = 1 << 20;
    cfg.queue_limits.soft_bytes = 0;
    return new BrokerCore(cfg);
  }();
  return *c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto in = ringcast::fuzz::split_input(data, size);
  if (!in) return 0;

  for (const bool authenticated : {true, false}) {
    const Outcome whole = parse(*in, true, authenticated);
    const Outcome split = parse(*in, false, authenticated);
    if (whole.commands != split.commands || whole.error != split.error) std::abort();
  }

  // Two sessions: one sends, one listens, so PUBLISH has somewhere to go.
  auto listener = std::make_unique<FuzzSession>(core());
  (void)listener->on_input("PSUBSCRIBE *\r\n");
  auto s = std::make_unique<FuzzSession>(core());
  ringcast::fuzz::for_each_piece(*in, [&](std::string_view piece) {
    const auto r = s->on_input(piece);
    s->drain();
    listener->drain();
    return r != Client::InputResult::kClose;
  });
  s->detach();
  listener->detach();
  return 0;
}
