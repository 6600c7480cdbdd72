// Boost.Interprocess message_queue in the large-message benchmark: one queue
// of `depth` messages of the cell's size per consumer, since a queue is not a
// broadcast primitive (the sender copies each message into every queue).
// Lossless by nature: send blocks on a full queue.
#include <boost/interprocess/ipc/message_queue.hpp>
#include <fmt/format.h>
#include <memory>
#include <string>
#include <vector>

#include "transport.hpp"

namespace ringcast::bench {
namespace {

namespace bip = boost::interprocess;

std::string queue_name(const std::string& tag, int i) { return fmt::format("{}-q{}", tag, i); }

class BoostSender final : public Sender {
 public:
  explicit BoostSender(const CellSpec& spec) : spec_(spec), buffer_(spec.size) {
    for (int i = 0; i < spec.consumers; ++i) {
      bip::message_queue::remove(queue_name(spec.tag, i).c_str());
      queues_.push_back(std::make_unique<bip::message_queue>(bip::create_only, queue_name(spec.tag, i).c_str(),
                                                             spec.depth, spec.size));
    }
  }
  // The consumers keep their mappings: removing the names does not end them.
  ~BoostSender() override { remove_boost_names(spec_.tag, spec_.consumers); }

  void send(const MessageHeader& h) override {
    write_message(buffer_, h, spec_.touch);
    for (auto& q : queues_) {
      if (q->try_send(buffer_.data(), buffer_.size(), 0)) continue;
      ++full_hits;
      q->send(buffer_.data(), buffer_.size(), 0);  // sleeps on the queue's condition variable
    }
  }

 private:
  const CellSpec spec_;
  std::vector<std::unique_ptr<bip::message_queue>> queues_;
  std::vector<std::byte> buffer_;
};

class BoostReceiver final : public Receiver {
 public:
  explicit BoostReceiver(const CellSpec& spec)
      : queue_(bip::open_only, queue_name(spec.tag, spec.index).c_str()), buffer_(spec.size) {}

  void run(MessageSink& sink) override {
    for (;;) {
      bip::message_queue::size_type got = 0;
      unsigned priority = 0;
      queue_.receive(buffer_.data(), buffer_.size(), got, priority);
      if (sink.on_message(std::span<const std::byte>(buffer_.data(), got))) return;
    }
  }

 private:
  bip::message_queue queue_;
  std::vector<std::byte> buffer_;
};

}  // namespace

std::unique_ptr<Sender> make_boost_sender(const CellSpec& spec) { return std::make_unique<BoostSender>(spec); }
std::unique_ptr<Receiver> make_boost_receiver(const CellSpec& spec) { return std::make_unique<BoostReceiver>(spec); }
void remove_boost_names(const std::string& tag, int consumers) {
  for (int i = 0; i < consumers; ++i) bip::message_queue::remove(queue_name(tag, i).c_str());
}

}  // namespace ringcast::bench
