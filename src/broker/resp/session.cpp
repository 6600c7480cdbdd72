#include "broker/resp/session.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <optional>
#include <unordered_set>
#include <utility>

#include <fmt/format.h>

#include "broker/guarantees/channel_history.hpp"
#include "broker/resp/resp_encoder.hpp"
#include "broker/util/glob.hpp"
#include "ringcast/broker/token.hpp"

namespace ringcast::broker {

namespace {

enum class Cmd : std::uint8_t {
  kSubscribe,
  kUnsubscribe,
  kPsubscribe,
  kPunsubscribe,
  kSsubscribe,
  kSunsubscribe,
  kPublish,
  kSpublish,
  kPing,
  kQuit,
  kReset,
  kAuth,
  kHello,
  kClient,
  kPubsub,
  kInfo,
  kHistory,
};

struct CommandSpec {
  std::string_view name;  // lower case, as Redis's command table
  int arity;              // Redis convention: n exact, -n at least n
  bool pubsub_context;    // allowed while subscribed in RESP2
  bool no_auth;           // allowed before authentication
  bool container;         // has subcommands
  Cmd cmd;
};

constexpr std::array kCommands{
    CommandSpec{"subscribe", -2, true, false, false, Cmd::kSubscribe},
    CommandSpec{"unsubscribe", -1, true, false, false, Cmd::kUnsubscribe},
    CommandSpec{"psubscribe", -2, true, false, false, Cmd::kPsubscribe},
    CommandSpec{"punsubscribe", -1, true, false, false, Cmd::kPunsubscribe},
    CommandSpec{"ssubscribe", -2, true, false, false, Cmd::kSsubscribe},
    CommandSpec{"sunsubscribe", -1, true, false, false, Cmd::kSunsubscribe},
    CommandSpec{"publish", 3, false, false, false, Cmd::kPublish},
    CommandSpec{"spublish", 3, false, false, false, Cmd::kSpublish},
    // PING before AUTH is a ringcast choice (issue 4): health checks need no secret.
    CommandSpec{"ping", -1, true, true, false, Cmd::kPing},
    CommandSpec{"quit", -1, true, true, false, Cmd::kQuit},
    CommandSpec{"reset", 1, true, true, false, Cmd::kReset},
    CommandSpec{"auth", -2, false, true, false, Cmd::kAuth},
    CommandSpec{"hello", -1, false, true, false, Cmd::kHello},
    CommandSpec{"client", -2, false, false, true, Cmd::kClient},
    CommandSpec{"pubsub", -2, false, false, true, Cmd::kPubsub},
    CommandSpec{"info", -1, false, false, false, Cmd::kInfo},
    // A ringcast extension (docs/broker.md, "HISTORY"): a channel's retained messages.
    CommandSpec{"history", -2, false, false, false, Cmd::kHistory},
};

struct SubcommandSpec {
  std::string_view container;
  std::string_view name;
  int arity;
};

constexpr std::array kSubcommands{
    SubcommandSpec{"client", "setname", 3},      SubcommandSpec{"client", "getname", 2},
    SubcommandSpec{"client", "id", 2},           SubcommandSpec{"client", "list", -2},
    SubcommandSpec{"client", "info", 2},         SubcommandSpec{"client", "overflow", -2},
    SubcommandSpec{"client", "help", 2},         SubcommandSpec{"client", "reply", 3},
    SubcommandSpec{"pubsub", "channels", -2},    SubcommandSpec{"pubsub", "numsub", -2},
    SubcommandSpec{"pubsub", "numpat", 2},       SubcommandSpec{"pubsub", "shardchannels", -2},
    SubcommandSpec{"pubsub", "shardnumsub", -2}, SubcommandSpec{"pubsub", "help", 2},
};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

bool arity_ok(int arity, std::size_t argc) {
  return arity >= 0 ? argc == static_cast<std::size_t>(arity) : argc >= static_cast<std::size_t>(-arity);
}

// printf's "%.*s" of a C string: stops at NUL and at `max` bytes.
std::string_view c_str_prefix(std::string_view s, std::size_t max) {
  s = s.substr(0, s.find('\0'));
  return s.substr(0, max);
}

constexpr std::string_view kNoAuth = "NOAUTH Authentication required.";
constexpr std::string_view kWrongPass = "WRONGPASS invalid username-password pair or user is disabled.";

}  // namespace

RespSession::RespSession(BrokerCore& core, std::string peer, Waker& waker)
    : Client(core, std::move(peer), WireFormat::kResp2, Deliveries::kPerSubscription, waker, true),
      parser_(ParserLimits{core.config().max_bulk_len, core.config().max_args}),
      refusals_(core, core.config().max_block) {
  set_authenticated(!auth_required());
}

Client::InputResult RespSession::on_input(std::string_view bytes) {
  while (!closing_ && !held_) {
    parser_.set_authenticated(authenticated());  // the parser's pre-auth limits (its invariant 4)
    const RequestParser::Status st = parser_.parse(bytes);
    if (st == RequestParser::Status::kNeedMore) break;
    if (st == RequestParser::Status::kError) {
      flush_publishes(/*may_hold=*/false);
      // Redis suppresses this reply too under CLIENT REPLY OFF, or SKIP just sent.
      if (!reply_off_ && !skip_next_) resp::error(reply_, parser_.error());
      closing_ = true;
      break;
    }
    core().count_command();
    execute(parser_.args());
  }
  if (!held_) flush_publishes();
  if (held_) held_input_.append(bytes);  // the unparsed rest waits (invariant 4)
  flush_replies();
  if (closing_) return InputResult::kClose;
  return held_ ? InputResult::kHeld : InputResult::kOk;
}

Client::InputResult RespSession::retry_held() {
  held_ = false;
  if (!batch_.empty()) flush_publishes();
  if (!held_ && !held_command_.empty()) {
    const std::vector<std::string> cmd = std::move(held_command_);
    held_command_.clear();
    execute(cmd);
  }
  if (held_) {
    flush_replies();
    return InputResult::kHeld;
  }
  const std::string input = std::move(held_input_);
  held_input_.clear();
  return on_input(input);
}

bool RespSession::hold_refused() {
  return refusals_.on_refused(RefusalHold::Clock::now()) == RefusalHold::Verdict::kWait;
}

void RespSession::flush_publishes(bool may_hold) {
  if (batch_.empty()) return;
  thread_local std::vector<Message> msgs;
  thread_local std::vector<std::size_t> receivers;
  batch_.messages(msgs);
  receivers.assign(msgs.size(), 0);
  mark_published();
  std::size_t at = 0;
  while (at < msgs.size()) {
    const PublishOutcome o = core().publish(std::span(msgs).subspan(at), std::span(receivers).subspan(at));
    for (std::size_t i = at; i < at + o.published; ++i) {
      if (batch_.reply(i)) resp::integer(reply_, static_cast<long long>(receivers[i]));
    }
    at += o.published;
    if (at == msgs.size()) break;
    // Stopped at a refusal: hold, or refuse this one and go on.
    if (!may_hold) {
      refusals_.refuse_now();
    } else if (hold_refused()) {
      batch_.drop_front(at);
      held_ = true;
      reply_mark_ = reply_.size();  // these replies belong to earlier commands (invariant 5)
      return;
    }
    if (batch_.reply(at)) refused_reply(msgs[at].channel);
    ++at;
  }
  refusals_.release();
  batch_.clear();
  reply_mark_ = reply_.size();  // these replies belong to earlier commands (invariant 5)
}

void RespSession::flush_replies() {
  reply_mark_ = 0;
  if (reply_.empty()) return;
  if (!push_reply(reply_)) closing_ = true;
  reply_.clear();
}

void RespSession::execute(std::span<const std::string> args) {
  const std::string name = lower(args[0]);
  // Every reply but a batched PUBLISH's must follow the pending PUBLISH replies.
  if (!(name == "publish" && args.size() == 3 && authenticated() && !subscribed())) {
    flush_publishes();
    if (held_) {  // invariant 4: this command runs after the held PUBLISH
      held_command_.assign(args.begin(), args.end());
      return;
    }
  }
  // CLIENT REPLY (invariant 5): what this command appends to reply_ past the
  // mark is its reply, discarded when replies are off or skipped. Pushes
  // ((un)subscribe confirmations, messages) never pass through reply_ unflushed.
  reply_mark_ = reply_.size();
  skip_current_ = std::exchange(skip_next_, false);
  dispatch(name, args);
  if (reply_off_ || skip_current_) reply_.resize(reply_mark_);
  // A command held here (invariant 4) runs again from retry_held(): its SKIP too.
  if (held_ && skip_current_) skip_next_ = true;
}

void RespSession::dispatch(const std::string& name, std::span<const std::string> args) {
  const auto spec =
      std::find_if(kCommands.begin(), kCommands.end(), [&](const CommandSpec& c) { return c.name == name; });
  if (spec == kCommands.end()) {
    std::string list;
    for (std::size_t i = 1; i < args.size() && list.size() < 128; ++i) {
      list += fmt::format("'{}' ", c_str_prefix(args[i], 128 - list.size()));
    }
    resp::error(reply_, fmt::format("ERR unknown command '{}', with args beginning with: {}",
                                    c_str_prefix(args[0], 128), list));
    return;
  }
  std::string fullname(spec->name);
  if (spec->container && args.size() >= 2) {
    const std::string sub = lower(args[1]);
    const auto sspec = std::find_if(kSubcommands.begin(), kSubcommands.end(), [&](const SubcommandSpec& s) {
      return s.container == spec->name && s.name == sub;
    });
    if (sspec == kSubcommands.end()) {
      resp::error(reply_, fmt::format("ERR unknown subcommand '{}'. Try {} HELP.", c_str_prefix(args[1], 128),
                                      upper(spec->name)));
      return;
    }
    fullname = fmt::format("{}|{}", spec->name, sspec->name);
    if (!arity_ok(sspec->arity, args.size())) {
      resp::error(reply_, fmt::format("ERR wrong number of arguments for '{}' command", fullname));
      return;
    }
  } else if (!arity_ok(spec->arity, args.size())) {
    resp::error(reply_, fmt::format("ERR wrong number of arguments for '{}' command", fullname));
    return;
  }
  if (!authenticated() && !spec->no_auth) {
    resp::error(reply_, kNoAuth);
    return;
  }
  if (format() == WireFormat::kResp2 && subscribed() && !spec->pubsub_context) {
    resp::error(reply_, fmt::format("ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE "
                                    "/ PING / QUIT / RESET are allowed in this context",
                                    fullname));
    return;
  }
  switch (spec->cmd) {
    case Cmd::kSubscribe:
      return cmd_subscribe(args, SubscriptionSpace::kChannel);
    case Cmd::kPsubscribe:
      return cmd_subscribe(args, SubscriptionSpace::kPattern);
    case Cmd::kSsubscribe:
      return cmd_subscribe(args, SubscriptionSpace::kShard);
    case Cmd::kUnsubscribe:
      return cmd_unsubscribe(args, SubscriptionSpace::kChannel);
    case Cmd::kPunsubscribe:
      return cmd_unsubscribe(args, SubscriptionSpace::kPattern);
    case Cmd::kSunsubscribe:
      return cmd_unsubscribe(args, SubscriptionSpace::kShard);
    case Cmd::kPublish:
      return cmd_publish(args);
    case Cmd::kSpublish:
      return cmd_spublish(args);
    case Cmd::kPing:
      return cmd_ping(args);
    case Cmd::kQuit:
      resp::simple(reply_, "OK");
      closing_ = true;
      return;
    case Cmd::kReset:
      return cmd_reset();
    case Cmd::kAuth:
      return cmd_auth(args);
    case Cmd::kHello:
      return cmd_hello(args);
    case Cmd::kClient:
      return cmd_client(args);
    case Cmd::kPubsub:
      return cmd_pubsub(args);
    case Cmd::kHistory:
      return cmd_history(args);
    case Cmd::kInfo:
      return cmd_info(args);
  }
}

std::size_t RespSession::confirmation_count(SubscriptionSpace space) const noexcept {
  // Redis 7 counts shard channels apart from channels and patterns.
  return space == SubscriptionSpace::kShard ? shard_channels().size() : channels().size() + patterns().size();
}

std::string_view RespSession::confirmation_kind(SubscriptionSpace space, bool subscribe) noexcept {
  switch (space) {
    case SubscriptionSpace::kPattern:
      return subscribe ? "psubscribe" : "punsubscribe";
    case SubscriptionSpace::kShard:
      return subscribe ? "ssubscribe" : "sunsubscribe";
    case SubscriptionSpace::kChannel:
      break;
  }
  return subscribe ? "subscribe" : "unsubscribe";
}

void RespSession::cmd_subscribe(std::span<const std::string> args, SubscriptionSpace space) {
  const Access access = space == SubscriptionSpace::kPattern ? Access::kSubscribePattern : Access::kSubscribe;
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (space == SubscriptionSpace::kPattern && !glob_pattern_fits(args[i])) {
      resp::error(reply_, "ERR " + pattern_too_long(args[i]));
      return;
    }
    if (!check_permission(access, args[i])) return;  // the whole command, as Redis's ACL
  }
  const SubscriptionList& mine = subscriptions(space);
  std::unordered_set<std::string_view> fresh;
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (!mine.contains(args[i])) fresh.insert(args[i]);
  }
  const std::size_t limit = core().config().max_subscriptions;
  if (subscription_count() + fresh.size() > limit) {
    resp::error(reply_, fmt::format("ERR max subscriptions per client reached ({})", limit));
    return;
  }
  flush_replies();
  const std::string_view kind = confirmation_kind(space, true);
  SubscriptionUpdate update = core().update(*this);
  for (std::size_t i = 1; i < args.size(); ++i) {
    update.subscribe(space, args[i]);
    resp::push(reply_, format(), 3);
    resp::bulk(reply_, kind);
    resp::bulk(reply_, args[i]);
    resp::integer(reply_, static_cast<long long>(confirmation_count(space)));
    update.slice_point([this] { flush_replies(); });
  }
  // Queued under the index lock: a message on a new channel cannot overtake
  // its confirmation (invariant 1).
  flush_replies();
}

