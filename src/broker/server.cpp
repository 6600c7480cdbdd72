// The network side of the broker (server.hpp): Boost.Asio, one io_context per
// I/O thread, connections pinned to one thread each (round-robin at accept), so a
// connection's socket, client and writer state are touched by one thread only.
//
// Publishers (any thread) reach a connection through its client's queue and
// on_queue_ready(), which wakes the connection (Waker): it appends itself to its
// thread's ready list; the thread's
// drain handler gives each ready connection one writev of up to the write budget,
// then moves on, so one busy connection cannot starve the others on its thread.
// A drain pass over the ready list runs in slices of kDrainSlice connections,
// each slice one handler: the rest of the pass is posted behind the handlers
// queued meanwhile (accepts, other sockets' reads, timers), so a fan-out to
// tens of thousands of connections does not keep a newcomer waiting for all
// of it (docs/broker.md, "Delivery").
// No socket is written while the subscription-index lock is held: publishers only
// push frame references and mark connections ready.
//
// Writer progress: a connection with queued frames is never forgotten. Its
// queue's armed_ flag (connection_queue.hpp, invariant 3) means "a writer turn
// is owed", and
//   W. while the queue is armed, at least one of these owes that turn:
//      (a) the pusher whose push returned wake and has not yet called
//          mark_ready; (b) an entry for the connection in its worker's ready_,
//          or in draining_ at or after drain_pos_ (the pass in progress);
//          (c) the pending
//          async_wait(write) of a parked writer (waiting_writable_); (d) a
//          flush() running on the connection's thread. (Redundant extra ready
//          entries are allowed: their flush pops nothing and disarms.)
//      Frames queued, a loss notice owed or a queue closed by its policy
//      always leave the queue armed.
// Every transition keeps W:
//   1. push: only the push that arms a disarmed queue returns wake (also the
//      one that closes it); the pusher (SubscriptionIndex deliver,
//      Client::push_reply) calls on_queue_ready -> mark_ready: (a) -> (b).
//   2. each drain clears drain_posted_ and, once the pass in progress is
//      done (drain_pos_ at its end), swaps ready_ into draining_, under one
//      lock: a mark_ready after that posts a new drain, so no entry lands in
//      a list that no drain will visit. A drain ends by making sure one is
//      posted (posting it itself unless a mark_ready did) while entries
//      remain after drain_pos_ or in ready_ (a mark_ready that found a
//      continuation posted did not post); that drain continues the pass
//      before it swaps.
//   3. flush while parked returns (c stays); flush that pops nothing disarms
//      under the queue lock that saw it empty, so the next push wakes (1).
//   4. a partial write or EAGAIN parks: async_wait(write) (c). Asio starts a
//      wait with EPOLL_CTL_MOD (Boost 1.74 epoll_reactor::start_op, no
//      speculative run for waits), which reports a socket that became
//      writable between our EAGAIN and the registration: the edge-triggered
//      registration loses no wakeup. The wait's completion runs flush (d);
//      an error closes.
//   5. a batch written whole: complete() under the queue lock either reports
//      more (frames, notice, closed) and flush marks ready (b), or disarms in
//      the critical section that saw the queue empty (as in 3).
//   6. read_once's own flush (replies first) is one more (d); the ready entry
//      it leaves behind is a redundant one (W).
//   7. Pacing (PaceWaiter, pace_timer_), holds (hold_timer_) and ending_
//      (close after flush) stop reading only; no writer transition waits on
//      them. teardown() unmarks (b), closes the queue and cancels (c).
//      linger() closes the queue before flush() starts ignoring wakes, so a
//      lingering connection owes no turn.
//
// Ownership and lifetime (who destroys a Client, and when):
//   L1. A Connection owns its Client (unique_ptr, declared last, so destroyed
//       first); nothing else owns or deletes a Client.
//   L2. A Connection is held by shared_ptr: by its worker's conns_ from
//       start() until shutdown(), and by every pending handler it armed
//       (reads, writes, timers); one that runs after teardown() does nothing
//       (its wait was cancelled, or it checks closed_). The last holder to go
//       destroys it, on its worker's thread, or after that thread has joined
//       (the io_context's destructor drops pending handlers).
//       Raw pointers to it live only in the ready lists (W), which teardown()
//       removes before it can die; on_room() holds a weak_ptr.
//   L3. teardown() (from shutdown() or ~Connection, whichever runs first)
//       detaches the Client before the socket is closed: out of the index and
//       the registry, so neither a publisher nor CLIENT LIST reaches it
//       (client.hpp, invariant 1), and ~Client finds it detached.
// Running out of descriptors changes none of this (docs/broker.md, "Out of
// descriptors", for the UBSan report that looked like a double destruction).
//
// TLS (Listener::tls, tls/tls_stream.hpp; docs/broker.md, "TLS"): the same
// waits and turns, with OpenSSL on the connection's socket.
//   T1. Until the handshake completes (handshaking_) nothing is read for the
//       client and flush() returns at once; the handshake's completion runs
//       flush() (W, d), then read_once(). Its deadline is auth_timer_.
//   T2. A read is "drained" only when OpenSSL says WANT_READ (recv saw
//       EAGAIN): OpenSSL may hold whole records it took off the socket, which
//       no edge-triggered wait would report, so a TLS read never stops at a
//       short read.
//   T3. A write the socket could not take (WANT_WRITE) parks exactly as a
//       partial sendmsg does (4); iov_ advances only by the records written,
//       so the retry hands OpenSSL the same record again. With kernel TLS
//       (ktls_send_) writes are the plain sendmsg.

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <system_error>
#include <thread>
#include <unordered_set>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <fmt/format.h>

