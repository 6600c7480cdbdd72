// open() on files that are not healthy rings: every case is layout_mismatch,
// not_ready or io_error, never a crash or an out-of-bounds access (this suite
// runs under ASan+UBSan in CI).
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <string>

#include "child_process.hpp"
#include "ringcast/broadcast_ring.hpp"
#include "test_support.hpp"

namespace ringcast {
namespace {

class BadFileTest : public ::testing::Test {
 protected:
  test::TempDir dir_;
  std::string path_ = dir_.path() + "/ring";

  // A valid ring's bytes, to be damaged by each test.
  std::string healthy_bytes(std::uint64_t capacity = 4) {
    { auto ring = BroadcastRing::create(path_, capacity); }
    std::string bytes = test::read_file(path_);
    ::unlink(path_.c_str());
    return bytes;
  }
  template <class T>
  static void poke(std::string& bytes, std::size_t offset, T value) {
    std::memcpy(bytes.data() + offset, &value, sizeof value);
  }
  Errc open_code(const std::string& bytes) {
    test::write_file(path_, bytes);
    auto ring = BroadcastRing::open(path_);
    return ring ? Errc::ok : ring.error().code;
  }
};

TEST_F(BadFileTest, HealthyBytesOpen) { EXPECT_EQ(open_code(healthy_bytes()), Errc::ok); }

TEST_F(BadFileTest, TruncatedFileIsLayoutMismatch) {
  const std::string bytes = healthy_bytes();
  EXPECT_EQ(open_code(bytes.substr(0, bytes.size() - 1)), Errc::layout_mismatch);
  EXPECT_EQ(open_code(bytes.substr(0, layout::kHeaderBytes - 1)), Errc::layout_mismatch);
  EXPECT_EQ(open_code(""), Errc::layout_mismatch);
}

TEST_F(BadFileTest, WrongMagicIsLayoutMismatch) {
  std::string bytes = healthy_bytes();
  poke<std::uint64_t>(bytes, 0, 0x1234);
  EXPECT_EQ(open_code(bytes), Errc::layout_mismatch);
}

TEST_F(BadFileTest, ZeroMagicIsNotReady) {
  std::string bytes = healthy_bytes();
  poke<std::uint64_t>(bytes, 0, 0);
  EXPECT_EQ(open_code(bytes), Errc::not_ready);
}

TEST_F(BadFileTest, WrongLayoutVersionIsLayoutMismatchNamingBothVersions) {
  std::string bytes = healthy_bytes();
  poke<std::uint32_t>(bytes, 8, kLayoutVersion + 1);
  EXPECT_EQ(open_code(bytes), Errc::layout_mismatch);
  const auto ring = BroadcastRing::open(path_);
  ASSERT_FALSE(ring);
  EXPECT_EQ(ring.error().found, kLayoutVersion + 1);
  EXPECT_EQ(ring.error().expected, kLayoutVersion);
  EXPECT_EQ(ring.error().message(), path_ + ": open: unsupported layout version: layout_mismatch (found " +
                                        std::to_string(kLayoutVersion + 1) + ", expected " +
                                        std::to_string(kLayoutVersion) + ")");
}

TEST_F(BadFileTest, WrongSlotSizeIsLayoutMismatchNamingBothSizes) {
  std::string bytes = healthy_bytes();
  poke<std::uint32_t>(bytes, 12, 128);
  EXPECT_EQ(open_code(bytes), Errc::layout_mismatch);
  const auto ring = BroadcastRing::open(path_);
  ASSERT_FALSE(ring);
  EXPECT_EQ(ring.error().message(), path_ + ": open: slot size is not 64: layout_mismatch (found 128, expected 64)");
}

TEST(ErrorMessageTest, JoinsWhatDetailAndStrerrorLeavingOutEmptyParts) {
  EXPECT_EQ(error_message("create", "open", EACCES), std::string("create: open: ") + std::strerror(EACCES));
  EXPECT_EQ(error_message("metrics", "address 'x'", 0), "metrics: address 'x'");
  EXPECT_EQ(error_message({}, "history dir /x: corrupt", 0), "history dir /x: corrupt");
  EXPECT_EQ(error_message("bind 127.0.0.1:1", {}, EADDRINUSE),
            std::string("bind 127.0.0.1:1: ") + std::strerror(EADDRINUSE));
  EXPECT_EQ((Error{Errc::io_error, EACCES, "create: open"}.message()),
            std::string("create: open: io_error: ") + std::strerror(EACCES));
}

TEST_F(BadFileTest, CapacityLargerThanFileIsLayoutMismatch) {
  std::string bytes = healthy_bytes(4);
  poke<std::uint64_t>(bytes, 16, 5);
  EXPECT_EQ(open_code(bytes), Errc::layout_mismatch);
  poke<std::uint64_t>(bytes, 16, ~std::uint64_t{0});
  EXPECT_EQ(open_code(bytes), Errc::layout_mismatch);
}

TEST_F(BadFileTest, ZeroCapacityIsLayoutMismatch) {
  std::string bytes = healthy_bytes();
  poke<std::uint64_t>(bytes, 16, 0);
  EXPECT_EQ(open_code(bytes), Errc::layout_mismatch);
  poke<std::uint64_t>(bytes, 16, 1);
  EXPECT_EQ(open_code(bytes), Errc::layout_mismatch);
}

TEST_F(BadFileTest, UnknownFlagsAreLayoutMismatch) {
  std::string bytes = healthy_bytes();
  poke<std::uint32_t>(bytes, 24, 0x80);
  EXPECT_EQ(open_code(bytes), Errc::layout_mismatch);
}

TEST_F(BadFileTest, RandomBytesNeverOpen) {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 200; ++round) {
    std::string bytes(layout::file_size(4), '\0');
    for (auto& b : bytes) b = static_cast<char>(rng());
    EXPECT_EQ(open_code(bytes), Errc::layout_mismatch);
  }
}

TEST_F(BadFileTest, DirectoryIsAnError) {
  auto ring = BroadcastRing::open(dir_.path());
  ASSERT_FALSE(ring);
  EXPECT_TRUE(ring.error().code == Errc::io_error || ring.error().code == Errc::layout_mismatch);
  auto created = BroadcastRing::create(dir_.path(), 4, {.replace = true});
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error().code, Errc::io_error);
}

