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
//   7. Pacing and holds (PaceWaiter, pace_timer_) and ending_
//      (close after flush) stop reading only; no writer transition waits on
//      them. teardown() unmarks (b), closes the queue and cancels (c).
//      linger() closes the queue before flush() starts ignoring wakes, so a
//      lingering connection owes no turn.
//   8. A refused authentication's delay (delaying_, Client::take_reply_delay)
//      stops reading and writing: flush() returns at once while it runs, and
//      the pending wait of pace_timer_ owes the turn; its completion runs
//      flush() (d), as the TLS handshake's does (T1).
//
// Admission (Client::admitted: authenticated, and past the WebSocket upgrade):
//   A1. A connection the acceptor counted as unauthenticated (a TLS port, the
//       WebSocket port, or authentication configured; AuthStats) is
//       subtracted exactly once (counted_ cleared): when it is first admitted
//       after its TLS handshake, or at teardown. A RESET that de-authenticates
//       does not count it again (its auth timeout does run).
//   A2. Until admitted, auth_timer_ closes the connection at auth_timeout
//       (after the TLS handshake's own deadline), authentication configured
//       or not: a slow HTTP upgrade is held no longer than a slow AUTH.
//   A3. Until first admitted (while counted_), a connection whose queue holds
//       more than kMaxUnadmittedQueue bytes after its input's replies were
//       written as far as the socket took them (a client sending PINGs and
//       reading no PONG) is closed: what it can queue is bounded by that plus
//       one read's replies, not by the hard limit. (After a RESET the queue
//       may still hold deliveries from before; the hard limit bounds those.)
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
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "broker/core/broker_core.hpp"
#include "broker/core/client.hpp"
#include "broker/server/io_worker.hpp"
#include "broker/server/server.hpp"
#include "broker/tls/tls_context.hpp"
#include "broker/tls/tls_stream.hpp"

namespace ringcast::broker {

using tcp = asio::ip::tcp;

// Spans per writev: Linux's UIO_MAXIOV is 1024.
constexpr std::size_t kMaxIov = 1024;
// Lingering close, after our last bytes (a close frame, an HTTP error): input
// is read and discarded until the peer's EOF, for at most this long and this
// many bytes, before the socket is closed (Connection::linger).
constexpr auto kLingerTime = std::chrono::seconds(2);
constexpr std::size_t kLingerBytes = 4u << 20;
// Replies a connection not yet admitted may leave unread (A3).
constexpr std::size_t kMaxUnadmittedQueue = std::size_t{64} << 10;

// One accepted socket and the Client its listener's factory made for it: the
// connection reads into client().on_input() and writes what the client's queue
// holds; it knows nothing of the protocol.
class Connection final : public Waker, public PaceWaiter, public std::enable_shared_from_this<Connection> {
 public:
  // `unauthenticated`: the acceptor counted it in AuthStats' gauge (A1).
  Connection(BrokerCore& core, IoWorker& worker, tcp::socket sock, std::string peer, std::atomic<std::size_t>& live,
             const ClientFactory& factory, tls::TlsContext* tls_context, bool unauthenticated);

  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  // teardown() throws only when a mutex or the reactor fails (std::system_error
  // from a lock, a timer's cancel): nothing to recover, so terminating is right.
  // NOLINTNEXTLINE(bugprone-exception-escape)
  ~Connection() { teardown(); }

  // This worker's thread.
  void start();

  // Any thread (Waker contract): never blocks, never touches the socket.
  void wake() noexcept override { worker_.mark_ready(this); }

  // Any thread, under FlowControl's lock (PaceWaiter): the pressure that paused
  // our reading has ended. weak: we may be in teardown, waiting for that lock.
  void on_room() noexcept override;

  // This worker's thread: one sendmsg (writev) of up to the write budget.
  void flush();

  // This worker's thread. Idempotent.
  void shutdown();

 private:
  const BrokerConfig& core_config() const noexcept { return core_.config(); }
  [[nodiscard]] Client& client() const noexcept { return *client_; }
  [[nodiscard]] ConnectionQueue& queue() const noexcept { return client_->queue(); }
  using InputResult = Client::InputResult;

  void wait_readable();

  // One recv into the thread's buffer, parsed before the thread reads anything
  // else. Asio registers sockets edge-triggered and only this thread runs this
  // context's reactor: after a short read (everything there was read) or EAGAIN,
  // any later data raises an event the next wait sees. After a full read more may
  // be waiting with no new event, so read again, behind the handlers already
  // queued (the writes this input caused, other connections), instead of waiting.
  void read_once();