void RespSession::cmd_unsubscribe(std::span<const std::string> args, SubscriptionSpace space) {
  flush_replies();
  const std::string_view kind = confirmation_kind(space, false);
  SubscriptionUpdate update = core().update(*this);
  auto remove = [&](std::string_view name) {
    update.unsubscribe(space, name);
    resp::push(reply_, format(), 3);
    resp::bulk(reply_, kind);
    resp::bulk(reply_, name);
    resp::integer(reply_, static_cast<long long>(confirmation_count(space)));
    update.slice_point([this] { flush_replies(); });
  };
  if (args.size() == 1) {
    const SubscriptionList& mine = subscriptions(space);
    const std::vector<std::string> all(mine.begin(), mine.end());
    if (all.empty()) {
      resp::push(reply_, format(), 3);
      resp::bulk(reply_, kind);
      resp::null(reply_, format());
      resp::integer(reply_, static_cast<long long>(confirmation_count(space)));
    }
    for (const std::string& name : all) remove(name);
  } else {
    for (std::size_t i = 1; i < args.size(); ++i) remove(args[i]);
  }
  // Queued under the index lock (invariant 1).
  flush_replies();
}

void RespSession::cmd_publish(std::span<const std::string> args) {
  if (const Permission p = permission(Access::kPublish, args[1]); p != Permission::kAllowed) {
    // The refusal is this command's reply: after the batched ones (invariant 3).
    flush_publishes();
    if (held_) {
      held_command_.assign(args.begin(), args.end());
      return;
    }
    noperm_reply(args[1], p);
    return;
  }
  if (!subscribed() && PublishBatch::fits(args[1], args[2])) {
    // Batched (invariant 3): nothing but this connection's own replies can enter
    // its queue, so executing at the end of the input changes no order.
    if (batch_.add(args[1], args[2], !reply_off_ && !skip_current_)) flush_publishes();
    return;
  }
  // A large message is published from the parser's copy, not copied into the
  // batch (after the batch, so replies stay in order). RESP3 and subscribed: this
  // connection may receive the message itself, after its earlier replies and
  // before this PUBLISH's reply, as Redis sends them.
  flush_publishes();
  if (held_) {
    held_command_.assign(args.begin(), args.end());
    return;
  }
  flush_replies();
  const BrokerCore::Published p = core().publish(Message{args[1], args[2]});
  mark_published();
  reply_published(args, p);
}

