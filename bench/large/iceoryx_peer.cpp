// iceoryx 2.0 (Debian's libiceoryx-posh-dev) in the large-message benchmark.
// Built only when CMake finds iceoryx_posh and iox-roudi (bench/CMakeLists.txt);
// iceoryx_absent.cpp otherwise.
//
// Lossless: the publisher waits for a full subscriber queue
// (ConsumerTooSlowPolicy::WAIT_FOR_CONSUMER: publish() yields in a loop until
// every queue took the chunk) and every subscriber asks for that
// (QueueFullPolicy::BLOCK_PRODUCER). Queue capacity = the cell's depth
// (iceoryx allows at most 256). Zero copy: the sender writes into the loaned
// chunk, a receiver reads the chunk it took.
//
// The harness starts RouDi itself (bench/common/roudi.hpp).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "iceoryx_hoofs/log/logmanager.hpp"
#include "iceoryx_posh/mepoo/chunk_header.hpp"
#include "iceoryx_posh/popo/untyped_publisher.hpp"
#include "iceoryx_posh/popo/untyped_subscriber.hpp"
#include "iceoryx_posh/popo/wait_set.hpp"
#include "iceoryx_posh/runtime/posh_runtime.hpp"
#include "transport.hpp"
#include "workload.hpp"

namespace ringcast::bench {
namespace {

constexpr auto kAttachTimeout = std::chrono::seconds(10);

// A process joins RouDi once, under a name unique on the host. The library
// logs its debug lines unless told otherwise.
void init_runtime(const char* role) {
  iox::log::LogManager::GetLogManager().SetDefaultLogLevel(iox::log::LogLevel::kWarn,
                                                           iox::log::LogLevelOutput::kHideLogLevel);
  const std::string name = fmt::format("ringcast-large-{}-{}", role, ::getpid());
  iox::runtime::PoshRuntime::initRuntime(iox::RuntimeName_t(iox::cxx::TruncateToCapacity, name.c_str()));
}

iox::capro::ServiceDescription service(const CellSpec& spec) {
  return {"ringcast-large", iox::capro::IdString_t(iox::cxx::TruncateToCapacity, spec.tag.c_str()), "data"};
}

iox::popo::PublisherOptions publisher_options() {
  iox::popo::PublisherOptions o;
  o.historyCapacity = 0;
  o.subscriberTooSlowPolicy = iox::popo::ConsumerTooSlowPolicy::WAIT_FOR_CONSUMER;
  return o;
}

iox::popo::SubscriberOptions subscriber_options(const CellSpec& spec) {
  iox::popo::SubscriberOptions o;
  o.queueCapacity = std::min<std::uint64_t>(spec.depth, iox::MAX_SUBSCRIBER_QUEUE_CAPACITY);
  o.queueFullPolicy = iox::popo::QueueFullPolicy::BLOCK_PRODUCER;
  return o;
}

class IceoryxSender final : public Sender {
 public:
  explicit IceoryxSender(const CellSpec& spec) : spec_(spec), backoff_(Idle::kYield) {
    init_runtime("producer");
    publisher_.emplace(service(spec), publisher_options());
  }

  void send(const MessageHeader& h) override {
    bool counted = false;
    for (;;) {
      auto loan = publisher_->loan(static_cast<std::uint32_t>(spec_.size), 8);
      if (!loan.has_error()) {
        write_message(std::span<std::byte>(static_cast<std::byte*>(loan.value()), spec_.size), h, spec_.touch);
        publisher_->publish(loan.value());  // waits (yielding) while a subscriber's queue is full
        backoff_.reset();
        return;
      }
      // The pool is sized for every queue full at once (start_roudi's
      // callers), so this is a subscriber still holding chunks: wait.
      if (loan.get_error() != iox::popo::AllocationError::RUNNING_OUT_OF_CHUNKS &&
          loan.get_error() != iox::popo::AllocationError::TOO_MANY_CHUNKS_ALLOCATED_IN_PARALLEL) {
        throw std::runtime_error(fmt::format("iceoryx loan: error {}", static_cast<int>(loan.get_error())));
      }
      if (!counted) ++full_hits;
      counted = true;
      backoff_.pause();
    }
  }

 private:
  const CellSpec spec_;
  std::optional<iox::popo::UntypedPublisher> publisher_;
  Backoff backoff_;
};

class IceoryxReceiver final : public Receiver {
 public:
  explicit IceoryxReceiver(const CellSpec& spec) : spec_(spec) {
    init_runtime("consumer");
    subscriber_.emplace(service(spec), subscriber_options(spec));
    // SUBSCRIBED once RouDi has added our queue to the publisher: from then
    // on nothing published is missed.
    const auto deadline = std::chrono::steady_clock::now() + kAttachTimeout;
    while (subscriber_->getSubscriptionState() != iox::SubscribeState::SUBSCRIBED) {
      if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("iceoryx: not subscribed after 10 s");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (spec.kind == Kind::kIceoryxWait) {
      waitset_.emplace();
      if (waitset_->attachState(*subscriber_, iox::popo::SubscriberState::HAS_DATA).has_error()) {
        throw std::runtime_error("iceoryx: WaitSet::attachState");
      }
    }
  }
  ~IceoryxReceiver() override {
    if (waitset_) waitset_->detachState(*subscriber_, iox::popo::SubscriberState::HAS_DATA);
  }

  void run(MessageSink& sink) override {
    for (;;) {
      auto taken = subscriber_->take();
      if (!taken.has_error()) {
        const void* chunk = taken.value();
        const std::uint32_t length = iox::mepoo::ChunkHeader::fromUserPayload(chunk)->userPayloadSize();
        const bool done = sink.on_message(std::span<const std::byte>(static_cast<const std::byte*>(chunk), length));
        subscriber_->release(chunk);
        if (done) return;
        continue;
      }
      if (taken.get_error() != iox::popo::ChunkReceiveResult::NO_CHUNK_AVAILABLE) {
        throw std::runtime_error("iceoryx take: too many chunks held");
      }
      if (waitset_) {
        (void)waitset_->timedWait(iox::units::Duration::fromSeconds(1));
      } else {
        cpu_relax();
      }
    }
  }

 private:
  const CellSpec spec_;
  std::optional<iox::popo::UntypedSubscriber> subscriber_;
  std::optional<iox::popo::WaitSet<>> waitset_;
};

}  // namespace

std::unique_ptr<Sender> make_iceoryx_sender(const CellSpec& spec) { return std::make_unique<IceoryxSender>(spec); }
std::unique_ptr<Receiver> make_iceoryx_receiver(const CellSpec& spec) {
  return std::make_unique<IceoryxReceiver>(spec);
}

}  // namespace ringcast::bench
