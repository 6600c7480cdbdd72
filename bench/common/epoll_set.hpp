// The load generators' reader threads: one thread watches every subscriber
// connection through one epoll set, instead of a thread per connection (which
// would measure the scheduler, not the server).
#pragma once

#include <sys/epoll.h>
#include <unistd.h>

#include <cstddef>
#include <vector>

namespace ringcast::bench {

// An epoll set (close-on-exec, level-triggered) watching N sockets for input;
// each event names its socket by index (data.u64), in the order given. Owns
// the epoll descriptor, not the sockets. One thread uses it.
class EpollSet {
 public:
  // Watches fd_of(i) for input, for i in [0, count).
  template <class FdOf>
  EpollSet(std::size_t count, FdOf fd_of) : ep_(::epoll_create1(EPOLL_CLOEXEC)) {
    for (std::size_t i = 0; i < count; ++i) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = i;
      ::epoll_ctl(ep_, EPOLL_CTL_ADD, fd_of(i), &ev);
    }
  }
  ~EpollSet() {
    if (ep_ >= 0) ::close(ep_);
  }
  EpollSet(const EpollSet&) = delete;
  EpollSet& operator=(const EpollSet&) = delete;

  // Waits up to timeout_ms for input and fills the front of `events`: returns
  // how many (0 on timeout, -1 with errno on failure, EINTR included).
  int wait(std::vector<epoll_event>& events, int timeout_ms) {
    return ::epoll_wait(ep_, events.data(), static_cast<int>(events.size()), timeout_ms);
  }

  // Stops watching `fd` (a connection that closed or failed).
  void remove(int fd) { ::epoll_ctl(ep_, EPOLL_CTL_DEL, fd, nullptr); }

 private:
  int ep_;
};

}  // namespace ringcast::bench
