// ringcast_bench_py_producer: the C++ side of bench/python/consumer_bench.py.
//
//   ringcast_bench_py_producer ring PATH COUNT   push COUNT messages into the
//       ring at PATH (its consumer registered before this starts), batches of
//       64 with try_push_batch; when the ring is full, push_wait for one slot
//       (on a wakeups ring it sleeps on the futex until the consumer frees one)
//   ringcast_bench_py_producer zmq ENDPOINT COUNT   bind an XPUB socket, wait
//       for one subscription, send COUNT messages (XPUB_NODROP: none is dropped)
//
// Every message is tests/ring/message_pattern.hpp's 52-byte pattern for its
// sequence number, so the consumer can check each one. Exits 0 when all were sent.
#include <zmq.h>

#include <CLI/CLI.hpp>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "message_pattern.hpp"
#include "ringcast/broadcast_ring.hpp"

namespace {

using namespace ringcast;

constexpr std::size_t kBatch = 64;
using Message = std::array<std::byte, kMaxPayload>;

int fail(const std::string& what) {
  fmt::print(stderr, "ringcast_bench_py_producer: {}\n", what);
  return 1;
}

int produce_ring(const std::string& path, std::uint64_t count) {
  auto ring = BroadcastRing::open(path);
  if (!ring) return fail(ring.error().message());
  if (auto c = ring->claim_producer(); !c) return fail(c.error().message());
  alignas(8) std::array<Message, kBatch> messages{};
  std::array<std::span<const std::byte>, kBatch> spans;
  for (std::uint64_t seq = 0; seq < count;) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kBatch, count - seq));
    for (std::size_t i = 0; i < n; ++i) {
      test::make_message(seq + i, messages[i]);
      spans[i] = messages[i];
    }
    std::size_t pushed = 0;
    while (pushed < n) {
      const BatchResult r = ring->try_push_batch(std::span(spans).subspan(pushed, n - pushed));
      pushed += r.count;
      Errc e = r.status;
      if (e == Errc::full) {
        e = ring->push_wait(spans[pushed], {std::chrono::seconds(60), IdleStrategy::kSpinThenBlock});
        if (e == Errc::ok) ++pushed;
      }
      if (e != Errc::ok) return fail(fmt::format("push: {}", to_string(e)));
    }
    seq += n;
  }
  return 0;
}

int produce_zmq(const std::string& endpoint, std::uint64_t count) {
  void* ctx = zmq_ctx_new();
  void* pub = zmq_socket(ctx, ZMQ_XPUB);
  const int one = 1;
  const int hwm = 1000;  // the default, stated
  zmq_setsockopt(pub, ZMQ_SNDHWM, &hwm, sizeof hwm);
  zmq_setsockopt(pub, ZMQ_XPUB_NODROP, &one, sizeof one);
  if (zmq_bind(pub, endpoint.c_str()) != 0) return fail(fmt::format("zmq_bind: {}", zmq_strerror(errno)));
  std::printf("bound\n");
  std::fflush(stdout);
  std::array<char, 64> sub{};
  if (zmq_recv(pub, sub.data(), sub.size(), 0) < 1 || sub[0] != 1) return fail("no subscription arrived");
  alignas(8) Message m{};
  for (std::uint64_t seq = 0; seq < count; ++seq) {
    test::make_message(seq, m);
    // XPUB_NODROP: EAGAIN while the subscriber's pipe is at its high-water mark.
    while (zmq_send(pub, m.data(), m.size(), ZMQ_DONTWAIT) < 0) {
      if (errno != EAGAIN && errno != EINTR) return fail(fmt::format("zmq_send: {}", zmq_strerror(errno)));
      std::this_thread::yield();
    }
  }
  const int linger = -1;  // deliver everything before closing
  zmq_setsockopt(pub, ZMQ_LINGER, &linger, sizeof linger);
  zmq_close(pub);
  zmq_ctx_term(ctx);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"C++ producer for bench/python/consumer_bench.py"};
  std::string transport, where;
  std::uint64_t count = 0;
  app.add_option("transport", transport, "ring or zmq")->required()->check(CLI::IsMember({"ring", "zmq"}));
  app.add_option("where", where, "ring path, or zmq endpoint (ipc://...)")->required();
  app.add_option("count", count, "messages to send")->required();
  CLI11_PARSE(app, argc, argv);
  return transport == "ring" ? produce_ring(where, count) : produce_zmq(where, count);
}
