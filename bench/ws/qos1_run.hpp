// ringcast-ws-bench --mode qos1: QoS 1 end to end over the WebSocket port
// (docs/guarantees.md, "QoS 1"). One WebSocket publisher sends
// {"type":"publish",...,"qos":1} and keeps at most `window` publishes
// without their puback (a QoS 1 publisher must wait for pubacks to know what
// is stored); N WebSocket subscribers, subscribed at qos 1, read every
// delivery and answer each with {"type":"ack","topic":...,"message_id":N}
// (batched per read). Reported: first deliveries per second summed over the
// subscribers (first publish to last delivery), publishes per second,
// redeliveries seen (dup), and p50/p99 publish-to-receive latency from the
// payload's stamp (stamp.hpp).
//
// Thread safety: run_qos1 uses two threads of its own (publisher, reader),
// joined before it returns.
#pragma once

#include <fcntl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "epoll_set.hpp"
#include "fd_io.hpp"
#include "histogram.hpp"
#include "stamp.hpp"
#include "tcp_loopback.hpp"
#include "ws_client.hpp"

namespace ringcast::bench::ws {

struct Qos1Result {
  double delivered_per_s = 0;  // first deliveries, all subscribers
  double published_per_s = 0;  // pubacks received per second
  std::uint64_t published = 0;
  std::uint64_t delivered = 0;
  std::uint64_t redelivered = 0;  // frames marked dup
  double p50_us = 0;
  double p99_us = 0;
  double seconds = 0;
  std::string error;
};

namespace qos1_detail {

inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The unsigned number after `key` in `s`, or -1.
inline std::int64_t number_after(std::string_view s, std::string_view key) {
  const auto at = s.rfind(key);
  if (at == std::string_view::npos) return -1;
  std::uint64_t v = 0;
  const char* b = s.data() + at + key.size();
  const auto r = std::from_chars(b, s.data() + s.size(), v);
  return r.ec == std::errc() ? static_cast<std::int64_t>(v) : -1;
}

// A WebSocket connection that collects whole text frames.
struct Conn {
  int fd = -1;
  FrameReader reader;
  std::string frame;              // the text frame being assembled
  std::vector<std::string> done;  // complete frames of the last feed
  void begin(Opcode, bool, std::uint64_t) { frame.clear(); }
  void data(const char* p, std::size_t n) { frame.append(p, n); }
  void end() { done.push_back(std::move(frame)); }
};

}  // namespace qos1_detail

// `subscribers` QoS 1 subscribers of one topic, `messages` QoS 1 publishes of
// `payload` bytes, at most `window` without a puback. Waits for every
// subscriber's first delivery of every message, or `settle_ms` without one.
inline Qos1Result run_qos1(int ws_port, int subscribers, std::size_t payload, std::uint64_t messages,
                           std::size_t window, int settle_ms) {
  using namespace qos1_detail;
  Qos1Result res;
  const std::string topic = "bench";
  std::vector<std::unique_ptr<Conn>> subs;
  auto connect = [&](Conn& c) {
    c.fd = ringcast::test::connect_loopback(ws_port);
    std::string rest, error;
    if (c.fd < 0 || !upgrade(c.fd, ws_port, rest, error, test::deadline_in(std::chrono::seconds(10)))) {
      res.error = c.fd < 0 ? "cannot connect" : error;
      return false;
    }
    return c.reader.feed(rest.data(), rest.size(), c);
  };
  for (int i = 0; i < subscribers; ++i) {
    subs.push_back(std::make_unique<Conn>());
    Conn& c = *subs.back();
    if (!connect(c)) return res;
    test::send_all(c.fd, client_frame(Opcode::kText, R"({"type":"subscribe","topic":")" + topic + R"(","qos":1})"));
    while (c.done.empty()) {
      std::string in;
      if (test::read_some(c.fd, in, test::deadline_in(std::chrono::seconds(10))) <= 0) {
        res.error = "no subscribe confirmation";
        return res;
      }
      c.reader.feed(in.data(), in.size(), c);
    }
    c.done.clear();
  }
  Conn pub;
  if (!connect(pub)) return res;

  auto latency = std::make_unique<LatencyHistogram>();
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> delivered{0};
  std::atomic<std::int64_t> last_delivery{0};
  std::uint64_t redelivered = 0;  // reader-written, read after the join
  std::thread reader([&] {
    EpollSet ep(subs.size(), [&](std::size_t i) { return subs[i]->fd; });
    std::vector<epoll_event> evs(64);
    std::vector<char> buf(1 << 18);
    std::string acks;
    std::uint64_t total = 0;
    // relaxed: a stop flag; the results are read after the join.
    while (!stop.load(std::memory_order_relaxed)) {
      const int n = ep.wait(evs, 20);
      for (int k = 0; k < n; ++k) {
        Conn& c = *subs[evs[static_cast<std::size_t>(k)].data.u64];
        const ssize_t r = ::read(c.fd, buf.data(), buf.size());
        if (r <= 0) continue;
        const std::int64_t t = now_ns();
        c.reader.feed(buf.data(), static_cast<std::size_t>(r), c);
        acks.clear();
        for (const std::string& f : c.done) {
          const std::int64_t id = number_after(f, R"("message_id":)");
          const auto at = f.find(R"("payload":")");
          if (id <= 0 || at == std::string::npos) continue;
          acks += client_frame(Opcode::kText,
                               R"({"type":"ack","topic":")" + topic + R"(","message_id":)" + std::to_string(id) + "}");
          if (f.find(R"("dup":true)") != std::string::npos) {
            ++redelivered;
            continue;
          }
          std::uint64_t seq = 0;
          std::int64_t sent = 0;
          if (f.size() >= at + 11 + kStampBytes && read_stamp(f.data() + at + 11, seq, sent)) {
            latency->record(static_cast<std::uint64_t>(std::max<std::int64_t>(0, t - sent)));
          }
          ++total;
        }
        c.done.clear();
        if (!acks.empty()) test::send_all(c.fd, acks);
        // relaxed: progress counters polled by the publisher.
        delivered.store(total, std::memory_order_relaxed);
        last_delivery.store(t, std::memory_order_relaxed);
      }
    }
  });

  // The publisher: up to `window` publishes without a puback.
  std::string body(payload, 'p');
  const std::string head = R"({"type":"publish","topic":")" + topic + R"(","qos":1,"payload":")";
  std::uint64_t sent = 0, acked = 0;
  std::vector<char> buf(1 << 16);
  const std::int64_t t0 = now_ns();
  std::string out;
  while (acked < messages) {
    out.clear();
    while (sent < messages && sent - acked < window && out.size() < (64u << 10)) {
      write_stamp(body.data(), sent, now_ns());
      out += client_frame(Opcode::kText, head + body + "\"}");
      ++sent;
    }
    if (!out.empty() && !test::send_all(pub.fd, out)) {
      res.error = "the publisher's connection failed";
      break;
    }
    std::string in;
    if (test::read_some(pub.fd, in, test::deadline_in(std::chrono::seconds(10))) <= 0) {
      res.error = "no puback within 10 s";
      break;
    }
    pub.reader.feed(in.data(), in.size(), pub);
    for (const std::string& f : pub.done) {
      if (f.find(R"("puback")") != std::string::npos) ++acked;
    }
    pub.done.clear();
  }
  const std::int64_t t_published = now_ns();
  const std::uint64_t expected = acked * static_cast<std::uint64_t>(subscribers);
  std::uint64_t last_seen = 0;
  auto last_change = std::chrono::steady_clock::now();
  for (;;) {
    // relaxed: progress counter.
    const std::uint64_t d = delivered.load(std::memory_order_relaxed);
    if (d >= expected) break;
    if (d != last_seen) {
      last_seen = d;
      last_change = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - last_change > std::chrono::milliseconds(settle_ms)) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  stop.store(true, std::memory_order_relaxed);
  reader.join();
  const std::int64_t t_last = std::max(last_delivery.load(std::memory_order_relaxed), t0 + 1);
  res.published = acked;
  res.delivered = delivered.load(std::memory_order_relaxed);
  res.redelivered = redelivered;
  res.seconds = static_cast<double>(t_last - t0) / 1e9;
  res.delivered_per_s = static_cast<double>(res.delivered) / res.seconds;
  res.published_per_s = static_cast<double>(acked) / (static_cast<double>(t_published - t0) / 1e9);
  res.p50_us = static_cast<double>(latency->percentile(0.5)) / 1000.0;
  res.p99_us = static_cast<double>(latency->percentile(0.99)) / 1000.0;
  for (auto& s : subs) ::close(s->fd);
  ::close(pub.fd);
  return res;
}

}  // namespace ringcast::bench::ws
