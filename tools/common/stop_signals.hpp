// The servers' shutdown signals: SIGINT and SIGTERM, blocked in every thread so
// that one sigwait/sigtimedwait on the returned set is their only receiver.
#pragma once

#include <pthread.h>

#include <csignal>

namespace ringcast::tools {

// Call before starting any thread (threads inherit the mask). Also ignores
// SIGPIPE: a peer that vanished mid-write is an EPIPE, not a death.
inline sigset_t block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  return set;
}

}  // namespace ringcast::tools
