// Subscription index: which subscribers receive a message published on a channel.
//
// Thread safety:
//  * publish(), count queries and channels() take the index lock shared and may run
//    concurrently from any threads.
//  * Mutations (add_*/remove_*) require the caller to hold the lock returned by
//    lock_for_update(); they are called by a subscriber's owning thread only, so
//    a subscriber's own channel/pattern lists are never written concurrently.
//  * Publishers push into subscribers' queues while holding the shared lock and
//    their channel's id stripe lock (invariant 4), and nothing ever writes to a
//    socket while holding either. Lock order: index -> id stripe -> queue, and
//    id stripe -> the RunLog's own locks (history store: leaf locks, never
//    held while calling back into the index).
//
// Invariants:
//  1. A subscriber is in channels_[c] iff c is in its channels list, in
//     shard_channels_[c] iff c is in its shard channels list, and in a
//     PatternEntry's subs iff the pattern is in its patterns list; entries with
//     no subscriber are erased. Shard channels (Redis 7 SSUBSCRIBE) are a
//     namespace of their own: PUBLISH never reaches them, SPUBLISH reaches only
//     them.
//  2. Each pattern entry lives in the trie node reached by its literal prefix
//     (glob_literal_prefix), so a publish on channel c visits only the entries
//     whose prefix is a prefix of c, then checks each with glob_match.
//  3. A Subscriber is referenced by the index only between its first add and its
//     remove_all(); the owner calls remove_all() before destroying it, so
//     publishers (who hold the shared lock) never see a dead subscriber.
//  4. Message ids: every published message gets the next number of its
//     channel's sequence (1, 2, 3, ...; PUBLISH and SPUBLISH channels are
//     separate sequences). A run takes its ids and is pushed into every queue
//     while its channel's id stripe mutex is held (taken under the shared index
//     lock, before any queue lock), so each subscriber receives a channel's
//     messages in id order even when several threads publish on it at once.
//     The stripe mutex serialises only publishers of channels that hash to the
//     same stripe, which a plain per-channel lock would too, without a lock
//     object per channel. Refused messages (a `block` subscriber) take no id.
//     Memory: a channel that was ever published keeps its counter (its name,
//     8 bytes and a hash node, about 64 bytes plus the name) for the broker's
//     life, like a Redis key: the number of distinct channels published is the
//     bound (docs/broker.md, "Message ids").
//  5. With a RunLog (set before the first publish), a PUBLISH channel's first
//     id after start continues from RunLog::last_id, and every accepted run is
//     appended to the log under the stripe lock, after its ids are fixed and
//     before any queue is offered it. So while lock_for_update() is held the
//     log holds exactly the runs every current subscriber was offered: a
//     subscriber added then may replay the log and take live runs after it
//     with no gap and no duplicate (docs/guarantees.md, "Recovery"). A QoS 1
//     run the log fails to store is refused whole (kNotStored): it
//     takes no ids and no subscriber is offered it, so a puback always means
//     stored; a QoS 0 run is delivered anyway (the log counts the failure).
//  6. With a ClusterLink, the link is told when an entry of channels_,
//     shard_channels_ or patterns_ is created and when it is erased, under mu_
//     held exclusively: its interest is always the keys of those maps.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "broker/core/subscription_list.hpp"
#include "broker/queue/connection_queue.hpp"
#include "broker/queue/frame.hpp"
#include "broker/util/run_log.hpp"
#include "ringcast/broker/cluster.hpp"

