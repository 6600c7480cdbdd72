#include "broker/ws/ws_session.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "broker/core/glob.hpp"
#include "broker/guarantees/replay.hpp"
#include "broker/ws/server_frame.hpp"
#include "ringcast/broker/token.hpp"

namespace ringcast::broker::ws {

namespace {

using json = nlohmann::ordered_json;  // keys in insertion order: "type" first

// Compact JSON; strings that are not UTF-8 (none should reach here: topics and
// messages come from validated text) are repaired rather than thrown on.
std::string to_text(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Topics containing glob syntax are pattern subscriptions, as PSUBSCRIBE's.
bool is_pattern(std::string_view topic) noexcept { return glob_literal_prefix(topic) < topic.size(); }

// At most `n` bytes of `s` for an error message, cut on a UTF-8 boundary.
std::string_view prefix(std::string_view s, std::size_t n) noexcept {
  if (s.size() <= n) return s;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

}  // namespace

WsSession::WsSession(BrokerCore& core, std::string peer, Waker& waker, const HttpRoutes& routes)
    : Client(core, std::move(peer), WireFormat::kJson, waker, true),
      http_(std::make_unique<HttpUpgrade>(routes)),
      decoder_(core.config().ws_max_message) {
  set_authenticated(!auth_required());
}

Client::InputResult WsSession::on_input(std::string_view bytes) {
  if (!closing_ && http_ != nullptr) {
    switch (http_->feed(bytes)) {
      case HttpUpgrade::Status::kNeedMore:
        return InputResult::kOk;
      case HttpUpgrade::Status::kRespond:
        push_reply(http_->response());
        closing_ = true;
        break;
      case HttpUpgrade::Status::kUpgraded: {
        push_reply(http_->response());
        // Frames sent before the 101 arrived (allowed to a client that does not
        // wait) are in the parser's leftover; the HTTP state is freed after it.
        const std::unique_ptr<HttpUpgrade> done = std::move(http_);
        on_frames(done->rest());
        break;
      }
    }
  }
  if (!closing_) on_frames(bytes);
  return closing_ ? InputResult::kClose : InputResult::kOk;
}

void WsSession::on_frames(std::string_view bytes) {
  while (!closing_) {
    switch (decoder_.decode(bytes)) {
      case FrameDecoder::Status::kNeedMore:
        return;
      case FrameDecoder::Status::kText:
      case FrameDecoder::Status::kBinary:  // PopSub's commands are JSON either way
        on_message(decoder_.payload());
        break;
      case FrameDecoder::Status::kPing:
        frame_.clear();
        append_server_frame(frame_, Opcode::kPong, decoder_.payload());
        push_reply(frame_);
        break;
      case FrameDecoder::Status::kPong:
        break;
      case FrameDecoder::Status::kClose: {
        // Echo the client's code (RFC 6455 §5.5.1); 1000 if it sent none.
        const std::uint16_t code = decoder_.close_code();
        send_close(code == FrameDecoder::kNoStatus ? static_cast<std::uint16_t>(CloseCode::kNormal) : code);
        break;
      }
      case FrameDecoder::Status::kError:
        send_close(static_cast<std::uint16_t>(decoder_.error_code()), decoder_.error());
        break;
    }
  }
}

void WsSession::on_message(std::string_view text) {
  core().count_command();
  auto cmd = parse_json_command(text);
  const bool gate = auth_required() && !authenticated();  // invariant 3
  if (!cmd) {
    send_error(cmd.error());
    if (gate) send_close(static_cast<std::uint16_t>(CloseCode::kPolicyViolation), "authenticate first");
    return;
  }
  if (gate && cmd->type != JsonCommand::Type::kAuth) {
    send_error(R"(authenticate first: send {"type":"auth","token":...})");
    send_close(static_cast<std::uint16_t>(CloseCode::kPolicyViolation), "authenticate first");
    return;
  }
  switch (cmd->type) {
    case JsonCommand::Type::kAuth:
      return cmd_auth(*cmd);
    case JsonCommand::Type::kSubscribe:
      return cmd_subscribe(*cmd);
    case JsonCommand::Type::kUnsubscribe:
      return cmd_unsubscribe(*cmd);
    case JsonCommand::Type::kPublish:
      return cmd_publish(*cmd);
    case JsonCommand::Type::kAck:
      // Accepted and ignored: per-subscriber acknowledgements come with
      // history and redelivery (issue 14).
      return;
  }
}

void WsSession::cmd_auth(const JsonCommand& c) {
  const BrokerConfig& cfg = core().config();
  AuthStats& stats = core().auth_stats();
  if (!cfg.token_secret.empty()) {
    auto grant = verify_token(c.token, cfg.token_secret);
    if (!grant) {
      stats.count_token_refused(grant.error());
      send_error("invalid token: " + std::string(describe(grant.error())));
      send_close(static_cast<std::uint16_t>(CloseCode::kPolicyViolation), "invalid token");
      return;
    }
    stats.count_token_accepted();
    set_name(grant->subject);
    set_grant(std::move(*grant));
  } else if (!cfg.requirepass.empty()) {
    // No token secret: the token field carries the broker's password.
    if (!password_matches(c.token)) {
      stats.count_password_refused();
      send_error("invalid password");
      send_close(static_cast<std::uint16_t>(CloseCode::kPolicyViolation), "invalid password");
      return;
    }
    set_grant(std::nullopt);
  }
  set_authenticated(true);
  send_text(R"({"type":"authenticated"})");
}

bool WsSession::check_permission(Access access, std::string_view name) {
  const Permission p = permission(access, name);
  if (p == Permission::kAllowed) return true;
  core().auth_stats().count_permission_denied();
  if (p == Permission::kExpired) {
    send_error("the token has expired; send auth with a new one");
  } else {
    send_error(std::string("no permission to ") + (access == Access::kPublish ? "publish to '" : "subscribe to '") +
               std::string(prefix(name, 128)) + "'");
  }
  return false;
}

void WsSession::cmd_subscribe(const JsonCommand& c) {
  const bool pattern = is_pattern(c.topic);
  if (!check_permission(pattern ? Access::kSubscribePattern : Access::kSubscribe, c.topic)) return;
  const SubscriptionSpace space = pattern ? SubscriptionSpace::kPattern : SubscriptionSpace::kChannel;
  const auto& mine = subscriptions(space);
  const bool fresh = std::find(mine.begin(), mine.end(), c.topic) == mine.end();
  const std::size_t limit = core().config().max_subscriptions;
  if (fresh && subscription_count() >= limit) {
    send_error("max subscriptions per client reached (" + std::to_string(limit) + ")");
    return;
  }
  // A retained channel's confirmation carries its offset and epoch; `since`
  // and `history` replay it first (invariant 5).
  const ChannelHistory* history = pattern ? nullptr : core().history();
  if (history != nullptr && history->rule(c.topic) == nullptr) history = nullptr;
  std::optional<Replay> replay;
  if (c.since || c.history) {
    if (history == nullptr) {
      send_error(pattern ? "subscribe: \"since\" and \"history\" need a topic, not a pattern"
                         : "subscribe: '" + std::string(prefix(c.topic, 128)) +
                               "' keeps no history (the broker's --history rules match no such channel)");
      return;
    }
    if (!fresh) {
      send_error("subscribe: already subscribed to '" + std::string(prefix(c.topic, 128)) +
                 "'; unsubscribe first to replay its history");
      return;
    }
    replay = c.since ? Replay::since(*history, c.topic, c.since->offset, c.since->epoch)
                     : Replay::last(*history, c.topic, static_cast<std::size_t>(*c.history));
    replay->read();  // before the lock: publishers run on meanwhile
    replay->encode(format());
  }
  json reply{{"type", "subscribed"}, {"topic", c.topic}};
  SubscriptionUpdate update = core().update(*this);
  update.subscribe(space, c.topic);
  if (history != nullptr) {
    if (replay) {
      replay->complete();  // the runs logged since read(); none can be logged now
      replay->encode(format());
      if (c.since) reply["recovered"] = replay->recovered();
    }
    reply["offset"] = replay ? replay->offset() : history->store().top(c.topic);
    reply["epoch"] = history->epoch();
  }
  send_text(to_text(reply));  // under the index lock (invariant 1)
  if (replay) push_messages(replay->frames());  // still under it: before every live message
}

void WsSession::cmd_unsubscribe(const JsonCommand& c) {
  const SubscriptionSpace space = is_pattern(c.topic) ? SubscriptionSpace::kPattern : SubscriptionSpace::kChannel;
  const std::string reply = to_text(json{{"type", "unsubscribed"}, {"topic", c.topic}});
  SubscriptionUpdate update = core().update(*this);
  update.unsubscribe(space, c.topic);
  send_text(reply);  // under the index lock (invariant 1)
}

void WsSession::cmd_publish(const JsonCommand& c) {
  if (!check_permission(Access::kPublish, c.topic)) return;
  // The publisher's message_id and qos are not used yet: the broker numbers
  // messages per channel itself, and acknowledgements come with issue 14.
  const std::size_t n = core().publish(c.topic, c.payload);
  mark_published();
  if (n == kRefusedReceivers) {
    core().count_refused(1);
    send_error("refused: a subscriber of '" + std::string(prefix(c.topic, 128)) +
               "' with the block overflow policy has no room; nothing was delivered, retry later");
  }
}

void WsSession::send_text(std::string_view json_text) {
  frame_.clear();
  append_server_frame(frame_, Opcode::kText, json_text);
  push_reply(frame_);
}

void WsSession::send_error(std::string_view message) {
  send_text(to_text(json{{"type", "error"}, {"message", message}}));
}

void WsSession::send_close(std::uint16_t code, std::string_view reason) {
  frame_.clear();
  append_close_frame(frame_, code, reason);
  push_reply(frame_);
  closing_ = true;
}

}  // namespace ringcast::broker::ws
