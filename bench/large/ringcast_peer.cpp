// ringcast in the large-message benchmark: a blocking BroadcastRing file in
// /dev/shm whose max_message is the cell's message size, driven through the
// copying API (try_push / try_recv) or the zero-copy one (try_claim /
// try_view). transport.hpp says how each side waits.
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ringcast/broadcast_ring.hpp"
#include "transport.hpp"

namespace ringcast::bench {
namespace {

constexpr auto kWaitSlice = std::chrono::seconds(1);  // one recv_wait/push_wait; the harness bounds the cell

std::string ring_path(const std::string& tag) { return "/dev/shm/" + tag + "-ring"; }

[[noreturn]] void fail(const std::string& what, Errc e) {
  throw std::runtime_error(what + ": " + std::string(to_string(e)));
}

class RingcastSender final : public Sender {
 public:
  explicit RingcastSender(const CellSpec& spec) : spec_(spec), path_(ring_path(spec.tag)), buffer_(spec.size) {
    CreateOptions options;
    options.replace = true;
    options.max_message = spec.size;
    auto ring = BroadcastRing::create(path_, ring_capacity(spec.size, spec.depth), options);
    if (!ring) throw std::runtime_error("create " + path_ + ": " + ring.error().message());
    ring_.emplace(std::move(*ring));
  }
  ~RingcastSender() override { ::unlink(path_.c_str()); }

  void send(const MessageHeader& h) override {
    if (spec_.kind == Kind::kRingcastView) {
      claim_and_send(h);
      return;
    }
    write_message(buffer_, h, spec_.touch);
    const Errc e = ring_->try_push(buffer_);
    if (e == Errc::ok) return;
    if (e != Errc::full) fail("try_push", e);
    ++full_hits;
    for (;;) {
      const Errc w = ring_->push_wait(buffer_, {kWaitSlice, spec_.ring_wait});
      if (w == Errc::ok) return;
      if (w != Errc::full && w != Errc::timed_out) fail("push_wait", w);
    }
  }

 private:
  void claim_and_send(const MessageHeader& h) {
    ProducerClaim claim = ring_->try_claim(spec_.size);
    if (!claim) {
      if (claim.status() != Errc::full) fail("try_claim", claim.status());
      ++full_hits;
      do {
        claim = ring_->claim_wait(spec_.size, {kWaitSlice, spec_.ring_wait});
        if (!claim && claim.status() != Errc::full && claim.status() != Errc::timed_out) {
          fail("claim_wait", claim.status());
        }
      } while (!claim);
    }
    write_message(claim.data(), h, spec_.touch);
    claim.commit();
  }

  const CellSpec spec_;
  const std::string path_;
  std::optional<BroadcastRing> ring_;
  std::vector<std::byte> buffer_;  // the copying API's message
};

class RingcastReceiver final : public Receiver {
 public:
  explicit RingcastReceiver(const CellSpec& spec) : spec_(spec), buffer_(spec.size) {
    auto ring = BroadcastRing::open(ring_path(spec.tag));
    if (!ring) throw std::runtime_error("open " + ring_path(spec.tag) + ": " + ring.error().message());
    ring_.emplace(std::move(*ring));
    auto id = ring_->register_consumer();
    if (!id) throw std::runtime_error("register_consumer: " + id.error().message());
    id_ = *id;
  }

  void run(MessageSink& sink) override {
    if (spec_.kind == Kind::kRingcastView) {
      view_all(sink);
      return;
    }
    for (;;) {
      RecvResult r = ring_->try_recv(id_, buffer_);
      if (r.status == Errc::empty || r.status == Errc::stalled) {
        r = ring_->recv_wait(id_, buffer_, {kWaitSlice, spec_.ring_wait});
      }
      if (r.status == Errc::ok) {
        if (sink.on_message(std::span<const std::byte>(buffer_.data(), r.length))) return;
      } else if (r.status != Errc::timed_out && r.status != Errc::empty && r.status != Errc::stalled) {
        fail("try_recv", r.status);
      }
    }
  }

 private:
  void view_all(MessageSink& sink) {
    for (;;) {
      const MessageView v = ring_->try_view(id_);
      if (v.status == Errc::ok) {
        const bool done = sink.on_message(v.data);
        if (const Errc e = ring_->release_view(id_); e != Errc::ok) fail("release_view", e);
        if (done) return;
        continue;
      }
      if (v.status != Errc::empty && v.status != Errc::stalled) fail("try_view", v.status);
      // Sleep until a message is there: with no room for it, recv_wait
      // returns buffer_too_small and leaves it for try_view.
      const RecvResult w = ring_->recv_wait(id_, {}, {kWaitSlice, spec_.ring_wait});
      if (w.status != Errc::buffer_too_small && w.status != Errc::timed_out && w.status != Errc::empty &&
          w.status != Errc::stalled) {
        fail("recv_wait", w.status);
      }
    }
  }

  const CellSpec spec_;
  std::optional<BroadcastRing> ring_;
  ConsumerId id_ = 0;
  std::vector<std::byte> buffer_;  // the copying API's destination
};

}  // namespace

std::uint64_t ring_capacity(std::size_t size, std::uint64_t depth) noexcept {
  const std::uint64_t slots = layout::message_slots(size);
  const std::uint64_t least = std::bit_ceil(2 * layout::block_slots(size));
  return std::max({std::bit_floor(std::max<std::uint64_t>(depth * slots, 1)), least, kMinCapacity});
}

std::unique_ptr<Sender> make_ringcast_sender(const CellSpec& spec) { return std::make_unique<RingcastSender>(spec); }
std::unique_ptr<Receiver> make_ringcast_receiver(const CellSpec& spec) {
  return std::make_unique<RingcastReceiver>(spec);
}
void remove_ringcast_names(const std::string& tag) { ::unlink(ring_path(tag).c_str()); }

}  // namespace ringcast::bench