namespace ringcast::broker {

class AckTracker;

// Which subscriptions an operation acts on: exact channels (SUBSCRIBE),
// patterns (PSUBSCRIBE) or shard channels (SSUBSCRIBE, a namespace of its
// own); the spaces a cluster link hears interest in.
using SubscriptionSpace = InterestSpace;

// How many deliveries a message makes to a subscriber several of whose
// subscriptions match it. The session decides, not the wire format: the index
// never asks which protocol a subscriber speaks.
enum class Deliveries : std::uint8_t {
  kPerSubscription,  // Redis's behaviour: one per matching subscription (unless --dedupe)
  kPerMessage,       // one per message (WebSocket clients; docs/broker.md, "JSON deliveries")
};

// What the index needs from a connection: its queue, its wire format, how many
// deliveries a message makes, and a way to wake its writer. Every client (core/client.hpp) and the tests' fakes derive
// from it.
class Subscriber {
 public:
  Subscriber(WireFormat format, Deliveries deliveries, QueueLimits limits, OverflowPolicy policy, const Clock& clock,
             FlowControl* flow = nullptr)
      : format_(format), deliveries_(deliveries), queue_(limits, policy, clock, flow) {
    queue_.set_format(format);
  }
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  [[nodiscard]] ConnectionQueue& queue() noexcept { return queue_; }
  [[nodiscard]] const ConnectionQueue& queue() const noexcept { return queue_; }

  // Format this subscriber's messages are encoded in. Written only through
  // SubscriptionIndex::set_format (update lock held); read by publishers under
  // the shared lock.
  [[nodiscard]] WireFormat format() const noexcept { return format_; }
  // Fixed for the subscriber's life.
  [[nodiscard]] Deliveries deliveries() const noexcept { return deliveries_; }

  // Called by a publisher (any thread, index lock held shared) or by the owner
  // when a push returned wake=true: the writer must run soon. Must not block or
  // write to the socket.
  virtual void on_queue_ready() noexcept = 0;

  // The subscriber's subscriptions in the order they were made (the order bare
  // UNSUBSCRIBE / PUNSUBSCRIBE / SUNSUBSCRIBE report them). Owner thread only.
  [[nodiscard]] const SubscriptionList& channels() const noexcept { return channels_; }
  [[nodiscard]] const SubscriptionList& patterns() const noexcept { return patterns_; }
  [[nodiscard]] const SubscriptionList& shard_channels() const noexcept { return shard_channels_; }
  [[nodiscard]] const SubscriptionList& subscriptions(SubscriptionSpace space) const noexcept {
    return list_of(*this, space);
  }
  // Channels, patterns and shard channels together.
  [[nodiscard]] std::size_t subscription_count() const noexcept {
    return channels_.size() + patterns_.size() + shard_channels_.size();
  }

  // QoS 1 (guarantees/ack_tracker.hpp): the tracker that QoS 1 publishes on
  // the subscriber's QoS 1 subscriptions go through, and whether its
  // subscription `name` in `space` is one (marked in the subscription's own
  // entry). Written through SubscriptionIndex (update lock held), read by
  // publishers under the shared lock.
  [[nodiscard]] AckTracker* ack_tracker() const noexcept { return ack_tracker_; }
  [[nodiscard]] bool qos1_for(SubscriptionSpace space, std::string_view name) const noexcept {
    return subscriptions(space).qos1(name);
  }

 protected:
  virtual ~Subscriber() = default;

 private:
  friend class SubscriptionIndex;
  // The list of `space`, const or not as `self`.
  template <class Self>
  static auto list_of(Self& self, SubscriptionSpace space) noexcept -> decltype((self.channels_)) {
    switch (space) {
      case SubscriptionSpace::kPattern:
        return self.patterns_;
      case SubscriptionSpace::kShard:
        return self.shard_channels_;
      case SubscriptionSpace::kChannel:
        break;
    }
    return self.channels_;
  }