  // After some input was read: what the next read waits for.
  enum class ReadNext : std::uint8_t {
    kWaitReadable,  // the socket is drained: the next bytes raise an event
    kReadAgain,     // more may be there with no new event: read again, queued
    kWaitWritable,  // TLS: OpenSSL must write before it can read on
  };

  // The TLS read_once: SSL_read until the buffer is full or the socket is
  // drained. OpenSSL may hold records it read from the socket but not yet
  // returned, so "drained" is its WANT_READ, never a short read.
  void read_tls();

  void continue_reading(ReadNext next);

  // This worker's thread: `input` was read; `next` says how to read on.
  void handle_input(std::string_view input, ReadNext next);
  // This worker's thread: the client consumed input with result `r`, and owes
  // no reply delay (any has passed): write, then read on as `next` says.
  void after_input(InputResult r, ReadNext next);
  // This worker's thread: neither reads nor writes for `delay` (W8), then
  // after_input(r, kReadAgain).
  void delay_replies(std::chrono::milliseconds delay, InputResult r);

  // This worker's thread: the handshake of a TLS connection, bounded by the
  // handshake timeout (auth_timer_ until it completes, then the auth timeout's
  // again).
  void start_handshake();

  void handshake();

  void wait_handshake(tcp::socket::wait_type what);

  void handshake_failed(tls::HandshakeFailure why, std::string_view detail);

  // A TLS read or write after the handshake ended the connection: the peer
  // closed, a socket error, a bad or truncated record (counted and logged), or
  // a write that wants a read (no renegotiation is allowed, so that would be a
  // broken peer).
  void tls_io_failed(tls::IoStatus status);

  // This worker's thread: a `block` subscriber refused our PUBLISH or
  // SPUBLISH and max_block > 0. A paused reader, as under pacing: no reading
  // until the session lets go (session.hpp, invariant 4). The session retries
  // when a `block` queue makes room (FlowControl::wait_room_async) or at the
  // latest after kHoldSlice (flow_control.hpp, invariant 4: room made before
  // we registered is not reported); it refuses once max_block has passed.
  void hold();
  // This worker's thread: room, or the slice passed: the session tries again.
  void retry_hold();

  // This worker's thread: arms client_timer_ for the client's next deadline
  // (Client::next_timer) unless it is armed for one no later. Every QoS 1
  // delivery is pushed to the queue, which runs flush(), which asks; an ack's
  // refill is input, which asks after on_input; a store completed on another
  // thread wakes the writer (remote_wake.hpp), whose flush() asks. When the
  // timer fires, a held input is tried again (retry_hold).
  void arm_client_timer();

  // This worker's thread. False if the pressure ended meanwhile (read on).
  bool pause_reading();

  // This worker's thread: the pause ended (pressure gone, or max_stall). Reads
  // at once: the socket is edge-triggered and may hold data already.
  void resume_reading();

  // This worker's thread: our last bytes are written (Ending::kAfterFlush).
  // close() on a socket with unread input would send a reset instead of a FIN,
  // and a reset can make the peer's kernel drop what we wrote before the peer
  // read it: the close code, the HTTP response. So: refuse further frames,
  // send a FIN after the last bytes (shutdown SHUT_WR), read and discard until
  // the peer's EOF, kLingerTime or kLingerBytes, then close.
  void linger();

  // This worker's thread, while lingering: reads and drops what the peer sent.
  void discard_input();

  // Connections not admitted get auth_timeout to be (A2), counted from
  // connect or from the RESET that de-authenticated them; the first admission
  // leaves the unauthenticated count (A1).
  void update_auth_timer();

  void advance(std::size_t n);

  void clear_batch();

  void teardown();

  friend class IoWorker;
  BrokerCore& core_;
  IoWorker& worker_;
  tcp::socket sock_;
  asio::steady_timer auth_timer_;    // auth_timeout; then, while lingering, kLingerTime
  asio::steady_timer pace_timer_;    // ends a pause after max_stall, a hold's slice, or a reply delay (W8)
  asio::steady_timer client_timer_;  // the client's own deadline (QoS 1 redelivery)
  std::chrono::nanoseconds client_timer_due_{0};
  bool client_timer_armed_ = false;
  std::atomic<std::size_t>& live_;
  std::chrono::steady_clock::time_point paused_at_{};
  bool paused_ = false;           // reading stopped for pacing
  bool held_ = false;             // reading stopped for a held publish (hold())
  bool delaying_ = false;         // reading and writing stopped for a reply delay (W8)
  bool counted_ = false;          // in AuthStats' unauthenticated gauge (A1)
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

}  // namespace ringcast::broker
