// libnats starts threads of its own (timers, asynchronous callbacks, the
// garbage collector) on first use and ends them only in nats_Close. A test
// process that exits with them still running pays ThreadSanitizer's
// atexit_sleep_ms (1 s by default: it sleeps when a second thread is alive at
// exit, to catch races with exit-time destructors), once per test under ctest,
// where every test is a process of its own. After the last test, every
// connection is destroyed (each fixture's TearDown), so this closes the library
// and waits for its threads, as the tools do before they return from main;
// a thread of ours left running still meets the sleep.
// Linked into every test executable that uses libnats (tests/relay/CMakeLists.txt).
#include <nats/nats.h>

#include <gtest/gtest.h>

namespace {

class NatsLibrary final : public ::testing::Environment {
 public:
  void TearDown() override { nats_CloseAndWait(5000); }
};

[[maybe_unused]] const ::testing::Environment* const registered = ::testing::AddGlobalTestEnvironment(new NatsLibrary);

}  // namespace
