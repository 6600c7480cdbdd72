#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "ringcast/broker/config.hpp"
#include "ringcast/broker/error.hpp"

namespace ringcast::broker {
namespace {

TEST(ConfigTest, SizesTakeRedisSuffixes) {
  EXPECT_EQ(parse_size("4096"), 4096u);
  EXPECT_EQ(parse_size("64k"), 64u << 10);
  EXPECT_EQ(parse_size("8MB"), 8u << 20);
  EXPECT_EQ(parse_size("1gb"), std::size_t{1} << 30);
  EXPECT_FALSE(parse_size("mb"));
  EXPECT_FALSE(parse_size("12x"));
  EXPECT_FALSE(parse_size(""));
  EXPECT_FALSE(parse_size("99999999999999999999gb"));
}

TEST(ConfigTest, DurationsTakeUnitsFromMillisecondsToDays) {
  using std::chrono::milliseconds;
  EXPECT_EQ(parse_duration("250ms"), milliseconds(250));
  EXPECT_EQ(parse_duration("30"), milliseconds(30'000)) << "bare: seconds";
  EXPECT_EQ(parse_duration("30s"), milliseconds(30'000));
  EXPECT_EQ(parse_duration("10m"), milliseconds(600'000));
  EXPECT_EQ(parse_duration("24h"), milliseconds(86'400'000));
  EXPECT_EQ(parse_duration("7d"), milliseconds(7 * 86'400'000LL));
  EXPECT_EQ(parse_duration("0"), milliseconds(0));
  EXPECT_FALSE(parse_duration(""));
  EXPECT_FALSE(parse_duration("h"));
  EXPECT_FALSE(parse_duration("5w"));
  EXPECT_FALSE(parse_duration("-5s"));
  EXPECT_FALSE(parse_duration("36501d")) << "past 100 years";
}

TEST(ConfigTest, BareDurationsCanBeRefused) {
  using std::chrono::milliseconds;
  EXPECT_EQ(parse_duration("0", BareDuration::kRefused), milliseconds(0));
  EXPECT_EQ(parse_duration("200ms", BareDuration::kRefused), milliseconds(200));
  EXPECT_FALSE(parse_duration("200", BareDuration::kRefused)) << "200 what?";
}

TEST(ConfigTest, FormattedSizesAndDurationsParseBackInTheLargestExactUnit) {
  using std::chrono::milliseconds;
  EXPECT_EQ(format_size(0), "0");
  EXPECT_EQ(format_size(4097), "4097");
  EXPECT_EQ(format_size(256u << 10), "256kb");
  EXPECT_EQ(format_size(32u << 20), "32mb");
  EXPECT_EQ(format_size(std::size_t{3} << 30), "3gb");
  for (const std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{1536}, std::size_t{8} << 20}) {
    EXPECT_EQ(parse_size(format_size(bytes)), bytes);
  }
  EXPECT_EQ(format_duration(milliseconds(0)), "0s");
  EXPECT_EQ(format_duration(milliseconds(200)), "200ms");
  EXPECT_EQ(format_duration(milliseconds(1500)), "1500ms");
  EXPECT_EQ(format_duration(milliseconds(60'000)), "1m");
  EXPECT_EQ(format_duration(milliseconds(86'400'000)), "1d");
  for (const auto ms : {0LL, 1LL, 999LL, 5000LL, 90'000LL, 7LL * 86'400'000}) {
    EXPECT_EQ(parse_duration(format_duration(milliseconds(ms)), BareDuration::kRefused), milliseconds(ms));
  }
}

TEST(ConfigTest, ValidateNamesTheFlagOfTheFirstProblem) {
  BrokerConfig hard;
  hard.queue_limits.hard_bytes = 0;
  EXPECT_EQ(validate(hard).error().detail, "--hard-limit must be > 0");
  BrokerConfig soft;
  soft.queue_limits.soft_bytes = soft.queue_limits.hard_bytes + 1;
  EXPECT_EQ(validate(soft).error().detail, "--soft-limit must not exceed --hard-limit");
  BrokerConfig stall;
  stall.max_stall = std::chrono::milliseconds(0);
  EXPECT_EQ(validate(stall).error().detail, "--max-stall must be > 0");
  BrokerConfig cert;
  cert.tls.cert_file = "/etc/cert.pem";
  EXPECT_EQ(validate(cert).error().detail,
            "--tls-cert-file, --tls-key-file and --tls-ca-cert-file need --tls-port or --ws-tls");
  EXPECT_TRUE(validate(BrokerConfig{}));
}

TEST(ConfigTest, ErrorMessageNamesWhatFailedTheDetailAndTheErrno) {
  EXPECT_EQ((BrokerError{BrokerError::Code::kBind, EADDRINUSE, "127.0.0.1:6390"}.message()),
            std::string("cannot listen 127.0.0.1:6390: ") + std::strerror(EADDRINUSE));
  EXPECT_EQ((BrokerError{BrokerError::Code::kInvalidConfig, 0, "hard limit must be > 0"}.message()),
            "invalid configuration: hard limit must be > 0");
}

TEST(ConfigTest, OverflowPolicyNamesRoundTripCaseInsensitively) {
  for (OverflowPolicy p : {OverflowPolicy::kDropOldest, OverflowPolicy::kDropNewest, OverflowPolicy::kDisconnect,
                           OverflowPolicy::kBlock, OverflowPolicy::kConflate}) {
    EXPECT_EQ(parse_overflow_policy(to_string(p)), p);
  }
  EXPECT_EQ(parse_overflow_policy("DROP-OLDEST"), OverflowPolicy::kDropOldest);
  EXPECT_EQ(parse_overflow_policy("Block"), OverflowPolicy::kBlock);
  EXPECT_EQ(parse_overflow_policy("Conflate"), OverflowPolicy::kConflate);
  EXPECT_FALSE(parse_overflow_policy("drop"));
}

}  // namespace
}  // namespace ringcast::broker