void RespSession::reply_published(std::span<const std::string> args, const BrokerCore::Published& p) {
  // Refused by a `block` subscriber (a RESP publish is never QoS 1, so never
  // kNotStored): held like a batched PUBLISH (invariant 4), or refused.
  if (p.status != PublishOutcome::Status::kPublished && hold_refused()) {
    held_command_.assign(args.begin(), args.end());  // executed again by retry_held()
    held_ = true;
    return;
  }
  refusals_.release();
  if (p.status == PublishOutcome::Status::kPublished) {
    resp::integer(reply_, static_cast<long long>(p.receivers));
  } else {
    refused_reply(args[1]);
  }
}

void RespSession::refused_reply(std::string_view channel) {
  resp::error(reply_, fmt::format("REFUSED a subscriber of '{}' with the block overflow policy has no room; "
                                  "nothing was delivered, retry later",
                                  c_str_prefix(channel, 128)));
}

void RespSession::cmd_spublish(std::span<const std::string> args) {
  // Not batched: rare next to PUBLISH. As there, a subscribed RESP3 connection
  // may receive its own smessage, after its earlier replies and before this
  // one, and a `block` refusal holds it as it holds a PUBLISH (invariant 4).
  if (!check_permission(Access::kPublish, args[1])) return;
  flush_replies();
  const BrokerCore::Published p = core().publish(Message{args[1], args[2]}, BrokerCore::Space::kShardChannels);
  mark_published();
  reply_published(args, p);
}

