#include "broker/guarantees/replay.hpp"

#include <limits>
#include <utility>

namespace ringcast::broker {

namespace {

constexpr std::size_t kAll = std::numeric_limits<std::size_t>::max();
// A block ends after this many messages or bytes, as a publish run's does
// (subscription_index.cpp): it bounds what one reference pins.
constexpr std::size_t kMaxBlockMessages = 1024;
constexpr std::size_t kMaxBlockBytes = 1u << 20;

}  // namespace

Replay Replay::since(const ChannelHistory& h, std::string channel, std::uint64_t offset, std::string epoch) {
  Replay r(h, Mode::kSince, std::move(channel));
  r.since_ = offset;
  r.epoch_ = std::move(epoch);
  r.read_to_ = offset;
  return r;
}

Replay Replay::last(const ChannelHistory& h, std::string channel, std::size_t n) {
  Replay r(h, Mode::kLast, std::move(channel));
  r.n_ = n;
  return r;
}

void Replay::fail() noexcept {
  failed_ = true;
  recovered_ = false;
  messages_.clear();
  frames_.clear();
  encoded_ = 0;
}

void Replay::read() {
  if (mode_ == Mode::kSince && epoch_ != h_->epoch()) return fail();  // history was lost
  if (mode_ == Mode::kLast && n_ == 0) return;
  auto r = mode_ == Mode::kSince ? h_->store().read_since(channel_, since_, kAll) : h_->store().read_last(channel_, n_);
  if (!r) return fail();
  if (mode_ == Mode::kSince && r->status != ReadStatus::kOk) return fail();  // pruned, or not our offset
  read_to_ = r->messages.empty() ? (mode_ == Mode::kSince ? since_ : r->top) : r->messages.back().offset;
  messages_ = std::move(r->messages);
}

void Replay::complete() {
  const HistoryStore& store = h_->store();
  top_ = store.top(channel_);
  if (failed_ || (mode_ == Mode::kLast && n_ == 0)) return;
  if (top_ == read_to_) return;  // nothing appended since step 1 (the common case)
  auto r = store.read_since(channel_, read_to_, kAll);
  if (!r) return fail();
  if (r->status != ReadStatus::kOk) {
    // Pruned between the steps: the messages after read_to_ are gone.
    if (mode_ == Mode::kSince) return fail();
    messages_.clear();  // last N: the newest ones, read_last's way
    frames_.clear();
    encoded_ = 0;
    r = store.read_last(channel_, n_);
    if (!r) return fail();
  }
  take(std::move(*r));
}

void Replay::take(HistoryRead&& r) {
  messages_.reserve(messages_.size() + r.messages.size());
  for (HistoryMessage& m : r.messages) messages_.push_back(std::move(m));
  if (mode_ == Mode::kLast && messages_.size() > n_) {
    messages_.erase(messages_.begin(), messages_.begin() + static_cast<std::ptrdiff_t>(messages_.size() - n_));
    frames_.clear();  // the encoded prefix moved: encode anew (history: N is small)
    encoded_ = 0;
  }
}

void Replay::encode(WireFormat f) {
  std::vector<Message> run;
  for (std::size_t i = encoded_; i < messages_.size();) {
    // Consecutive offsets with one timestamp: one DeliveryRun, one block.
    run.clear();
    std::size_t j = i;
    std::size_t bytes = 0;
    while (j < messages_.size() && run.size() < kMaxBlockMessages && bytes < kMaxBlockBytes &&
           messages_[j].time_ms == messages_[i].time_ms) {
      run.push_back({channel_, messages_[j].payload});
      bytes += messages_[j].payload.size();
      ++j;
    }
    const DeliveryRun d{DeliveryKind::kMessage, {}, run, messages_[i].offset, messages_[i].time_ms};
    frames_.push_back(wire_codec(f).encode(d));
    i = j;
  }
  encoded_ = messages_.size();
}

}  // namespace ringcast::broker
