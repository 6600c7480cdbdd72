// One I/O thread of the server (server.hpp): its io_context, the ready list of
// connections owed a writer turn and the drain that gives each one writev, and
// the buffers every connection on the thread shares. The writer-progress
// invariant W that the ready list keeps is in connection.hpp.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_set>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "broker/tls/tls_stream.hpp"

namespace ringcast::broker {

namespace asio = boost::asio;

// Connections one drain handler flushes (one writev each) before it posts the
// rest of the pass behind whatever else is queued on the thread: a newcomer
// (accept, SUBSCRIBE) waits for at most two slices, not a whole fan-out. A
// slice of 64 sendmsg calls takes a few hundred microseconds; the cost of
// slicing is one post per 64 connections.
constexpr std::size_t kDrainSlice = 64;
// One read buffer per I/O thread, not per connection: a connection's bytes are
// parsed (and copied where kept) before the thread reads another socket.
constexpr std::size_t kReadBuffer = std::size_t{256} * 1024;

class Connection;

class IoWorker {
 public:
  IoWorker() : guard_(asio::make_work_guard(ctx_)) {}

  asio::io_context& context() noexcept { return ctx_; }
  // This worker's thread: the buffer every read on this thread goes into.
  [[nodiscard]] std::span<char> read_buffer() noexcept { return read_buffer_; }
  // This worker's thread: where a TLS connection's writer gathers one record
  // (tls_stream.hpp); its contents matter only during one TlsStream::write.
  [[nodiscard]] std::span<char> tls_scratch() {
    if (tls_scratch_.empty()) tls_scratch_.resize(tls::kMaxRecord);
    return tls_scratch_;
  }

  // Any thread. The connection must stay alive until unmark() (it calls unmark
  // before dying, on this worker's thread).
  void mark_ready(Connection* c) {
    bool post = false;
    {
      std::lock_guard lock(ready_mu_);
      ready_.push_back(c);
      post = !drain_posted_;
      drain_posted_ = true;
    }
    if (post) asio::post(ctx_, [this] { drain(); });
  }

  // This worker's thread: forgets `c` in the ready list and in the list being
  // drained right now (a connection closed by an earlier entry of the same drain).
  void unmark(Connection* c) {
    std::replace(draining_.begin(), draining_.end(), c, static_cast<Connection*>(nullptr));
    std::lock_guard lock(ready_mu_);
    ready_.erase(std::remove(ready_.begin(), ready_.end(), c), ready_.end());
  }

  void adopt(std::shared_ptr<Connection> c) { conns_.insert(std::move(c)); }
  void forget(const std::shared_ptr<Connection>& c) { conns_.erase(c); }
  // This worker's thread: closes every connection, and any started later.
  void close_all();
  [[nodiscard]] bool stopping() const noexcept { return stopping_; }
  void release_guard() { guard_.reset(); }
  void run() { ctx_.run(); }

 private:
  void drain();

  // Declaration order matters: ctx_ is destroyed first, and handlers it still
  // holds may destroy connections, which unmark themselves from the lists below.
  std::mutex ready_mu_;
  std::vector<Connection*> ready_;     // guarded by ready_mu_
  bool drain_posted_ = false;          // guarded by ready_mu_
  std::vector<Connection*> draining_;  // this worker's thread only
  std::size_t drain_pos_ = 0;          // the pass in progress: draining_[drain_pos_...] still owed; this thread only
  std::unordered_set<std::shared_ptr<Connection>> conns_;           // this worker's thread only
  bool stopping_ = false;                                           // this worker's thread only
  std::vector<char> read_buffer_ = std::vector<char>(kReadBuffer);  // this worker's thread only
  std::vector<char> tls_scratch_;                                   // this worker's thread only
  asio::io_context ctx_{1};
  asio::executor_work_guard<asio::io_context::executor_type> guard_;
};

}  // namespace ringcast::broker
