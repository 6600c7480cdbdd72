// Helpers for the relay tests: nats-server instances. Deadlines, polling,
// temporary directories, loopback sockets, child processes and the RESP client
// come from tests/common; relay_fixture.hpp adds what the in-process tests
// share.
#pragma once

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "child_process.hpp"
#include "deadline.hpp"
#include "eventually.hpp"
#include "fd_io.hpp"
#include "resp_client.hpp"
#include "tcp_loopback.hpp"
#include "temp_dir.hpp"

namespace ringcast::relay::testing {

using test::ChildProcess;
using test::connect_loopback;
using test::Deadline;
using test::deadline_in;
using test::eventually;
using test::free_port;
using test::ms_left;
using test::RespClient;
using test::RespElem;
using test::RespReply;
using test::TempDir;
using test::wait_accepting;

// Sanitizer builds run the large tests with fewer messages (see CMakeLists).
// True once every thread of `pid` is in the stopped state ('T'): SIGSTOP takes
// effect asynchronously, thread by thread.
inline bool all_threads_stopped(pid_t pid) {
  std::error_code ec;
  std::size_t threads = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream in(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] != 'T') return false;
    ++threads;
  }
  return !ec && threads > 0;
}

inline std::uint64_t scaled(std::uint64_t release_count, std::uint64_t sanitizer_count) {
#if defined(RINGCAST_RELAY_SANITIZED)
  (void)release_count;
  return sanitizer_count;
#else
  (void)sanitizer_count;
  return release_count;
#endif
}

// Messages for the end-to-end tests: 1,000,000 in release builds, 100,000
// under the sanitizers; the environment variable RINGCAST_RELAY_E2E_MESSAGES
// overrides both.
inline std::uint64_t e2e_messages() {
  if (const char* env = std::getenv("RINGCAST_RELAY_E2E_MESSAGES"); env != nullptr && *env != '\0') {
    return std::strtoull(env, nullptr, 10);
  }
  return scaled(1'000'000, 100'000);
}

#ifdef NATS_SERVER_EXE
// nats-server on loopback ports the test picked; killed and reaped on destruction.
struct NatsServerOptions {
  std::uint16_t port = 0;       // 0: the server picks a free port (-p -1), read back from its log
  bool cluster = false;         // also listen for routes, on a port the server picks
  std::uint16_t route_to = 0;   // another server's cluster_port(); 0: no route
  std::string jetstream_dir{};  // non-empty: JetStream on (-js), storing under this directory
  std::string server_name{};    // -n: a JetStream cluster needs a unique one per server
  // The route listen port; 0: the server picks. A JetStream cluster needs
  // every server to have a route configured at start, so two JetStream
  // servers each take a port picked beforehand and route to the other's.
  std::uint16_t cluster_port = 0;
  // Non-empty: nats-server -c FILE, for what has no flag (a `tls {}` block
  // with `verify: true`). The flags above still apply and override the file.
  std::string config_file{};
};

class NatsServer {
 public:
  // Starts nats-server on loopback and returns once it accepts clients; nullptr
  // when it fails to start. Ports chosen by the server itself, never picked
  // here and released, so no other process can take them in between.
  static std::unique_ptr<NatsServer> start(NatsServerOptions o = {}) {
    auto s = std::make_unique<NatsServer>();
    std::vector<std::string> argv{NATS_SERVER_EXE, "-a", "127.0.0.1", "-p",
                                  o.port == 0 ? "-1" : std::to_string(o.port)};
    if (o.cluster) {
      const std::string listen = o.cluster_port == 0 ? "-1" : std::to_string(o.cluster_port);
      argv.insert(argv.end(), {"--cluster", "nats://127.0.0.1:" + listen, "--cluster_name", "ringcast-test"});
    }
    if (!o.config_file.empty()) argv.insert(argv.end(), {"-c", o.config_file});
    if (!o.jetstream_dir.empty()) argv.insert(argv.end(), {"-js", "-sd", o.jetstream_dir});
    if (!o.server_name.empty()) argv.insert(argv.end(), {"-n", o.server_name});
    if (o.route_to != 0) {
      argv.insert(argv.end(), {"--routes", "nats://127.0.0.1:" + std::to_string(o.route_to)});
    }
    s->child_ = ChildProcess::spawn(argv, {.err = test::Stream::kPipe});
    const Deadline d = test::deadline_in(std::chrono::seconds(20));
    s->port_ = s->listening_port("client", d);
    if (o.cluster) s->cluster_port_ = s->listening_port("route", d);
    if (s->port_ == 0 || (o.cluster && s->cluster_port_ == 0) || !wait_accepting(s->port_)) return nullptr;
    return s;
  }
  [[nodiscard]] std::uint16_t port() const { return port_; }
  [[nodiscard]] std::uint16_t cluster_port() const { return cluster_port_; }
  [[nodiscard]] std::string url() const { return "nats://127.0.0.1:" + std::to_string(port_); }
  [[nodiscard]] std::string tls_url() const { return "tls://127.0.0.1:" + std::to_string(port_); }
  void kill() { (void)child_.stop(SIGKILL); }
  ChildProcess& child() { return child_; }

 private:
  // The port of nats-server's "Listening for <kind> connections on HOST:PORT"
  // log line; 0 if it does not appear by `d`.
  std::uint16_t listening_port(const std::string& kind, Deadline d) {
    const std::string marker = "Listening for " + kind + " connections on 127.0.0.1:";
    const auto line = child_.running() ? child_.read_stderr_line_with(marker, d) : std::nullopt;
    if (!line) return 0;
    return static_cast<std::uint16_t>(std::strtoul(line->c_str() + line->find(marker) + marker.size(), nullptr, 10));
  }
  std::uint16_t port_ = 0;
  std::uint16_t cluster_port_ = 0;
  ChildProcess child_;
};
#endif  // NATS_SERVER_EXE

}  // namespace ringcast::relay::testing
