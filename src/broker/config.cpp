#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "broker/guarantees/retention.hpp"
#include "broker/tls/tls_config.hpp"
#include "ringcast/broker/config.hpp"
#include "ringcast/broker/error.hpp"
#include "ringcast/broker/token.hpp"
#include "ringcast/error.hpp"

namespace ringcast::broker {

std::string_view to_string(OverflowPolicy p) noexcept {
  switch (p) {
    case OverflowPolicy::kDropOldest:
      return "drop-oldest";
    case OverflowPolicy::kDropNewest:
      return "drop-newest";
    case OverflowPolicy::kDisconnect:
      return "disconnect";
    case OverflowPolicy::kBlock:
      return "block";
    case OverflowPolicy::kConflate:
      return "conflate";
  }
  return "unknown";
}

std::optional<OverflowPolicy> parse_overflow_policy(std::string_view s) noexcept {
  auto eq = [s](std::string_view name) {
    if (s.size() != name.size()) return false;
    for (std::size_t i = 0; i < s.size(); ++i) {
      const char c = (s[i] >= 'A' && s[i] <= 'Z') ? static_cast<char>(s[i] - 'A' + 'a') : s[i];
      if (c != name[i]) return false;
    }
    return true;
  };
  for (OverflowPolicy p : {OverflowPolicy::kDropOldest, OverflowPolicy::kDropNewest, OverflowPolicy::kDisconnect,
                           OverflowPolicy::kBlock, OverflowPolicy::kConflate}) {
    if (eq(to_string(p))) return p;
  }
  return std::nullopt;
}

std::string_view to_string(FsyncMode m) noexcept {
  switch (m) {
    case FsyncMode::kAlways:
      return "always";
    case FsyncMode::kBatch:
      return "batch";
    case FsyncMode::kOff:
      return "off";
  }
  return "?";
}

tl::expected<FsyncMode, std::string> parse_fsync_mode(std::string_view s) {
  for (FsyncMode m : {FsyncMode::kAlways, FsyncMode::kBatch, FsyncMode::kOff})
    if (s == to_string(m)) return m;
  return tl::unexpected(fmt::format("--fsync '{}': expected always, batch or off", s));
}

std::string_view to_string(TlsAuthClients a) noexcept {
  switch (a) {
    case TlsAuthClients::kNo:
      return "no";
    case TlsAuthClients::kOptional:
      return "optional";
    case TlsAuthClients::kYes:
      return "yes";
  }
  return "unknown";
}

std::optional<TlsAuthClients> parse_tls_auth_clients(std::string_view s) noexcept {
  for (const TlsAuthClients a : {TlsAuthClients::kNo, TlsAuthClients::kOptional, TlsAuthClients::kYes}) {
    if (s == to_string(a)) return a;
  }
  return std::nullopt;
}

std::string BrokerError::message() const {
  std::string_view what;
  switch (code) {
    case Code::kInvalidConfig:
      what = "invalid configuration";
      break;
    case Code::kBadAddress:
      what = "bad bind address";
      break;
    case Code::kBind:
      what = "cannot listen";
      break;
    case Code::kThread:
      what = "cannot start I/O thread";
      break;
    case Code::kHistory:
      what = "cannot open history";
      break;
  }
  // With an errno the detail names what the call was about ("cannot listen
  // 127.0.0.1:6390: Address already in use"); without, it is the reason.
  if (sys_errno != 0) return error_message(fmt::format("{} {}", what, detail), {}, sys_errno);
  return error_message(what, detail, 0);
}

tl::expected<void, BrokerError> validate(const BrokerConfig& config) {
  auto invalid = [](std::string what) {
    return tl::unexpected(BrokerError{BrokerError::Code::kInvalidConfig, 0, std::move(what)});
  };
  const QueueLimits& q = config.queue_limits;
  if (q.hard_bytes == 0) return invalid("--hard-limit must be > 0");
  if (q.soft_bytes > q.hard_bytes) return invalid("--soft-limit must not exceed --hard-limit");
  if (config.write_budget_bytes == 0) return invalid("--write-budget must be > 0");
  // setsockopt takes an int; the kernel caps it at net.core.wmem_max anyway.
  if (config.send_buffer_bytes > (std::size_t{1} << 30)) return invalid("--send-buffer must be at most 1gb");
  if (config.max_stall.count() <= 0) return invalid("--max-stall must be > 0");
  if (config.max_bulk_len == 0 || config.max_args == 0) return invalid("--max-bulk-len and --max-args must be > 0");
  // Frames are sized in 32 bits; Redis caps a string at 512 MiB too.
  if (config.max_bulk_len > (512u << 20)) return invalid("--max-bulk-len must be at most 512mb");
  if (config.ws_max_message == 0) return invalid("--ws-max-message must be > 0");
  if (!config.token_secret.empty() && config.token_secret.size() < kMinTokenSecretBytes) {
    return invalid("the token secret is " + std::to_string(config.token_secret.size()) +
                   " bytes; it must be at least " + std::to_string(kMinTokenSecretBytes));
  }
  if (config.ack_timeout.count() <= 0) return invalid("--ack-timeout must be > 0");
  if (config.max_in_flight == 0) return invalid("--max-in-flight must be > 0");
  if (config.max_connections == 0 || config.max_subscriptions == 0) {
    return invalid("--max-connections and --max-subscriptions must be > 0");
  }
  if (config.max_unauthenticated == 0) return invalid("--max-unauthenticated must be > 0");
  if (config.max_auth_failures == 0) return invalid("--max-auth-failures must be > 0");
  for (const std::string& spec : config.history) {
    if (auto rule = parse_retention(spec); !rule) return invalid(rule.error());
  }
  if (!config.data_dir.empty() && config.history.empty()) {
    return invalid("--data-dir keeps history, but no --history rule says which channels have any");
  }
  if (config.flush_interval.count() <= 0 || config.prune_interval.count() <= 0) {
    return invalid("history flush and prune intervals must be > 0");
  }
  const TlsConfig& t = config.tls;
  if (!t.enabled() && (!t.cert_file.empty() || !t.key_file.empty() || !t.ca_cert_file.empty())) {
    return invalid("--tls-cert-file, --tls-key-file and --tls-ca-cert-file need --tls-port or --ws-tls");
  }
  if (auto tls = tls::validate(config); !tls) return invalid(std::move(tls.error()));
  return {};
}

namespace {

constexpr std::uint64_t kMsPerSecond = 1000;
// The units of durations, largest first (format_duration picks the first exact one).
struct DurationUnit {
  std::string_view name;
  std::uint64_t ms;
};
constexpr DurationUnit kDurationUnits[] = {
    {"d", 86'400'000}, {"h", 3'600'000}, {"m", 60'000}, {"s", kMsPerSecond}, {"ms", 1}};

struct SizeUnit {
  std::string_view name;
  std::size_t bytes;
};
// Longest suffix first, so that "mb" is not read as "m" + "b".
constexpr SizeUnit kSizeUnits[] = {{"gb", std::size_t{1} << 30},
                                   {"mb", std::size_t{1} << 20},
                                   {"kb", std::size_t{1} << 10},
                                   {"g", std::size_t{1} << 30},
                                   {"m", std::size_t{1} << 20},
                                   {"k", std::size_t{1} << 10},
                                   {"b", 1}};

}  // namespace

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text, BareDuration bare) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  const std::string_view unit = text.substr(digits);
  std::uint64_t n = 0;
  const auto r = std::from_chars(text.data(), text.data() + digits, n);
  if (digits == 0 || r.ec != std::errc() || r.ptr != text.data() + digits) return std::nullopt;
  std::uint64_t ms_per = 0;
  if (unit.empty()) {
    if (bare == BareDuration::kSeconds) ms_per = kMsPerSecond;
    else if (n == 0) ms_per = 1;
  }
  for (const DurationUnit& u : kDurationUnits) {
    if (unit == u.name) ms_per = u.ms;
  }
  constexpr std::uint64_t kMaxMs = std::uint64_t{100} * 365 * 86'400'000;  // 100 years
  if (ms_per == 0 || n > kMaxMs / ms_per) return std::nullopt;
  return std::chrono::milliseconds(static_cast<std::int64_t>(n * ms_per));
}

std::string format_duration(std::chrono::milliseconds d) {
  if (d.count() <= 0) return "0s";
  const auto ms = static_cast<std::uint64_t>(d.count());
  for (const DurationUnit& u : kDurationUnits) {
    if (ms % u.ms == 0) return std::to_string(ms / u.ms) + std::string(u.name);
  }
  return std::to_string(ms) + "ms";  // not reached: every count is a whole number of ms
}

std::optional<std::size_t> parse_size(std::string_view text) {
  std::string s(text);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::size_t mult = 1;
  for (const SizeUnit& u : kSizeUnits) {
    if (s.size() > u.name.size() && s.compare(s.size() - u.name.size(), u.name.size(), u.name) == 0) {
      s.resize(s.size() - u.name.size());
      mult = u.bytes;
      break;
    }
  }
  std::size_t value = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  if (value > SIZE_MAX / mult) return std::nullopt;
  return value * mult;
}

std::string format_size(std::size_t bytes) {
  for (const SizeUnit& u : kSizeUnits) {
    if (u.name.size() == 2 && bytes != 0 && bytes % u.bytes == 0)
      return std::to_string(bytes / u.bytes) + std::string(u.name);
  }
  return std::to_string(bytes);
}

}  // namespace ringcast::broker
