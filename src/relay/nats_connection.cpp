#include "relay/nats_connection.hpp"

#include <algorithm>
#include <charconv>
#include <vector>

#include <fmt/format.h>

#include "ringcast/relay/continuity.hpp"

namespace ringcast::relay {

namespace {

std::string_view status_name(natsConnStatus s) noexcept {
  switch (s) {
    case NATS_CONN_STATUS_DISCONNECTED:
      return "disconnected";
    case NATS_CONN_STATUS_CONNECTING:
      return "connecting";
    case NATS_CONN_STATUS_CONNECTED:
      return "connected";
    case NATS_CONN_STATUS_CLOSED:
      return "closed";
    case NATS_CONN_STATUS_RECONNECTING:
      return "reconnecting";
    case NATS_CONN_STATUS_DRAINING_SUBS:
    case NATS_CONN_STATUS_DRAINING_PUBS:
      return "draining";
  }
  return "unknown";
}

// The host of "scheme://[user@]host:port" ("[v6]" without brackets).
std::string url_host(std::string_view url) {
  if (const auto scheme = url.find("://"); scheme != std::string_view::npos) url.remove_prefix(scheme + 3);
  if (const auto at = url.rfind('@'); at != std::string_view::npos) url.remove_prefix(at + 1);
  if (!url.empty() && url.front() == '[') return std::string(url.substr(1, url.find(']') - 1));
  return std::string(url.substr(0, url.find(':')));
}

// TLS options on `o` (NatsConfig::tls). An empty result: done; else what failed.
std::string set_tls(natsOptions* o, const NatsTlsConfig& tls, const std::vector<std::string>& urls) {
  auto failed = [](std::string_view what, natsStatus s) {
    const char* detail = nats_GetLastError(nullptr);
    return fmt::format("NATS TLS: {}: {}", what, detail != nullptr && *detail != '\0' ? detail : natsStatus_GetText(s));
  };
  natsStatus s = natsOptions_SetSecure(o, true);
  if (s != NATS_OK) return failed("turning TLS on", s);
  if (!tls.ca_cert_file.empty() &&
      (s = natsOptions_LoadCATrustedCertificates(o, tls.ca_cert_file.c_str())) != NATS_OK) {
    return failed("CA file " + tls.ca_cert_file, s);
  }
  if (!tls.cert_file.empty() &&
      (s = natsOptions_LoadCertificatesChain(o, tls.cert_file.c_str(), tls.key_file.c_str())) != NATS_OK) {
    return failed("certificate " + tls.cert_file + " / key " + tls.key_file, s);
  }
  // The server certificate must name the host the URL names. libnats checks
  // one expected name for every server: with several URLs they must share
  // their host, else it is a configuration error rather than a silent skip.
  const std::string host = url_host(urls.front());
  for (const auto& u : urls) {
    if (url_host(u) != host) {
      return "NATS TLS: the server URLs name different hosts (" + host + ", " + url_host(u) +
             "); libnats checks one expected certificate name for all of them";
    }
  }
  if ((s = natsOptions_SetExpectedHostname(o, host.c_str())) != NATS_OK) return failed("expected hostname", s);
  return {};
}

std::string connected_url(natsConnection* nc) {
  char buf[256] = {};
  if (natsConnection_GetConnectedUrl(nc, buf, sizeof buf) == NATS_OK && buf[0] != '\0') return buf;
  return "?";
}

}  // namespace

NatsConnection::NatsConnection(LogFn log) : callbacks_(std::make_shared<Callbacks>()) {
  callbacks_->log = std::move(log);
  closure_ = new Holder(callbacks_);
}

void NatsConnection::Callbacks::say(LogLevel level, const std::string& text) {
  std::lock_guard lock(mu);
  if (!closed) log(level, text);
}

tl::expected<std::unique_ptr<NatsConnection>, std::string> NatsConnection::connect(const NatsConfig& config,
                                                                                   LogFn log) {
  std::unique_ptr<NatsConnection> nc(new NatsConnection(std::move(log)));
  natsOptions* o = nullptr;
  auto fail = [&](std::string_view step, natsStatus s) {
    return tl::unexpected(fmt::format("{}: {}", step, natsStatus_GetText(s)));
  };
  if (natsStatus s = natsOptions_Create(&o); s != NATS_OK) return fail("natsOptions_Create", s);
  nc->options_ = o;
  void* closure = nc->closure_;
  // "nats://a:4222,nats://b:4222": libnats tries the servers in random order.
  std::vector<std::string> urls;
  for (std::size_t pos = 0; pos <= config.url.size();) {
    const std::size_t comma = std::min(config.url.find(',', pos), config.url.size());
    if (comma > pos) urls.push_back(config.url.substr(pos, comma - pos));
    pos = comma + 1;
  }
  if (urls.empty()) return tl::unexpected(std::string("empty NATS URL"));
  std::vector<const char*> url_ptrs;
  url_ptrs.reserve(urls.size());
  for (const auto& u : urls) url_ptrs.push_back(u.c_str());
  natsStatus s = natsOptions_SetServers(o, url_ptrs.data(), static_cast<int>(url_ptrs.size()));
  if (s != NATS_OK) return fail(fmt::format("URL '{}'", config.url), s);
  if ((s = natsOptions_SetName(o, config.client_name.c_str())) != NATS_OK) return fail("name", s);
  if ((s = natsOptions_SetAllowReconnect(o, true)) != NATS_OK) return fail("reconnect", s);
  if ((s = natsOptions_SetMaxReconnect(o, config.max_reconnect)) != NATS_OK) return fail("max reconnect", s);
  if ((s = natsOptions_SetReconnectWait(o, config.reconnect_wait.count())) != NATS_OK) return fail("reconnect wait", s);
  if ((s = natsOptions_SetReconnectBufSize(o, config.reconnect_buffer_bytes)) != NATS_OK) {
    return fail("reconnect buffer", s);
  }
  if ((s = natsOptions_SetTimeout(o, config.connect_timeout.count())) != NATS_OK) return fail("timeout", s);
  if ((s = natsOptions_SetNoEcho(o, true)) != NATS_OK) return fail("no echo", s);
  if (config.one_delivery_thread && (s = natsOptions_UseGlobalMessageDelivery(o, true)) != NATS_OK) {
    return fail("global message delivery", s);
  }
  if (config.servers_in_order && (s = natsOptions_SetNoRandomize(o, true)) != NATS_OK) return fail("no randomize", s);
  if (config.ping_interval.count() > 0 &&
      (s = natsOptions_SetPingInterval(o, config.ping_interval.count())) != NATS_OK) {
    return fail("ping interval", s);
  }
  if (config.write_deadline.count() > 0 &&
      (s = natsOptions_SetWriteDeadline(o, config.write_deadline.count())) != NATS_OK) {
    return fail("write deadline", s);
  }
  const bool secure = config.tls.enabled || std::any_of(urls.begin(), urls.end(),
                                                        [](const std::string& u) { return u.rfind("tls://", 0) == 0; });
  if (secure) {
    if (auto wrong = set_tls(o, config.tls, urls); !wrong.empty()) return tl::unexpected(std::move(wrong));
  }
  if ((s = natsOptions_SetDisconnectedCB(o, &NatsConnection::on_disconnected, closure)) != NATS_OK)
    return fail("cb", s);
  if ((s = natsOptions_SetReconnectedCB(o, &NatsConnection::on_reconnected, closure)) != NATS_OK) return fail("cb", s);
  if ((s = natsOptions_SetClosedCB(o, &NatsConnection::on_closed, closure)) != NATS_OK) return fail("cb", s);
  if ((s = natsOptions_SetErrorHandler(o, &NatsConnection::on_error, closure)) != NATS_OK) return fail("cb", s);
  // An unreachable server at start is retried like a lost one; publishes buffer.
  if ((s = natsOptions_SetRetryOnFailedConnect(o, true, &NatsConnection::on_connected, closure)) != NATS_OK) {
    return fail("retry on failed connect", s);
  }
  if (secure) {
    // TLS: a first attempt that does not retry, so that a server that
    // answers but refuses the session (an untrusted or misnamed certificate, a
    // missing client certificate) fails the start with the reason; retrying
    // would not change it, and libnats' retry loop keeps only "not yet
    // connected". An unreachable server is then retried as without TLS.
    if ((s = natsOptions_SetRetryOnFailedConnect(o, false, nullptr, nullptr)) != NATS_OK) {
      return fail("retry on failed connect", s);
    }
    s = natsConnection_Connect(&nc->conn_, o);
    if (s == NATS_OK) {
      nc->callbacks_->say(LogLevel::kInfo, fmt::format("NATS connected to {} (TLS)", connected_url(nc->conn_)));
      return nc;
    }
    nc->conn_ = nullptr;
    if (s != NATS_NO_SERVER) {  // NATS_NO_SERVER: none reachable, retried below
      const char* why = nats_GetLastError(nullptr);
      return tl::unexpected(fmt::format(
          "TLS to NATS {} failed: {}{}", config.url, why != nullptr && *why != '\0' ? why : natsStatus_GetText(s),
          // With TLS 1.3 a server that requires a client certificate says so
          // only after the handshake, by closing: libnats then sees no PONG.
          s == NATS_SSL_ERROR ? ""
                              : " (the server closed the connection after the TLS handshake: does it require "
                                "a client certificate, --nats-tls-cert-file?)"));
    }
    if ((s = natsOptions_SetRetryOnFailedConnect(o, true, &NatsConnection::on_connected, closure)) != NATS_OK) {
      return fail("retry on failed connect", s);
    }
  }
  s = natsConnection_Connect(&nc->conn_, o);
  if (s == NATS_NOT_YET_CONNECTED) {
    nc->callbacks_->say(LogLevel::kWarning,
                        fmt::format("NATS {} not reachable yet; retrying in the background", config.url));
  } else if (s != NATS_OK) {
    nc->conn_ = nullptr;
    return fail(fmt::format("connect {}", config.url), s);
  } else {
    nc->callbacks_->say(LogLevel::kInfo, fmt::format("NATS connected to {}", connected_url(nc->conn_)));
  }
  return nc;
}

NatsConnection::~NatsConnection() {
  close(std::chrono::milliseconds(1000));
  if (conn_ != nullptr) {
    natsConnection_Destroy(conn_);  // libnats still owns closure_: on_closed deletes it
  } else {
    delete closure_;  // no connection, so no callback will ever run
  }
  if (options_ != nullptr) natsOptions_Destroy(options_);
}

void NatsConnection::close(std::chrono::milliseconds flush_timeout) noexcept {
  // acq_rel: one caller closes; the others see it done.
  if (closed_.exchange(true, std::memory_order_acq_rel)) return;
  if (conn_ != nullptr && natsConnection_Status(conn_) == NATS_CONN_STATUS_CONNECTED) {
    const natsStatus s = natsConnection_FlushTimeout(conn_, flush_timeout.count());
    if (s != NATS_OK) {
      callbacks_->say(LogLevel::kWarning, fmt::format("NATS flush at close: {}", natsStatus_GetText(s)));
    }
  }
  {
    // From here on callbacks stay silent: whatever `log` points at may go away.
    std::lock_guard lock(callbacks_->mu);
    callbacks_->closed = true;
  }
  if (conn_ != nullptr) natsConnection_Close(conn_);
}

namespace {

// "<run hex>.<msg>" into `out` (NUL-terminated); 8 + 1 + 20 + 1 bytes at most.
void format_msg_number(char (&out)[32], std::uint32_t run, std::uint64_t msg) noexcept {
  char* p = std::to_chars(out, out + 8, run, 16).ptr;
  *p++ = '.';
  *std::to_chars(p, out + sizeof out - 1, msg).ptr = '\0';
}

}  // namespace

bool NatsConnection::publish_probe(const char* subject, const char* source, std::uint64_t seq,
                                   const Tag& tag) noexcept {
  char seq_text[24];
  *std::to_chars(seq_text, seq_text + sizeof seq_text - 1, seq).ptr = '\0';
  char msg_text[32];
  format_msg_number(msg_text, tag.run, tag.msg);
  natsMsg* msg = nullptr;
  natsStatus s = natsMsg_Create(&msg, subject, tag.reply, nullptr, 0);
  if (s == NATS_OK) s = natsMsgHeader_Set(msg, kSourceHeader, source);
  if (s == NATS_OK) s = natsMsgHeader_Set(msg, kSeqHeader, seq_text);
  if (s == NATS_OK) s = natsMsgHeader_Set(msg, kMsgHeader, msg_text);
  if (s == NATS_OK) s = natsMsgHeader_Set(msg, kProbeHeader, "1");
  if (s == NATS_OK) s = natsConnection_PublishMsg(conn_, msg);
  natsMsg_Destroy(msg);  // null-safe
  return s == NATS_OK;
}

bool NatsConnection::publish(const char* subject, std::string_view body, const char* source, std::uint64_t seq,
                             std::uint64_t count, std::uint64_t from, const Tag* tag) noexcept {
  char seq_text[24];
  *std::to_chars(seq_text, seq_text + sizeof seq_text - 1, seq).ptr = '\0';
  char count_text[24];
  *std::to_chars(count_text, count_text + sizeof count_text - 1, count).ptr = '\0';
  char from_text[24];
  *std::to_chars(from_text, from_text + sizeof from_text - 1, from).ptr = '\0';
  natsMsg* msg = nullptr;
  natsStatus s =
      natsMsg_Create(&msg, subject, tag != nullptr ? tag->reply : nullptr, body.data(), static_cast<int>(body.size()));
  if (s == NATS_OK) s = natsMsgHeader_Set(msg, kSourceHeader, source);
  if (s == NATS_OK) s = natsMsgHeader_Set(msg, kSeqHeader, seq_text);
  if (s == NATS_OK && count > 0) s = natsMsgHeader_Set(msg, kCountHeader, count_text);
  if (s == NATS_OK && from != kFromSeq && from != seq) s = natsMsgHeader_Set(msg, kFromHeader, from_text);
  if (s == NATS_OK && tag != nullptr) {
    char msg_text[32];
    format_msg_number(msg_text, tag->run, tag->msg);
    s = natsMsgHeader_Set(msg, kMsgHeader, msg_text);
  }
  if (s == NATS_OK) s = natsConnection_PublishMsg(conn_, msg);
  natsMsg_Destroy(msg);  // null-safe
  if (s == NATS_OK) {
    // relaxed: statistics.
    published_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  count_failure(s);
  return false;
}

void NatsConnection::count_failure(natsStatus s) noexcept {
  // relaxed: statistics; last_failure_ is a hint for stats(), not ordered with anything.
  if (s == NATS_INSUFFICIENT_BUFFER) {
    buffer_full_.fetch_add(1, std::memory_order_relaxed);
  } else {
    failed_.fetch_add(1, std::memory_order_relaxed);
  }
  last_failure_.store(static_cast<std::uint32_t>(s), std::memory_order_relaxed);
}

NatsStats NatsConnection::stats() const {
  NatsStats st;
  st.enabled = true;
  // relaxed: statistics.
  st.published = published_.load(std::memory_order_relaxed);
  st.buffer_full = buffer_full_.load(std::memory_order_relaxed);
  st.failed = failed_.load(std::memory_order_relaxed);
  st.disconnects = callbacks_->disconnects.load(std::memory_order_relaxed);
  st.reconnects = callbacks_->reconnects.load(std::memory_order_relaxed);
  if (conn_ != nullptr) {
    st.status = std::string(status_name(natsConnection_Status(conn_)));
    st.buffered_bytes = natsConnection_Buffered(conn_);
    natsStatistics* ns = nullptr;
    if (natsStatistics_Create(&ns) == NATS_OK) {
      std::uint64_t in_msgs = 0, in_bytes = 0, reconnects = 0;
      if (natsConnection_GetStats(conn_, ns) == NATS_OK) {
        (void)natsStatistics_GetCounts(ns, &in_msgs, &in_bytes, &st.out_msgs, &st.out_bytes, &reconnects);
      }
      natsStatistics_Destroy(ns);
    }
  }
  const auto last = static_cast<natsStatus>(last_failure_.load(std::memory_order_relaxed));
  std::lock_guard lock(callbacks_->mu);
  st.last_error = callbacks_->last_error;
  if (st.last_error.empty() && last != NATS_OK) st.last_error = natsStatus_GetText(last);
  return st;
}

void NatsConnection::on_connected(natsConnection* nc, void* closure) {
  state(closure).say(LogLevel::kInfo, fmt::format("NATS connected to {}", connected_url(nc)));
}

void NatsConnection::on_disconnected(natsConnection* /*nc*/, void* closure) {
  Callbacks& cb = state(closure);
  cb.disconnects.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistics
  cb.say(LogLevel::kWarning, "NATS disconnected; libnats buffers publishes and reconnects");
}

void NatsConnection::on_reconnected(natsConnection* nc, void* closure) {
  Callbacks& cb = state(closure);
  cb.reconnects.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistics
  cb.say(LogLevel::kInfo, fmt::format("NATS reconnected to {}", connected_url(nc)));
}

void NatsConnection::on_closed(natsConnection* /*nc*/, void* closure) {
  auto* holder = static_cast<Holder*>(closure);
  (*holder)->say(LogLevel::kError, "NATS connection closed (reconnect attempts exhausted); NATS publishes now fail");
  delete holder;  // the last callback libnats makes for this connection
}

void NatsConnection::on_error(natsConnection* /*nc*/, natsSubscription* /*sub*/, natsStatus err, void* closure) {
  Callbacks& cb = state(closure);
  {
    std::lock_guard lock(cb.mu);
    cb.last_error = natsStatus_GetText(err);
  }
  cb.say(LogLevel::kWarning, fmt::format("NATS asynchronous error: {}", natsStatus_GetText(err)));
}

}  // namespace ringcast::relay