#include "broker/server.hpp"
#include "broker/tls/tls_stream.hpp"

namespace ringcast::broker {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

// Asio opens and accepts sockets without close-on-exec, so a process that
// embeds the broker and starts children would hand them its listeners and
// clients. Set right after open/accept; a fork by another thread in between
// can still inherit the descriptor (Asio offers no accept4).
void set_close_on_exec(int fd) noexcept {
  const int flags = ::fcntl(fd, F_GETFD);
  if (flags >= 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

// An accept that failed for lack of descriptors or memory fails again at once
// while nothing closes: retrying at once would spin the acceptor thread.
bool out_of_resources(const boost::system::error_code& ec) noexcept {
  const int e = ec.value();
  return ec.category() == boost::system::system_category() &&
         (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM);
}
constexpr auto kAcceptBackoff = std::chrono::milliseconds(50);

// Spans per writev: Linux's UIO_MAXIOV is 1024.
constexpr std::size_t kMaxIov = 1024;
// Connections one drain handler flushes (one writev each) before it posts the
// rest of the pass behind whatever else is queued on the thread: a newcomer
// (accept, SUBSCRIBE) waits for at most two slices, not a whole fan-out. A
// slice of 64 sendmsg calls takes a few hundred microseconds; the cost of
// slicing is one post per 64 connections.
constexpr std::size_t kDrainSlice = 64;
// One read buffer per I/O thread, not per connection: a connection's bytes are
// parsed (and copied where kept) before the thread reads another socket.
constexpr std::size_t kReadBuffer = std::size_t{256} * 1024;
// Lingering close, after our last bytes (a close frame, an HTTP error): input
// is read and discarded until the peer's EOF, for at most this long and this
// many bytes, before the socket is closed (Connection::linger).
constexpr auto kLingerTime = std::chrono::seconds(2);
constexpr std::size_t kLingerBytes = 4u << 20;

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

// One accepted socket and the Client its listener's factory made for it: the
// connection reads into client().on_input() and writes what the client's queue
// holds; it knows nothing of the protocol.
class Connection final : public Waker, public PaceWaiter, public std::enable_shared_from_this<Connection> {
 public:
  Connection(BrokerCore& core, IoWorker& worker, tcp::socket sock, std::string peer, std::atomic<std::size_t>& live,
             const ClientFactory& factory, tls::TlsContext* tls_context)
      : core_(core),
        worker_(worker),
        sock_(std::move(sock)),
        auth_timer_(worker.context()),
        pace_timer_(worker.context()),
        hold_timer_(worker.context()),
        client_timer_(worker.context()),
        live_(live) {
    // batch_ and iov_ start empty and grow with the largest batch this
    // connection writes, then keep their capacity: an idle connection holds
    // none of it (docs/benchmarks.md, idle memory).
    if (tls_context != nullptr) {
      tls_ = tls::TlsStream::make(tls_context->current(), sock_.native_handle());
      handshaking_ = true;
    }
    client_ = factory(core, std::move(peer), *this);
  }

  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  // teardown() throws only when a mutex or the reactor fails (std::system_error
  // from a lock, a timer's cancel): nothing to recover, so terminating is right.
  // NOLINTNEXTLINE(bugprone-exception-escape)
  ~Connection() { teardown(); }

  // This worker's thread.
  void start() {
    worker_.adopt(shared_from_this());
    if (worker_.stopping()) {  // accepted while the broker was stopping
      shutdown();
      return;
    }
    boost::system::error_code ec;
    sock_.set_option(tcp::no_delay(true), ec);
    sock_.non_blocking(true, ec);
    if (handshaking_) {
      start_handshake();
      return;
    }
    update_auth_timer();
    wait_readable();
  }

  // Any thread (Waker contract): never blocks, never touches the socket.
  void wake() noexcept override { worker_.mark_ready(this); }

  // Any thread, under FlowControl's lock (PaceWaiter): the pressure that paused
  // our reading has ended. weak: we may be in teardown, waiting for that lock.
  void on_room() noexcept override {
    asio::post(worker_.context(), [w = weak_from_this()] {
      if (auto self = w.lock()) self->resume_reading();
    });
  }

  // This worker's thread: one sendmsg (writev) of up to the write budget.
  void flush() {
    if (closed_ || ending_ == Ending::kLingering) return;
    // Nothing is written before the handshake; its completion flushes (W, d).
    if (handshaking_) return;
    arm_client_timer();
    if (waiting_writable_) {
      // Parked on a full socket; only a disconnect verdict needs action now.
      if (queue().closed()) shutdown();
      return;
    }
    if (iov_.empty()) {
      const PopResult r = queue().pop_batch(core_config().write_budget_bytes, kMaxIov, batch_);
      if (r.closed) {
        shutdown();
        return;
      }
      if (r.frames == 0) {  // the pop disarmed the queue
        if (ending_ == Ending::kAfterFlush) linger();
        return;
      }
      batch_bytes_ = r.bytes;
      client().count_sent(r.frames);
      for (const FrameSpan& f : batch_) iov_.push_back(iovec{const_cast<char*>(f.data()), f.size()});
    }
    if (tls_ && !ktls_send_) {
      // User-space TLS: the shared frames are encrypted for this connection,
      // gathered into records (tls_stream.hpp).
      const tls::IoResult w = tls_->write(iov_.data() + iov_pos_, iov_.size() - iov_pos_, worker_.tls_scratch());
      advance(w.bytes);
      if (w.status != tls::IoStatus::kOk && w.status != tls::IoStatus::kWantWrite) {
        tls_io_failed(w.status);
        return;
      }
    }
    for (; !tls_ || ktls_send_;) {
      // sendmsg is writev plus flags: MSG_NOSIGNAL keeps a vanished peer an EPIPE
      // instead of a SIGPIPE that would kill an embedding process. With kTLS
      // the kernel encrypts what it is given, into records of its own.
      msghdr msg{};
      msg.msg_iov = iov_.data() + iov_pos_;
      msg.msg_iovlen = iov_.size() - iov_pos_;
      const ssize_t n = ::sendmsg(sock_.native_handle(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n >= 0) {
        advance(static_cast<std::size_t>(n));
        break;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      shutdown();
      return;
    }
    if (iov_pos_ < iov_.size()) {
      // The kernel buffer is full: wait for room rather than spin.
      waiting_writable_ = true;
      sock_.async_wait(tcp::socket::wait_write, [self = shared_from_this()](const boost::system::error_code& e) {
        self->waiting_writable_ = false;
        if (e) {
          self->shutdown();
          return;
        }
        self->flush();
      });
      return;
    }
    // Batch written. With more to send, go to the back of the ready list (the
    // queue stays armed) so the other connections of this thread get their turn.
    const bool more = queue().complete(batch_bytes_);
    clear_batch();
    if (more) {
      worker_.mark_ready(this);
    } else if (ending_ == Ending::kAfterFlush) {
      linger();
    }
  }

  // This worker's thread. Idempotent.
  void shutdown() {
    if (closed_) return;
    const auto self = shared_from_this();  // forget() may drop the last other reference
    teardown();
    worker_.forget(self);
  }

 private:
  const BrokerConfig& core_config() const noexcept { return core_.config(); }
  [[nodiscard]] Client& client() const noexcept { return *client_; }
  [[nodiscard]] ConnectionQueue& queue() const noexcept { return client_->queue(); }
  using InputResult = Client::InputResult;

  void wait_readable() {
    sock_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](const boost::system::error_code& ec) {
      if (self->closed_) return;
      if (ec) {
        self->shutdown();
        return;
      }
      self->read_once();
    });
  }

  // One recv into the thread's buffer, parsed before the thread reads anything
  // else. Asio registers sockets edge-triggered and only this thread runs this
  // context's reactor: after a short read (everything there was read) or EAGAIN,
  // any later data raises an event the next wait sees. After a full read more may
  // be waiting with no new event, so read again, behind the handlers already
  // queued (the writes this input caused, other connections), instead of waiting.
  void read_once() {
    if (tls_) {
      read_tls();
      return;
    }
    const std::span<char> buf = worker_.read_buffer();
    ssize_t n = 0;
    do {
      n = ::recv(sock_.native_handle(), buf.data(), buf.size(), MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      wait_readable();
      return;
    }
    if (n <= 0) {  // the peer closed, or an error
      shutdown();
      return;
    }
    const auto next = static_cast<std::size_t>(n) < buf.size() ? ReadNext::kWaitReadable : ReadNext::kReadAgain;
    handle_input(std::string_view(buf.data(), static_cast<std::size_t>(n)), next);
  }

  // After some input was read: what the next read waits for.
  enum class ReadNext : std::uint8_t {
    kWaitReadable,  // the socket is drained: the next bytes raise an event
    kReadAgain,     // more may be there with no new event: read again, queued
    kWaitWritable,  // TLS: OpenSSL must write before it can read on
  };

  // The TLS read_once: SSL_read until the buffer is full or the socket is
  // drained. OpenSSL may hold records it read from the socket but not yet
  // returned, so "drained" is its WANT_READ, never a short read.
  void read_tls() {
    if (tls_eof_) {
      shutdown();
      return;
    }
    const std::span<char> buf = worker_.read_buffer();
    const tls::IoResult r = tls_->read(buf);
    ReadNext next = ReadNext::kReadAgain;
    switch (r.status) {
      case tls::IoStatus::kOk:
        break;
      case tls::IoStatus::kWantRead:
        next = ReadNext::kWaitReadable;
        break;
      case tls::IoStatus::kWantWrite:
        next = ReadNext::kWaitWritable;
        break;
      case tls::IoStatus::kEof:
        tls_eof_ = true;  // the next read_once closes, once this input is served
        break;
      case tls::IoStatus::kError:
        // Input before a bad record is not served: it may be cut short too.
        tls_io_failed(r.status);
        return;
    }
    if (r.bytes == 0) {
      continue_reading(next);
      return;
    }
    handle_input(std::string_view(buf.data(), r.bytes), next);
  }

  void continue_reading(ReadNext next) {
    switch (next) {
      case ReadNext::kWaitReadable:
        wait_readable();
        return;
      case ReadNext::kReadAgain:
        asio::post(worker_.context(), [self = shared_from_this()] {
          if (!self->closed_) self->read_once();
        });
        return;
      case ReadNext::kWaitWritable:
        sock_.async_wait(tcp::socket::wait_write, [self = shared_from_this()](const boost::system::error_code& ec) {
          if (self->closed_) return;
          if (ec) {
            self->shutdown();
            return;
          }
          self->read_once();
        });
        return;
    }
  }

  // This worker's thread: `input` was read; `next` says how to read on.
  void handle_input(std::string_view input, ReadNext next) {
    const InputResult r = client().on_input(input);
    if (r == InputResult::kClose) {
      // Stop reading; flush() lingers, then closes, once the replies are out.
      ending_ = Ending::kAfterFlush;
      flush();
      return;
    }
    // Our own replies go out now, not at our turn in the ready list, which comes
    // after every subscriber this input's publishes marked on this thread: a
    // pipelining publisher then sends its next commands while we write the
    // fan-out, instead of waiting for all of it (Redis, too, writes the client it
    // replied to last first). Our entry in the ready list stays; its turn pops
    // whatever is queued by then, or nothing, which disarms an empty queue
    // (connection_queue.hpp, invariant 3), so an extra flush is harmless.
    flush();
    if (closed_) return;
    if (r == InputResult::kHeld) {
      hold();
      return;
    }
    update_auth_timer();
    arm_client_timer();
    // Publisher pacing (docs/broker.md): a connection that published while some
    // subscriber queue is over the pace mark stops being read (TCP back-pressure
    // reaches the client) until the pressure ends or max_stall passes.
    if (client().take_published() && core_.flow().pressured() && pause_reading()) return;
    continue_reading(next);
  }

  // This worker's thread: the handshake of a TLS connection, bounded by the
  // handshake timeout (auth_timer_ until it completes, then the auth timeout's
  // again).
  void start_handshake() {
    if (!tls_) {  // OpenSSL could not allocate the connection's state
      core_.tls_stats().log(fmt::format("{}: cannot allocate TLS state; closed", client().peer()));
      shutdown();
      return;
    }
    auth_timer_.expires_after(core_config().tls.handshake_timeout);
    auth_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& e) {
      if (e || self->closed_ || !self->handshaking_) return;
      self->handshake_failed(tls::HandshakeFailure::kTimeout, "handshake not complete within the timeout");
    });
    handshake();
  }

  void handshake() {
    switch (tls_->handshake()) {
      case tls::HandshakeStep::kDone:
        break;
      case tls::HandshakeStep::kWantRead:
        wait_handshake(tcp::socket::wait_read);
        return;
      case tls::HandshakeStep::kWantWrite:
        wait_handshake(tcp::socket::wait_write);
        return;
      case tls::HandshakeStep::kFailed:
        handshake_failed(tls_->failure(), tls_->error());
        return;
    }
    handshaking_ = false;
    auth_timer_.cancel();  // the handshake deadline; update_auth_timer arms the auth one
    core_.tls_stats().count_handshake();
    ktls_send_ = tls_->ktls_send();
    if (ktls_send_) core_.tls_stats().count_ktls_send();
    update_auth_timer();
    flush();  // anything queued during the handshake (W, d)
    if (closed_) return;
    read_once();  // the client's first records may have come with its Finished
  }

  void wait_handshake(tcp::socket::wait_type what) {
    sock_.async_wait(what, [self = shared_from_this()](const boost::system::error_code& ec) {
      if (self->closed_) return;
      if (ec) {
        self->handshake_failed(tls::HandshakeFailure::kAborted, ec.message());
        return;
      }
      self->handshake();
    });
  }

  void handshake_failed(tls::HandshakeFailure why, std::string_view detail) {
    core_.tls_stats().count_failure(why);
    core_.tls_stats().log(
        fmt::format("{}: handshake failed ({}): {}; closed", client().peer(), tls::to_string(why), detail));
    shutdown();
  }

  // A TLS read or write after the handshake ended the connection: the peer
  // closed, a socket error, a bad or truncated record (counted and logged), or
  // a write that wants a read (no renegotiation is allowed, so that would be a
  // broken peer).
  void tls_io_failed(tls::IoStatus status) {
    if (status == tls::IoStatus::kError && tls_->bad_record()) {
      core_.tls_stats().count_record_error();
      core_.tls_stats().log(fmt::format("{}: {}; closed", client().peer(), tls_->error()));
    }
    shutdown();
  }

  // This worker's thread: a `block` subscriber refused our PUBLISH and
  // max_block > 0. No reading until the session lets go (session.hpp,
  // invariant 4); it is retried every kHoldRetry, a rare path that needs no
  // wake-up from the subscribers' writers.
  void hold() {
    static constexpr auto kHoldRetry = std::chrono::milliseconds(1);
    hold_timer_.expires_after(kHoldRetry);
    hold_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& e) {
      if (e || self->closed_) return;
      const InputResult r = self->client().retry_held();
      if (r == InputResult::kHeld) {
        self->hold();
      } else if (r == InputResult::kClose) {
        self->ending_ = Ending::kAfterFlush;
        self->flush();
      } else {
        self->read_once();
      }
    });
  }

