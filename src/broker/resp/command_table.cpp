// The RESP command table, as Redis's (src/commands.def): every command the
// session runs, with its arity, flags and handler (commands/*.cpp).
#include <array>

#include "broker/resp/session.hpp"

namespace ringcast::broker {

namespace {
using Space = SubscriptionSpace;
}  // namespace

const std::array<RespSession::Command, 17> RespSession::kCommands{{
    // commands/pubsub.cpp
    {"subscribe", -2, kPubsubContext, &RespSession::cmd_subscribe<Space::kChannel>},
    {"unsubscribe", -1, kPubsubContext, &RespSession::cmd_unsubscribe<Space::kChannel>},
    {"psubscribe", -2, kPubsubContext, &RespSession::cmd_subscribe<Space::kPattern>},
    {"punsubscribe", -1, kPubsubContext, &RespSession::cmd_unsubscribe<Space::kPattern>},
    {"ssubscribe", -2, kPubsubContext, &RespSession::cmd_subscribe<Space::kShard>},
    {"sunsubscribe", -1, kPubsubContext, &RespSession::cmd_unsubscribe<Space::kShard>},
    {"publish", 3, kBatched, &RespSession::cmd_publish},
    {"spublish", 3, 0, &RespSession::cmd_spublish},
    // commands/connection.cpp
    // PING before AUTH is a ringcast choice (issue 4): health checks need no secret.
    {"ping", -1, kPubsubContext | kNoAuth, &RespSession::cmd_ping},
    {"quit", -1, kPubsubContext | kNoAuth, &RespSession::cmd_quit},
    {"reset", 1, kPubsubContext | kNoAuth, &RespSession::cmd_reset},
    {"auth", -2, kNoAuth, &RespSession::cmd_auth},
    {"hello", -1, kNoAuth, &RespSession::cmd_hello},
    {"client", -2, kContainer, &RespSession::cmd_client},
    // commands/server.cpp
    {"pubsub", -2, kContainer, &RespSession::cmd_pubsub},
    {"info", -1, 0, &RespSession::cmd_info},
    // commands/history.cpp: a ringcast extension (docs/broker.md, "HISTORY"),
    // a channel's retained messages.
    {"history", -2, 0, &RespSession::cmd_history},
}};

const std::array<RespSession::Subcommand, 14> RespSession::kSubcommands{{
    {"client", "setname", 3},
    {"client", "getname", 2},
    {"client", "id", 2},
    {"client", "list", -2},
    {"client", "info", 2},
    {"client", "overflow", -2},
    {"client", "help", 2},
    {"client", "reply", 3},
    {"pubsub", "channels", -2},
    {"pubsub", "numsub", -2},
    {"pubsub", "numpat", 2},
    {"pubsub", "shardchannels", -2},
    {"pubsub", "shardnumsub", -2},
    {"pubsub", "help", 2},
}};

}  // namespace ringcast::broker