void RespSession::cmd_ping(std::span<const std::string> args) {
  if (args.size() > 2) {
    resp::error(reply_, "ERR wrong number of arguments for 'ping' command");
    return;
  }
  if (format() == WireFormat::kResp2 && subscribed()) {
    resp::array(reply_, 2);
    resp::bulk(reply_, "pong");
    resp::bulk(reply_, args.size() == 2 ? std::string_view(args[1]) : std::string_view());
  } else if (args.size() == 2) {
    resp::bulk(reply_, args[1]);
  } else {
    resp::simple(reply_, "PONG");
  }
}

void RespSession::cmd_auth(std::span<const std::string> args) {
  if (args.size() > 3) {
    resp::error(reply_, "ERR syntax error");
    return;
  }
  const BrokerConfig& cfg = core().config();
  if (args.size() == 2 && cfg.requirepass.empty() && cfg.token_secret.empty()) {
    resp::error(reply_,
                "ERR AUTH <password> called without any password configured for the default "
                "user. Are you sure your configuration is correct?");
    return;
  }
  // One argument is the password when one is set; with only a token secret it
  // is a token, whose subject no username is there to match (as a client
  // configured with just a password sends it: redis://:<token>@host).
  std::optional<std::string_view> user;
  if (args.size() == 3) {
    user = args[1];
  } else if (!cfg.requirepass.empty()) {
    user = "default";
  }
  if (authenticate_or_reply(user, args.back())) resp::simple(reply_, "OK");
}