  // This worker's thread: arms client_timer_ for the client's next deadline
  // (Client::next_timer) unless it is armed for one no later. Every QoS 1
  // delivery is pushed to the queue, which runs flush(), which asks; an ack's
  // refill is input, which asks after on_input.
  void arm_client_timer() {
    const std::optional<std::chrono::nanoseconds> due = client().next_timer();
    if (!due || (client_timer_armed_ && client_timer_due_ <= *due)) return;
    client_timer_armed_ = true;
    client_timer_due_ = *due;
    // expires_at cancels a wait armed for later: its handler sees operation_aborted.
    client_timer_.expires_at(
        std::chrono::steady_clock::time_point(std::chrono::duration_cast<std::chrono::steady_clock::duration>(*due)));
    client_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& e) {
      if (e || self->closed_) return;
      self->client_timer_armed_ = false;
      self->client().on_timer();
      self->arm_client_timer();
    });
  }

  // This worker's thread. False if the pressure ended meanwhile (read on).
  bool pause_reading() {
    if (!core_.flow().wait_async(*this)) return false;
    paused_ = true;
    paused_at_ = std::chrono::steady_clock::now();
    pace_timer_.expires_after(core_config().max_stall);
    pace_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& e) {
      if (!e) self->resume_reading();
    });
    return true;
  }

  // This worker's thread: the pause ended (pressure gone, or max_stall). Reads
  // at once: the socket is edge-triggered and may hold data already.
  void resume_reading() {
    if (!paused_ || closed_) return;
    paused_ = false;
    core_.flow().cancel(*this);
    pace_timer_.cancel();
    core_.flow().record_stall(std::chrono::steady_clock::now() - paused_at_);
    read_once();
  }

  // This worker's thread: our last bytes are written (Ending::kAfterFlush).
  // close() on a socket with unread input would send a reset instead of a FIN,
  // and a reset can make the peer's kernel drop what we wrote before the peer
  // read it: the close code, the HTTP response. So: refuse further frames,
  // send a FIN after the last bytes (shutdown SHUT_WR), read and discard until
  // the peer's EOF, kLingerTime or kLingerBytes, then close.
  void linger() {
    ending_ = Ending::kLingering;
    queue().close();  // frames pushed from now on are discarded
    if (tls_) tls_->close_notify();
    boost::system::error_code ec;
    sock_.shutdown(tcp::socket::shutdown_send, ec);
    if (ec) {
      shutdown();
      return;
    }
    // The auth timer becomes the linger deadline (a pending auth timeout is
    // cancelled by the new expiry).
    auth_timer_armed_ = false;
    auth_timer_.expires_after(kLingerTime);
    auth_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& e) {
      if (!e) self->shutdown();
    });
    discard_input();
  }

  // This worker's thread, while lingering: reads and drops what the peer sent.
  void discard_input() {
    const std::span<char> buf = worker_.read_buffer();
    for (;;) {
      const ssize_t n = ::recv(sock_.native_handle(), buf.data(), buf.size(), MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      lingered_bytes_ += n > 0 ? static_cast<std::uint32_t>(n) : 0;
      // EOF (the peer sends no more, so closing resets nothing), an error, or
      // the byte bound.
      if (n <= 0 || lingered_bytes_ >= kLingerBytes) {
        shutdown();
        return;
      }
    }
    sock_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](const boost::system::error_code& ec) {
      if (self->closed_) return;
      if (ec) {
        self->shutdown();
        return;
      }
      self->discard_input();
    });
  }

  // Unauthenticated connections get auth_timeout to authenticate, counted from
  // connect or from the RESET that de-authenticated them.
  void update_auth_timer() {
    if (client().authenticated()) {
      if (auth_timer_armed_) {
        auth_timer_.cancel();
        auth_timer_armed_ = false;
      }
      return;
    }
    if (auth_timer_armed_) return;
    auth_timer_armed_ = true;
    auth_timer_.expires_after(core_config().auth_timeout);
    auth_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& e) {
      if (e) return;
      self->auth_timer_armed_ = false;
      if (!self->client().authenticated()) self->shutdown();
    });
  }

  void advance(std::size_t n) {
    while (n > 0 && iov_pos_ < iov_.size()) {
      iovec& v = iov_[iov_pos_];
      if (n >= v.iov_len) {
        n -= v.iov_len;
        ++iov_pos_;
      } else {
        v.iov_base = static_cast<char*>(v.iov_base) + n;
        v.iov_len -= n;
        n = 0;
      }
    }
  }

  void clear_batch() {
    batch_bytes_ = 0;
    batch_.clear();  // drops the frame references
    iov_.clear();
    iov_pos_ = 0;
  }

  void teardown() {
    if (closed_) return;
    closed_ = true;
    client().detach();  // out of the index: no publisher can wake us any more
    worker_.unmark(this);
    boost::system::error_code ec;
    auth_timer_.cancel();
    if (paused_) {
      paused_ = false;
      core_.flow().cancel(*this);
      pace_timer_.cancel();
    }
    hold_timer_.cancel();
    client_timer_.cancel();
    sock_.close(ec);
    if (batch_bytes_ > 0) queue().release(batch_bytes_);
    clear_batch();
    // relaxed: a connection count for the max_connections check; approximate is fine.
    live_.fetch_sub(1, std::memory_order_relaxed);
  }

  friend class IoWorker;
  BrokerCore& core_;
  IoWorker& worker_;
  tcp::socket sock_;
  asio::steady_timer auth_timer_;    // auth_timeout; then, while lingering, kLingerTime
  asio::steady_timer pace_timer_;    // ends a pause after max_stall
  asio::steady_timer hold_timer_;    // retries a held PUBLISH (block policy)
  asio::steady_timer client_timer_;  // the client's own deadline (QoS 1 redelivery)
  std::chrono::nanoseconds client_timer_due_{0};
  bool client_timer_armed_ = false;
  std::atomic<std::size_t>& live_;
  std::chrono::steady_clock::time_point paused_at_{};
  bool paused_ = false;           // reading stopped for pacing
  std::vector<FrameSpan> batch_;  // frames handed to the kernel, held until written
  std::vector<iovec> iov_;
  std::size_t iov_pos_ = 0;
  std::size_t batch_bytes_ = 0;
  std::uint32_t lingered_bytes_ = 0;  // read and discarded while lingering (< 2 x kLingerBytes)
  bool waiting_writable_ = false;
  bool auth_timer_armed_ = false;
  // kAfterFlush: the client is done (kClose); close once the queued frames are
  // written. kLingering: they are; input is discarded until close (linger()).
  enum class Ending : std::uint8_t { kNo, kAfterFlush, kLingering };
  Ending ending_ = Ending::kNo;
  bool closed_ = false;
  // TLS connections only (Listener::tls): OpenSSL's state; before and after
  // the handshake (handshaking_) reads and writes go through it, unless the
  // kernel encrypts writes (ktls_send_: sendmsg as on a plain socket).
  std::unique_ptr<tls::TlsStream> tls_;
  bool handshaking_ = false;
  bool ktls_send_ = false;
  bool tls_eof_ = false;  // the peer closed after the input being served
  // Declared last, so destroyed first: teardown() has detached it already.
  std::unique_ptr<Client> client_;
};

