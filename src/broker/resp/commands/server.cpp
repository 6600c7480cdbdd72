// What the broker reports about itself: PUBSUB and INFO.
#include "broker/resp/session.hpp"

#include <array>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "broker/resp/commands/text.hpp"
#include "broker/resp/info.hpp"
#include "broker/resp/resp_encoder.hpp"
#include "broker/util/glob.hpp"

namespace ringcast::broker {

void RespSession::cmd_pubsub(std::span<const std::string> args) {
  const std::string sub = lower(args[1]);
  SubscriptionIndex& index = core().index();
  const bool shard = sub == "shardchannels" || sub == "shardnumsub";
  if (sub == "channels" || sub == "shardchannels") {
    if (args.size() > 3) {
      resp::error(reply_, fmt::format("ERR unknown subcommand or wrong number of arguments for '{}'. "
                                      "Try PUBSUB HELP.",
                                      c_str_prefix(args[1], 128)));
      return;
    }
    const auto pattern = args.size() == 3 ? std::optional<std::string_view>(args[2]) : std::nullopt;
    if (pattern && !glob_pattern_fits(*pattern)) {
      resp::error(reply_, "ERR " + pattern_too_long(*pattern));
      return;
    }
    const auto names = shard ? index.shard_channels(pattern) : index.channels(pattern);
    resp::array(reply_, names.size());
    for (const std::string& n : names) resp::bulk(reply_, n);
  } else if (sub == "numsub" || sub == "shardnumsub") {
    resp::array(reply_, (args.size() - 2) * 2);
    for (std::size_t i = 2; i < args.size(); ++i) {
      resp::bulk(reply_, args[i]);
      resp::integer(reply_, static_cast<long long>(shard ? index.shard_numsub(args[i]) : index.numsub(args[i])));
    }
  } else if (sub == "numpat") {
    resp::integer(reply_, static_cast<long long>(index.numpat()));
  } else {  // help: Redis 7.0.15's text
    constexpr std::array<std::string_view, 14> kHelp{
        "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CHANNELS [<pattern>]",
        "    Return the currently active channels matching a <pattern> (default: '*').",
        "NUMPAT",
        "    Return number of subscriptions to patterns.",
        "NUMSUB [<channel> ...]",
        "    Return the number of subscribers for the specified channels, excluding",
        "    pattern subscriptions(default: no channels).",
        "SHARDCHANNELS [<pattern>]",
        "    Return the currently active shard level channels matching a <pattern> (default: '*').",
        "SHARDNUMSUB [<shardchannel> ...]",
        "    Return the number of subscribers for the specified shard level channel(s)",
        "HELP",
        "    Prints this help."};
    resp::array(reply_, kHelp.size());
    for (std::string_view line : kHelp) resp::simple(reply_, line);
  }
}

void RespSession::cmd_info(std::span<const std::string> args) {
  resp::verbatim(reply_, format(), info_reply(core(), args.subspan(1)));
}

}  // namespace ringcast::broker