bool RespSession::authenticate_or_reply(std::optional<std::string_view> user, std::string_view secret) {
  using Kind = AuthOutcome::Kind;
  const AuthOutcome r = authenticate(user, secret);
  closing_ = closing_ || r.close;  // max_auth_failures: answered, then closed
  switch (r.kind) {
    case Kind::kAccepted:
      return true;
    case Kind::kBadToken:
      resp::error(reply_, fmt::format("WRONGPASS invalid token: {}", describe(r.token_error)));
      break;
    case Kind::kWrongSubject:
      resp::error(reply_, "WRONGPASS invalid token: the username is not the token's subject (sub)");
      break;
    case Kind::kWrongPassword:
      resp::error(reply_, kWrongPass);
      break;
  }
  return false;
}

bool RespSession::check_permission(Access access, std::string_view name) {
  const Permission p = permission(access, name);
  if (p == Permission::kAllowed) return true;
  noperm_reply(name, p);
  return false;
}

void RespSession::noperm_reply(std::string_view name, Permission p) {
  core().auth_stats().count_permission_denied();
  if (p == Permission::kExpired) {
    resp::error(reply_, fmt::format("NOPERM User {} has an expired token; AUTH again with a new one",
                                    c_str_prefix(grant()->subject, 128)));
  } else {
    // Redis 7.2's wording for a refused channel, naming the user and the channel.
    resp::error(reply_, fmt::format("NOPERM User {} has no permissions to access the '{}' channel",
                                    c_str_prefix(grant()->subject, 128), c_str_prefix(name, 128)));
  }
}