  WireFormat format_ = WireFormat::kResp2;
  const Deliveries deliveries_;
  ConnectionQueue queue_;
  SubscriptionList channels_;
  SubscriptionList patterns_;
  SubscriptionList shard_channels_;
  AckTracker* ack_tracker_ = nullptr;
};

// How a publish into the index ended (SubscriptionIndex::publish): messages
// [0, published) were offered to their subscribers; when that is fewer than
// given, message `published` was refused, for `status`, and the later ones
// were not tried. A refused message took no id and reached nobody.
struct PublishOutcome {
  enum class Status : std::uint8_t {
    kPublished,  // every message was offered
    kRefused,    // a `block` subscriber it would reach had no room
    kNotStored,  // it is QoS 1 and the RunLog failed to store its run (invariant 5)
    // It could not leave this node (ClusterLink::ready said no; decided by
    // BrokerCore::publish, never by the index): refused like kRefused.
    kUnreachable,
    // The cluster's history could not take it yet: the link's bound of
    // stores awaiting acknowledgement was reached (ClusterLink::store said
    // kBusy; decided by BrokerCore::publish). Held like kRefused, for at
    // least the link's busy_hold().
    kBacklogged,
  };
  std::size_t published = 0;
  Status status = Status::kPublished;
};

class SubscriptionIndex {
 public:
  // `log` (may be null) must outlive the index (invariant 5), and so must
  // `cluster` (may be null: one node; invariant 6).
  explicit SubscriptionIndex(RunLog* log = nullptr, ClusterLink* cluster = nullptr);
  [[nodiscard]] ClusterLink* cluster() const noexcept { return cluster_; }
  ~SubscriptionIndex();
  SubscriptionIndex(const SubscriptionIndex&) = delete;
  SubscriptionIndex& operator=(const SubscriptionIndex&) = delete;

  // Exclusive lock for the mutations below. Hold it while queueing a subscribe or
  // unsubscribe confirmation too, so that no message for that channel can be
  // queued on the wrong side of the confirmation.
  [[nodiscard]] std::unique_lock<std::shared_mutex> lock_for_update() {
    return std::unique_lock<std::shared_mutex>(mu_);
  }
  // Each returns true if the subscription was added / removed, false if it was
  // already present / absent. REQUIRES: lock_for_update() held, owner thread.
  bool add_channel(Subscriber& s, std::string_view channel);
  bool remove_channel(Subscriber& s, std::string_view channel);
  bool add_pattern(Subscriber& s, std::string_view pattern);
  bool remove_pattern(Subscriber& s, std::string_view pattern);
  bool add_shard_channel(Subscriber& s, std::string_view channel);
  bool remove_shard_channel(Subscriber& s, std::string_view channel);
  // The one of the above that `space` names.
  bool add(Subscriber& s, SubscriptionSpace space, std::string_view name);
  bool remove(Subscriber& s, SubscriptionSpace space, std::string_view name);
  // Drops every subscription of `s`. REQUIRES: lock_for_update() held.
  void remove_all(Subscriber& s);
  // Drops at most `max` subscriptions of `s` (the oldest first) and returns
  // whether none is left: a caller removing many releases the update lock
  // between slices, so that publishers never wait for more than one slice
  // (SubscriptionUpdate::unsubscribe_all). Each removal costs O(1) plus the
  // channel's or pattern's subscriber count. REQUIRES: lock_for_update() held.
  bool remove_some(Subscriber& s, std::size_t max);
  // Changes the format messages to `s` are encoded in (and its queue's loss
  // notices). REQUIRES: lock_for_update() held.
  void set_format(Subscriber& s, WireFormat f) noexcept;
  // QoS 1: `tracker` (null: none) takes s's QoS 1 deliveries; set_qos1 marks
  // s's subscription `name` in `space` as QoS 1 or not (the mark goes when
  // the subscription does). The tracker must outlive s's subscriptions.
  // REQUIRES: lock_for_update() held; s subscribed to `name` in `space`.
  void set_ack_tracker(Subscriber& s, AckTracker* tracker) noexcept { s.ack_tracker_ = tracker; }
  void set_qos1(Subscriber& s, SubscriptionSpace space, std::string_view name, bool qos1) noexcept;

