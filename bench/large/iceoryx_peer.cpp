// iceoryx 2.0 (Debian's libiceoryx-posh-dev) in the large-message benchmark,
// and the iox-roudi daemon it needs. Built only when CMake finds iceoryx_posh
// and iox-roudi (bench/large/CMakeLists.txt); iceoryx_absent.cpp otherwise.
//
// Lossless: the publisher waits for a full subscriber queue
// (ConsumerTooSlowPolicy::WAIT_FOR_CONSUMER: publish() yields in a loop until
// every queue took the chunk) and every subscriber asks for that
// (QueueFullPolicy::BLOCK_PRODUCER). Queue capacity = the cell's depth
// (iceoryx allows at most 256). Zero copy: the sender writes into the loaned
// chunk, a receiver reads the chunk it took.
//
// RouDi: one per host in iceoryx 2.0 (it holds /tmp/roudi.lock and serves
// the socket /tmp/roudi), so a run refuses to start a second one. Its
// configuration (a memory pool per message size) is written to a temporary
// directory, removed with it.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "child_process.hpp"
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
      // The pool is sized for every queue full at once (start_iceoryx_daemon's
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

// iox-roudi as a child of the harness (it dies with it), with its stderr in
// a log file next to its configuration.
class Roudi final : public PeerDaemon {
 public:
  Roudi(std::string dir, test::ChildProcess process) : dir_(std::move(dir)), process_(std::move(process)) {}
  // SIGTERM: RouDi removes its shared memory and socket before it exits.
  ~Roudi() override {
    (void)process_.stop(SIGTERM);
    std::remove((dir_ + "/roudi.toml").c_str());
    std::remove((dir_ + "/roudi.log").c_str());
    ::rmdir(dir_.c_str());
  }

 private:
  std::string dir_;
  test::ChildProcess process_;
};

// True if another process holds RouDi's host-wide lock.
bool roudi_running() {
  const int fd = ::open("/tmp/roudi.lock", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0;
  ::close(fd);  // also drops our lock if we got it
  return held;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

std::unique_ptr<Sender> make_iceoryx_sender(const CellSpec& spec) { return std::make_unique<IceoryxSender>(spec); }
std::unique_ptr<Receiver> make_iceoryx_receiver(const CellSpec& spec) {
  return std::make_unique<IceoryxReceiver>(spec);
}

bool iceoryx_built_in() noexcept { return true; }

std::unique_ptr<PeerDaemon> start_iceoryx_daemon(const std::vector<PoolNeed>& pools, std::string& why_not) {
  if (roudi_running()) {
    why_not = "another iox-roudi runs on this host (iceoryx 2.0 allows one per host)";
    return nullptr;
  }
  // One pool per chunk payload size (rounded up to 64 bytes), ascending.
  std::map<std::size_t, std::uint64_t> chunks;
  for (const PoolNeed& p : pools) chunks[(p.size + 63) / 64 * 64] += p.chunks;
  std::string config = "[general]\nversion = 1\n\n[[segment]]\n";
  for (const auto& [size, count] : chunks)
    config += fmt::format("\n[[segment.mempool]]\nsize = {}\ncount = {}\n", size, count);

  char dir_template[] = "/tmp/ringcast-large-roudi-XXXXXX";
  const char* dir = ::mkdtemp(dir_template);
  if (dir == nullptr) {
    why_not = "mkdtemp failed";
    return nullptr;
  }
  const std::string config_path = std::string(dir) + "/roudi.toml";
  const std::string log_path = std::string(dir) + "/roudi.log";
  std::ofstream(config_path) << config;
  // exec: the child is RouDi itself, so stop() signals RouDi and not a shell.
  const std::string command =
      fmt::format("exec {} -c {} -l warning -m off 2>{}", RINGCAST_BENCH_ROUDI, config_path, log_path);
  test::ChildProcess process = test::ChildProcess::spawn({"/bin/sh", "-c", command}, {.out = test::Stream::kPipe});
  const bool ready =
      process.running() && process.read_stdout_until("RouDi is ready for clients", test::deadline_in(kAttachTimeout));
  if (!ready) why_not = "iox-roudi did not start: " + read_file(log_path);
  auto daemon = std::make_unique<Roudi>(dir, std::move(process));
  if (!ready) return nullptr;  // ~Roudi stops it and removes the directory
  return daemon;
}

}  // namespace ringcast::bench
