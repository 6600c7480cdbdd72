// The hostile-client suite's ground (issue 40): the ringcast-broker executable
// started with a RESP and a WebSocket port on loopback, a canary that proves
// the broker still serves an ordinary subscriber after an attack, and the
// broker's resident memory read from /proc, so a test can say "bounded" with a
// number instead of trusting that nothing grew.
//
// Each attack family has its own file in this folder; all link into one test
// executable (broker_hostile_test). A test drives the attack from a real
// socket, then asserts the outcome: the broker alive (canary), the error text
// the attacker got, the counter that recorded it, and memory where memory is
// the attack.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "child_process.hpp"
#include "deadline.hpp"
#include "resp_client.hpp"

namespace ringcast::broker::hostile {

// ringcast-broker on 127.0.0.1, RESP port 0 and WebSocket port 0, both read
// from its first lines; `extra` flags are appended. Always reaped.
class Broker {
 public:
  // `err`: the broker's stderr; kPipe lets a test read its log lines
  // (process().read_stderr_line_with).
  explicit Broker(std::vector<std::string> extra = {}, test::Stream err = test::Stream::kInherit) {
    std::vector<std::string> argv{BROKER_EXE, "--port", "0", "--ws-port", "0", "--io-threads", "2"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    child_ = test::ChildProcess::spawn(argv, {.err = err});
    // "ringcast-broker listening on 127.0.0.1:<port>" and
    // "ringcast-broker websocket on ws://127.0.0.1:<port>/ (live page: ...)".
    for (int line = 0; line < 4 && (port_ == 0 || ws_port_ == 0); ++line) {
      const auto l = child_.read_line();
      if (!l) break;
      if (const auto ws = l->find("ws://"); ws != std::string::npos) {
        ws_port_ = static_cast<std::uint16_t>(std::stoi(l->substr(l->find(':', ws + 5) + 1)));
      } else if (l->find("listening on ") != std::string::npos) {
        port_ = static_cast<std::uint16_t>(std::stoi(l->substr(l->rfind(':') + 1)));
      }
    }
    EXPECT_NE(port_, 0) << "no RESP port line";
    EXPECT_NE(ws_port_, 0) << "no WebSocket port line";
  }

  [[nodiscard]] std::uint16_t port() const { return port_; }
  [[nodiscard]] std::uint16_t ws_port() const { return ws_port_; }
  [[nodiscard]] pid_t pid() const { return child_.pid(); }
  [[nodiscard]] test::ChildProcess& process() { return child_; }
  // What the canary and info_field() send with AUTH first, when the broker
  // was started with a password or a token secret.
  void set_credential(std::string credential) { credential_ = std::move(credential); }

  // True while the process has not exited (a crash reaps as not running).
  [[nodiscard]] bool alive() { return !child_.wait_exit(test::deadline_in(std::chrono::milliseconds(0))); }

  // Resident set size in bytes (VmRSS of /proc/<pid>/status); 0 if unreadable.
  [[nodiscard]] std::size_t rss_bytes() const {
    std::ifstream in("/proc/" + std::to_string(child_.pid()) + "/status");
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;  // "VmRSS:  1234 kB"
    }
    return 0;
  }

  // A fresh subscriber gets a fresh publisher's message on a fresh channel:
  // the broker accepts, parses, routes and writes. Use after every attack.
  [[nodiscard]] ::testing::AssertionResult serves_canary() const {
    static int round = 0;
    const std::string channel = "canary." + std::to_string(++round);
    test::RespClient sub(port_), pub(port_);
    if (!sub.ok() || !pub.ok()) return ::testing::AssertionFailure() << "cannot connect to port " << port_;
    if (!authenticate(sub) || !authenticate(pub)) return ::testing::AssertionFailure() << "AUTH refused";
    if (!sub.subscribe(channel))
      return ::testing::AssertionFailure() << "SUBSCRIBE " << channel << " got no confirmation";
    const auto reply = pub.call({"PUBLISH", channel, "tweet"});
    if (!reply || reply->type != ':' || reply->num != 1) {
      return ::testing::AssertionFailure() << "PUBLISH " << channel << " did not reach its one subscriber";
    }
    const auto msg = sub.next(test::deadline_in(std::chrono::seconds(10)));
    if (!msg || !msg->is_message(channel) || msg->elems[2].str != "tweet") {
      return ::testing::AssertionFailure() << "the canary subscriber got no message on " << channel;
    }
    return ::testing::AssertionSuccess();
  }

  // INFO's line `field:<value>` (the first one), or nullopt.
  // Over a connection of its own, or over `via` (already authenticated): a
  // new connection is itself counted, or refused, by some limits under test.
  [[nodiscard]] std::optional<std::string> info_field(std::string_view field, test::RespClient* via = nullptr) const {
    std::optional<test::RespClient> own;
    if (via == nullptr) {
      via = &own.emplace(port_);
      if (!authenticate(*via)) return std::nullopt;
    }
    const auto r = via->call({"INFO", "everything"});
    if (!r || r->type != '$') return std::nullopt;
    const std::string key = std::string(field) + ":";
    const std::string_view text = r->str;
    for (std::size_t at = 0; at < text.size();) {
      auto nl = text.find('\n', at);
      if (nl == std::string_view::npos) nl = text.size();
      std::string_view line = text.substr(at, nl - at);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.substr(0, key.size()) == key) return std::string(line.substr(key.size()));
      at = nl + 1;
    }
    return std::nullopt;
  }

 private:
  [[nodiscard]] bool authenticate(test::RespClient& c) const {
    if (credential_.empty()) return true;
    const auto r = c.call({"AUTH", credential_});
    return r && r->type == '+';
  }

  test::ChildProcess child_;
  std::string credential_;
  std::uint16_t port_ = 0;
  std::uint16_t ws_port_ = 0;
};

}  // namespace ringcast::broker::hostile
