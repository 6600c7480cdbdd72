#include "broker/resp/session.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include <fmt/format.h>

#include "broker/resp/commands/text.hpp"
#include "broker/resp/resp_encoder.hpp"

namespace ringcast::broker {

namespace {

bool arity_ok(int arity, std::size_t argc) {
  return arity >= 0 ? argc == static_cast<std::size_t>(arity) : argc >= static_cast<std::size_t>(-arity);
}

constexpr std::string_view kNoAuthReply = "NOAUTH Authentication required.";

}  // namespace

RespSession::RespSession(BrokerCore& core, std::string peer, Waker& waker)
    : Client(core, std::move(peer), WireFormat::kResp2, Deliveries::kPerSubscription, waker, true),
      parser_(ParserLimits{core.config().max_bulk_len, core.config().max_args}),
      refusals_(core, core.config().max_block, RefusalHold::Mode::kHold) {
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

bool RespSession::hold_refused(PublishOutcome::Status why) {
  return refusals_.on_refused(RefusalHold::Clock::now(), why) == RefusalHold::Verdict::kWait;
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
    } else if (hold_refused(o.status)) {
      batch_.drop_front(at);
      held_ = true;
      reply_mark_ = reply_.size();  // these replies belong to earlier commands (invariant 5)
      return;
    }
    if (batch_.reply(at)) refused_reply(msgs[at].channel, o.status);
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
  const Command* spec = find_command(lower(args[0]));
  const bool batched = batches(spec, args);
  // Every reply but a batched PUBLISH's must follow the pending PUBLISH replies.
  if (!batched) {
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
  if (batched) {
    // Invariant 3: nothing but this connection's own replies can enter its
    // queue, so executing at the end of the input changes no order.
    if (batch_.add(args[1], args[2], !reply_off_ && !skip_current_)) flush_publishes();
  } else {
    dispatch(spec, args);
  }
  if (reply_off_ || skip_current_) reply_.resize(reply_mark_);
  // A command held here (invariant 4) runs again from retry_held(): its SKIP too.
  if (held_ && skip_current_) skip_next_ = true;
}

const RespSession::Command* RespSession::find_command(std::string_view name) noexcept {
  const auto it = std::find_if(kCommands.begin(), kCommands.end(), [&](const Command& c) { return c.name == name; });
  return it == kCommands.end() ? nullptr : &*it;
}

bool RespSession::batches(const Command* spec, std::span<const std::string> args) {
  // Everything dispatch() would check for a PUBLISH, then the batch's own
  // conditions: no subscription, and small enough to copy.
  return spec != nullptr && (spec->flags & kBatched) != 0 && arity_ok(spec->arity, args.size()) && authenticated() &&
         !subscribed() && permission(Access::kPublish, args[1]) == Permission::kAllowed &&
         PublishBatch::fits(args[1], args[2]);
}

void RespSession::dispatch(const Command* spec, std::span<const std::string> args) {
  if (spec == nullptr) {
    std::string list;
    for (std::size_t i = 1; i < args.size() && list.size() < 128; ++i) {
      list += fmt::format("'{}' ", c_str_prefix(args[i], 128 - list.size()));
    }
    resp::error(reply_, fmt::format("ERR unknown command '{}', with args beginning with: {}",
                                    c_str_prefix(args[0], 128), list));
    return;
  }
  std::string fullname(spec->name);
  if ((spec->flags & kContainer) != 0 && args.size() >= 2) {
    const std::string sub = lower(args[1]);
    const auto sspec = std::find_if(kSubcommands.begin(), kSubcommands.end(),
                                    [&](const Subcommand& s) { return s.container == spec->name && s.name == sub; });
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
  if (!authenticated() && (spec->flags & kNoAuth) == 0) {
    resp::error(reply_, kNoAuthReply);
    return;
  }
  if (format() == WireFormat::kResp2 && subscribed() && (spec->flags & kPubsubContext) == 0) {
    resp::error(reply_, fmt::format("ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE "
                                    "/ PING / QUIT / RESET are allowed in this context",
                                    fullname));
    return;
  }
  (this->*spec->handler)(args);
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

}  // namespace ringcast::broker
