// A WebSocket client speaking PopSub's JSON protocol or ringcast's richer one
// (invariant 8; docs/broker.md, "WebSocket"): first one HTTP request (http_upgrade.hpp), then client frames
// (frame_decoder.hpp) carrying JSON commands (json_command.hpp), executed as
// calls on the core (BrokerCore::update, BrokerCore::publish). Deliveries reach
// it as every subscriber's do: the core encodes each message once per wire
// format, and a WebSocket subscriber's queue holds a reference to the shared
// JSON text frame (WireFormat::kJson). It owns no subscription state.
//
// Thread safety: as Client (client.hpp): everything here runs on the
// connection's owning thread; publishers reach the session only through its
// queue and on_queue_ready().
//
// Invariants:
//  1. Every frame the session sends is a queue frame that no overflow policy
//     drops (Client::push_reply): HTTP responses, replies, pongs, close frames.
//     A subscribe or unsubscribe confirmation is queued while the index lock is
//     held, so no message of that topic can be queued on the wrong side of it.
//  2. Before the upgrade only the HTTP request is read; a response other than
//     101 closes the connection once written. After a close frame (sent or
//     received) nothing more is read or executed.
//  3. When the broker needs authentication (token_secret or requirepass set),
//     nothing but control frames and `auth` is executed before a good `auth`:
//     any other message, and a refused `auth`, get an error and a close with
//     1008 (policy violation). PopSub's `login` is answered with an error and
//     never closes: ringcast has no username/password step. Until then a
//     message (reassembled) is at most kMaxUnauthMessage bytes, larger ones
//     close with 1009, so a connection that has not authenticated holds at
//     most that much here; ws_max_message applies from the good `auth` on.
//  4. Command errors (malformed JSON, bad fields, refused permissions) answer
//     {"type":"error"} and keep the connection; protocol errors (bad frames,
//     invalid UTF-8, a message over ws_max_message) close it with their code.
//  5. A subscribe with `since` or `history` (an exact, retained topic the
//     client is not subscribed to) reads history before the index lock, then
//     under it reads what was logged meanwhile, subscribes, queues the
//     confirmation and then the replayed messages (guarantees/replay.hpp): the
//     first live message is the one after the last replayed offset.
//  6. QoS 1 (docs/guarantees.md): tracker_ exists from the first subscribe at
//     qos 1 and is registered with the index (SubscriptionUpdate) before that
//     subscription is, so no QoS 1 delivery misses it; publishers offer to it,
//     the session acks it and runs its timer (next_timer, on_timer).
//  7. Durable (subscribe with client_id; guarantees/durable_sessions.hpp):
//     the session is held by this connection from its first such subscribe
//     until the destructor, which detaches from the index before letting it
//     go; or until a connection on another node of a cluster takes the
//     session (durable_sessions.hpp, invariant 1) and wakes this one, whose
//     timer (next_timer: now) queues an error and a close frame, then lets
//     go of the session as the destructor would, and ends the connection. The missed messages are read from history as
//     in invariant 5: the bulk before the index lock (from the session's floor then), the rest under it, from the floor
//     it has then (which can only have grown: what was read up to it is dropped). A subscribe's subscription and
//     confirmation, the redelivery of the session's unacked deliveries and
//     the offer of its missed messages all happen under the index update lock,
//     in that order: no live message can come before or between them, so there
//     is no gap and no duplicate at the seam (beyond the dup redeliveries).
//     Only the session's owner takes it (durable_sessions.hpp, invariant 4),
//     and its unacked deliveries on channels this connection may not
//     subscribe to are withheld from it (ack_tracker.hpp, invariant 5).
//  8. Two JSON protocols (docs/broker.md, "PopSub's frames and ringcast's"):
//     a connection speaks PopSub's (format kPopSubJson) unless its upgrade
//     offered the subprotocol kRingcastSubprotocol (ringcast_, format kJson),
//     fixed at the upgrade, before any command. PopSub's gets only frames
//     PopSub's ServerMessage has (authenticated, error, message): no
//     subscribed, unsubscribed, puback or dup; a subscribe without "qos" is a
//     QoS 1 subscription; a plain subscribe to a retained topic replays it.
//  9. Publishes are answered in the order they came. A QoS 1 publish that the
//     cluster's history stores (BrokerCore::stored_by_cluster) does not wait
//     on this thread: its StoreReceipt waits in answers_, and so does every
//     later publish's answer until those before it are sent. The receipt's
//     completion wakes the connection (remote_wake.hpp), whose timer
//     (next_timer: now, once the oldest is complete) runs on_timer(), which
//     sends the answers that are due. With kMaxAnswersWaiting waiting, input
//     is held (kHeld, retry_held) until fewer are.
#pragma once

#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "broker/core/broker_core.hpp"
#include "broker/core/client.hpp"
#include "broker/core/refusal_hold.hpp"
#include "broker/core/store_receipt.hpp"
#include "broker/guarantees/ack_tracker.hpp"
#include "broker/guarantees/durable_sessions.hpp"
#include "broker/guarantees/replay.hpp"
#include "broker/ws/frame_decoder.hpp"
#include "broker/ws/http_upgrade.hpp"
#include "broker/ws/json_command.hpp"

