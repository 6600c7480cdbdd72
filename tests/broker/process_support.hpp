// The broker executable as a child process for the integration tests: started
// on 127.0.0.1 port 0, its port read from its first line, always reaped.
#pragma once

#include <signal.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "child_process.hpp"

namespace ringcast::broker::testing {

class BrokerProcess {
 public:
  // `wrapper`: a command the broker runs under (e.g. prlimit and its flags).
  explicit BrokerProcess(std::vector<std::string> extra = {}, std::vector<std::string> wrapper = {}) {
    std::vector<std::string> argv = std::move(wrapper);
    for (const char* a : {BROKER_EXE, "--port", "0", "--io-threads", "2"}) argv.emplace_back(a);
    argv.insert(argv.end(), extra.begin(), extra.end());
    child_ = test::ChildProcess::spawn(argv);
    if (child_.read_stdout_until("\n", test::deadline_in(std::chrono::seconds(20)))) {
      const std::string& out = child_.stdout_text();
      const auto colon = out.rfind(':');
      if (colon != std::string::npos) port_ = std::stoi(out.substr(colon + 1));
    }
  }
  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] pid_t pid() const { return child_.pid(); }
  // SIGTERM and reap; the exit status must be a clean 0 (sanitizer reports in
  // the child make it non-zero).
  std::optional<int> stop() { return child_.stop(SIGTERM); }

 private:
  test::ChildProcess child_;
  int port_ = 0;
};

}  // namespace ringcast::broker::testing
