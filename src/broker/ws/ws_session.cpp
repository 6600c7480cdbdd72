#include "broker/ws/ws_session.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "broker/guarantees/replay.hpp"
#include "broker/util/glob.hpp"
#include "broker/ws/json_delivery.hpp"
#include "broker/ws/server_frame.hpp"
#include "ringcast/broker/token.hpp"

namespace ringcast::broker::ws {

namespace {

using nlohmann::ordered_json;  // keys in insertion order: "type" first

// Compact JSON; strings that are not UTF-8 (none should reach here: topics and
// messages come from validated text) are repaired rather than thrown on.
std::string to_text(const ordered_json& j) { return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace); }

// Topics containing glob syntax are pattern subscriptions, as PSUBSCRIBE's.
bool is_pattern(std::string_view topic) noexcept { return glob_literal_prefix(topic) < topic.size(); }

// At most `n` bytes of `s` for an error message, cut on a UTF-8 boundary.
std::string_view prefix(std::string_view s, std::size_t n) noexcept {
  if (s.size() <= n) return s;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

}  // namespace

WsSession::~WsSession() {
  // Floors first, while the subscriptions are known; a delivery offered after
  // it only leaves the saved floor lower (duplicates after a crash, no loss).
  if (session_ != nullptr) save_floors();
  detach();  // out of the index: no publisher reaches the tracker after this
  if (session_ != nullptr) core().durable().detach(*session_);
}

WsSession::WsSession(BrokerCore& core, std::string peer, Waker& waker, const HttpRoutes& routes)
    : Client(core, std::move(peer), WireFormat::kPopSubJson, Deliveries::kPerMessage, waker, true),
      http_(std::make_unique<HttpUpgrade>(routes, Client::peer())),
      decoder_(core.config().ws_max_message),
      refusals_(core, std::chrono::nanoseconds(0), RefusalHold::Mode::kAtOnce) {
  set_authenticated(!auth_required());
  if (!authenticated()) decoder_.set_max_message(std::min(kMaxUnauthMessage, core.config().ws_max_message));
}

Client::InputResult WsSession::on_input(std::string_view bytes) {
  if (!closing_ && http_ != nullptr) {
    switch (http_->feed(bytes)) {
      case HttpUpgrade::Status::kNeedMore:
        return InputResult::kOk;
      case HttpUpgrade::Status::kRespond:
        delay_reply(http_->delay());
        push_reply(http_->response());
        closing_ = true;
        break;
      case HttpUpgrade::Status::kUpgraded: {
        push_reply(http_->response());
        // Frames sent before the 101 arrived (allowed to a client that does not
        // wait) are in the parser's leftover; the HTTP state is freed after it.
        const std::unique_ptr<HttpUpgrade> done = std::move(http_);
        if (done->ringcast_protocol()) {  // invariant 8: before any subscription
          ringcast_ = true;
          core().update(*this).set_format(WireFormat::kJson);
        }
        on_frames(done->rest());
        break;
      }
    }
  }
  if (!closing_) on_frames(bytes);
  if (closing_) return InputResult::kClose;
  return answers_.size() >= kMaxAnswersWaiting ? InputResult::kHeld : InputResult::kOk;  // invariant 9
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
  if (cmd->type == JsonCommand::Type::kLogin) return cmd_login();  // answered, never closed (invariant 3)
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
      return cmd_ack(*cmd);
    case JsonCommand::Type::kLogin:
      return cmd_login();
  }
}

void WsSession::cmd_login() {
  // PopSub's username/password step has no counterpart here: PopSub's clients
  // use it to obtain a token, and ringcast's tokens are minted by the operator.
  send_error(
      "login: username/password login is not supported; send {\"type\":\"auth\",\"token\":T} with a signed "
      "HS256 token T (minted with `ringcast token`; docs/security.md, \"Tokens\")");
}