namespace ringcast::broker::ws {

class WsSession final : public Client {
 public:
  // Invariant 3: the largest message before authentication (an `auth` with a
  // token of up to about 16 KiB fits), as RESP's bound (request_parser.hpp).
  static constexpr std::size_t kMaxUnauthMessage = std::size_t{16} * 1024;

  // Registers with `core`; `waker` and `routes` must outlive the session.
  WsSession(BrokerCore& core, std::string peer, Waker& waker, const HttpRoutes& routes);
  // Detaches first: no publisher may reach tracker_ once it is gone; then
  // saves a durable session's floors and lets the session go.
  ~WsSession() override;

  // Reads the HTTP request, then frames (any split is fine).
  InputResult on_input(std::string_view bytes) override;
  // Invariant 9: kOk once fewer than kMaxAnswersWaiting answers wait.
  InputResult retry_held() override;

  std::optional<std::chrono::nanoseconds> next_timer() const override;
  InputResult on_timer() override;

  // True once the 101 response is queued.
  [[nodiscard]] bool upgraded() const noexcept { return http_ == nullptr; }
  // Upgraded and authenticated: until then auth_timeout runs, with or
  // without authentication configured (a slow HTTP request is held no longer).
  [[nodiscard]] bool admitted() const noexcept override { return upgraded() && authenticated(); }

 private:
  void on_frames(std::string_view bytes);
  void on_message(std::string_view text);
  void cmd_auth(const JsonCommand& c);
  void cmd_subscribe(const JsonCommand& c);
  void cmd_unsubscribe(const JsonCommand& c);
  void cmd_publish(const JsonCommand& c);
  // The answer to a publish of `topic` (with the publisher's `message_id`)
  // at `qos`: its error, a puback (ringcast's protocol, QoS 1) or nothing
  // (""). `status` kPublished with `id` its id; kNotStored with `why`.
  std::string publish_answer(std::string_view topic, const std::optional<std::string>& message_id, std::uint8_t qos,
                             PublishOutcome::Status status, std::uint64_t id, std::string_view why);
  // Sends the answers of answers_ that are due, oldest first (invariant 9).
  void send_answers();
  void cmd_ack(const JsonCommand& c);
  void cmd_login();
  // Durable session (invariant 7): where the session stands on `topic`: its
  // tracker's last delivery (the unacked ones are sent again), else the floor
  // saved before a restart or on another node of a cluster (read at the
  // attach: no round trip here); nullopt: nowhere (a first subscription).
  [[nodiscard]] std::optional<std::uint64_t> durable_floor(const std::string& topic) const;
  // Queues what the session missed on `topic` since its floor, from the
  // channel's history, completing `pre` (read before the lock from the floor
  // then) or reading it all. REQUIRES: the index update lock.
  void resume_durable(const std::string& topic, std::optional<Replay>& pre);
  // Saves the durable session's resume floor of each of its channels.
  void save_floors();

  // False and an error reply if the grant refuses `access` to `name`.
  bool check_permission(Access access, std::string_view name);
  // Queues one text frame holding `json` (invariant 1).
  void send_text(std::string_view json);
  void send_error(std::string_view message);
  // Queues a close frame and stops reading (invariant 2).
  void send_close(std::uint16_t code, std::string_view reason = {});

  std::unique_ptr<HttpUpgrade> http_;  // until the upgrade; freed after it
  FrameDecoder decoder_;
  std::string frame_;              // the frame being built, reused
  AckTracker* tracker_ = nullptr;  // invariant 6: own_tracker_'s, or the durable session's
  std::unique_ptr<AckTracker> own_tracker_;
  std::shared_ptr<DurableSessions::Session> session_;  // with a client_id
  static constexpr std::chrono::milliseconds kFloorSaveInterval{20};
  // A refused publish is refused at once (max_block 0): a WebSocket client
  // has no PUBLISH pipeline to pause, and retries on the error.
  RefusalHold refusals_;
  bool closing_ = false;
  bool ringcast_ = false;  // invariant 8: ringcast's protocol, else PopSub's
  // Invariant 9: publishes whose answers wait, in their order: a QoS 1
  // publish the cluster is storing (`receipt`, with what its answer names),
  // or one answered already (`answer`) that came after one still storing.
  struct WaitingAnswer {
    std::shared_ptr<StoreReceipt> receipt;  // null: `answer` is the answer
    std::string topic;
    std::optional<std::string> message_id;
    std::string answer;
  };
  // A list, not a deque: libstdc++'s deque allocates about 600 bytes when
  // constructed, which every idle connection would hold for nothing.
  std::list<WaitingAnswer> answers_;
  static constexpr std::size_t kMaxAnswersWaiting = 256;
};

}  // namespace ringcast::broker::ws
