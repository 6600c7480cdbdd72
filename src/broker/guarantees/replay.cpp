#include "broker/guarantees/replay.hpp"

#include <algorithm>
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

Replay Replay::resume(const ChannelHistory& h, std::string channel, std::uint64_t floor) {
  Replay r(h, Mode::kResume, std::move(channel));
  r.since_ = floor;
  r.read_to_ = floor;
  return r;
}

void Replay::fail(std::string error) noexcept {
  failed_ = true;
  recovered_ = false;
  error_ = std::move(error);
  messages_.clear();
  lost_.clear();
  clear_encoding();
}

void Replay::clear_encoding() noexcept {
  frames_.clear();
  frame_offsets_.clear();
  encoded_ = 0;
}

void Replay::note_lost(std::uint64_t since, const HistoryRead& r) {
  if (r.status != ReadStatus::kTruncated) return;
  const std::uint64_t first = r.messages.empty() ? r.top + 1 : r.messages.front().offset;
  if (first > since + 1) lost_.emplace_back(since + 1, first - 1);
}

void Replay::read() {
  if (mode_ == Mode::kSince && epoch_ != h_->epoch()) return fail();  // history was lost
  if (mode_ == Mode::kLast && n_ == 0) return;
  auto r = mode_ == Mode::kLast ? h_->store().read_last(channel_, n_) : h_->store().read_since(channel_, since_, kAll);
  if (!r) return fail(r.error().message());
  if (mode_ == Mode::kSince && r->status != ReadStatus::kOk) return fail();  // pruned, or not our offset
  if (mode_ == Mode::kResume) {
    if (r->status == ReadStatus::kAhead) return;  // a floor past the top: nothing to resend
    note_lost(since_, *r);
    // Everything up to the top was read or is gone.
    read_to_ = r->messages.empty() ? std::max(since_, r->top) : r->messages.back().offset;
  } else {
    read_to_ = r->messages.empty() ? (mode_ == Mode::kSince ? since_ : r->top) : r->messages.back().offset;
  }
  messages_ = std::move(r->messages);
}

void Replay::advance(std::uint64_t floor) {
  if (floor == since_) return;
  if (floor < since_) {  // read anew from the lower floor, under the lock
    messages_.clear();
    lost_.clear();
    clear_encoding();
    since_ = read_to_ = floor;
    return;
  }
  since_ = floor;
  read_to_ = std::max(read_to_, floor);
  std::erase_if(lost_, [floor](const auto& l) { return l.second <= floor; });
  for (auto& l : lost_) l.first = std::max(l.first, floor + 1);
  std::size_t drop = 0;
  while (drop < messages_.size() && messages_[drop].offset <= floor) ++drop;
  if (drop == 0) return;
  messages_.erase(messages_.begin(), messages_.begin() + static_cast<std::ptrdiff_t>(drop));
  clear_encoding();
}

void Replay::complete() {
  const HistoryStore& store = h_->store();
  top_ = store.top(channel_);
  if (failed_ || (mode_ == Mode::kLast && n_ == 0)) return;
  if (top_ <= read_to_) return;  // nothing appended since step 1 (the common case)
  auto r = store.read_since(channel_, read_to_, kAll);
  if (!r) return fail(r.error().message());
  if (mode_ == Mode::kResume) {
    note_lost(read_to_, *r);  // pruned between the steps: said, not a failure
    if (r->status != ReadStatus::kAhead) take(std::move(*r));
    return;
  }
  if (r->status != ReadStatus::kOk) {
    // Pruned between the steps: the messages after read_to_ are gone.
    if (mode_ == Mode::kSince) return fail();
    messages_.clear();  // last N: the newest ones, read_last's way
    clear_encoding();
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
    clear_encoding();  // the encoded prefix moved: encode anew (history: N is small)
  }
}

void Replay::encode(WireFormat f) {
  std::vector<Message> run;
  for (std::size_t i = encoded_; i < messages_.size();) {
    // Consecutive offsets with one timestamp: one DeliveryRun, one block (a
    // resume may hold a pruned hole: a block never spans it).
    run.clear();
    std::size_t j = i;
    std::size_t bytes = 0;
    while (j < messages_.size() && run.size() < kMaxBlockMessages && bytes < kMaxBlockBytes &&
           messages_[j].time_ms == messages_[i].time_ms && messages_[j].offset == messages_[i].offset + (j - i)) {
      run.push_back({channel_, messages_[j].payload});
      bytes += messages_[j].payload.size();
      ++j;
    }
    // A resume is a QoS 1 delivery (each owes an ack); the others are QoS 0.
    const DeliveryRun d{DeliveryKind::kMessage,
                        {},
                        run,
                        messages_[i].offset,
                        messages_[i].time_ms,
                        static_cast<std::uint8_t>(mode_ == Mode::kResume ? 1 : 0)};
    frames_.push_back(wire_codec(f).encode(d));
    frame_offsets_.push_back(messages_[i].offset);
    i = j;
  }
  encoded_ = messages_.size();
}

}  // namespace ringcast::broker
