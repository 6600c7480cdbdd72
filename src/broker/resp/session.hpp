// A RESP2/RESP3 client: parses its requests, executes the commands as calls on
// the core (BrokerCore::update, BrokerCore::publish) through the command table
// (command_table.cpp; the handlers are in commands/, one file per family), and
// queues replies in order with the messages it receives. It owns no subscription state: that is
// the index's (client.hpp).
//
// Thread safety: as Client (client.hpp): everything here runs on the
// connection's owning thread; publishers reach the session only through its
// queue and on_queue_ready().
//
// Invariants:
//  1. Replies and messages leave in the order Redis would send them: pending
//     replies are flushed into the queue before any command that queues frames
//     itself (SUBSCRIBE family, PUBLISH), and (un)subscribe confirmations are
//     queued while the index lock is held (while the SubscriptionUpdate lives).
//  2. Until authenticated (when BrokerConfig::requirepass or token_secret is
//     set), only AUTH, HELLO, PING, QUIT and RESET run, and commands are
//     parsed under the parser's pre-authentication limits (request_parser.hpp,
//     invariant 4). An AUTH or HELLO AUTH refused for the max_auth_failures-th
//     time on the connection is answered, then the connection closes.
//  3. PUBLISHes whose channel and payload together are at most 64 KiB, from a
//     connection with no subscription, are batched: consecutive ones in one
//     input buffer are executed together (one index lock, one queue push per
//     subscriber per run of one channel) when another command, the end of the
//     input or a size cap comes; their replies are appended then, before any
//     later reply. Nothing else can reach such a connection's queue, so no
//     client sees an order Redis would not produce.
//  4. Held (BrokerConfig::max_block > 0, a `block` subscriber refused a
//     PUBLISH or SPUBLISH): the refused command and everything after it wait, in order, as
//     the batch remainder in batch_, the command being executed in
//     held_command_ and the unparsed input in held_input_; nothing else runs
//     until retry_held() gets the PUBLISH through or max_block has passed since
//     the first refusal (then it is answered with the REFUSED error).
//  5. CLIENT REPLY: a command's reply is what it appends to reply_ after
//     reply_mark_; with REPLY OFF, or SKIP sent just before, that part is cut
//     when the command ends (a batched PUBLISH records the choice in its entry).
//     (Un)subscribe confirmations and messages are pushes: they are flushed to
//     the queue as they are made, so they arrive whatever the reply mode, as in
//     Redis 7.0.
//  6. With a grant (AUTH <sub> <token>), SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE,
//     PUBLISH and SPUBLISH are checked against it before they have any effect:
//     one refused channel refuses the whole command with NOPERM, as Redis's ACL
//     does, and changes nothing. A password AUTH or RESET drops the grant.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "broker/core/broker_core.hpp"
#include "broker/core/client.hpp"
#include "broker/core/refusal_hold.hpp"
#include "broker/core/subscription_index.hpp"
#include "broker/resp/publish_batch.hpp"
#include "broker/resp/request_parser.hpp"

namespace ringcast::broker {

class RespSession : public Client {
 public:
  // Registers with `core`; `waker` must outlive the session.
  RespSession(BrokerCore& core, std::string peer, Waker& waker);

  // Parses and executes every complete command in `bytes` (any split is fine).
  InputResult on_input(std::string_view bytes) override;
  // Tries the held PUBLISH again and, once it is through (or refused for good),
  // runs the held command and input. kHeld while still held.
  InputResult retry_held() override;

 private:
  // The command table (command_table.cpp), as Redis's: a command's name,
  // arity, flags and handler. A handler appends its reply to reply_.
  using Handler = void (RespSession::*)(std::span<const std::string> args);
  enum Flags : std::uint8_t {
    kPubsubContext = 1,  // allowed while subscribed in RESP2
    kNoAuth = 2,         // allowed before authentication (invariant 2)
    kContainer = 4,      // has subcommands (kSubcommands)
    kBatched = 8,        // may join the publish batch (invariant 3, batches())
  };
  struct Command {
    std::string_view name;  // lower case, as Redis's command table
    int arity;              // Redis convention: n exact, -n at least n
    std::uint8_t flags;     // Flags
    Handler handler;
  };
  struct Subcommand {
    std::string_view container;
    std::string_view name;
    int arity;
  };
  static const std::array<Command, 17> kCommands;
  static const std::array<Subcommand, 14> kSubcommands;
  // The table's entry for a lower-case name, or null.
  [[nodiscard]] static const Command* find_command(std::string_view name) noexcept;

