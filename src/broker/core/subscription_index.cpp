#include "broker/core/subscription_index.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <tuple>

#include "broker/guarantees/ack_tracker.hpp"
#include "broker/util/clock.hpp"
#include "broker/util/glob.hpp"

namespace ringcast::broker {

namespace {

bool erase_one(std::vector<Subscriber*>& v, const Subscriber* s) noexcept {
  auto it = std::find(v.begin(), v.end(), s);
  if (it == v.end()) return false;
  *it = v.back();
  v.pop_back();
  return true;
}

// Frames of one run from one source (exact subscriptions, shard subscriptions
// or one pattern), encoded on first use per wire format: one block per format
// that has subscribers, shared by all of them.
struct SourceFrames {
  DeliveryRun run;  // msgs, ids and timestamp are the run's; kind and pattern the source's
  std::array<FrameRef, kWireFormatCount> blocks;
  // A QoS 1 run's frames for QoS 1 subscribers (JSON formats only), per format.
  std::array<FrameRef, kWireFormatCount> qos1;
  const FrameRef& get(WireFormat f) {
    FrameRef& slot = blocks[static_cast<std::size_t>(f)];
    if (!slot) {
      DeliveryRun r = run;
      r.qos = 0;
      slot = wire_codec(f).encode(r);
    }
    return slot;
  }
  const FrameRef& get_qos1(WireFormat f) {
    FrameRef& slot = qos1[static_cast<std::size_t>(f)];
    if (!slot) slot = wire_codec(f).encode(run);
    return slot;
  }
  // Keeps only the first `n` messages (n >= 1): the frames already encoded
  // are cut from their blocks, not encoded again.
  void truncate(std::size_t n) {
    run.msgs = run.msgs.first(n);
    for (auto* slots : {&blocks, &qos1}) {
      for (FrameRef& slot : *slots) {
        if (slot) slot = copy_frames(FrameSpan{slot, 0, static_cast<std::uint32_t>(n)});
      }
    }
  }
  // The subscription this source matched: the channel or the pattern, in its space.
  [[nodiscard]] std::string_view name() const noexcept {
    return run.kind == DeliveryKind::kPattern ? run.pattern : run.msgs.front().channel;
  }
  [[nodiscard]] SubscriptionSpace space() const noexcept {
    switch (run.kind) {
      case DeliveryKind::kPattern:
        return SubscriptionSpace::kPattern;
      case DeliveryKind::kShard:
        return SubscriptionSpace::kShard;
      case DeliveryKind::kMessage:
        break;
    }
    return SubscriptionSpace::kChannel;
  }
};

// One matching subscription: who, in which order Redis would deliver it, from
// which source.
struct Hit {
  Subscriber* sub;
  std::uint32_t order;
  std::uint32_t source;  // index into the run's SourceFrames
};

// Subscriber::deliveries(): one delivery per message, or one per matching
// subscription unless --dedupe.
bool one_delivery(const Subscriber* s, bool dedupe) noexcept {
  return dedupe || s->deliveries() == Deliveries::kPerMessage;
}

void deliver(Subscriber* s, const FrameRef& block) noexcept {
  if (s->queue().push(block).wake) s->on_queue_ready();
}

// A QoS 1 delivery goes through the subscriber's tracker when the subscription
// it matched is a QoS 1 one (only JSON subscribers have trackers).
void deliver_from(Subscriber* s, SourceFrames& src) noexcept {
  if (src.run.qos == 1 && s->ack_tracker() != nullptr && s->qos1_for(src.space(), src.name())) {
    const FrameRef& block = src.get_qos1(s->format());
    if (s->ack_tracker()->offer(src.run.msgs.front().channel, src.run.first_id, block, s->queue())) s->on_queue_ready();
    return;
  }
  deliver(s, src.get(s->format()));
}

// One block holding frame k of each of `blocks` (which have equal frame counts),
// then frame k + 1 of each, and so on.
FrameRef interleave(const std::vector<const FrameRef*>& blocks) {
  thread_local std::vector<std::uint32_t> sizes;
  sizes.clear();
  const std::uint32_t count = (*blocks.front())->count();
  for (std::uint32_t k = 0; k < count; ++k) {
    for (const FrameRef* b : blocks) sizes.push_back(static_cast<std::uint32_t>((*b)->frame(k).size()));
  }
  FrameRef out = FrameRef::allocate_frames(sizes, /*droppable=*/true);
  char* p = out.mutable_data();
  for (std::uint32_t k = 0; k < count; ++k) {
    for (const FrameRef* b : blocks) {
      const std::string_view f = (*b)->frame(k);
      std::memcpy(p, f.data(), f.size());
      p += f.size();
    }
  }
  return out;
}

// A run ends after this many messages or payload bytes: a queue may keep up to
// two blocks alive beyond the bytes it accounts for (connection_queue.hpp,
// invariant 5), so the size of a block is what bounds that memory.
constexpr std::size_t kMaxRunMessages = 1024;
constexpr std::size_t kMaxRunBytes = 1u << 20;

}  // namespace

SubscriptionIndex::SubscriptionIndex(RunLog* log, ClusterLink* cluster) : log_(log), cluster_(cluster) {}
SubscriptionIndex::~SubscriptionIndex() = default;

SubscriptionIndex::TrieNode* SubscriptionIndex::TrieNode::child(unsigned char b) const noexcept {
  auto it = std::lower_bound(children.begin(), children.end(), b,
                             [](const std::unique_ptr<TrieNode>& n, unsigned char v) { return n->byte < v; });
  return it != children.end() && (*it)->byte == b ? it->get() : nullptr;
}

SubscriptionIndex::TrieNode* SubscriptionIndex::trie_find_or_add(std::string_view prefix) {
  TrieNode* node = &root_;
  for (char c : prefix) {
    const auto b = static_cast<unsigned char>(c);
    auto it = std::lower_bound(node->children.begin(), node->children.end(), b,
                               [](const std::unique_ptr<TrieNode>& n, unsigned char v) { return n->byte < v; });
    if (it == node->children.end() || (*it)->byte != b) {
      auto n = std::make_unique<TrieNode>();
      n->byte = b;
      n->parent = node;
      it = node->children.insert(it, std::move(n));
    }
    node = it->get();
  }
  return node;
}

void SubscriptionIndex::trie_prune(TrieNode* node) noexcept {
  while (node != &root_ && node->patterns.empty() && node->children.empty()) {
    TrieNode* parent = node->parent;
    auto& kids = parent->children;
    kids.erase(
        std::find_if(kids.begin(), kids.end(), [node](const std::unique_ptr<TrieNode>& n) { return n.get() == node; }));
    node = parent;
  }
}

bool SubscriptionIndex::add_to(InterestSpace space, Subscriber& s, std::string_view channel) {
  const bool shard = space == InterestSpace::kShard;
  if (!(shard ? s.shard_channels_ : s.channels_).insert(channel)) return false;
  ChannelMap& map = shard ? shard_channels_ : channels_;
  auto it = map.find(channel);
  if (it == map.end()) {
    it = map.emplace(std::string(channel), 0).first;
    if (cluster_ != nullptr) cluster_->interest_added(space, channel);  // invariant 6
  }
  it->second.push_back(&s);
  return true;
}

bool SubscriptionIndex::remove_from(InterestSpace space, Subscriber& s, std::string_view channel) {
  const bool shard = space == InterestSpace::kShard;
  SubscriptionList& mine = shard ? s.shard_channels_ : s.channels_;
  if (!mine.contains(channel)) return false;
  ChannelMap& map = shard ? shard_channels_ : channels_;
  auto it = map.find(channel);
  erase_one(it->second, &s);  // invariant 1: present in the map because in `mine`
  if (it->second.empty()) {
    if (cluster_ != nullptr) cluster_->interest_removed(space, channel);  // invariant 6
    map.erase(it);
  }
  mine.erase(channel);  // last: `channel` may view the string it frees
  return true;
}

bool SubscriptionIndex::add_channel(Subscriber& s, std::string_view channel) {
  return add_to(InterestSpace::kChannel, s, channel);
}

bool SubscriptionIndex::remove_channel(Subscriber& s, std::string_view channel) {
  return remove_from(InterestSpace::kChannel, s, channel);
}

bool SubscriptionIndex::add_shard_channel(Subscriber& s, std::string_view channel) {
  return add_to(InterestSpace::kShard, s, channel);
}

bool SubscriptionIndex::remove_shard_channel(Subscriber& s, std::string_view channel) {
  return remove_from(InterestSpace::kShard, s, channel);
}

bool SubscriptionIndex::add(Subscriber& s, SubscriptionSpace space, std::string_view name) {
  switch (space) {
    case SubscriptionSpace::kPattern:
      return add_pattern(s, name);
    case SubscriptionSpace::kShard:
      return add_shard_channel(s, name);
    case SubscriptionSpace::kChannel:
      break;
  }
  return add_channel(s, name);
}

bool SubscriptionIndex::remove(Subscriber& s, SubscriptionSpace space, std::string_view name) {
  switch (space) {
    case SubscriptionSpace::kPattern:
      return remove_pattern(s, name);
    case SubscriptionSpace::kShard:
      return remove_shard_channel(s, name);
    case SubscriptionSpace::kChannel:
      break;
  }
  return remove_channel(s, name);
}

bool SubscriptionIndex::add_pattern(Subscriber& s, std::string_view pattern) {
  auto it = patterns_.find(pattern);
  if (it == patterns_.end()) {
    auto entry = std::make_unique<PatternEntry>();
    entry->pattern = std::string(pattern);
    trie_find_or_add(pattern.substr(0, glob_literal_prefix(pattern)))->patterns.push_back(entry.get());
    it = patterns_.emplace(std::string(pattern), std::move(entry)).first;
    if (cluster_ != nullptr) cluster_->interest_added(InterestSpace::kPattern, pattern);  // invariant 6
  }
  if (!s.patterns_.insert(pattern)) return false;
  it->second->subs.push_back(&s);
  return true;
}

bool SubscriptionIndex::remove_pattern(Subscriber& s, std::string_view pattern) {
  if (!s.patterns_.contains(pattern)) return false;
  auto it = patterns_.find(pattern);
  erase_one(it->second->subs, &s);  // invariant 1: present because in s.patterns_
  if (it->second->subs.empty()) {
    PatternEntry* entry = it->second.get();
    TrieNode* node = &root_;
    for (char c : pattern.substr(0, glob_literal_prefix(pattern))) {
      node = node->child(static_cast<unsigned char>(c));
    }
    auto& list = node->patterns;
    list.erase(std::find(list.begin(), list.end(), entry));
    if (cluster_ != nullptr) cluster_->interest_removed(InterestSpace::kPattern, pattern);  // invariant 6
    patterns_.erase(it);
    trie_prune(node);
  }
  s.patterns_.erase(pattern);  // last: `pattern` may view the string it frees
  return true;
}

void SubscriptionIndex::remove_all(Subscriber& s) { remove_some(s, SIZE_MAX); }

bool SubscriptionIndex::remove_some(Subscriber& s, std::size_t max) {
  for (; max > 0 && !s.channels_.empty(); --max) remove_channel(s, s.channels_.front());
  for (; max > 0 && !s.patterns_.empty(); --max) remove_pattern(s, s.patterns_.front());
  for (; max > 0 && !s.shard_channels_.empty(); --max) remove_shard_channel(s, s.shard_channels_.front());
  return s.subscription_count() == 0;
}

void SubscriptionIndex::set_qos1(Subscriber& s, SubscriptionSpace space, std::string_view name, bool qos1) noexcept {
  Subscriber::list_of(s, space).set_qos1(name, qos1);
}

void SubscriptionIndex::set_format(Subscriber& s, WireFormat f) noexcept {
  s.format_ = f;
  s.queue().set_format(f);
}

template <class F>
void SubscriptionIndex::for_each_matching_pattern(std::string_view channel, F&& f) const {
  // Invariant 2: only entries on the trie path spelled by the channel's bytes
  // can match, because a pattern's literal prefix must be a prefix of the channel.
  const TrieNode* node = &root_;
  for (std::size_t depth = 0;; ++depth) {
    for (const PatternEntry* e : node->patterns) {
      if (glob_match(e->pattern, channel)) f(*e);
    }
    if (depth == channel.size()) return;
    node = node->child(static_cast<unsigned char>(channel[depth]));
    if (node == nullptr) return;
  }
}

PublishOutcome SubscriptionIndex::publish(std::span<const Message> msgs, bool dedupe, std::span<std::size_t> receivers,
                                          std::span<std::uint64_t> ids) {
  return publish_runs(msgs, dedupe, /*shard=*/false, receivers, ids);
}

std::size_t SubscriptionIndex::report_upstream_loss(std::string_view channel, std::uint64_t lost) {
  thread_local std::vector<Subscriber*> told;
  told.clear();
  std::shared_lock lock(mu_);
  if (auto it = channels_.find(channel); it != channels_.end()) {
    told.insert(told.end(), it->second.begin(), it->second.end());
  }
  for_each_matching_pattern(channel,
                            [&](const PatternEntry& e) { told.insert(told.end(), e.subs.begin(), e.subs.end()); });
  std::sort(told.begin(), told.end());
  told.erase(std::unique(told.begin(), told.end()), told.end());  // one notice per connection
  for (Subscriber* s : told) {
    if (s->queue().note_upstream_loss(lost)) s->on_queue_ready();
  }
  return told.size();
}

PublishOutcome SubscriptionIndex::publish_shard(std::span<const Message> msgs, std::span<std::size_t> receivers) {
  return publish_runs(msgs, /*dedupe=*/false, /*shard=*/true, receivers, {});
}

PublishOutcome SubscriptionIndex::publish_runs(std::span<const Message> msgs, bool dedupe, bool shard,
                                               std::span<std::size_t> receivers, std::span<std::uint64_t> ids) {
  std::shared_lock lock(mu_);
  std::size_t i = 0;
  while (i < msgs.size()) {
    std::size_t j = i + 1;
    std::size_t bytes = msgs[i].payload.size();
    while (j < msgs.size() && j - i < kMaxRunMessages && bytes < kMaxRunBytes && msgs[j].channel == msgs[i].channel &&
           msgs[j].qos == msgs[i].qos) {
      bytes += msgs[j++].payload.size();
    }
    std::size_t accepted = 0;
    std::uint64_t first_id = 0;  // the channel's next
    bool unstored = false;
    const std::size_t n = publish_run(msgs.subspan(i, j - i), dedupe, shard, accepted, first_id, unstored);
    const auto at = [&](std::size_t k) { return receivers.begin() + static_cast<std::ptrdiff_t>(k); };
    std::fill(at(i), at(i + accepted), n);
    if (!ids.empty()) {
      for (std::size_t k = 0; k < j - i; ++k) ids[i + k] = k < accepted ? first_id + k : 0;
    }
    if (accepted < j - i) {
      using Status = PublishOutcome::Status;
      return {i + accepted, unstored ? Status::kNotStored : Status::kRefused};
    }
    i = j;
  }
  return {msgs.size(), PublishOutcome::Status::kPublished};
}

PublishOutcome SubscriptionIndex::publish_numbered(std::span<const Message> msgs, bool dedupe,
                                                   std::span<std::size_t> receivers,
                                                   std::span<const std::uint64_t> ids) {
  std::shared_lock lock(mu_);
  for (std::size_t i = 0; i < msgs.size(); ++i) {
    std::size_t accepted = 0;
    std::uint64_t id = ids[i];
    bool unstored = false;
    receivers[i] = publish_run(msgs.subspan(i, 1), dedupe, /*shard=*/false, accepted, id, unstored);
    if (accepted == 0) return {i, unstored ? PublishOutcome::Status::kNotStored : PublishOutcome::Status::kRefused};
  }
  return {msgs.size(), PublishOutcome::Status::kPublished};
}

SubscriptionIndex::IdStripe& SubscriptionIndex::id_stripe(std::string_view channel) noexcept {
  return id_stripes_[StringHash{}(channel) % kIdStripes];
}

std::size_t SubscriptionIndex::publish_run(std::span<const Message> run, bool dedupe, bool shard, std::size_t& accepted,
                                           std::uint64_t& first_id, bool& unstored) {
  // Invariant 4: the ids of this run and its pushes into queues happen under the
  // channel's stripe lock, so two publishers of one channel cannot interleave.
  const std::string_view channel = run.front().channel;
  IdStripe& stripe = id_stripe(channel);
  std::lock_guard lock(stripe.mu);
  IdMap& ids = shard ? stripe.shard : stripe.plain;
  auto it = ids.find(channel);  // heterogeneous: no allocation for a channel seen before
  // Invariant 5: a logged channel continues from its log after a restart.
  const std::uint64_t last = it != ids.end() ? it->second : log_ != nullptr && !shard ? log_->last_id(channel) : 0;
  if (first_id != 0 && first_id <= last) {  // numbered elsewhere, and published here before
    accepted = run.size();
    return 0;
  }
  if (first_id == 0) first_id = last + 1;
  const std::size_t receivers = publish_run_locked(run, dedupe, shard, first_id, accepted, unstored);
  if (accepted > 0) {
    if (it == ids.end()) it = ids.emplace(std::string(channel), 0).first;
    it->second = first_id + accepted - 1;
  }
  return receivers;
}

std::size_t SubscriptionIndex::publish_run_locked(std::span<const Message> run, bool dedupe, bool shard,
                                                  std::uint64_t first_id, std::size_t& accepted, bool& unstored) {
  // Per thread, keeping their capacity: a steady publisher does not allocate here.
  thread_local std::vector<Hit> hits;
  thread_local std::vector<SourceFrames> sources;
  thread_local std::vector<const FrameRef*> blocks;
  hits.clear();
  sources.clear();
  const std::string_view channel = run.front().channel;
  // One wall-clock read per run (a vDSO call), shared by its messages.
  const DeliveryRun base{DeliveryKind::kMessage, {}, run, first_id, wall_clock_ms(), run.front().qos};
  const ChannelMap& exact = shard ? shard_channels_ : channels_;
  if (auto it = exact.find(channel); it != exact.end()) {
    DeliveryRun r = base;
    r.kind = shard ? DeliveryKind::kShard : DeliveryKind::kMessage;
    sources.push_back({r, {}, {}});
    for (Subscriber* s : it->second) hits.push_back({s, static_cast<std::uint32_t>(hits.size()), 0});
  }
  if (!shard) {  // patterns never match shard channels (Redis 7 has no SPSUBSCRIBE)
    for_each_matching_pattern(channel, [&](const PatternEntry& e) {
      const auto source = static_cast<std::uint32_t>(sources.size());
      DeliveryRun r = base;
      r.kind = DeliveryKind::kPattern;
      r.pattern = e.pattern;
      sources.push_back({r, {}, {}});
      for (Subscriber* s : e.subs) hits.push_back({s, static_cast<std::uint32_t>(hits.size()), source});
    });
  }

  // A subscriber can be matched twice only through two sources: then group each
  // subscriber's hits, in delivery order, and where it gets one delivery per
  // message keep only its first.
  if (sources.size() > 1) {
    std::sort(hits.begin(), hits.end(),
              [](const Hit& a, const Hit& b) { return std::tie(a.sub, a.order) < std::tie(b.sub, b.order); });
    hits.erase(
        std::unique(hits.begin(), hits.end(),
                    [dedupe](const Hit& a, const Hit& b) { return a.sub == b.sub && one_delivery(a.sub, dedupe); }),
        hits.end());
  }
  // Seed 002 §5: refuse for the whole channel, never deliver to some and not
  // others. A subscriber matched several times is checked per matching source,
  // a lower bound of the room its interleaved block needs; the hard limit
  // catches the rest (connection_queue.hpp, kBlock).
  std::size_t allowed = run.size();
  for (const Hit& h : hits) {
    if (!h.sub->queue().blocking()) continue;  // one relaxed load per delivery
    allowed = std::min<std::size_t>(allowed, h.sub->queue().room_frames(sources[h.source].get(h.sub->format())));
  }
  if (allowed == 0) {
    hits.clear();
    sources.clear();
    accepted = 0;
    return 0;
  }
  if (allowed < run.size()) {
    // Rare: only the prefix that fits is published, from the frames above.
    run = run.first(allowed);
    for (SourceFrames& src : sources) src.truncate(allowed);
  }
  accepted = run.size();
  // Invariant 5: logged before any subscriber is offered the run; a QoS 1 run
  // that is not stored is offered to nobody.
  if (log_ != nullptr && !shard && !log_->append(channel, first_id, run, base.timestamp_ms) && base.qos == 1) {
    hits.clear();
    sources.clear();
    accepted = 0;
    unstored = true;
    return 0;
  }
  for (std::size_t g = 0; g < hits.size();) {
    Subscriber* s = hits[g].sub;
    std::size_t end = g + 1;
    while (end < hits.size() && hits[end].sub == s) ++end;
    if (end - g == 1) {
      deliver_from(s, sources[hits[g].source]);
    } else {
      // Matched several times (RESP, no dedupe): Redis's order per message is the
      // exact subscription's frame, then each matching pattern's, then the next
      // message. A rare case, so the frames are copied into a block of the
      // subscriber's own.
      blocks.clear();
      for (std::size_t h = g; h < end; ++h) blocks.push_back(&sources[hits[h].source].get(s->format()));
      deliver(s, interleave(blocks));
    }
    g = end;
  }
  sources.clear();  // release the blocks now, not at the next publish
  return hits.size();
}

std::vector<std::string> SubscriptionIndex::names_of(const ChannelMap& map,
                                                     std::optional<std::string_view> pattern) const {
  std::shared_lock lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, subs] : map) {
    if (!pattern || glob_match(*pattern, name)) out.push_back(name);
  }
  return out;
}

std::vector<std::string> SubscriptionIndex::channels(std::optional<std::string_view> pattern) const {
  return names_of(channels_, pattern);
}

std::vector<std::string> SubscriptionIndex::shard_channels(std::optional<std::string_view> pattern) const {
  return names_of(shard_channels_, pattern);
}

std::size_t SubscriptionIndex::shard_numsub(std::string_view channel) const {
  std::shared_lock lock(mu_);
  auto it = shard_channels_.find(channel);
  return it == shard_channels_.end() ? 0 : it->second.size();
}

std::size_t SubscriptionIndex::num_shard_channels() const {
  std::shared_lock lock(mu_);
  return shard_channels_.size();
}

std::size_t SubscriptionIndex::numsub(std::string_view channel) const {
  std::shared_lock lock(mu_);
  auto it = channels_.find(channel);
  return it == channels_.end() ? 0 : it->second.size();
}

std::size_t SubscriptionIndex::numpat() const {
  std::shared_lock lock(mu_);
  return patterns_.size();
}

std::size_t SubscriptionIndex::num_channels() const {
  std::shared_lock lock(mu_);
  return channels_.size();
}

}  // namespace ringcast::broker