void WsSession::cmd_auth(const JsonCommand& c) {
  // No username: with a token secret the field holds a token, without one
  // the broker's password (Client::authenticate).
  using Kind = AuthOutcome::Kind;
  const AuthOutcome r = authenticate(std::nullopt, c.token);
  switch (r.kind) {
    case Kind::kAccepted:
      decoder_.set_max_message(core().config().ws_max_message);  // invariant 3
      if (grant()) set_name(grant()->subject);
      send_text(R"({"type":"authenticated"})");
      return;
    case Kind::kBadToken:
    case Kind::kWrongSubject:  // no username, so never
      send_error("invalid token: " + std::string(describe(r.token_error)));
      send_close(static_cast<std::uint16_t>(CloseCode::kPolicyViolation), "invalid token");
      return;
    case Kind::kWrongPassword:
      send_error("invalid password");
      send_close(static_cast<std::uint16_t>(CloseCode::kPolicyViolation), "invalid password");
      return;
  }
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
  // Invariant 8: PopSub's subscribe has no qos and means "as published"
  // (QoS 1 publishes at least once); ringcast's defaults to 0, as before.
  const std::uint8_t qos = c.qos_given ? c.qos : ringcast_ ? 0 : 1;
  const bool pattern = is_pattern(c.topic);
  if (pattern && !glob_pattern_fits(c.topic)) {
    send_error("subscribe: " + pattern_too_long(c.topic));
    return;
  }
  if (!check_permission(pattern ? Access::kSubscribePattern : Access::kSubscribe, c.topic)) return;
  const SubscriptionSpace space = pattern ? SubscriptionSpace::kPattern : SubscriptionSpace::kChannel;
  const bool fresh = !subscriptions(space).contains(c.topic);
  const std::size_t limit = core().config().max_subscriptions;
  if (fresh && subscription_count() >= limit) {
    send_error("max subscriptions per client reached (" + std::to_string(limit) + ")");
    return;
  }
  if (!c.client_id.empty() && (c.since || c.history)) {
    send_error(
        "subscribe: a durable subscription (\"client_id\") resumes where it stood; \"since\" and "
        "\"history\" are for the others");
    return;
  }
  if (!c.client_id.empty() && qos != 1) {
    send_error("subscribe: \"client_id\" needs \"qos\":1 (a durable session is a QoS 1 session)");
    return;
  }
  if (qos == 1 && tracker_ != nullptr && (session_ == nullptr) != c.client_id.empty()) {
    send_error("subscribe: a connection's QoS 1 subscriptions are all durable (with one client_id) or none");
    return;
  }
  if (session_ != nullptr && !c.client_id.empty() && session_->client_id != c.client_id) {
    send_error("subscribe: this connection's client_id is '" + std::string(prefix(session_->client_id, 128)) + "'");
    return;
  }
  bool attached_now = false;
  if (qos == 1 && tracker_ == nullptr) {
    const BrokerConfig& cfg = core().config();
    AckSettings settings;
    settings.max_in_flight = cfg.max_in_flight;
    settings.ack_timeout = cfg.ack_timeout;
    settings.max_retries = cfg.max_retries;
    settings.max_waiting_bytes = cfg.queue_limits.hard_bytes;
    settings.policy = cfg.overflow_policy;
    auto make = [&] {
      return std::make_unique<AckTracker>(settings, core().clock(), format(),
                                          ringcast_ ? json_redelivery : popsub_redelivery, &core().qos1());
    };
    if (c.client_id.empty()) {
      own_tracker_ = make();
      tracker_ = own_tracker_.get();
    } else {
      // Invariant 7: the session's owner is the token's subject, else
      // "default" (the password's user, and everyone's without authentication).
      auto attached = core().durable().attach(c.client_id, grant() ? grant()->subject : "default", make,
                                              [wake = remote_wake()] { wake->wake(); });
      if (!attached) {
        const char* why = "' is in use by another connection";
        if (attached.error() == DurableSessions::Refusal::kNotOwner)
          why = "' belongs to another identity: a durable session is resumed only by the one that created it";
        if (attached.error() == DurableSessions::Refusal::kNoStore)
          why = "': the cluster's session store cannot be reached to check its owner; retry later";
        send_error("subscribe: client_id '" + std::string(prefix(c.client_id, 128)) + why);
        return;
      }
      session_ = std::move(*attached);
      tracker_ = session_->tracker.get();
      attached_now = true;
      if (tracker_->format() != format()) {
        // Its unacked deliveries are encoded for the other protocol.
        send_error("subscribe: client_id '" + std::string(prefix(c.client_id, 128)) +
                   "' was created over the other JSON protocol (ringcast's or PopSub's); use one for a session");
        core().durable().detach(*session_);
        session_.reset();
        tracker_ = nullptr;
        return;
      }
    }
  }
  // A retained channel's confirmation carries its offset and epoch; `since`
  // and `history` replay it first (invariant 5).
  const ChannelHistory* history = pattern ? nullptr : core().history();
  if (history != nullptr && history->rule(c.topic) == nullptr) history = nullptr;
  std::optional<Replay> replay;
  // PopSub sends a topic's stored messages to each new subscriber: a PopSub
  // connection's plain subscribe to a retained topic replays all it retains.
  const bool popsub_replay = !ringcast_ && history != nullptr && fresh && c.client_id.empty() && !c.since && !c.history;
  if (popsub_replay) {
    replay = Replay::last(*history, c.topic, std::numeric_limits<std::size_t>::max());
    replay->read();
    replay->encode(format());
  }
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
  // Invariant 7: a durable session's missed messages, read before the lock
  // too (a long backlog must not hold publishers up).
  std::optional<Replay> resume;
  if (session_ != nullptr && qos == 1 && !pattern && fresh && history != nullptr) {
    if (const std::optional<std::uint64_t> floor = durable_floor(c.topic)) {
      resume = Replay::resume(*history, c.topic, *floor);
      resume->read();
      resume->encode(format());
    }
  }
  ordered_json reply{{"type", "subscribed"}, {"topic", c.topic}};
  if (qos == 1) reply["qos"] = 1;
  if (session_ != nullptr && qos == 1) reply["client_id"] = session_->client_id;
  SubscriptionUpdate update = core().update(*this);
  if (qos == 1) update.set_ack_tracker(tracker_);  // invariant 6: before the subscription
  update.subscribe(space, c.topic);
  update.set_qos1(space, c.topic, qos == 1);
  if (history != nullptr) {
    if (replay) {
      replay->complete();  // the runs logged since read(); none can be logged now
      replay->encode(format());
      if (c.since) reply["recovered"] = replay->recovered();
    }
    reply["offset"] = replay ? replay->offset() : history->store().top(c.topic);
    reply["epoch"] = history->epoch();
  }
  if (ringcast_) send_text(to_text(reply));     // under the index lock (invariant 1)
  if (replay) push_messages(replay->frames());  // still under it: before every live message
  // Invariant 7: still under the index lock, so no live message of the topic
  // can come before or between the session's redeliveries and what it missed.
  // Channels this connection may not read stay withheld (ack_tracker.hpp,
  // invariant 5): not sent to it, and not acked or expired by it.
  if (attached_now && tracker_->redeliver_all(queue(), [this](std::string_view ch) {
        return permission(Access::kSubscribe, ch) == Permission::kAllowed;
      }))
    on_queue_ready();
  if (session_ != nullptr && qos == 1 && !pattern) resume_durable(c.topic, resume);
}

