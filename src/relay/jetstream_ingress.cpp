#include "relay/jetstream_ingress.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

namespace ringcast::relay {

namespace {

std::string js_error(std::string_view step, natsStatus s, jsErrCode jerr) {
  std::string text = fmt::format("{}: {}", step, natsStatus_GetText(s));
  if (jerr != 0) text += fmt::format(" (JetStream error {})", static_cast<int>(jerr));
  const char* last = nats_GetLastError(nullptr);
  if (last != nullptr && *last != '\0') text += fmt::format(": {}", last);
  return text;
}

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
    return tl::unexpected(js_error("JetStream context", s, static_cast<jsErrCode>(0)));
  }
  jsErrCode jerr = static_cast<jsErrCode>(0);
  jsStreamInfo* si = nullptr;
  natsStatus s = js_GetStreamInfo(&si, in->js_, stream, nullptr, &jerr);
  if (s != NATS_OK) {
    return tl::unexpected(js_error(fmt::format("JetStream stream '{}' (created by the publishing relay's "
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
      return tl::unexpected(js_error(fmt::format("recreating durable '{}'", in->durable_), s, jerr));
    }
  } else if (jerr != JSConsumerNotFoundErr) {
    return tl::unexpected(js_error(fmt::format("durable '{}' on stream '{}'", in->durable_, config.stream), s, jerr));
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
        js_error(fmt::format("creating durable '{}' on stream '{}'", in->durable_, config.stream), s, jerr));
  }
  jsConsumerInfo_Destroy(ci);
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = stream;
  so.Consumer = name;
  if ((s = js_PullSubscribe(&in->sub_, in->js_, subject.c_str(), name, nullptr, &so, &jerr)) != NATS_OK) {
    return tl::unexpected(js_error(fmt::format("binding to durable '{}'", in->durable_), s, jerr));
  }
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
  if (sub_ != nullptr) natsSubscription_Destroy(sub_);  // the durable stays on the server
  if (js_ != nullptr) jsCtx_Destroy(js_);
}

void JetStreamIngress::stop() noexcept {
  // release: pairs with the fetch thread's acquire loads.
  stop_.store(true, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
}

void JetStreamIngress::run() noexcept {
  natsStatus last_error = NATS_OK;
  // acquire: pairs with the release store in stop().
  while (!stop_.load(std::memory_order_acquire)) {
    natsMsgList list{};
    // What is there now, up to a batch, without waiting for the batch to fill
    // (a plain Fetch holds a trickle until the batch fills or it times out:
    // latency). Nothing there: wait for the next message, at most 200 ms so
    // stop stays prompt.
    jsFetchRequest req;
    jsFetchRequest_Init(&req);
    req.Batch = config_.fetch_batch;
    req.NoWait = true;
    req.Expires = std::chrono::nanoseconds(std::chrono::milliseconds(200)).count();
    natsStatus s = natsSubscription_FetchRequest(&list, sub_, &req);
    if ((s == NATS_OK && list.Count == 0) || s == NATS_NOT_FOUND || s == NATS_TIMEOUT) {
      natsMsgList_Destroy(&list);
      list = natsMsgList{};  // a failed fetch leaves it as it is: never destroy it twice
      req.NoWait = false;
      req.Batch = 1;
      s = natsSubscription_FetchRequest(&list, sub_, &req);
    }
    if (s == NATS_TIMEOUT || s == NATS_NOT_FOUND) {
      natsMsgList_Destroy(&list);
      continue;
    }
    if (s != NATS_OK) {
      fetch_errors_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistics
      if (s != last_error) {
        try {
          log_(LogLevel::kWarning,
               fmt::format("JetStream ingress '{}': fetch: {}; retrying", durable_, natsStatus_GetText(s)));
        } catch (...) {
          // Logging failed (out of memory); the count is in the statistics.
        }
        last_error = s;
      }
      natsMsgList_Destroy(&list);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    last_error = NATS_OK;
    fetched_.fetch_add(static_cast<std::uint64_t>(list.Count), std::memory_order_relaxed);  // relaxed: statistics
    natsMsg* done = nullptr;
    for (int i = 0; i < list.Count; ++i) {
      natsMsg* m = list.Msgs[i];
      // Invariant 4: a redelivery (stream sequence already handled) is
      // skipped; anything newer goes to the handler, whatever its ring
      // sequence says (a retried publish is stored late, never twice).
      std::uint64_t stream_seq = 0;
      jsMsgMetaData* meta = nullptr;
      if (natsMsg_GetMetaData(&meta, m) == NATS_OK) {
        stream_seq = meta->Sequence.Stream;
        jsMsgMetaData_Destroy(meta);
      }
      if (stream_seq != 0 && stream_seq <= last_stream_seq_) {
        redeliveries_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistics
        done = m;
        continue;
      }
      if (!handler_(m)) break;
      if (stream_seq != 0) last_stream_seq_ = stream_seq;
      done = m;
    }
    // Invariant 1: AckAll on the last message done acks it and all before it.
    // A lost ack costs a redelivery (a duplicate), never a loss.
    if (done != nullptr && natsMsg_Ack(done, nullptr) == NATS_OK) {
      acks_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistics
    }
    natsMsgList_Destroy(&list);
  }
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
