// HISTORY, a ringcast extension (docs/broker.md, "HISTORY"): a channel's retained messages.
#include "broker/resp/session.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "broker/guarantees/channel_history.hpp"
#include "broker/resp/commands/text.hpp"
#include "broker/resp/resp_encoder.hpp"

namespace ringcast::broker {

void RespSession::cmd_history(std::span<const std::string> args) {
  const std::string& channel = args[1];
  std::optional<std::uint64_t> since;
  std::optional<std::uint64_t> count;
  for (std::size_t i = 2; i < args.size(); i += 2) {
    const std::string opt = lower(args[i]);
    std::uint64_t v = 0;
    const bool known = opt == "since" || opt == "count";
    if (!known || i + 1 == args.size()) {
      resp::error(reply_, "ERR syntax error: HISTORY channel [SINCE offset] [COUNT n]");
      return;
    }
    const std::string& text = args[i + 1];
    const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || r.ec != std::errc() || r.ptr != text.data() + text.size()) {
      resp::error(reply_, fmt::format("ERR {} must be a non-negative integer", upper(opt)));
      return;
    }
    (opt == "since" ? since : count) = v;
  }
  // Reading a channel's history is reading the channel: a subscribe permission.
  if (!check_permission(Access::kSubscribe, channel)) return;
  const ChannelHistory* history = core().history();
  if (history == nullptr || history->rule(channel) == nullptr) {
    resp::error(reply_, fmt::format("ERR channel '{}' keeps no history (the broker's --history rules match no such "
                                    "channel)",
                                    c_str_prefix(channel, 128)));
    return;
  }
  // Without COUNT a page, not the whole channel (docs/broker.md, "HISTORY").
  constexpr std::uint64_t kDefaultCount = 1000;
  constexpr std::uint64_t kAll = std::numeric_limits<std::size_t>::max();
  const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(count.value_or(kDefaultCount), kAll));
  const auto read = since ? history->store().read_since(channel, *since, n) : history->store().read_last(channel, n);
  if (!read) {
    resp::error(reply_, "ERR history: " + read.error().message());
    return;
  }
  // A reply is never dropped: one past the output limit would close the
  // connection (connection_queue.hpp), so it is refused with a reason instead.
  // The payloads alone are a lower bound of its size: checked first, so a
  // reply far too large is not encoded only to be thrown away.
  const std::size_t start = reply_.size();
  const std::size_t limit = core().config().queue_limits.hard_bytes;
  const std::size_t queued = queue().total_bytes() + start;
  const std::size_t room = limit - std::min(limit, queued);
  std::size_t payload_bytes = 0;
  for (const HistoryMessage& m : read->messages) payload_bytes += m.payload.size();
  if (payload_bytes <= room) {
    resp::array(reply_, 4);
    resp::bulk(reply_, history->epoch());
    resp::integer(reply_, static_cast<long long>(read->top));
    resp::simple(reply_, read->status == ReadStatus::kOk          ? "ok"
                         : read->status == ReadStatus::kTruncated ? "truncated"
                                                                  : "ahead");
    resp::array(reply_, read->messages.size());
    for (const HistoryMessage& m : read->messages) {
      resp::array(reply_, 3);
      resp::integer(reply_, static_cast<long long>(m.offset));
      resp::integer(reply_, m.time_ms);
      resp::bulk(reply_, m.payload);
    }
    if (reply_.size() - start <= room) return;
    reply_.resize(start);
  }
  resp::error(reply_, fmt::format("ERR HISTORY reply of {} messages would not fit the output limit ({} bytes, "
                                  "--hard-limit, {} already queued); ask for fewer with COUNT",
                                  read->messages.size(), limit, queued));
}

}  // namespace ringcast::broker
