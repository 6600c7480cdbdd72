// Waiting for state that nothing announces: a consumer registering in a ring,
// a counter reaching a value, a screen showing a line. The test polls what it
// can observe, with a bound: the bound turns a hang into a failure and is
// never a timing the test relies on (a slow machine only polls longer).
#pragma once

#include <chrono>
#include <thread>

#include "deadline.hpp"

namespace ringcast::test {

// Calls `condition` every `step` until it returns true (true) or `timeout`
// has passed (false). A condition that is expensive to look at (a process to
// run) wants a longer step.
template <class Condition>
bool eventually(Condition&& condition, std::chrono::milliseconds timeout = std::chrono::seconds(20),
                std::chrono::milliseconds step = std::chrono::milliseconds(2)) {
  const Deadline d = deadline_in(timeout);
  for (;;) {
    if (condition()) return true;
    if (ms_left(d) == 0) return false;
    std::this_thread::sleep_for(step);
  }
}

}  // namespace ringcast::test
