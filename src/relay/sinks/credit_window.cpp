#include "relay/sinks/credit_window.hpp"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

namespace ringcast::relay {

tl::expected<std::unique_ptr<CreditWindow>, std::string> CreditWindow::start(natsConnection* conn, Config config,
                                                                             LogFn log) {
  std::unique_ptr<CreditWindow> w(new CreditWindow(config, std::move(log)));
  w->conn_ = conn;
  natsInbox* inbox = nullptr;
  natsStatus s = natsInbox_Create(&inbox);
  if (s != NATS_OK) return tl::unexpected(fmt::format("credit window inbox: {}", natsStatus_GetText(s)));
  w->inbox_ = inbox;
  natsInbox_Destroy(inbox);
  s = natsConnection_Subscribe(&w->sub_, conn, w->inbox_.c_str(), &CreditWindow::on_ack, w.get());
  if (s != NATS_OK) {
    w->sub_ = nullptr;
    return tl::unexpected(fmt::format("credit window: subscribe to {}: {}", w->inbox_, natsStatus_GetText(s)));
  }
  if ((s = natsSubscription_SetOnCompleteCB(w->sub_, &CreditWindow::on_complete, w.get())) != NATS_OK) {
    return tl::unexpected(fmt::format("credit window: completion callback: {}", natsStatus_GetText(s)));
  }
  // Acks are small and few (one per ~1024 positions and heartbeats): the
  // defaults of libnats are ample; a dropped ack is superseded by the next.
  if (natsConnection_Status(conn) == NATS_CONN_STATUS_CONNECTED) (void)natsConnection_FlushTimeout(conn, 2000);
  return w;
}

CreditWindow::~CreditWindow() {
  if (sub_ == nullptr) return;
  // Unsubscribed here, or closed with its connection: either way libnats
  // calls on_complete once no on_ack runs any more. Bounded: a libnats that
  // never calls back must not hang shutdown.
  (void)natsSubscription_Unsubscribe(sub_);
  {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(2), [this] { return done_; });
  }
  natsSubscription_Destroy(sub_);
}

void CreditWindow::on_complete(void* closure) {
  auto* w = static_cast<CreditWindow*>(closure);
  std::lock_guard lock(w->mu_);
  w->done_ = true;
  w->cv_.notify_all();
}

void CreditWindow::reset(std::uint32_t run) noexcept {
  std::lock_guard lock(mu_);
  run_locked_ = run;
  known_ = 0;
  publish_base_locked();
}

void CreditWindow::publish_base_locked() noexcept {
  std::uint64_t base = kNone;
  for (std::size_t i = 0; i < known_; ++i) base = std::min(base, table_[i].acked);
  // release: pairs with the acquire load in open(); the reader acts on it.
  base_.store(base, std::memory_order_release);
  cv_.notify_all();
}

void CreditWindow::on_ack(natsConnection* /*nc*/, natsSubscription* /*sub*/, natsMsg* msg, void* closure) {
  auto* w = static_cast<CreditWindow*>(closure);
  // "<id hex> <run hex> <position>" or "<id hex> <run hex> -" (left).
  const char* p = natsMsg_GetData(msg);
  const char* end = p + natsMsg_GetDataLength(msg);
  std::uint64_t id = 0;
  std::uint32_t run = 0;
  std::uint64_t pos = 0;
  bool left = false;
  auto r = std::from_chars(p, end, id, 16);
  bool ok = r.ec == std::errc() && r.ptr < end && *r.ptr == ' ';
  if (ok) {
    r = std::from_chars(r.ptr + 1, end, run, 16);
    ok = r.ec == std::errc() && r.ptr < end && *r.ptr == ' ';
  }
  if (ok) {
    if (r.ptr + 2 == end && r.ptr[1] == '-') {
      left = true;
    } else {
      r = std::from_chars(r.ptr + 1, end, pos);
      ok = r.ec == std::errc() && r.ptr == end;
    }
  }
  natsMsg_Destroy(msg);
  if (!ok) return;
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(w->mu_);
  if (run != w->run_locked_) return;  // invariant 2
  ++w->counts_.acks;
  std::size_t i = 0;
  while (i < w->known_ && w->table_[i].id != id) ++i;
  if (left) {
    if (i < w->known_) {
      w->table_[i] = w->table_[--w->known_];
      ++w->counts_.left;
      w->publish_base_locked();
    }
    return;
  }
  if (i == w->known_) {
    if (w->known_ == kMaxIngresses) {
      ++w->counts_.overflow;
      return;
    }
    w->table_[w->known_++] = Ingress{id, pos, now};
  } else {
    w->table_[i].acked = std::max(w->table_[i].acked, pos);  // invariant 2
    w->table_[i].heard = now;
  }
  w->publish_base_locked();
}

bool CreditWindow::expire_locked(std::chrono::steady_clock::time_point cutoff,
                                 std::chrono::steady_clock::time_point wait_began) {
  bool any = false;
  for (std::size_t i = 0; i < known_;) {
    // Silence is measured from when we started to need the ingress.
    if (std::max(table_[i].heard, wait_began) < cutoff) {
      if (log_) {
        try {
          log_(LogLevel::kWarning,
               fmt::format("NATS ingress {:x} silent for {} ms at position {}; no longer waiting for it (what it "
                           "misses, it counts as lost)",
                           table_[i].id, config_.ack_timeout.count(), table_[i].acked));
        } catch (...) {
        }
      }
      table_[i] = table_[--known_];
      ++counts_.expired;
      any = true;
    } else {
      ++i;
    }
  }
  if (any) publish_base_locked();
  return any;
}

bool CreditWindow::wait_slice(std::uint64_t seq, std::chrono::steady_clock::time_point wait_began,
                              std::chrono::steady_clock::time_point& last_progress, std::uint64_t& last_base) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(5), [&] { return open(seq); });
  const auto now = std::chrono::steady_clock::now();
  // relaxed: mu_ is held, and on_ack stores under mu_.
  const std::uint64_t base = base_.load(std::memory_order_relaxed);
  if (base != last_base) {
    last_base = base;
    last_progress = now;
  }
  // An ingress cannot ack while our own connection is down: silence counts
  // only from when it is up again.
  if (natsConnection_Status(conn_) != NATS_CONN_STATUS_CONNECTED) {
    down_until_ = now;
  } else {
    expire_locked(now - config_.ack_timeout, std::max(wait_began, down_until_));
  }
  if (open(seq)) return false;
  if (now - last_progress >= config_.probe_interval) {
    last_progress = now;
    return true;
  }
  return false;
}

CreditWindow::Stats CreditWindow::stats() const {
  std::lock_guard lock(mu_);
  Stats s = counts_;
  s.ingresses = known_;
  // relaxed: statistics.
  const std::uint64_t base = base_.load(std::memory_order_relaxed);
  const std::uint64_t last = last_published_.load(std::memory_order_relaxed);
  s.in_flight = base == kNone || last < base ? 0 : last - base;
  return s;
}

}  // namespace ringcast::relay