std::optional<std::uint64_t> WsSession::durable_floor(const std::string& topic) const {
  // The tracker's last delivery: everything after it was missed (the unacked
  // ones up to it are redelivered from the tracker). Else the floor saved
  // before a restart: everything after it is unacked or missed.
  if (const std::uint64_t last = tracker_->last_offered(topic); last > 0) return last;
  return core().durable().saved_floor(session_->client_id, topic);
}

void WsSession::resume_durable(const std::string& topic, std::optional<Replay>& pre) {
  const ChannelHistory* history = core().history();
  if (history != nullptr && history->rule(topic) == nullptr) history = nullptr;
  const std::uint64_t top = history != nullptr ? history->store().top(topic) : 0;
  const std::optional<std::uint64_t> floor = durable_floor(topic);
  if (!floor) {
    // A first subscription starts at the channel's end, like any other.
    core().durable().save_floor(session_->client_id, topic, top);
    return;
  }
  if (history == nullptr || *floor >= top) return;
  if (pre) {
    pre->advance(*floor);  // the floor only grew since step 1 (invariant 7)
  } else {
    pre = Replay::resume(*history, topic, *floor);  // not read before the lock (rare): read it all now
    pre->read();
  }
  pre->complete();  // what was appended since step 1; nothing can be appended now
  if (pre->failed()) {
    send_error("subscribe: cannot read the history of '" + std::string(prefix(topic, 128)) + "': " + pre->error());
    return;
  }
  pre->encode(format());
  for (const auto& [first, last] : pre->lost()) {
    // Pruned: say what cannot be resent, as a loss notice.
    const FrameRef notice = encode_message(
        format(), kLossChannel,
        fmt::format("history-lost topic={} from={} to={} (pruned from the history)", topic, first, last));
    push_reply(notice->view());
  }
  bool wake = false;
  for (std::size_t i = 0; i < pre->frames().size(); ++i)
    wake |= tracker_->offer(topic, pre->frame_offsets()[i], pre->frames()[i], queue());
  if (wake) on_queue_ready();
}

void WsSession::save_floors() {
  for (const std::string& ch : channels()) {
    // Only channels this session was delivered on: a floor saved for another
    // would make a later durable subscription replay from it.
    if (tracker_->last_offered(ch) > 0)
      core().durable().save_floor(session_->client_id, ch, tracker_->resume_floor(ch));
  }
  session_->saved = std::chrono::steady_clock::now();
}

