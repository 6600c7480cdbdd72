#include "relay/jetstream_ingress.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "relay/jetstream_error.hpp"

namespace ringcast::relay {

namespace {

std::int64_t nanos(std::chrono::milliseconds d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

}  // namespace

std::string JetStreamIngress::default_durable(std::string_view what) {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::strcpy(host, "localhost");
  std::string name = fmt::format("ringcast-{}-{}", host, what);
  for (char& c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  return name;
}

std::optional<std::string> JetStreamIngress::check_routes(const JetStreamConfig& config, std::size_t routes) {
  if (config.durable.empty() || routes <= 1) return std::nullopt;
  return std::string(
      "--jetstream-durable names one durable consumer, for one --nats-in route; with several, leave it out (each "
      "route gets its own default name)");
}

JetStreamIngress::JetStreamIngress(const JetStreamConfig& config, std::string durable, Handler handler, LogFn log)
    : config_(config), durable_(std::move(durable)), handler_(std::move(handler)), log_(std::move(log)) {}

tl::expected<std::unique_ptr<JetStreamIngress>, std::string> JetStreamIngress::start(natsConnection* conn,
                                                                                     const JetStreamConfig& config,
                                                                                     const std::string& subject,
                                                                                     std::string durable,
                                                                                     Handler handler, LogFn log) {
  if (durable.empty() || durable.find_first_of(".*> \t") != std::string::npos) {
    return tl::unexpected(
        fmt::format("--jetstream-durable '{}': a durable name is non-empty without '.', '*', '>' "
                    "or spaces",
                    durable));
  }
  std::unique_ptr<JetStreamIngress> in(
      new JetStreamIngress(config, std::move(durable), std::move(handler), std::move(log)));
  const char* stream = config.stream.c_str();
  const char* name = in->durable_.c_str();
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = 5000;
  if (natsStatus s = natsConnection_JetStream(&in->js_, conn, &jo); s != NATS_OK) {
    return tl::unexpected(jetstream_error("JetStream context", s, static_cast<jsErrCode>(0)));
  }
  jsErrCode jerr = static_cast<jsErrCode>(0);
  jsStreamInfo* si = nullptr;
  natsStatus s = js_GetStreamInfo(&si, in->js_, stream, nullptr, &jerr);
  if (s != NATS_OK) {
    return tl::unexpected(jetstream_error(fmt::format("JetStream stream '{}' (created by the publishing relay's "
                                                      "--jetstream; is the server up, with -js?)",
                                                      config.stream),
                                          s, jerr));
  }
  const std::uint64_t first_seq = std::max<std::uint64_t>(1, si->State.FirstSeq);
  const std::uint64_t next_seq = si->State.LastSeq + 1;
  jsStreamInfo_Destroy(si);

  // Invariant 2: resume right after the ack floor, in order.
  std::uint64_t start = config.deliver_new ? next_seq : first_seq;
  jsConsumerInfo* ci = nullptr;
  s = js_GetConsumerInfo(&ci, in->js_, stream, name, nullptr, &jerr);
  if (s == NATS_OK) {
    const std::uint64_t floor = ci->AckFloor.Stream;
    start = floor > 0 ? floor + 1 : std::max<std::uint64_t>(ci->Config->OptStartSeq, 1);
    in->redelivered_bound_ = ci->Delivered.Stream > floor ? ci->Delivered.Stream - floor : 0;
    jsConsumerInfo_Destroy(ci);
    ci = nullptr;
    if ((s = js_DeleteConsumer(in->js_, stream, name, nullptr, &jerr)) != NATS_OK) {
      return tl::unexpected(jetstream_error(fmt::format("recreating durable '{}'", in->durable_), s, jerr));
    }
  } else if (jerr != JSConsumerNotFoundErr) {
    return tl::unexpected(
        jetstream_error(fmt::format("durable '{}' on stream '{}'", in->durable_, config.stream), s, jerr));
  }
  in->resumed_at_ = start;

  jsConsumerConfig cc;
  jsConsumerConfig_Init(&cc);
  cc.Durable = name;
  cc.Description = "ringcast-relay --nats-in (docs/scale-out.md)";
  cc.DeliverPolicy = js_DeliverByStartSequence;
  cc.OptStartSeq = start;
  cc.AckPolicy = js_AckAll;
  cc.AckWait = nanos(config.ack_wait);
  cc.MaxAckPending = std::max(4 * config.fetch_batch, 1024);
  cc.FilterSubject = subject.c_str();
  if ((s = js_AddConsumer(&ci, in->js_, stream, &cc, nullptr, &jerr)) != NATS_OK) {
    return tl::unexpected(
        jetstream_error(fmt::format("creating durable '{}' on stream '{}'", in->durable_, config.stream), s, jerr));
  }
  jsConsumerInfo_Destroy(ci);
  // Our own pull requests (see the header: not libnats' fetch), answered on a
  // private inbox. The same pending limits as any subscription: at most one
  // batch plus a late one's messages wait there.
  in->conn_ = conn;
  natsInbox* inbox = nullptr;
  if ((s = natsInbox_Create(&inbox)) != NATS_OK) return tl::unexpected(jetstream_error("inbox", s, jerr));
  in->inbox_subject_ = inbox;
  natsInbox_Destroy(inbox);
  if ((s = natsConnection_SubscribeSync(&in->inbox_, conn, in->inbox_subject_.c_str())) != NATS_OK) {
    in->inbox_ = nullptr;
    return tl::unexpected(jetstream_error(fmt::format("subscribing for durable '{}'", in->durable_), s, jerr));
  }
  in->next_subject_ = fmt::format("$JS.API.CONSUMER.MSG.NEXT.{}.{}", config.stream, in->durable_);
  // The server ends the request at "expires" with a 408 status if it could not
  // fill the batch; our deadline (run) allows for that status to arrive.
  in->request_ = fmt::format(R"({{"batch":{},"expires":{}}})", config.fetch_batch, nanos(config.pull_wait));
  in->log_(LogLevel::kInfo,
           fmt::format("JetStream ingress: durable '{}' on stream '{}' ({}) resumes at stream sequence {}{}", name,
                       config.stream, subject, start,
                       in->redelivered_bound_ > 0
                           ? fmt::format("; up to {} messages the last run delivered unacked come again",
                                         in->redelivered_bound_)
                           : std::string()));
  in->thread_ = std::thread([raw = in.get()] { raw->run(); });
  return in;
}

JetStreamIngress::~JetStreamIngress() {
  stop();
  if (inbox_ != nullptr) natsSubscription_Destroy(inbox_);  // the durable stays on the server
  if (js_ != nullptr) jsCtx_Destroy(js_);
}

void JetStreamIngress::stop() noexcept {
  // release: pairs with the fetch thread's acquire loads.
  stop_.store(true, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
}

void JetStreamIngress::warn(std::string_view what, std::string_view why) noexcept {
  fetch_errors_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistics
  try {
    // Once per kind of trouble until a message comes again (no log flood
    // while the server is away); the count is in the statistics.
    std::string text = fmt::format("JetStream ingress '{}': {}: {}; retrying", durable_, what, why);
    if (text == last_warning_) return;
    log_(LogLevel::kWarning, text);
    last_warning_ = std::move(text);
  } catch (...) {
    // Logging failed (out of memory); the count is in the statistics.
  }
}

bool JetStreamIngress::request_more() noexcept {
  const natsStatus s = natsConnection_PublishRequest(conn_, next_subject_.c_str(), inbox_subject_.c_str(),
                                                     request_.data(), static_cast<int>(request_.size()));
  if (s != NATS_OK) warn("pull request", natsStatus_GetText(s));
  return s == NATS_OK;
}

bool JetStreamIngress::is_status(natsMsg* m, const char*& code) noexcept {
  code = nullptr;
  return natsMsg_GetDataLength(m) == 0 && natsMsgHeader_Get(m, "Status", &code) == NATS_OK && code != nullptr;
}

void JetStreamIngress::ack_held() noexcept {
  if (held_ == nullptr) return;
  // AckAll: "+ACK" to the message's reply subject covers it and every earlier
  // one (invariant 1). A lost ack costs a redelivery (a duplicate), never a loss.
  const char* reply = natsMsg_GetReply(held_);
  if (reply != nullptr && natsConnection_PublishString(conn_, reply, "+ACK") == NATS_OK) {
    acks_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistics
  }
  natsMsg_Destroy(held_);
  held_ = nullptr;
}

void JetStreamIngress::run() noexcept {
  using Clock = std::chrono::steady_clock;
  // Invariant 5: one open request. Its deadline leaves the server's 408 time
  // to arrive; past it with nothing queued (server away, request lost) the
  // next one is sent. Queued messages are always handled before a new
  // request goes out, except when a request was lost.
  const auto request_life = config_.pull_wait + std::chrono::milliseconds(1000);
  int open = 0;  // messages the open request may still deliver; 0: none open
  Clock::time_point deadline{};
  int since_ack = 0;  // messages done since the last ack
  // acquire: pairs with the release store in stop().
  while (!stop_.load(std::memory_order_acquire)) {
    if (open == 0) {
      if (!request_more()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      open = config_.fetch_batch;
      deadline = Clock::now() + request_life;
    }
    // Short waits, so that stop stays prompt.
    natsMsg* m = nullptr;
    const natsStatus s = natsSubscription_NextMsg(&m, inbox_, 200);
    if (s == NATS_TIMEOUT) {
      ack_held();  // idle: ack what is done
      // Nothing queued and the open request past its life: lost (server
      // away, reconnect); the next one goes out.
      if (Clock::now() >= deadline) {
        warn("pull request", "no answer");
        open = 0;
      }
      continue;
    }
    if (s != NATS_OK) {
      warn("reading the pull responses", natsStatus_GetText(s));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    const char* code = nullptr;
    if (is_status(m, code)) {
      // 404/408: no (more) messages for this request; 409: the server ended
      // it (too many waiting requests, consumer deleted); 503: no responders
      // (stream leader away). The request is over either way. A status of a
      // request that already passed its deadline may end the current one
      // early: that costs one more request, never a message.
      const bool empty = std::strncmp(code, "404", 3) == 0 || std::strncmp(code, "408", 3) == 0;
      if (!empty && std::strncmp(code, "100", 3) != 0) {
        const char* text = nullptr;
        (void)natsMsgHeader_Get(m, "Description", &text);
        try {
          warn("pull request ended", fmt::format("status {} {}", code, text != nullptr ? text : ""));
        } catch (...) {
          // Out of memory for the text: not counted, the next is.
        }
      }
      if (std::strncmp(code, "100", 3) != 0) open = 0;
      natsMsg_Destroy(m);
      if (!empty) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    if (open > 0) --open;
    deadline = Clock::now() + request_life;            // the request is alive
    last_warning_.clear();                             // trouble over: the next is logged
    fetched_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistics
    // Invariant 4: a redelivery (stream sequence already handled) is skipped;
    // anything newer goes to the handler, whatever its ring sequence says (a
    // retried publish is stored late, never twice).
    std::uint64_t stream_seq = 0;
    jsMsgMetaData* meta = nullptr;
    if (natsMsg_GetMetaData(&meta, m) == NATS_OK) {
      stream_seq = meta->Sequence.Stream;
      jsMsgMetaData_Destroy(meta);
    }
    if (stream_seq != 0 && stream_seq <= last_stream_seq_) {
      redeliveries_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistics
      natsMsg_Destroy(m);
      continue;
    }
    if (!handler_(m)) {  // stopping: this one stays unacked (invariant 1)
      natsMsg_Destroy(m);
      break;
    }
    if (stream_seq != 0) last_stream_seq_ = stream_seq;
    // Invariant 6: m replaces the held message as the one the next ack names.
    if (held_ != nullptr) natsMsg_Destroy(held_);
    held_ = m;
    // Ack once per batch, and whenever nothing more is waiting.
    int waiting = 0;
    int waiting_bytes = 0;
    if (++since_ack >= config_.fetch_batch ||
        natsSubscription_GetPending(inbox_, &waiting, &waiting_bytes) != NATS_OK || waiting == 0) {
      ack_held();
      since_ack = 0;
    }
  }
  ack_held();  // what was done before the stop
}

JetStreamIngressStats JetStreamIngress::stats() const {
  JetStreamIngressStats st;
  st.durable = durable_;
  // relaxed: statistics.
  st.fetched = fetched_.load(std::memory_order_relaxed);
  st.acks = acks_.load(std::memory_order_relaxed);
  st.fetch_errors = fetch_errors_.load(std::memory_order_relaxed);
  st.redeliveries = redeliveries_.load(std::memory_order_relaxed);
  st.resumed_at = resumed_at_;
  st.redelivered_bound = redelivered_bound_;
  return st;
}

}  // namespace ringcast::relay
