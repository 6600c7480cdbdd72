#include "broker/server/io_worker.hpp"

#include <algorithm>

#include "broker/server/connection.hpp"

namespace ringcast::broker {

void IoWorker::drain() {
  {
    std::lock_guard lock(ready_mu_);
    drain_posted_ = false;
    if (drain_pos_ == draining_.size()) {  // the last pass is done: start the next
      draining_.clear();
      drain_pos_ = 0;
      draining_.swap(ready_);  // ready_ keeps the old capacity: no allocation
    }
  }
  // Connections in draining_ are alive: each unmarks itself (here too) in
  // teardown, before it can die. flush() never adds to draining_.
  const std::size_t end = std::min(draining_.size(), drain_pos_ + kDrainSlice);
  while (drain_pos_ < end) {
    Connection* c = draining_[drain_pos_++];
    if (c != nullptr) c->flush();
  }
  if (drain_pos_ == draining_.size()) {  // pass done: teardown's unmark() has nothing to scan
    draining_.clear();
    drain_pos_ = 0;
  }
  // More owed (the rest of this pass, or entries that a mark_ready added to
  // ready_ while an earlier continuation was posted, so it did not post):
  // make sure a drain is posted.
  bool post = false;
  {
    std::lock_guard lock(ready_mu_);
    post = !drain_posted_ && (drain_pos_ < draining_.size() || !ready_.empty());
    drain_posted_ = drain_posted_ || post;
  }
  if (post) asio::post(ctx_, [this] { drain(); });
}

void IoWorker::close_all() {
  stopping_ = true;
  std::vector<std::shared_ptr<Connection>> all(conns_.begin(), conns_.end());
  for (auto& c : all) c->shutdown();
}

}  // namespace ringcast::broker