void WsSession::cmd_unsubscribe(const JsonCommand& c) {
  const SubscriptionSpace space = is_pattern(c.topic) ? SubscriptionSpace::kPattern : SubscriptionSpace::kChannel;
  const std::string reply = to_text(ordered_json{{"type", "unsubscribed"}, {"topic", c.topic}});
  SubscriptionUpdate update = core().update(*this);
  update.unsubscribe(space, c.topic);
  if (ringcast_) send_text(reply);  // under the index lock (invariant 1); PopSub sends none
}

void WsSession::cmd_publish(const JsonCommand& c) {
  if (!check_permission(Access::kPublish, c.topic)) return;
  // The broker numbers messages per channel itself; a publisher's message_id
  // travels with the message for PopSub's subscribers, who see and ack it
  // (json_delivery.hpp), and is echoed in the puback.
  const std::string_view own = c.message_id ? std::string_view(*c.message_id) : std::string_view();
  const Message m{c.topic, c.payload, c.qos, own};
  std::string answer;
  if (core().stored_by_cluster(m)) {  // invariant 9
    auto receipt = std::make_shared<StoreReceipt>(remote_wake());
    const PublishOutcome::Status s = core().publish_async(m, receipt);
    mark_published();
    if (s == PublishOutcome::Status::kPublished) {
      answers_.push_back({std::move(receipt), c.topic, c.message_id, {}});
      return;
    }
    answer = publish_answer(c.topic, c.message_id, c.qos, s, 0, "the cluster's history is unreachable");
  } else {
    const BrokerCore::Published p = core().publish(m);
    mark_published();
    const ChannelHistory* h = core().history();
    answer = publish_answer(c.topic, c.message_id, c.qos, p.status, p.id, h != nullptr ? h->last_error() : "");
  }
  if (answer.empty()) return;
  if (answers_.empty()) {
    send_text(answer);
  } else {
    answers_.push_back({nullptr, {}, {}, std::move(answer)});
  }
}

std::string WsSession::publish_answer(std::string_view topic, const std::optional<std::string>& message_id,
                                      std::uint8_t qos, PublishOutcome::Status status, std::uint64_t id,
                                      std::string_view why) {
  // Not held as RESP holds a refused PUBLISH (docs/broker.md, "The block
  // policy"): refusals_ refuses at once, and the client retries.
  const bool refused = status == PublishOutcome::Status::kRefused || status == PublishOutcome::Status::kUnreachable ||
                       status == PublishOutcome::Status::kBacklogged;
  if (refused && refusals_.on_refused(RefusalHold::Clock::now(), status) == RefusalHold::Verdict::kRefuse) {
    refusals_.release();
    return to_text(
        ordered_json{{"type", "error"}, {"message", "refused: " + refusal_reason(status, prefix(topic, 128))}});
  }
  if (status == PublishOutcome::Status::kNotStored) {
    // puback means stored: a QoS 1 message history could not store reached
    // nobody and took no id (docs/guarantees.md, "When history cannot store").
    ordered_json e{{"type", "error"},
                   {"topic", topic},
                   {"message", "not stored: the history of '" + std::string(prefix(topic, 128)) +
                                   "' could not store the message (" + std::string(why) +
                                   "); nothing was delivered, retry later"}};
    if (message_id) e["client_message_id"] = *message_id;
    return to_text(e);
  }
  if (qos != 1 || !ringcast_) return {};
  // Stored: every QoS 1 subscriber's tracker holds it (and, with history,
  // the store; docs/guarantees.md).
  ordered_json r{{"type", "puback"}, {"topic", topic}, {"message_id", id}};
  if (message_id) r["client_message_id"] = *message_id;
  core().qos1().count_puback();
  return to_text(r);
}

void WsSession::send_answers() {
  while (!answers_.empty()) {
    WaitingAnswer& a = answers_.front();
    if (a.receipt != nullptr) {
      const StoreReceipt::State state = a.receipt->state();
      if (state == StoreReceipt::State::kPending) return;
      const bool stored = state == StoreReceipt::State::kStored;
      if (!stored) core().qos1().count_not_stored();
      a.answer = publish_answer(
          a.topic, a.message_id, 1, stored ? PublishOutcome::Status::kPublished : PublishOutcome::Status::kNotStored,
          stored ? a.receipt->offset() : 0,
          "the cluster's history did not confirm it within --cluster-store-timeout, or refused it");
    }
    if (!a.answer.empty()) send_text(a.answer);
    answers_.pop_front();
  }
}