void IoWorker::drain() {
  {
    std::lock_guard lock(ready_mu_);
    drain_posted_ = false;
    if (drain_pos_ == draining_.size()) {  // the last pass is done: start the next
      draining_.clear();
      drain_pos_ = 0;
      draining_.swap(ready_);  // ready_ keeps the old capacity: no allocation
    }
  }
  // Connections in draining_ are alive: each unmarks itself (here too) in
  // teardown, before it can die. flush() never adds to draining_.
  const std::size_t end = std::min(draining_.size(), drain_pos_ + kDrainSlice);
  while (drain_pos_ < end) {
    Connection* c = draining_[drain_pos_++];
    if (c != nullptr) c->flush();
  }
  if (drain_pos_ == draining_.size()) {  // pass done: teardown's unmark() has nothing to scan
    draining_.clear();
    drain_pos_ = 0;
  }
  // More owed (the rest of this pass, or entries that a mark_ready added to
  // ready_ while an earlier continuation was posted, so it did not post):
  // make sure a drain is posted.
  bool post = false;
  {
    std::lock_guard lock(ready_mu_);
    post = !drain_posted_ && (drain_pos_ < draining_.size() || !ready_.empty());
    drain_posted_ = drain_posted_ || post;
  }
  if (post) asio::post(ctx_, [this] { drain(); });
}

