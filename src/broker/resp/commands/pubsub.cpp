// SUBSCRIBE, UNSUBSCRIBE and their P and S kin; PUBLISH and SPUBLISH.
#include "broker/resp/session.hpp"

#include <string>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "broker/resp/commands/text.hpp"
#include "broker/resp/resp_encoder.hpp"
#include "broker/util/glob.hpp"

namespace ringcast::broker {

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

void RespSession::subscribe(std::span<const std::string> args, SubscriptionSpace space) {
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

void RespSession::unsubscribe(std::span<const std::string> args, SubscriptionSpace space) {
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
  // Not batched (execute() decides, invariant 3; the batch was flushed before
  // this): a large message is published from the parser's copy. RESP3 and
  // subscribed: this connection may receive the message itself, after its
  // earlier replies and before this PUBLISH's reply, as Redis sends them.
  if (!check_permission(Access::kPublish, args[1])) return;
  flush_replies();
  const BrokerCore::Published p = core().publish(Message{args[1], args[2]});
  mark_published();
  reply_published(args, p);
}

void RespSession::reply_published(std::span<const std::string> args, const BrokerCore::Published& p) {
  // Refused by a `block` subscriber, an unreachable or busy cluster (a RESP
  // publish is never QoS 1, so never kNotStored): held like a batched
  // PUBLISH (invariant 4), or refused.
  if (p.status != PublishOutcome::Status::kPublished && hold_refused(p.status)) {
    held_command_.assign(args.begin(), args.end());  // executed again by retry_held()
    held_ = true;
    return;
  }
  refusals_.release();
  if (p.status == PublishOutcome::Status::kPublished) {
    resp::integer(reply_, static_cast<long long>(p.receivers));
  } else {
    refused_reply(args[1], p.status);
  }
}

void RespSession::refused_reply(std::string_view channel, PublishOutcome::Status why) {
  // CLUSTERDOWN: Redis Cluster's word for a command the cluster cannot serve;
  // TRYAGAIN, its word for one to send again shortly.
  const char* code = why == PublishOutcome::Status::kUnreachable  ? "CLUSTERDOWN"
                     : why == PublishOutcome::Status::kBacklogged ? "TRYAGAIN"
                                                                  : "REFUSED";
  resp::error(reply_, fmt::format("{} {}", code, refusal_reason(why, c_str_prefix(channel, 128))));
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

}  // namespace ringcast::broker