  // Runs one command with the CLIENT REPLY rules (invariant 5): into the
  // publish batch when batches(), else through dispatch().
  void execute(std::span<const std::string> args);
  // The one batching decision (invariant 3): a PUBLISH that dispatch() would
  // run and allow, from a connection with no subscription, small enough.
  [[nodiscard]] bool batches(const Command* spec, std::span<const std::string> args);
  // Checks the name, arity, authentication and RESP2 subscribed context, then
  // calls the handler; else appends the error.
  void dispatch(const Command* spec, std::span<const std::string> args);
  void flush_replies();
  // Executes the batched PUBLISHes and appends their replies (invariant 3).
  // may_hold: a refusal may hold the session (invariant 4) instead of answering.
  void flush_publishes(bool may_hold = true);
  // Invariant 4: a refused PUBLISH (now) is held, or else answered REFUSED
  // (core/refusal_hold.hpp decides; false: refused and counted).
  bool hold_refused(PublishOutcome::Status why);
  void set_protocol(WireFormat r);
  [[nodiscard]] bool subscribed() const noexcept { return subscription_count() > 0; }

  // The running count in a confirmation: shard channels alone, or channels plus patterns.
  [[nodiscard]] std::size_t confirmation_count(SubscriptionSpace space) const noexcept;
  [[nodiscard]] static std::string_view confirmation_kind(SubscriptionSpace space, bool subscribe) noexcept;

  // Handlers (commands/*.cpp, one file per family).
  template <SubscriptionSpace S>
  void cmd_subscribe(std::span<const std::string> args) {
    subscribe(args, S);
  }
  template <SubscriptionSpace S>
  void cmd_unsubscribe(std::span<const std::string> args) {
    unsubscribe(args, S);
  }
  void subscribe(std::span<const std::string> args, SubscriptionSpace space);
  void unsubscribe(std::span<const std::string> args, SubscriptionSpace space);
  void cmd_publish(std::span<const std::string> args);
  // The error reply of a PUBLISH refused by a `block` subscriber (REFUSED)
  // or because the cluster is unreachable (CLUSTERDOWN).
  void refused_reply(std::string_view channel, PublishOutcome::Status why);
  // Answers a PUBLISH or SPUBLISH executed alone: its count, or its hold or
  // REFUSED error when a `block` subscriber refused it (invariant 4).
  void reply_published(std::span<const std::string> args, const BrokerCore::Published& p);
  void cmd_spublish(std::span<const std::string> args);
  void cmd_ping(std::span<const std::string> args);
  void cmd_auth(std::span<const std::string> args);
  void cmd_hello(std::span<const std::string> args);
  void cmd_quit(std::span<const std::string> args);
  void cmd_reset(std::span<const std::string> args);
  void cmd_client(std::span<const std::string> args);
  void cmd_pubsub(std::span<const std::string> args);
  void cmd_info(std::span<const std::string> args);
  void cmd_history(std::span<const std::string> args);
  // CLIENT SETNAME's check: queues the error and returns false for a bad name.
  bool try_set_name(std::string_view name);

  // Tokens and permissions (invariant 6, docs/security.md "Tokens").
  // AUTH / HELLO AUTH credentials: a token when a token secret is set (unless
  // the user is "default" and a password is set too), else the password. No
  // user: a token whose subject is not checked (one-argument AUTH).
  // Returns true when authenticated; else appends the WRONGPASS reply.
  bool authenticate_or_reply(std::optional<std::string_view> user, std::string_view secret);
  // Client::permission() allows it, or else the NOPERM reply and false.
  bool check_permission(Access access, std::string_view name);
  // Appends the NOPERM reply for a refusal `p` of `name` and counts it.
  void noperm_reply(std::string_view name, Permission p);

  RequestParser parser_;
  std::string reply_;           // replies not yet queued (invariant 1)
  std::size_t reply_mark_ = 0;  // where the running command's reply starts (invariant 5)
  bool reply_off_ = false;      // CLIENT REPLY OFF
  bool skip_next_ = false;      // CLIENT REPLY SKIP: the next command's reply is dropped
  bool skip_current_ = false;   // ... and this is that command
  PublishBatch batch_;          // invariant 3
  bool closing_ = false;
  bool held_ = false;     // invariant 4
  RefusalHold refusals_;  // invariant 4: how long a refused PUBLISH is held
  std::vector<std::string> held_command_;
  std::string held_input_;
};

}  // namespace ringcast::broker
