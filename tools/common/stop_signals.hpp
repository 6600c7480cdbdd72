// The tools' stop signals, one way for each kind of tool:
//  * servers (ringcast-broker, ringcast-relay): SIGINT and SIGTERM blocked in
//    every thread, so that one sigwait/sigtimedwait on the returned set is
//    their only receiver (block_stop_signals);
//  * single-threaded loops (ringcast pub/sub, ring-top): a handler that sets
//    the flag stop_requested() reads; a blocking call it interrupts fails
//    with EINTR, so the loop gets to check the flag (catch_stop_signals).
// Both ignore SIGPIPE: a peer that vanished mid-write is an EPIPE, not a death.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <csignal>
#include <initializer_list>

namespace ringcast::tools {

// Call before starting any thread (threads inherit the mask).
inline sigset_t block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  return set;
}

namespace detail {
// Written only by the handler; read by the loop (a sig_atomic_t: the one type
// a handler may write that the interrupted thread then reads whole).
inline volatile std::sig_atomic_t stop_flag = 0;
inline void on_stop_signal(int /*sig*/) { stop_flag = 1; }
}  // namespace detail

// Installs the handler for `signals` (without SA_RESTART).
inline void catch_stop_signals(std::initializer_list<int> signals = {SIGINT, SIGTERM}) {
  struct sigaction sa {};
  sa.sa_handler = detail::on_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (const int sig : signals) ::sigaction(sig, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
}

// A signal catch_stop_signals caught has arrived.
[[nodiscard]] inline bool stop_requested() noexcept { return detail::stop_flag != 0; }

}  // namespace ringcast::tools