  // Publishes `msgs` in order, exactly as one publish per message would, and
  // stores each message's PUBLISH reply (the number of deliveries) in
  // `receivers[i]`. Every matching exact subscription gets a `message` frame and
  // every matching pattern subscription a `pmessage` frame; with `dedupe`, a
  // subscriber matched several times receives only the first (its exact
  // subscription, else its first matching pattern in trie order), and the reply
  // counts subscribers. Wakes writers as needed.
  //
  // `block` subscribers (seed 002 §5): a message is offered to nobody unless
  // every blocking subscriber it would reach has room for it
  // (ConnectionQueue::room_frames); otherwise it is refused and the call
  // returns there (PublishOutcome), leaving the later receivers untouched: the
  // caller decides whether to wait, retry or skip it. Costs one relaxed load
  // per delivery, plus one queue lock per blocking subscriber. A QoS 1 run the
  // RunLog cannot store is refused the same way, with kNotStored (invariant 5).
  //
  // Consecutive messages on one channel form a run (at most 1024 messages or
  // 1 MiB of payload): the run is encoded once per wire format that has
  // subscribers and per pattern into one block, and each subscriber gets the
  // whole run with one queue push (one lock, one reference). Only a RESP
  // subscriber matched several times without dedupe gets a block of its own, a
  // copy with its frames interleaved per message as Redis sends them. A JSON
  // subscriber matched several times gets one delivery per message (its exact
  // subscription's, else its first matching pattern's), dedupe or not. Each
  // message gets its channel's next id (invariant 4), stored in ids[i] when
  // `ids` is not empty (0 for a refused message), and accepted runs go to the
  // RunLog (invariant 5).
  //
  // QoS 1 (Message::qos == 1): a subscriber whose delivery comes through one of
  // its QoS 1 subscriptions gets frames marked qos 1 through its AckTracker
  // (window, redelivery); everybody else gets them as QoS 0. Messages of
  // different qos never share a run.
  // REQUIRES: receivers.size() == msgs.size(); ids empty or ids.size() == msgs.size().
  PublishOutcome publish(std::span<const Message> msgs, bool dedupe, std::span<std::size_t> receivers,
                         std::span<std::uint64_t> ids = {});
  // Tells every connection with a subscription matching `channel` (exact or
  // pattern; not shard) that `lost` messages on it were lost before the broker
  // (ConnectionQueue::note_upstream_loss): one loss notice per connection,
  // queued ahead of the channel's next message. Returns how many connections
  // were told. Takes the index lock shared; allocates only the notices.
  std::size_t report_upstream_loss(std::string_view channel, std::uint64_t lost);
  // SPUBLISH: as publish(), but only shard subscriptions of each channel match,
  // each getting an `smessage` frame; patterns and plain subscriptions never do.
  // REQUIRES: receivers.size() == msgs.size().
  PublishOutcome publish_shard(std::span<const Message> msgs, std::span<std::size_t> receivers);

  // Messages numbered elsewhere (a cluster's history, ClusterLink::
  // open_history): each published as publish() does, one run each, with
  // ids[i] as its id instead of its channel's next; the channel's numbering
  // continues after it (invariant 4 with holes: the ids still only grow). A
  // message whose id is at or below its channel's last was published here
  // before: skipped, with 0 receivers. PUBLISH channels only.
  // REQUIRES: receivers.size() == ids.size() == msgs.size().
  PublishOutcome publish_numbered(std::span<const Message> msgs, bool dedupe, std::span<std::size_t> receivers,
                                  std::span<const std::uint64_t> ids);

