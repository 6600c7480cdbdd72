// Built with RINGCAST_TEST_BROKEN_SEQLOCK: the reader's second version check is
// compiled out, which is the bug the torn-read stress exists to catch. This
// test passes only if the stress detects torn payloads, proving that a zero
// in concurrency_test means something.
#include <gtest/gtest.h>

#include "torn_read_stress.hpp"

namespace ringcast {
namespace {

TEST(SeqlockDetectorTest, StressCatchesReaderWithoutVersionRecheck) {
  const test::StressResult r = test::run_torn_read_stress(
      {.capacity = 2, .lossy = true, .readers = 1, .max_messages = ~std::uint64_t{0},
       .max_time = std::chrono::milliseconds(30'000), .stop_at_first_tear = true});
  EXPECT_GT(r.torn, 0U) << "pushed " << r.pushed << ", received " << r.received;
}

}  // namespace
}  // namespace ringcast
