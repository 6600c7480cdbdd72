#include "broker/server/connection.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include <boost/asio/post.hpp>

#include <fmt/format.h>

namespace ringcast::broker {

Connection::Connection(BrokerCore& core, IoWorker& worker, tcp::socket sock, std::string peer,
                       std::atomic<std::size_t>& live, const ClientFactory& factory, tls::TlsContext* tls_context,
                       bool unauthenticated)
    : core_(core),
      worker_(worker),
      sock_(std::move(sock)),
      auth_timer_(worker.context()),
      pace_timer_(worker.context()),
      client_timer_(worker.context()),
      live_(live),
      counted_(unauthenticated) {
  // batch_ and iov_ start empty and grow with the largest batch this
  // connection writes, then keep their capacity: an idle connection holds
  // none of it (docs/benchmarks.md, idle memory).
  if (tls_context != nullptr) {
    tls_ = tls::TlsStream::make(tls_context->current(), sock_.native_handle());
    handshaking_ = true;
  }
  client_ = factory(core, std::move(peer), *this);
}

void Connection::start() {
  worker_.adopt(shared_from_this());
  if (worker_.stopping()) {  // accepted while the broker was stopping
    shutdown();
    return;
  }
  boost::system::error_code ec;
  sock_.set_option(tcp::no_delay(true), ec);
  if (const std::size_t bytes = core_config().send_buffer_bytes; bytes > 0) {
    sock_.set_option(asio::socket_base::send_buffer_size(static_cast<int>(bytes)), ec);
  }
  sock_.non_blocking(true, ec);
  if (handshaking_) {
    start_handshake();
    return;
  }
  update_auth_timer();
  wait_readable();
}

void Connection::on_room() noexcept {
  asio::post(worker_.context(), [w = weak_from_this()] {
    auto self = w.lock();
    if (!self) return;
    if (self->held_) {
      self->retry_hold();
    } else {
      self->resume_reading();
    }
  });
}

void Connection::flush() {
  if (closed_ || ending_ == Ending::kLingering) return;
  // Nothing is written before the handshake, or during a reply delay; their
  // completion flushes (W, d; W8).
  if (handshaking_ || delaying_) return;
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

void Connection::shutdown() {
  if (closed_) return;
  const auto self = shared_from_this();  // forget() may drop the last other reference
  teardown();
  worker_.forget(self);
}

void Connection::wait_readable() {
  sock_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](const boost::system::error_code& ec) {
    if (self->closed_) return;
    if (ec) {
      self->shutdown();
      return;
    }
    self->read_once();
  });
}

