#include "broker/subscription_index.hpp"

#include <algorithm>
#include <tuple>

#include "broker/glob.hpp"

namespace ringcast::broker {

namespace {

bool erase_one(std::vector<Subscriber*>& v, const Subscriber* s) noexcept {
  auto it = std::find(v.begin(), v.end(), s);
  if (it == v.end()) return false;
  *it = v.back();
  v.pop_back();
  return true;
}

bool erase_name(std::vector<std::string>& v, std::string_view name) {
  auto it = std::find(v.begin(), v.end(), name);
  if (it == v.end()) return false;
  v.erase(it);  // keep subscription order: bare UNSUBSCRIBE reports in this order
  return true;
}

// Frames of one publish, encoded on first use per protocol version.
struct LazyFrames {
  FrameRef f[2];
  const FrameRef& get(Resp r, auto&& encode) {
    FrameRef& slot = f[r == Resp::kResp3 ? 1 : 0];
    if (!slot) slot = encode(r);
    return slot;
  }
};

void deliver(Subscriber* s, const FrameRef& frame, PublishResult& r) noexcept {
  ++r.receivers;
  const PushResult p = s->queue().push(frame);
  if (p.status == PushStatus::kQueued) {
    ++r.queued;
  } else {
    ++r.dropped;
  }
  if (p.wake) s->on_queue_ready();
}

}  // namespace

SubscriptionIndex::SubscriptionIndex() = default;
SubscriptionIndex::~SubscriptionIndex() = default;

SubscriptionIndex::TrieNode* SubscriptionIndex::TrieNode::child(unsigned char b) const noexcept {
  auto it = std::lower_bound(children.begin(), children.end(), b,
                             [](const std::unique_ptr<TrieNode>& n, unsigned char v) {
                               return n->byte < v;
                             });
  return it != children.end() && (*it)->byte == b ? it->get() : nullptr;
}

SubscriptionIndex::TrieNode* SubscriptionIndex::trie_find_or_add(std::string_view prefix) {
  TrieNode* node = &root_;
  for (char c : prefix) {
    const auto b = static_cast<unsigned char>(c);
    auto it = std::lower_bound(node->children.begin(), node->children.end(), b,
                               [](const std::unique_ptr<TrieNode>& n, unsigned char v) {
                                 return n->byte < v;
                               });
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
    kids.erase(std::find_if(kids.begin(), kids.end(),
                            [node](const std::unique_ptr<TrieNode>& n) { return n.get() == node; }));
    node = parent;
  }
}

bool SubscriptionIndex::add_channel(Subscriber& s, std::string_view channel) {
  auto it = channels_.find(channel);
  if (it == channels_.end()) it = channels_.emplace(std::string(channel), 0).first;
  auto& subs = it->second;
  if (std::find(subs.begin(), subs.end(), &s) != subs.end()) return false;
  subs.push_back(&s);
  s.channels_.emplace_back(channel);
  return true;
}

bool SubscriptionIndex::remove_channel(Subscriber& s, std::string_view channel) {
  auto it = channels_.find(channel);
  if (it == channels_.end() || !erase_one(it->second, &s)) return false;
  if (it->second.empty()) channels_.erase(it);
  erase_name(s.channels_, channel);
  return true;
}

bool SubscriptionIndex::add_pattern(Subscriber& s, std::string_view pattern) {
  auto it = patterns_.find(pattern);
  if (it == patterns_.end()) {
    auto entry = std::make_unique<PatternEntry>();
    entry->pattern = std::string(pattern);
    trie_find_or_add(pattern.substr(0, glob_literal_prefix(pattern)))->patterns.push_back(entry.get());
    it = patterns_.emplace(std::string(pattern), std::move(entry)).first;
  }
  auto& subs = it->second->subs;
  if (std::find(subs.begin(), subs.end(), &s) != subs.end()) return false;
  subs.push_back(&s);
  s.patterns_.emplace_back(pattern);
  return true;
}

bool SubscriptionIndex::remove_pattern(Subscriber& s, std::string_view pattern) {
  auto it = patterns_.find(pattern);
  if (it == patterns_.end() || !erase_one(it->second->subs, &s)) return false;
  erase_name(s.patterns_, pattern);
  if (it->second->subs.empty()) {
    PatternEntry* entry = it->second.get();
    TrieNode* node = &root_;
    for (char c : pattern.substr(0, glob_literal_prefix(pattern))) {
      node = node->child(static_cast<unsigned char>(c));
    }
    auto& list = node->patterns;
    list.erase(std::find(list.begin(), list.end(), entry));
    patterns_.erase(it);
    trie_prune(node);
  }
  return true;
}

void SubscriptionIndex::remove_all(Subscriber& s) {
  while (!s.channels_.empty()) {
    const std::string c = s.channels_.back();
    remove_channel(s, c);
  }
  while (!s.patterns_.empty()) {
    const std::string p = s.patterns_.back();
    remove_pattern(s, p);
  }
}

void SubscriptionIndex::set_resp(Subscriber& s, Resp r) noexcept {
  s.resp_ = r;
  s.queue().set_resp(r);
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

PublishResult SubscriptionIndex::publish(std::string_view channel, std::string_view payload,
                                         bool dedupe) {
  std::shared_lock lock(mu_);
  PublishResult result;
  LazyFrames message;
  auto encode_msg = [&](Resp r) { return encode_message(r, channel, payload); };

  if (!dedupe) {
    if (auto it = channels_.find(channel); it != channels_.end()) {
      for (Subscriber* s : it->second) deliver(s, message.get(s->resp(), encode_msg), result);
    }
    for_each_matching_pattern(channel, [&](const PatternEntry& e) {
      LazyFrames pmessage;
      auto encode_pm = [&](Resp r) { return encode_pmessage(r, e.pattern, channel, payload); };
      for (Subscriber* s : e.subs) deliver(s, pmessage.get(s->resp(), encode_pm), result);
    });
    return result;
  }

  // Dedupe: gather (subscriber, order, source) and deliver the first per
  // subscriber. The vectors are per thread and keep their capacity, so a steady
  // publisher does not allocate here.
  struct Hit {
    Subscriber* sub;
    std::size_t order;
    const PatternEntry* entry;  // nullptr: exact subscription
  };
  thread_local std::vector<Hit> hits;
  hits.clear();
  if (auto it = channels_.find(channel); it != channels_.end()) {
    for (Subscriber* s : it->second) hits.push_back({s, hits.size(), nullptr});
  }
  for_each_matching_pattern(channel, [&](const PatternEntry& e) {
    for (Subscriber* s : e.subs) hits.push_back({s, hits.size(), &e});
  });
  std::sort(hits.begin(), hits.end(), [](const Hit& a, const Hit& b) {
    return std::tie(a.sub, a.order) < std::tie(b.sub, b.order);
  });
  // pmessage frames per matched pattern, encoded once each.
  struct PatternFrames {
    const PatternEntry* entry;
    LazyFrames frames;
  };
  thread_local std::vector<PatternFrames> pframes;
  pframes.clear();
  for (std::size_t i = 0; i < hits.size(); ++i) {
    if (i > 0 && hits[i].sub == hits[i - 1].sub) continue;
    Subscriber* s = hits[i].sub;
    const PatternEntry* e = hits[i].entry;
    if (e == nullptr) {
      deliver(s, message.get(s->resp(), encode_msg), result);
      continue;
    }
    auto pf = std::find_if(pframes.begin(), pframes.end(),
                           [e](const PatternFrames& p) { return p.entry == e; });
    if (pf == pframes.end()) {
      pframes.push_back({e, {}});
      pf = pframes.end() - 1;
    }
    auto encode_pm = [&](Resp r) { return encode_pmessage(r, e->pattern, channel, payload); };
    deliver(s, pf->frames.get(s->resp(), encode_pm), result);
  }
  pframes.clear();  // release the frames now, not at the next publish
  return result;
}

std::vector<std::string> SubscriptionIndex::channels(std::optional<std::string_view> pattern) const {
  std::shared_lock lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, subs] : channels_) {
    if (!pattern || glob_match(*pattern, name)) out.push_back(name);
  }
  return out;
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