void IoWorker::close_all() {
  stopping_ = true;
  std::vector<std::shared_ptr<Connection>> all(conns_.begin(), conns_.end());
  for (auto& c : all) c->shutdown();
}

}  // namespace

struct Server::Impl {
  Impl(BrokerCore& c, Server& s) : core(c), server(s) {}

  struct Acceptor {
    Acceptor(asio::io_context& ctx, Listener l) : acceptor(ctx), backoff(ctx), spec(std::move(l)) {}
    tcp::acceptor acceptor;
    asio::steady_timer backoff;  // out of descriptors: the next accept waits kAcceptBackoff
    Listener spec;
  };

  void accept_next(Acceptor& a) {
    IoWorker& w = *workers[next_worker];
    next_worker = (next_worker + 1) % workers.size();
    a.acceptor.async_accept(w.context(), [this, &a, &w](const boost::system::error_code& ec, tcp::socket sock) {
      if (ec) {
        if (ec == asio::error::operation_aborted || server.stopped()) return;
        if (!out_of_resources(ec)) {
          accept_next(a);  // the peer gave up (ECONNABORTED, ...): next one
          return;
        }
        // Keep serving the connections we have; newcomers wait in the listen
        // backlog until a descriptor frees up.
        core.count_accept_backoff();
        a.backoff.expires_after(kAcceptBackoff);
        a.backoff.async_wait([this, &a](const boost::system::error_code& wec) {
          if (!wec && !server.stopped()) accept_next(a);
        });
        return;
      }
      set_close_on_exec(sock.native_handle());
      core.count_connection();
      // relaxed: only this acceptor thread increments; the bound is approximate
      // while connections close concurrently, which errs on the side of refusing.
      if (live.load(std::memory_order_relaxed) >= core.config().max_connections) {
        core.count_rejected();
        boost::system::error_code ignored;
        sock.non_blocking(true, ignored);
        if (a.spec.tls == nullptr) sock.write_some(asio::buffer(a.spec.refusal), ignored);
        sock.close(ignored);
        accept_next(a);
        return;
      }
      live.fetch_add(1, std::memory_order_relaxed);
      boost::system::error_code pec;
      const auto ep = sock.remote_endpoint(pec);
      std::string peer = pec ? std::string("?") : ep.address().to_string() + ":" + std::to_string(ep.port());
      // Made on the worker's thread: the client belongs to it from the start.
      asio::post(w.context(), [this, &a, &w, sock = std::move(sock), peer = std::move(peer)]() mutable {
        auto conn =
            std::make_shared<Connection>(core, w, std::move(sock), std::move(peer), live, a.spec.factory, a.spec.tls);
        conn->start();
      });
      accept_next(a);
    });
  }

