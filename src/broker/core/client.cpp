#include "broker/core/client.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

#include "broker/core/broker_core.hpp"
#include "ringcast/broker/token.hpp"

namespace ringcast::broker {

Client::Client(BrokerCore& core, std::string peer, WireFormat format, Deliveries deliveries, Waker& waker,
               bool authenticated)
    : Subscriber(format, deliveries, core.config().queue_limits, core.config().overflow_policy, core.clock(),
                 &core.flow()),
      core_(core),
      waker_(waker),
      id_(core.next_client_id()),
      peer_(std::move(peer)),
      authenticated_(authenticated),
      format_mirror_(format) {
  core_.register_client(*this);
}

Client::~Client() { detach(); }

void Client::detach() noexcept {
  if (detached_) return;
  detached_ = true;
  if (remote_wake_) remote_wake_->cut();
  core_.update(*this).unsubscribe_all();
  // After the index lock is released no publisher can reach this client again
  // (index invariant 3); closing the queue frees whatever it still holds.
  queue().close();
  core_.unregister_client(*this);
}

const std::shared_ptr<RemoteWake>& Client::remote_wake() {
  if (!remote_wake_) remote_wake_ = std::make_shared<RemoteWake>(*this);
  return remote_wake_;
}

void Client::refresh_mirrors() noexcept {
  // relaxed: display-only mirrors for other threads' CLIENT LIST.
  nsub_.store(static_cast<std::uint32_t>(channels().size()), std::memory_order_relaxed);
  npsub_.store(static_cast<std::uint32_t>(patterns().size()), std::memory_order_relaxed);
  nssub_.store(static_cast<std::uint32_t>(shard_channels().size()), std::memory_order_relaxed);
  format_mirror_.store(format(), std::memory_order_relaxed);
}

std::string Client::name() const {
  std::lock_guard lock(name_mu_);
  return name_;
}

void Client::set_name(std::string name) {
  std::lock_guard lock(name_mu_);
  name_ = std::move(name);
}

bool Client::push_reply(std::string_view bytes) {
  const PushResult r = queue().push(FrameRef::copy_of(bytes, /*droppable=*/false));
  if (r.wake) on_queue_ready();
  return r.status != PushStatus::kClosed;
}

void Client::push_messages(std::span<const FrameRef> blocks) noexcept {
  bool wake = false;
  for (const FrameRef& b : blocks) wake |= queue().push(b).wake;
  if (wake) on_queue_ready();
}

bool Client::auth_required() const noexcept { return core_.config().auth_required(); }

Client::AuthOutcome Client::authenticate(std::optional<std::string_view> user, std::string_view secret) {
  using Kind = AuthOutcome::Kind;
  const BrokerConfig& cfg = core_.config();
  AuthStats& stats = core_.auth_stats();
  const bool password_user = user == "default" && !cfg.requirepass.empty();
  if (!cfg.token_secret.empty() && !password_user) {
    auto grant = verify_token(secret, cfg.token_secret);
    if (!grant) {
      stats.count_token_refused(grant.error());
      return refuse({Kind::kBadToken, grant.error()}, describe(grant.error()));
    }
    if (user && grant->subject != *user) {
      stats.count_subject_mismatch();
      return refuse({Kind::kWrongSubject}, "the user is not the token's subject");
    }
    stats.count_token_accepted();
    set_grant(std::move(*grant));
  } else {
    if ((user && *user != "default") || !password_matches(secret)) {
      stats.count_password_refused();
      return refuse({Kind::kWrongPassword}, "wrong password");
    }
    set_grant(std::nullopt);  // the password gives every channel
  }
  set_authenticated(true);
  return {};
}

Client::AuthOutcome Client::refuse(AuthOutcome r, std::string_view why) {
  ++auth_failures_;
  r.close = auth_failures_ >= core_.config().max_auth_failures;
  // Summed: guesses pipelined in one input wait as long as guesses sent one
  // after the other would.
  reply_delay_ += core_.auth_stats().record_failure(peer_, why, auth_failures_, r.close);
  return r;
}

bool Client::password_matches(std::string_view pass) const noexcept {
  const std::string& want = core_.config().requirepass;
  if (want.empty()) return true;
  // Time depends only on the lengths, not on where the first difference is.
  unsigned diff = pass.size() == want.size() ? 0u : 1u;
  const std::size_t n = std::max(pass.size(), want.size());
  for (std::size_t i = 0; i < n; ++i) {
    const auto x = static_cast<unsigned char>(i < pass.size() ? pass[i] : 0);
    const auto y = static_cast<unsigned char>(i < want.size() ? want[i] : 0);
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

Client::Permission Client::permission(Access access, std::string_view name) const noexcept {
  if (!grant_) return Permission::kAllowed;
  Permission verdict = Permission::kExpired;
  if (std::chrono::system_clock::now() <= grant_->expiry + kTokenLeeway) {
    const bool ok = access == Access::kSubscribe          ? grant_->may_subscribe(name)
                    : access == Access::kSubscribePattern ? grant_->may_subscribe_pattern(name)
                                                          : grant_->may_publish(name);
    verdict = ok ? Permission::kAllowed : Permission::kDenied;
  }
  return verdict;
}

}  // namespace ringcast::broker