bool RespSession::try_set_name(std::string_view name) {
  for (char c : name) {
    if (c < '!' || c > '~') {
      resp::error(reply_, "ERR Client names cannot contain spaces, newlines or special characters.");
      return false;
    }
  }
  set_name(std::string(name));
  return true;
}

void RespSession::set_protocol(WireFormat r) {
  if (r == format()) return;
  // Under the index lock: publishers read format() to pick the frame encoding.
  flush_replies();
  core().update(*this).set_format(r);
}

void RespSession::cmd_hello(std::span<const std::string> args) {
  long long version = 0;
  std::size_t next = 1;
  if (args.size() >= 2) {
    if (!parse_int64(args[1], version)) {
      resp::error(reply_, "ERR Protocol version is not an integer or out of range");
      return;
    }
    ++next;
    if (version < 2 || version > 3) {
      resp::error(reply_, "NOPROTO unsupported protocol version");
      return;
    }
  }
  const std::string* user = nullptr;
  const std::string* pass = nullptr;
  const std::string* name = nullptr;
  for (std::size_t j = next; j < args.size(); ++j) {
    const std::size_t more = args.size() - 1 - j;
    const std::string opt = lower(args[j]);
    if (opt == "auth" && more >= 2) {
      user = &args[j + 1];
      pass = &args[j + 2];
      j += 2;
    } else if (opt == "setname" && more >= 1) {
      name = &args[j + 1];
      ++j;
    } else {
      resp::error(reply_, fmt::format("ERR Syntax error in HELLO option '{}'", c_str_prefix(args[j], 1024)));
      return;
    }
  }
  if (user != nullptr && !authenticate_or_reply(std::string_view(*user), *pass)) return;
  if (!authenticated()) {
    resp::error(reply_,
                "NOAUTH HELLO must be called with the client already authenticated, otherwise the "
                "HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and "
                "select the RESP protocol version at the same time");
    return;
  }
  if (name != nullptr && !try_set_name(*name)) return;
  if (version != 0) set_protocol(version == 3 ? WireFormat::kResp3 : WireFormat::kResp2);
  resp::map(reply_, format(), 7);
  resp::bulk(reply_, "server");
  resp::bulk(reply_, "ringcast-broker");
  resp::bulk(reply_, "version");
  resp::bulk(reply_, "7.0.0");  // the Redis protocol level implemented (docs/broker.md)
  resp::bulk(reply_, "proto");
  resp::integer(reply_, format() == WireFormat::kResp3 ? 3 : 2);
  resp::bulk(reply_, "id");
  resp::integer(reply_, static_cast<long long>(id()));
  resp::bulk(reply_, "mode");
  resp::bulk(reply_, "standalone");
  resp::bulk(reply_, "role");
  resp::bulk(reply_, "master");
  resp::bulk(reply_, "modules");
  resp::array(reply_, 0);
}