  BrokerCore& core;
  Server& server;
  asio::io_context accept_ctx{1};
  std::vector<std::unique_ptr<Acceptor>> acceptors;
  std::vector<std::unique_ptr<IoWorker>> workers;
  std::vector<std::thread> threads;
  std::size_t next_worker = 0;
  std::atomic<std::size_t> live{0};
  std::mutex stop_mu;
  bool joined = false;
};

Server::Server(BrokerCore& core, unsigned io_threads) : impl_(std::make_unique<Impl>(core, *this)) {
  for (unsigned i = 0; i < io_threads; ++i) impl_->workers.push_back(std::make_unique<IoWorker>());
}

Server::~Server() {
  stop();
  wait();
}

tl::expected<std::uint16_t, BrokerError> Server::listen(Listener listener) {
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(listener.address, ec);
  if (ec) return tl::unexpected(BrokerError{BrokerError::Code::kBadAddress, 0, listener.address});
  const tcp::endpoint ep(address, listener.port);
  const std::string where = listener.address + ":" + std::to_string(listener.port);
  auto bind_error = [&](const boost::system::error_code& e) {
    return tl::unexpected(BrokerError{BrokerError::Code::kBind, e.value(), where});
  };
  auto a = std::make_unique<Impl::Acceptor>(impl_->accept_ctx, std::move(listener));
  a->acceptor.open(ep.protocol(), ec);
  if (ec) return bind_error(ec);
  set_close_on_exec(a->acceptor.native_handle());
  a->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  a->acceptor.bind(ep, ec);
  if (ec) return bind_error(ec);
  a->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return bind_error(ec);
  const std::uint16_t port = a->acceptor.local_endpoint(ec).port();
  impl_->acceptors.push_back(std::move(a));
  return port;
}

