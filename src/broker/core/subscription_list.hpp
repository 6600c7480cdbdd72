// One connection's subscriptions in one space (channels, patterns, shard
// channels, or its QoS 1 names): a set that remembers the order names were
// added, because bare UNSUBSCRIBE reports them in that order.
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
#include <list>
#include <string>
#include <string_view>
#include <unordered_map>

namespace ringcast::broker {

class SubscriptionList {
 public:
  using const_iterator = std::list<std::string>::const_iterator;

  SubscriptionList() = default;
  // Not copyable: the map's keys view the list's strings.
  SubscriptionList(const SubscriptionList&) = delete;
  SubscriptionList& operator=(const SubscriptionList&) = delete;

  [[nodiscard]] bool contains(std::string_view name) const noexcept { return where_.find(name) != where_.end(); }
  // Appends `name`; false if it was already present.
  bool insert(std::string_view name) {
    if (contains(name)) return false;
    names_.emplace_back(name);
    where_.emplace(names_.back(), std::prev(names_.end()));
    return true;
  }
  // Removes `name`; false if it was absent.
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
  [[nodiscard]] std::size_t size() const noexcept { return names_.size(); }
  [[nodiscard]] bool empty() const noexcept { return names_.empty(); }
  // The names in the order they were added.
  [[nodiscard]] const_iterator begin() const noexcept { return names_.begin(); }
  [[nodiscard]] const_iterator end() const noexcept { return names_.end(); }
  [[nodiscard]] const std::string& front() const noexcept { return names_.front(); }

 private:
  std::list<std::string> names_;                                // in insertion order; nodes never move
  std::unordered_map<std::string_view, const_iterator> where_;  // keys view names_' strings
};

}  // namespace ringcast::broker
