// Recovery of missed messages over WebSocket (docs/guarantees.md, "Recovery"):
// an in-process broker with --history, N messages of 52 B published while
// nobody listens, then a raw WebSocket client subscribes with
// since {offset 0, epoch} and reads until the N-th message. Reports the time
// from sending the subscribe to receiving the last replayed message, per run,
// and the median, and when the confirmation arrived (the broker has read and
// encoded the replay by then). The client's own frame parsing is included. Not a test; the client is the tests' raw RFC
// 6455 client.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ringcast/broker/broker.hpp"
#include "ws_client.hpp"

int main(int argc, char** argv) {
  using namespace ringcast::broker;
  std::size_t messages = 100'000;
  int repeat = 5;
  std::string data_dir;
  CLI::App app{"ringcast-broker recovery: time to replay N missed messages to a WebSocket client"};
  app.add_option("--messages", messages, "Messages missed (and replayed)")->capture_default_str();
  app.add_option("--repeat", repeat, "Runs (a fresh broker each)")->capture_default_str();
  app.add_option("--data-dir", data_dir, "Keep history in LMDB under this directory (a fresh sub-directory per run)");
  CLI11_PARSE(app, argc, argv);

  std::vector<double> ms;
  for (int run = 0; run < repeat; ++run) {
    BrokerConfig cfg;
    cfg.port = 0;
    cfg.ws_port = 0;
    cfg.io_threads = 1;
    cfg.history = {fmt::format("r={}", messages)};
    if (!data_dir.empty()) cfg.data_dir = fmt::format("{}/run{}", data_dir, run);
    auto broker = Broker::start(cfg);
    if (!broker) {
      fmt::print(stderr, "{}\n", broker.error().message());
      return 1;
    }
    const std::string payload(52, 'm');
    const std::vector<Message> batch(1024, Message{"r", payload});
    std::vector<std::size_t> receivers(batch.size());
    for (std::size_t sent = 0; sent < messages; sent += batch.size()) {
      const std::size_t n = std::min(batch.size(), messages - sent);
      (void)(*broker)->publish(std::span(batch).first(n), std::span(receivers).first(n));
    }
    ringcast::broker::ws::test::WsClient probe((*broker)->ws_port());
    probe.send_json({{"type", "subscribe"}, {"topic", "r"}});
    const std::string epoch = probe.read_json().value()["epoch"];

    ringcast::broker::ws::test::WsClient c((*broker)->ws_port());
    const auto t0 = std::chrono::steady_clock::now();
    c.send_json({{"type", "subscribe"}, {"topic", "r"}, {"since", {{"offset", 0}, {"epoch", epoch}}}});
    const auto reply = c.read_json();
    const auto t_reply = std::chrono::steady_clock::now();
    if (!reply || (*reply)["recovered"] != true) {
      fmt::print(stderr, "not recovered: {}\n", reply ? reply->dump() : "no reply");
      return 1;
    }
    std::size_t got = 0;
    std::string last;
    while (got < messages) {
      auto f = c.read_frame();
      if (!f) {
        fmt::print(stderr, "connection ended after {} messages\n", got);
        return 1;
      }
      ++got;
      if (got == messages) last = std::move(f->payload);
    }
    const auto t1 = std::chrono::steady_clock::now();
    if (last.find(fmt::format("\"message_id\":{},", messages)) == std::string::npos) {
      fmt::print(stderr, "the last message is not {}: {}\n", messages, last);
      return 1;
    }
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    fmt::print("run {}: {} messages replayed in {:.1f} ms ({:.2f} M msgs/s); confirmation after {:.1f} ms\n", run + 1,
               messages, ms.back(), static_cast<double>(messages) / ms.back() / 1e3,
               std::chrono::duration<double, std::milli>(t_reply - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  fmt::print("median {:.1f} ms, min {:.1f} ms, max {:.1f} ms over {} runs\n", ms[ms.size() / 2], ms.front(), ms.back(),
             ms.size());
  return 0;
}