tl::expected<void, BrokerError> Server::start() {
  for (auto& a : impl_->acceptors) impl_->accept_next(*a);
  try {
    Impl* raw = impl_.get();
    impl_->threads.emplace_back([raw] { raw->accept_ctx.run(); });
    for (auto& w : impl_->workers) {
      IoWorker* wp = w.get();
      impl_->threads.emplace_back([wp] { wp->run(); });
    }
  } catch (const std::system_error& e) {
    stop();
    wait();
    return tl::unexpected(BrokerError{BrokerError::Code::kThread, e.code().value(), "io thread"});
  }
  return {};
}

void Server::stop() noexcept {
  // release: pairs with the acquire load in stopped().
  if (stopped_.exchange(true, std::memory_order_acq_rel)) return;
  asio::post(impl_->accept_ctx, [impl = impl_.get()] {
    boost::system::error_code ec;
    for (auto& a : impl->acceptors) {
      a->acceptor.close(ec);
      a->backoff.cancel();
    }
  });
  for (auto& w : impl_->workers) {
    IoWorker* wp = w.get();
    asio::post(wp->context(), [wp] {
      wp->close_all();
      wp->release_guard();
    });
  }
}

void Server::wait() noexcept {
  std::lock_guard lock(impl_->stop_mu);
  if (impl_->joined) return;
  for (auto& t : impl_->threads) t.join();
  impl_->joined = true;
}

}  // namespace ringcast::broker