void Connection::read_once() {
  if (ending_ != Ending::kNo) return;  // closing: linger() discards what comes
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

void Connection::read_tls() {
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

void Connection::continue_reading(ReadNext next) {
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

void Connection::handle_input(std::string_view input, ReadNext next) {
  const InputResult r = client().on_input(input);
  const std::chrono::milliseconds delay = client().take_reply_delay();
  if (delay.count() > 0) {
    delay_replies(delay, r);
    return;
  }
  after_input(r, next);
}

void Connection::delay_replies(std::chrono::milliseconds delay, InputResult r) {
  delaying_ = true;
  pace_timer_.expires_after(delay);
  pace_timer_.async_wait([self = shared_from_this(), r](const boost::system::error_code& e) {
    if (e || self->closed_) return;
    self->delaying_ = false;
    // Input that came meanwhile raised no event we wait for: read at once.
    self->after_input(r, ReadNext::kReadAgain);
  });
}

void Connection::after_input(InputResult r, ReadNext next) {
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
  if (counted_ && !client().admitted() && queue().total_bytes() > kMaxUnadmittedQueue) {  // A3
    shutdown();
    return;
  }
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

void Connection::start_handshake() {
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

void Connection::handshake() {
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

void Connection::wait_handshake(tcp::socket::wait_type what) {
  sock_.async_wait(what, [self = shared_from_this()](const boost::system::error_code& ec) {
    if (self->closed_) return;
    if (ec) {
      self->handshake_failed(tls::HandshakeFailure::kAborted, ec.message());
      return;
    }
    self->handshake();
  });
}

void Connection::handshake_failed(tls::HandshakeFailure why, std::string_view detail) {
  core_.tls_stats().count_failure(why);
  core_.tls_stats().log(
      fmt::format("{}: handshake failed ({}): {}; closed", client().peer(), tls::to_string(why), detail));
  shutdown();
}

void Connection::tls_io_failed(tls::IoStatus status) {
  if (status == tls::IoStatus::kError && tls_->bad_record()) {
    core_.tls_stats().count_record_error();
    core_.tls_stats().log(fmt::format("{}: {}; closed", client().peer(), tls_->error()));
  }
  shutdown();
}

void Connection::hold() {
  static constexpr auto kHoldSlice = std::chrono::milliseconds(5);
  held_ = true;
  core_.flow().wait_room_async(*this);
  pace_timer_.expires_after(kHoldSlice);
  pace_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& e) {
    if (!e) self->retry_hold();
  });
}

void Connection::retry_hold() {
  if (!held_ || closed_) return;
  held_ = false;
  core_.flow().cancel(*this);
  pace_timer_.cancel();
  const InputResult r = client().retry_held();
  if (r == InputResult::kHeld) {
    hold();
  } else if (r == InputResult::kClose) {
    ending_ = Ending::kAfterFlush;
    flush();
  } else {
    read_once();
  }
}

void Connection::arm_client_timer() {
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
    if (self->client().on_timer() == InputResult::kClose && self->ending_ == Ending::kNo) {
      // As after input (after_input): a read this connection waits for finds
      // ending_ set and reads nothing more.
      self->ending_ = Ending::kAfterFlush;
      self->flush();
      return;
    }
    // What held the input may be over now (a WebSocket session's answers
    // waiting for the cluster's stores, ws_session.hpp, invariant 9).
    if (self->held_) self->retry_hold();
    if (self->closed_) return;
    self->arm_client_timer();
  });
}

bool Connection::pause_reading() {
  if (!core_.flow().wait_async(*this)) return false;
  paused_ = true;
  paused_at_ = std::chrono::steady_clock::now();
  pace_timer_.expires_after(core_config().max_stall);
  pace_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& e) {
    if (!e) self->resume_reading();
  });
  return true;
}

void Connection::resume_reading() {
  if (!paused_ || closed_) return;
  paused_ = false;
  core_.flow().cancel(*this);
  pace_timer_.cancel();
  core_.flow().record_stall(std::chrono::steady_clock::now() - paused_at_);
  read_once();
}

void Connection::linger() {
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

void Connection::discard_input() {
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

void Connection::update_auth_timer() {
  if (client().admitted()) {
    if (counted_) {  // A1
      counted_ = false;
      core_.auth_stats().remove_unauthenticated();
    }
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
    if (!self->client().admitted()) self->shutdown();
  });
}

void Connection::advance(std::size_t n) {
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

void Connection::clear_batch() {
  batch_bytes_ = 0;
  batch_.clear();  // drops the frame references
  iov_.clear();
  iov_pos_ = 0;
}

void Connection::teardown() {
  if (closed_) return;
  closed_ = true;
  client().detach();  // out of the index: no publisher can wake us any more
  worker_.unmark(this);
  boost::system::error_code ec;
  auth_timer_.cancel();
  if (paused_ || held_) {
    paused_ = false;
    held_ = false;
    core_.flow().cancel(*this);
    pace_timer_.cancel();
  }
  if (delaying_) {
    delaying_ = false;
    pace_timer_.cancel();
  }
  if (counted_) {
    counted_ = false;
    core_.auth_stats().remove_unauthenticated();
  }
  client_timer_.cancel();
  sock_.close(ec);
  if (batch_bytes_ > 0) queue().release(batch_bytes_);
  clear_batch();
  // relaxed: a connection count for the max_connections check; approximate is fine.
  live_.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace ringcast::broker
