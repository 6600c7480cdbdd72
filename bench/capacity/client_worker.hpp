// One client process of the capacity benchmark: it opens its share of the
// idle subscribed connections to the broker (RESP SUBSCRIBE or WebSocket
// subscribe, each confirmed before the next), then reads all of them with one
// epoll thread and answers the harness over the control channel
// (control_channel.hpp). Many processes because each one may hold only
// RLIMIT_NOFILE descriptors, as the broker may.
//
// A round: the harness says "round k"; every connection must receive k more
// messages. The client notes when each connection completes its k (the first
// and the last completion give a single message's fan-out timeline) and
// reports once every live connection has, with the send-to-receive latency
// histogram of the round's deliveries (each payload starts with the
// publisher's stamp, bench/ws/stamp.hpp).
//
// Thread safety: single-threaded.
#pragma once

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "connect_from.hpp"
#include "control_channel.hpp"
#include "histogram.hpp"
#include "loopback.hpp"
#include "resp_client.hpp"
#include "stamp.hpp"
#include "subscriber.hpp"

namespace ringcast::bench::capacity {

// Set by the SIGINT/SIGTERM handler of a client process (or the harness): stop,
// reset every connection, exit.
inline volatile std::sig_atomic_t stop_requested = 0;

enum class Protocol { kResp, kWs };

// RESP2 deliveries of one channel and payload size have one size: frame
// boundaries by arithmetic, the stamp copied out of the bytes as they pass.
struct RespFrames {
  std::size_t frame = 0;     // bytes per "message" frame
  std::size_t stamp_at = 0;  // offset of the payload (its stamp) in a frame

  RespFrames(const std::string& channel, std::size_t payload)
      : frame(test::resp_message_size(channel, payload)),
        stamp_at(test::resp_message_payload_offset(channel, payload)) {}
};

// One RESP subscriber's position in the stream of fixed-size frames.
class RespStream {
 public:
  // Feeds bytes read at `now`; counts each whole frame into `tally` and its
  // latency into `latency`. False if a stamp does not read (not a delivery).
  bool feed(const RespFrames& f, const char* p, std::size_t n, std::int64_t now, ws::Tally& tally,
            LatencyHistogram& latency) {
    while (n > 0) {
      const std::size_t take = std::min(n, f.frame - pos_);
      const std::size_t lo = std::max(pos_, f.stamp_at);
      const std::size_t hi = std::min(pos_ + take, f.stamp_at + ws::kStampBytes);
      if (lo < hi) std::memcpy(stamp_ + (lo - f.stamp_at), p + (lo - pos_), hi - lo);
      pos_ += take;
      p += take;
      n -= take;
      if (pos_ == f.frame) {
        pos_ = 0;
        std::uint64_t seq = 0;
        std::int64_t sent = 0;
        if (!ws::read_stamp(stamp_, seq, sent)) return false;
        ++tally.received;
        if (seq >= tally.next_seq) {
          tally.gaps += seq - tally.next_seq;
          tally.next_seq = seq + 1;
        } else {
          ++tally.reordered;
        }
        if (now >= sent) latency.record(static_cast<std::uint64_t>(now - sent));
      }
    }
    return true;
  }

 private:
  std::size_t pos_ = 0;
  char stamp_[ws::kStampBytes] = {};
};

struct ClientOptions {
  Protocol protocol = Protocol::kResp;
  int port = 0;         // the broker's RESP or WebSocket port
  int connections = 0;  // this client's share
  int first_index = 0;  // global index of its first connection (picks the source address)
  int sources = 1;      // source addresses 127.0.0.1 .. 127.0.0.<sources>, round robin
  std::string channel;
  std::size_t payload = 0;
  int control_fd = -1;
};

inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline double process_cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

class ClientWorker {
 public:
  explicit ClientWorker(ClientOptions o) : o_(std::move(o)), control_(o_.control_fd), frames_(o_.channel, o_.payload) {}

  // Connects, reports, serves rounds until "quit" or EOF. The exit status.
  int run() {
    conns_.reserve(static_cast<std::size_t>(o_.connections));
    std::string why;
    for (int i = 0; i < o_.connections; ++i) {
      if (stop_requested != 0) return finish(130);
      if (!connect_one(o_.first_index + i, why)) {
        control_.send(fmt::format("failed {} connection {}: {}\n", conns_.size(), o_.first_index + i, why));
        return finish(1);
      }
      if ((i + 1) % 250 == 0) control_.send(fmt::format("progress {}\n", i + 1));
    }
    control_.send(fmt::format("ready {}\n", conns_.size()));
    return finish(serve());
  }

 private:
  struct Conn {
    int fd = -1;
    std::unique_ptr<ws::Subscriber> ws;  // kWs
    RespStream resp;                     // kResp
    ws::Tally resp_tally;
    std::uint64_t target = 0;  // received count that completes the round
    bool dead = false;
    [[nodiscard]] const ws::Tally& tally() const { return ws ? ws->tally() : resp_tally; }
  };

