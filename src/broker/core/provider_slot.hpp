// A callback the embedder installs, replaces or removes from any thread while
// broker threads call it (InfoProvider, MetricsProvider).
//
// Thread safety: set() and get() from any thread. get() returns a reference to
// the callback installed at that instant; a caller runs it outside every broker
// lock, and a set() meanwhile does not destroy it under the caller.
#pragma once

#include <memory>
#include <mutex>
#include <utility>

namespace ringcast::broker {

template <class Fn>
class ProviderSlot {
 public:
  // An empty `fn` removes the callback.
  void set(Fn fn) {
    auto p = fn ? std::make_shared<const Fn>(std::move(fn)) : nullptr;
    std::lock_guard lock(mu_);
    fn_.swap(p);  // the old callback is released outside the lock, with p
  }
  // nullptr while none is installed.
  [[nodiscard]] std::shared_ptr<const Fn> get() const {
    std::lock_guard lock(mu_);
    return fn_;
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const Fn> fn_;  // guarded by mu_
};

}  // namespace ringcast::broker