void RespSession::cmd_reset() {
  // As Redis's clearClientConnectionState: no unsubscribe confirmations, back to
  // RESP2, name cleared, authentication required again if a password is set.
  flush_replies();
  {
    SubscriptionUpdate update = core().update(*this);
    update.unsubscribe_all();
    update.set_format(WireFormat::kResp2);
  }
  set_name({});
  queue().set_policy(core().config().overflow_policy);
  set_authenticated(!auth_required());
  set_grant(std::nullopt);
  // As Redis: REPLY OFF and a pending SKIP end, but a SKIP that covers this
  // RESET itself still swallows its reply.
  reply_off_ = false;
  skip_next_ = false;
  resp::simple(reply_, "RESET");
}

void RespSession::cmd_client(std::span<const std::string> args) {
  const std::string sub = lower(args[1]);
  if (sub == "setname") {
    if (try_set_name(args[2])) resp::simple(reply_, "OK");
  } else if (sub == "getname") {
    const std::string name = this->name();
    if (name.empty()) {
      resp::null(reply_, format());
    } else {
      resp::bulk(reply_, name);
    }
  } else if (sub == "id") {
    resp::integer(reply_, static_cast<long long>(id()));
  } else if (sub == "list") {
    if (args.size() != 2) {
      resp::error(reply_, "ERR syntax error");
      return;
    }
    resp::verbatim(reply_, format(), core().client_list());
  } else if (sub == "info") {
    resp::verbatim(reply_, format(), core().client_info(*this));
  } else if (sub == "overflow") {
    if (args.size() == 2) {
      resp::bulk(reply_, to_string(queue().policy()));
      return;
    }
    const auto policy = args.size() == 3 ? parse_overflow_policy(args[2]) : std::nullopt;
    if (!policy) {
      resp::error(reply_, "ERR overflow policy must be drop-oldest, drop-newest, disconnect, block or conflate");
      return;
    }
    queue().set_policy(*policy);
    resp::simple(reply_, "OK");
  } else if (sub == "reply") {
    const std::string mode = lower(args[2]);
    if (mode == "on") {
      reply_off_ = false;
      skip_current_ = false;
      resp::simple(reply_, "OK");
    } else if (mode == "off") {
      reply_off_ = true;
    } else if (mode == "skip") {
      if (!reply_off_) skip_next_ = true;
    } else {
      resp::error(reply_, "ERR syntax error");
    }
  } else {  // help
    constexpr std::array<std::string_view, 11> kHelp{
        "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GETNAME",
        "    Return the name of the current connection.",
        "ID",
        "    Return the ID of the current connection.",
        "REPLY (ON|OFF|SKIP)",
        "    Control the replies sent to the current connection.",
        "SETNAME <name>",
        "    Assign the name <name> to the current connection.",
        "LIST | INFO | OVERFLOW [drop-oldest|drop-newest|disconnect|block|conflate]",
        "    Connection details with per-reason drop counts; get or set this connection's overflow policy."};
    resp::array(reply_, kHelp.size());
    for (std::string_view line : kHelp) resp::simple(reply_, line);
  }
}

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
  resp::verbatim(reply_, format(), core().info_reply(std::vector<std::string>(args.begin() + 1, args.end())));
}

}  // namespace ringcast::broker