  bool connect_one(int index, std::string& why) {
    // Round robin over the source addresses; one that runs out of ports
    // (EADDRNOTAVAIL) hands over to the next ones, up to 127.0.0.254.
    int fd = connect_from(source_address(index % o_.sources), o_.port);
    for (int s = o_.sources; fd < 0 && errno == EADDRNOTAVAIL && s < 254; ++s) {
      fd = connect_from(source_address(s), o_.port);
    }
    if (fd < 0) {
      why = fmt::format("connect: {}", std::strerror(errno));
      return false;
    }
    Conn c;
    c.fd = fd;
    const auto deadline = test::deadline_in(std::chrono::seconds(30));
    if (o_.protocol == Protocol::kWs) {
      c.ws = std::make_unique<ws::Subscriber>(ws::Dialect::kPopSub, fd, &latency_);
      if (!c.ws->subscribe(o_.port, o_.channel, std::nullopt, deadline, why)) {
        ::close(fd);
        return false;
      }
    } else {
      const std::string confirm = test::resp_subscribe_reply(o_.channel);
      std::string in;
      if (!test::send_all(fd, test::resp_command({"SUBSCRIBE", o_.channel}))) {
        why = "cannot send SUBSCRIBE";
      } else {
        while (in.size() < confirm.size() && test::read_some(fd, in, deadline) > 0) {
        }
        if (in != confirm) why = fmt::format("unexpected reply to SUBSCRIBE: {:?}", in.substr(0, 80));
      }
      if (!why.empty()) {
        ::close(fd);
        return false;
      }
    }
    ::fcntl(fd, F_SETFL, O_NONBLOCK);
    conns_.push_back(std::move(c));
    return true;
  }

  int serve() {
    const int ep = ::epoll_create1(EPOLL_CLOEXEC);
    const int status = serve(ep);
    ::close(ep);
    return status;
  }

  int serve(int ep) {
    constexpr std::uint64_t kControl = UINT64_MAX;
    epoll_event cev{};
    cev.events = EPOLLIN;
    cev.data.u64 = kControl;
    ::epoll_ctl(ep, EPOLL_CTL_ADD, control_.fd(), &cev);
    for (std::size_t i = 0; i < conns_.size(); ++i) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = i;
      ::epoll_ctl(ep, EPOLL_CTL_ADD, conns_[i].fd, &ev);
    }
    alive_ = conns_.size();
    std::vector<epoll_event> evs(512);
    std::vector<char> buf(1 << 16);
    for (;;) {
      const int n = ::epoll_wait(ep, evs.data(), static_cast<int>(evs.size()), 100);
      if (stop_requested != 0) return 130;
      for (int k = 0; k < n; ++k) {
        const std::uint64_t id = evs[static_cast<std::size_t>(k)].data.u64;
        if (id == kControl) {
          if (!control_.pump()) return 0;  // the harness is gone
          while (auto line = control_.buffered_line()) {
            if (*line == "quit") return 0;
            command(*line);
          }
          continue;
        }
        Conn& c = conns_[id];
        for (int reads = 0; reads < 4; ++reads) {
          const ssize_t r = ::read(c.fd, buf.data(), buf.size());
          if (r < 0 && (errno == EAGAIN || errno == EINTR)) break;
          const std::int64_t t = now_ns();
          const bool ok = r > 0 && (c.ws ? c.ws->feed(buf.data(), static_cast<std::size_t>(r), t)
                                         : c.resp.feed(frames_, buf.data(), static_cast<std::size_t>(r), t,
                                                       c.resp_tally, latency_));
          if (!ok) {
            c.dead = true;
            ::epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, nullptr);
            --alive_;
            break;
          }
          if (in_round_ && c.tally().received >= c.target && c.target > 0) {
            c.target = 0;  // counted
            first_ = std::min(first_, t);
            last_ = std::max(last_, t);
            ++complete_;
          }
          if (static_cast<std::size_t>(r) < buf.size()) break;
        }
      }
      if (in_round_ && complete_ >= alive_) report_done();
    }
  }

  void command(const std::string& line) {
    if (line.rfind("round ", 0) == 0) {
      const std::uint64_t k = std::stoull(line.substr(6));
      alive_ = 0;
      for (Conn& c : conns_) {
        c.target = c.dead ? 0 : c.tally().received + k;
        alive_ += c.dead ? 0 : 1;
      }
      latency_ = LatencyHistogram{};
      complete_ = 0;
      first_ = INT64_MAX;
      last_ = INT64_MIN;
      cpu0_ = process_cpu_seconds();
      in_round_ = true;
      control_.send("armed\n");  // the harness publishes only after every client is armed
    } else if (line == "status") {
      control_.send(fmt::format("status {} {} {} {}\n", complete_, alive_, received(), gaps()));
    }
  }

  void report_done() {
    in_round_ = false;
    control_.send(fmt::format("done {} {} {} {} {} {} {:.3f} {}\n", first_, last_, complete_, alive_, received(),
                              gaps(), process_cpu_seconds() - cpu0_, sizeof(LatencyHistogram)));
    control_.send(std::string_view(reinterpret_cast<const char*>(&latency_), sizeof latency_));
  }

  [[nodiscard]] std::uint64_t received() const {
    std::uint64_t r = 0;
    for (const Conn& c : conns_) r += c.tally().received;
    return r;
  }
  [[nodiscard]] std::uint64_t gaps() const {
    std::uint64_t g = 0;
    for (const Conn& c : conns_) g += c.tally().gaps + c.tally().reordered;
    return g;
  }

  // Resets every connection (no TIME_WAIT left behind) and returns `status`.
  int finish(int status) {
    for (const Conn& c : conns_) close_reset(c.fd);
    conns_.clear();
    return status;
  }

  ClientOptions o_;
  ControlChannel control_;
  RespFrames frames_;
  std::vector<Conn> conns_;
  LatencyHistogram latency_;
  bool in_round_ = false;
  std::size_t alive_ = 0;
  std::size_t complete_ = 0;
  std::int64_t first_ = INT64_MAX;
  std::int64_t last_ = INT64_MIN;
  double cpu0_ = 0;
};

}  // namespace ringcast::bench::capacity
