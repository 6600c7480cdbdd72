// ZeroMQ in the large-message benchmark: XPUB bound on ipc://, one SUB per
// consumer. Lossless by XPUB_NODROP: a subscriber's pipe at its high-water
// mark (SNDHWM = RCVHWM = the cell's depth, in messages) makes zmq_send
// return EAGAIN instead of dropping, and the sender retries. The sender
// copies each message into ZeroMQ (zmq_send); a receiver reads it in place
// from the message ZeroMQ allocated (zmq_msg_recv).
#include <unistd.h>
#include <zmq.h>

#include <array>
#include <cerrno>
#include <stdexcept>
#include <string>
#include <vector>

#include "transport.hpp"
#include "workload.hpp"

namespace ringcast::bench {
namespace {

std::string socket_path(const std::string& tag) { return "/tmp/" + tag + ".ipc"; }
std::string endpoint(const std::string& tag) { return "ipc://" + socket_path(tag); }

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what + ": " + zmq_strerror(errno)); }

// A context and one socket, closed in that order.
class ZmqSocket {
 public:
  explicit ZmqSocket(int type) : ctx_(zmq_ctx_new()), socket_(zmq_socket(ctx_, type)) {
    if (socket_ == nullptr) fail("zmq_socket");
  }
  ZmqSocket(const ZmqSocket&) = delete;
  ZmqSocket& operator=(const ZmqSocket&) = delete;
  // zmq_ctx_term waits (linger: infinite) until every message queued for a
  // connected peer is handed to it: the last ones are not lost on exit.
  ~ZmqSocket() {
    zmq_close(socket_);
    zmq_ctx_term(ctx_);
  }
  void set(int option, int value) {
    if (zmq_setsockopt(socket_, option, &value, sizeof value) != 0) fail("zmq_setsockopt");
  }
  [[nodiscard]] void* get() const noexcept { return socket_; }

 private:
  void* ctx_;
  void* socket_;
};

class ZmqSender final : public Sender {
 public:
  explicit ZmqSender(const CellSpec& spec)
      : spec_(spec), socket_(ZMQ_XPUB), buffer_(spec.size), backoff_(Idle::kYield) {
    socket_.set(ZMQ_SNDHWM, static_cast<int>(spec.depth));
    socket_.set(ZMQ_XPUB_NODROP, 1);
    socket_.set(ZMQ_XPUB_VERBOSE, 1);
    socket_.set(ZMQ_RCVTIMEO, 10'000);
    if (zmq_bind(socket_.get(), endpoint(spec.tag).c_str()) != 0) fail("zmq_bind " + endpoint(spec.tag));
  }
  ~ZmqSender() override { ::unlink(socket_path(spec_.tag).c_str()); }

  // One subscription message per subscriber (XPUB_VERBOSE): after these,
  // nothing sent can be lost to the slow-joiner race.
  void wait_ready() override {
    for (int i = 0; i < spec_.consumers; ++i) {
      std::array<char, 16> sub{};
      if (zmq_recv(socket_.get(), sub.data(), sub.size(), 0) < 1 || sub[0] != 1) fail("zmq: a subscription");
    }
  }

  void send(const MessageHeader& h) override {
    write_message(buffer_, h, spec_.touch);
    bool counted = false;
    while (zmq_send(socket_.get(), buffer_.data(), buffer_.size(), ZMQ_DONTWAIT) < 0) {
      if (errno != EAGAIN && errno != EINTR) fail("zmq_send");
      if (!counted) ++full_hits;
      counted = true;
      backoff_.pause();  // ZeroMQ's I/O thread needs the CPU to drain the pipe
    }
    backoff_.reset();
  }

 private:
  const CellSpec spec_;
  ZmqSocket socket_;
  std::vector<std::byte> buffer_;
  Backoff backoff_;
};

class ZmqReceiver final : public Receiver {
 public:
  explicit ZmqReceiver(const CellSpec& spec) : socket_(ZMQ_SUB) {
    socket_.set(ZMQ_RCVHWM, static_cast<int>(spec.depth));
    if (zmq_connect(socket_.get(), endpoint(spec.tag).c_str()) != 0) fail("zmq_connect");
    if (zmq_setsockopt(socket_.get(), ZMQ_SUBSCRIBE, "", 0) != 0) fail("zmq_setsockopt SUBSCRIBE");
  }

  void run(MessageSink& sink) override {
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    for (;;) {
      if (zmq_msg_recv(&msg, socket_.get(), 0) < 0) {
        if (errno == EINTR) continue;
        zmq_msg_close(&msg);
        fail("zmq_msg_recv");
      }
      const std::span<const std::byte> m(static_cast<const std::byte*>(zmq_msg_data(&msg)), zmq_msg_size(&msg));
      if (sink.on_message(m)) break;
    }
    zmq_msg_close(&msg);
  }

 private:
  ZmqSocket socket_;
};

}  // namespace

std::unique_ptr<Sender> make_zmq_sender(const CellSpec& spec) { return std::make_unique<ZmqSender>(spec); }
std::unique_ptr<Receiver> make_zmq_receiver(const CellSpec& spec) { return std::make_unique<ZmqReceiver>(spec); }
void remove_zmq_names(const std::string& tag) { ::unlink(socket_path(tag).c_str()); }

}  // namespace ringcast::bench
