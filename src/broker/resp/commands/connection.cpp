// The connection's own commands: PING, QUIT, AUTH, HELLO, RESET, CLIENT.
#include "broker/resp/session.hpp"

#include <array>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "broker/resp/client_list.hpp"
#include "broker/resp/commands/text.hpp"
#include "broker/resp/resp_encoder.hpp"
#include "ringcast/broker/token.hpp"

namespace ringcast::broker {

namespace {

constexpr std::string_view kWrongPass = "WRONGPASS invalid username-password pair or user is disabled.";

}  // namespace

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

void RespSession::cmd_quit(std::span<const std::string> /*args*/) {
  resp::simple(reply_, "OK");
  closing_ = true;
}

void RespSession::cmd_reset(std::span<const std::string> /*args*/) {
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
    resp::verbatim(reply_, format(), client_list(core().connection_stats()));
  } else if (sub == "info") {
    resp::verbatim(reply_, format(), client_line(core().connection_stats(*this)));
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

}  // namespace ringcast::broker