TEST_F(BadFileTest, NoPermissionIsIoError) {
  ASSERT_TRUE(BroadcastRing::create(path_, 4));  // mode 0600, owned by us
  // Root ignores file modes, so check from a child that drops to nobody. Any
  // other owner is refused by mode 0000, in the child as in this process.
  if (::getuid() != 0) {
    ASSERT_EQ(::chmod(path_.c_str(), 0), 0);
  }
  const pid_t child = test::fork_with_death_signal();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const pid_t parent = ::getppid();  // still ours: its death would have killed us
    if (::getuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(2);
    test::die_with_parent(parent);  // the uid change cleared the death signal
    auto ring = BroadcastRing::open(path_);
    const bool ok = !ring && ring.error().code == Errc::io_error && ring.error().sys_errno == EACCES;
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST_F(BadFileTest, CorruptLengthInSlotIsReportedNotCopied) {
  auto ring = BroadcastRing::create(path_, 4);
  ASSERT_TRUE(ring);
  auto id = ring->register_consumer();
  ASSERT_EQ(ring->try_push(test::as_bytes("ok")), Errc::ok);
  // Another process with write access scribbles a huge length into the slot.
  const int fd = ::open(path_.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  const std::uint32_t huge = 0xFFFFFFFF;
  ASSERT_EQ(::pwrite(fd, &huge, sizeof huge, static_cast<off_t>(layout::kHeaderBytes + 8)), 4);
  ::close(fd);
  alignas(8) test::Buffer buf{};
  EXPECT_EQ(ring->try_recv(*id, buf).status, Errc::layout_mismatch);
}

}  // namespace
}  // namespace ringcast