  // PUBSUB CHANNELS [pattern]: active channels, optionally filtered by glob.
  [[nodiscard]] std::vector<std::string> channels(std::optional<std::string_view> pattern) const;
  // PUBSUB NUMSUB: subscribers of one channel (exact subscriptions only, as Redis).
  [[nodiscard]] std::size_t numsub(std::string_view channel) const;
  // PUBSUB NUMPAT: distinct patterns with at least one subscriber.
  [[nodiscard]] std::size_t numpat() const;
  [[nodiscard]] std::size_t num_channels() const;
  // PUBSUB SHARDCHANNELS [pattern] and SHARDNUMSUB: the same over shard channels.
  [[nodiscard]] std::vector<std::string> shard_channels(std::optional<std::string_view> pattern) const;
  [[nodiscard]] std::size_t shard_numsub(std::string_view channel) const;
  [[nodiscard]] std::size_t num_shard_channels() const;

 private:
  struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  using ChannelMap = std::unordered_map<std::string, std::vector<Subscriber*>, StringHash, std::equal_to<>>;
  struct PatternEntry {
    std::string pattern;
    std::vector<Subscriber*> subs;
  };
  struct TrieNode {
    unsigned char byte = 0;
    TrieNode* parent = nullptr;
    std::vector<std::unique_ptr<TrieNode>> children;  // sorted by byte
    std::vector<PatternEntry*> patterns;              // patterns whose literal prefix ends here
    [[nodiscard]] TrieNode* child(unsigned char b) const noexcept;
  };

  // Calls f(const PatternEntry&) for each pattern matching `channel`.
  // REQUIRES: mu_ held (shared or exclusive).
  template <class F>
  void for_each_matching_pattern(std::string_view channel, F&& f) const;
  // Splits `msgs` into runs and publishes each (publish, publish_shard).
  PublishOutcome publish_runs(std::span<const Message> msgs, bool dedupe, bool shard, std::span<std::size_t> receivers,
                              std::span<std::uint64_t> ids);
  // Publishes one run (messages sharing a channel) to the channel's plain and
  // pattern subscriptions, or with `shard` to its shard subscriptions only, or
  // the prefix of it that every blocking subscriber has room for; stores that
  // prefix's length in `accepted` and returns its reply count. `first_id`: 0
  // on entry takes the channel's next ids and stores the first; otherwise the
  // id given (publish_numbered). `unstored`: the run was refused because the
  // log could not store it (invariant 5; accepted is 0).
  // REQUIRES: mu_ held shared.
  std::size_t publish_run(std::span<const Message> run, bool dedupe, bool shard, std::size_t& accepted,
                          std::uint64_t& first_id, bool& unstored);
  // publish_run once the stripe lock is held and the first id known.
  std::size_t publish_run_locked(std::span<const Message> run, bool dedupe, bool shard, std::uint64_t first_id,
                                 std::size_t& accepted, bool& unstored);
  bool add_to(InterestSpace space, Subscriber& s, std::string_view channel);
  bool remove_from(InterestSpace space, Subscriber& s, std::string_view channel);
  [[nodiscard]] std::vector<std::string> names_of(const ChannelMap& map, std::optional<std::string_view> pattern) const;
  TrieNode* trie_find_or_add(std::string_view prefix);
  void trie_prune(TrieNode* node) noexcept;

  // Invariant 4. Each stripe on a cache line of its own: publishers of
  // different stripes do not share one.
  using IdMap = std::unordered_map<std::string, std::uint64_t, StringHash, std::equal_to<>>;
  struct alignas(64) IdStripe {
    std::mutex mu;
    IdMap plain;  // the last id given, per PUBLISH channel
    IdMap shard;  // per SPUBLISH channel
  };
  static constexpr std::size_t kIdStripes = 64;
  IdStripe& id_stripe(std::string_view channel) noexcept;

  RunLog* const log_;           // invariant 5
  ClusterLink* const cluster_;  // invariant 6
  mutable std::shared_mutex mu_;
  std::array<IdStripe, kIdStripes> id_stripes_;
  ChannelMap channels_;
  ChannelMap shard_channels_;
  std::unordered_map<std::string, std::unique_ptr<PatternEntry>, StringHash, std::equal_to<>> patterns_;
  TrieNode root_;
};

}  // namespace ringcast::broker
