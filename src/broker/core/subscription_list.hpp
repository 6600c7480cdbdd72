// One connection's subscriptions in one space (channels, patterns or shard
// channels): a set that remembers the order names were added, because bare
// UNSUBSCRIBE reports them in that order, and marks each QoS 1 or not. The
// mark lives in the name's own node (which a bool does not make larger: the
// node is a 64-byte malloc chunk either way), so a QoS 1 subscription costs
// nothing over a QoS 0 one.
//
// Every operation costs O(1) (one hash lookup) and iteration O(size), so no
// sequence of commands from one client costs it, or the publishers waiting on
// the index lock it holds, more than linear time (issue 40: 50,000 removals
// searched a vector from the front, quadratic under the lock).
//
// Thread safety: none; a Subscriber's lists are written by its owning thread
// under the index's update lock and read by publishers under the shared lock
// (subscription_index.hpp).
#pragma once

#include <cstddef>
#include <functional>
#include <iterator>
#include <list>
#include <string>
#include <string_view>
#include <unordered_map>

namespace ringcast::broker {

class SubscriptionList {
  struct Entry {
    std::string name;
    bool qos1 = false;
  };

 public:
  // Iterates the names in the order they were added.
  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = std::string;
    using difference_type = std::ptrdiff_t;
    using pointer = const std::string*;
    using reference = const std::string&;

    const_iterator() = default;
    reference operator*() const noexcept { return at_->name; }
    pointer operator->() const noexcept { return &at_->name; }
    const_iterator& operator++() noexcept {
      ++at_;
      return *this;
    }
    const_iterator operator++(int) noexcept { return const_iterator(at_++); }
    bool operator==(const const_iterator&) const = default;

   private:
    friend class SubscriptionList;
    explicit const_iterator(std::list<Entry>::const_iterator at) noexcept : at_(at) {}
    std::list<Entry>::const_iterator at_;
  };

  SubscriptionList() = default;
  // Not copyable: the map's keys view the list's strings.
  SubscriptionList(const SubscriptionList&) = delete;
  SubscriptionList& operator=(const SubscriptionList&) = delete;

  [[nodiscard]] bool contains(std::string_view name) const noexcept { return where_.find(name) != where_.end(); }
  // Appends `name`, not marked QoS 1; false if it was already present.
  bool insert(std::string_view name) {
    if (contains(name)) return false;
    names_.push_back(Entry{std::string(name)});
    where_.emplace(names_.back().name, std::prev(names_.end()));
    return true;
  }
  // Removes `name` and its mark; false if it was absent.
  bool erase(std::string_view name) noexcept {
    const auto it = where_.find(name);
    if (it == where_.end()) return false;
    const auto at = it->second;
    where_.erase(it);  // before the string its key views is freed
    names_.erase(at);
    return true;
  }
  void clear() noexcept {
    where_.clear();
    names_.clear();
  }
  // Marks `name` QoS 1 or not; false if it is absent.
  bool set_qos1(std::string_view name, bool qos1) noexcept {
    const auto it = where_.find(name);
    if (it == where_.end()) return false;
    it->second->qos1 = qos1;
    return true;
  }
  // Present and marked QoS 1.
  [[nodiscard]] bool qos1(std::string_view name) const noexcept {
    const auto it = where_.find(name);
    return it != where_.end() && it->second->qos1;
  }
  [[nodiscard]] std::size_t size() const noexcept { return names_.size(); }
  [[nodiscard]] bool empty() const noexcept { return names_.empty(); }
  [[nodiscard]] const_iterator begin() const noexcept { return const_iterator(names_.begin()); }
  [[nodiscard]] const_iterator end() const noexcept { return const_iterator(names_.end()); }
  [[nodiscard]] const std::string& front() const noexcept { return names_.front().name; }

 private:
  std::list<Entry> names_;                                                  // in insertion order; nodes never move
  std::unordered_map<std::string_view, std::list<Entry>::iterator> where_;  // keys view names_' strings
};

}  // namespace ringcast::broker