Client::InputResult WsSession::retry_held() {
  send_answers();
  return answers_.size() >= kMaxAnswersWaiting ? InputResult::kHeld : InputResult::kOk;
}

void WsSession::cmd_ack(const JsonCommand& c) {
  const std::string& text = *c.message_id;
  const std::optional<std::string_view> named =
      c.topic.empty() ? std::nullopt : std::optional<std::string_view>(c.topic);
  AckResult r = AckResult::kUnknown;
  bool wake = false;
  // PopSub's dialect: the id as the delivery showed it, the publisher's own or
  // "<topic>#<id>" (json_delivery.hpp).
  if (!ringcast_ && tracker_ != nullptr)
    r = tracker_->ack_shown(
        named, [&text](std::string_view frame) { return popsub_id_is(frame, text); }, queue(), wake);
  // Else the broker's id: a number, its decimal string, or "<topic>#<id>",
  // whose topic names the channel; an explicit "topic" wins.
  const std::optional<AckId> parsed = parse_ack_id(text);
  if (r != AckResult::kAcked && parsed && tracker_ != nullptr) {
    const std::string_view topic = c.topic.empty() ? parsed->topic : std::string_view(c.topic);
    r = tracker_->ack(topic.empty() ? std::nullopt : std::optional<std::string_view>(topic), parsed->id, queue(), wake);
  }
  if (wake) on_queue_ready();
  if (r == AckResult::kAcked) {
    // A durable session's floors are saved at most every kFloorSaveInterval:
    // a floor saved late costs duplicates after a crash, never a loss.
    if (session_ != nullptr && std::chrono::steady_clock::now() - session_->saved >= kFloorSaveInterval) save_floors();
    return;
  }
  if (r == AckResult::kUnknown) core().qos1().count_unknown_ack();
  std::string what = "ack: no delivery awaits an ack with message_id " + std::string(prefix(text, 64));
  if (!c.topic.empty()) what += " on '" + std::string(prefix(c.topic, 128)) + "'";
  if (r == AckResult::kAmbiguous)
    what = "ack: message_id " + std::string(prefix(text, 64)) + " is awaited on several topics; add \"topic\"";
  send_error(what);
}

std::optional<std::chrono::nanoseconds> WsSession::next_timer() const {
  // acquire: pairs with DurableSessions' release store (invariant 7).
  if (session_ != nullptr && !closing_ && session_->taken.load(std::memory_order_acquire)) return core().clock().now();
  std::optional<std::chrono::nanoseconds> due = tracker_ == nullptr ? std::nullopt : tracker_->next_deadline();
  // Invariant 9: an answer is due now once the oldest waiting one's store is complete.
  if (!answers_.empty() &&
      (answers_.front().receipt == nullptr || answers_.front().receipt->state() != StoreReceipt::State::kPending)) {
    due = core().clock().now();
  }
  return due;
}

Client::InputResult WsSession::on_timer() {
  if (!closing_ && session_ != nullptr && session_->taken.load(std::memory_order_acquire)) {  // invariant 7
    send_error("client_id '" + std::string(prefix(session_->client_id, 128)) +
               "' was taken by a connection on another node of the cluster; this connection closes");
    send_close(static_cast<std::uint16_t>(CloseCode::kPolicyViolation), "session taken by another connection");
    // Let go now, not at the destructor (after the close's linger): the
    // client may come back to this node at once. As the destructor does, with
    // the queue kept for the frames above: floors, out of the index (no
    // publisher reaches the tracker after it), then the session.
    save_floors();
    core().update(*this).unsubscribe_all();
    core().durable().detach(*session_);
    session_.reset();
    tracker_ = nullptr;
    return InputResult::kClose;
  }
  send_answers();
  if (tracker_ != nullptr && tracker_->on_timer(queue())) on_queue_ready();
  return InputResult::kOk;
}

void WsSession::send_text(std::string_view json_text) {
  frame_.clear();
  append_server_frame(frame_, Opcode::kText, json_text);
  push_reply(frame_);
}

void WsSession::send_error(std::string_view message) {
  send_text(to_text(ordered_json{{"type", "error"}, {"message", message}}));
}

void WsSession::send_close(std::uint16_t code, std::string_view reason) {
  frame_.clear();
  append_close_frame(frame_, code, reason);
  push_reply(frame_);
  closing_ = true;
}

}  // namespace ringcast::broker::ws
