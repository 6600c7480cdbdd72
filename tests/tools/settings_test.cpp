// Settings from flags, RINGCAST_* variables and --config files
// (tools/common/settings.hpp): the names, the precedence flag > environment >
// file > default, and the errors. In process over BrokerFlags (the values that
// reach BrokerConfig), then through the real ringcast-broker and ringcast-relay.
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "broker_flags.hpp"
#include "broker_settings.hpp"
#include "child_process.hpp"
#include "fd_io.hpp"
#include "settings.hpp"
#include "tcp_loopback.hpp"
#include "temp_dir.hpp"

namespace ringcast::tools {
namespace {

using namespace std::chrono_literals;

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

// Sets (or, with nullopt, removes) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::optional<std::string>& value) : name_(std::move(name)) {
    if (const char* old = ::getenv(name_.c_str())) old_ = old;
    if (value) {
      ::setenv(name_.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// parse_settings over an app holding BrokerFlags, as the tools build it.
struct BrokerApp {
  CLI::App app{"test"};
  broker::BrokerConfig cfg;
  BrokerFlags flags;
  BrokerApp() { flags.add_to(app, cfg); }

  std::optional<int> parse(std::vector<std::string> args) {
    args.insert(args.begin(), "test");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    return parse_settings(app, static_cast<int>(argv.size()), argv.data());
  }
};

TEST(SettingsTest, EnvironmentNameIsThePrefixedUpperCaseLongName) {
  EXPECT_EQ(env_name("--hard-limit"), "RINGCAST_HARD_LIMIT");
  EXPECT_EQ(env_name("io-threads"), "RINGCAST_IO_THREADS");
  EXPECT_EQ(env_name("--requirepass-file"), "RINGCAST_REQUIREPASS_FILE");
}

// Iterates the registered options, so a flag added to BrokerFlags later is
// covered without touching this test.
TEST(SettingsTest, EveryBrokerFlagGetsItsDerivedVariable) {
  BrokerApp b;
  ASSERT_EQ(b.parse({}), std::nullopt);
  std::size_t named = 0;
  for (const CLI::Option* opt : b.app.get_options()) {
    if (opt == b.app.get_help_ptr() || opt->get_single_name() == "print-config") {
      EXPECT_EQ(opt->get_envname(), "") << opt->get_name();
      continue;
    }
    ASSERT_FALSE(opt->get_lnames().empty()) << opt->get_name();
    EXPECT_EQ(opt->get_envname(), env_name(opt->get_lnames().front())) << opt->get_name();
    ++named;
  }
  EXPECT_GE(named, 18u);  // BrokerFlags' 17 flags and --config
}

TEST(SettingsTest, AnOptionThatNamesItsOwnVariableKeepsIt) {
  CLI::App app{"test"};
  std::string widget;
  app.add_option("--widget", widget)->envname("RINGCAST_GADGET");
  char name[] = "test";
  char* argv[] = {name};
  ASSERT_EQ(parse_settings(app, 1, argv), std::nullopt);
  EXPECT_EQ(app.get_option("--widget")->get_envname(), "RINGCAST_GADGET");
}

TEST(SettingsTest, PrintConfigLeavesOutSecretsButNotTheFilesHoldingThem) {
  CLI::App app{"test"};
  std::string pass, token, token_file, plain;
  app.add_option("--requirepass", pass);
  app.add_option("--token-secret", token);
  app.add_option("--token-secret-file", token_file);
  app.add_option("--plain", plain);
  std::vector<std::string> args{"test",   "--requirepass",       "p4ss",        "--token-secret",
                                "s3cret", "--token-secret-file", "/etc/secret", "--plain",
                                "xy",     "--print-config"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  ::testing::internal::CaptureStdout();
  const auto exit_status = parse_settings(app, static_cast<int>(argv.size()), argv.data());
  const std::string printed = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(exit_status, 0);
  EXPECT_EQ(printed.find("p4ss"), std::string::npos) << printed;
  EXPECT_EQ(printed.find("s3cret"), std::string::npos) << printed;
  EXPECT_NE(printed.find("token-secret-file=\"/etc/secret\""), std::string::npos) << printed;
  EXPECT_NE(printed.find("plain=\"xy\""), std::string::npos) << printed;
}

TEST(SettingsTest, FlagBeatsEnvironmentBeatsFileBeatsDefault) {
  test::TempDir dir;
  const std::string file = dir.file("broker.toml");
  write_file(file,
             "# every level below sets some of these\n"
             "hard-limit = \"1mb\"\n"
             "soft-limit = \"2mb\"\n"
             "write-budget = \"3mb\"\n"
             "max-args = 7\n"
             "dedupe = true\n");
  const ScopedEnv soft("RINGCAST_SOFT_LIMIT", "20mb");
  const ScopedEnv budget("RINGCAST_WRITE_BUDGET", "30mb");
  const ScopedEnv args("RINGCAST_MAX_ARGS", std::nullopt);
  const ScopedEnv dedupe("RINGCAST_DEDUPE", "false");
  BrokerApp b;
  ASSERT_EQ(b.parse({"--config", file, "--write-budget", "300mb"}), std::nullopt);
  ASSERT_EQ(b.flags.apply(b.cfg), std::nullopt);
  EXPECT_EQ(b.cfg.queue_limits.hard_bytes, 1u << 20);       // file
  EXPECT_EQ(b.cfg.queue_limits.soft_bytes, 20u << 20);      // environment over file
  EXPECT_EQ(b.cfg.write_budget_bytes, 300u << 20);          // flag over both
  EXPECT_EQ(b.cfg.max_args, 7u);                            // file, unset variable
  EXPECT_FALSE(b.cfg.dedupe);                               // environment over file
  EXPECT_EQ(b.cfg.pace_bytes, *broker::parse_size("1mb"));  // default
}

TEST(SettingsTest, EmptyVariableCountsAsUnset) {
  test::TempDir dir;
  const std::string file = dir.file("broker.toml");
  write_file(file, "hard-limit = \"1mb\"\n");
  const ScopedEnv hard("RINGCAST_HARD_LIMIT", "");
  BrokerApp b;
  ASSERT_EQ(b.parse({"--config", file}), std::nullopt);
  ASSERT_EQ(b.flags.apply(b.cfg), std::nullopt);
  EXPECT_EQ(b.cfg.queue_limits.hard_bytes, 1u << 20);
}

TEST(SettingsTest, ConfigFileFromTheEnvironment) {
  test::TempDir dir;
  const std::string file = dir.file("broker.toml");
  write_file(file, "max-connections = 12\n");
  const ScopedEnv config("RINGCAST_CONFIG", file);
  BrokerApp b;
  ASSERT_EQ(b.parse({}), std::nullopt);
  EXPECT_EQ(b.cfg.max_connections, 12u);
}

TEST(SettingsTest, BadFilesAreUsageErrors) {
  test::TempDir dir;
  const std::map<std::string, std::string> bad = {
      {"unknown.toml", "hard-limt = \"1mb\"\n"},
      {"section.toml", "[broker]\nhard-limit = \"1mb\"\n"},
      {"garbage.toml", "this is not a setting\n"},
      {"not-a-number.toml", "max-args = many\n"},
      {"help.toml", "help = true\n"},
  };
  for (const auto& [name, text] : bad) {
    write_file(dir.file(name), text);
    BrokerApp b;
    EXPECT_EQ(b.parse({"--config", dir.file(name)}), kUsageExit) << name;
  }
  BrokerApp missing;
  EXPECT_EQ(missing.parse({"--config", dir.file("missing.toml")}), kUsageExit);
  const ScopedEnv config("RINGCAST_CONFIG", dir.file("missing.toml"));
  BrokerApp missing_from_env;
  EXPECT_EQ(missing_from_env.parse({}), kUsageExit);
}

std::map<std::string, std::string> settings_of(const std::string& printed);

// Every setting of the table, as --print-config writes it.
std::map<std::string, std::string> table_values(const broker::BrokerConfig& cfg) {
  std::map<std::string, std::string> out;
  for (const Setting<broker::BrokerConfig>& s : broker_settings()) {
    auto& c = const_cast<broker::BrokerConfig&>(cfg);
    switch (s.kind) {
      case Setting<broker::BrokerConfig>::Kind::kValue:
        out[s.name] = s.format(cfg);
        break;
      case Setting<broker::BrokerConfig>::Kind::kFlag:
        out[s.name] = s.flag(c) ? "true" : "false";
        break;
      case Setting<broker::BrokerConfig>::Kind::kList:
        for (const std::string& v : s.list(c)) out[s.name] += v + ";";
        break;
    }
  }
  return out;
}

TEST(SettingsTest, PrintedConfigReadsBackToTheSameConfiguration) {
  test::TempDir dir;
  BrokerApp first;
  ::testing::internal::CaptureStdout();
  const auto printed_status = first.parse({"--hard-limit",
                                           "5MB",
                                           "--max-stall-ms",
                                           "300",
                                           "--soft-seconds",
                                           "5",
                                           "--ack-timeout",
                                           "7",
                                           "--session-ttl",
                                           "90m",
                                           "--history",
                                           "a.*=10,1m",
                                           "--history",
                                           "b=5",
                                           "--dedupe",
                                           "--ws-port",
                                           "0",
                                           "--overflow-policy",
                                           "Block",
                                           "--max-args",
                                           "12",
                                           "--print-config"});
  const std::string printed = ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(printed_status, 0);
  EXPECT_EQ(settings_of(printed).count("max-stall-ms"), 0u) << "old names are not printed\n" << printed;
  EXPECT_EQ(settings_of(printed).at("max-stall"), "\"300ms\"");
  EXPECT_EQ(settings_of(printed).at("soft-limit-duration"), "\"5s\"");
  EXPECT_EQ(settings_of(printed).at("ack-timeout"), "\"7s\"") << "a bare --ack-timeout is printed with its unit";
  write_file(dir.file("printed.toml"), printed);

  BrokerApp second;
  ::testing::internal::CaptureStdout();
  const auto reprinted_status = second.parse({"--config", dir.file("printed.toml"), "--print-config"});
  const std::string reprinted = ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(reprinted_status, 0);
  EXPECT_EQ(reprinted, printed);
  EXPECT_EQ(table_values(second.cfg), table_values(first.cfg));
  EXPECT_EQ(second.cfg.queue_limits.hard_bytes, 5u << 20);
  EXPECT_EQ(second.cfg.max_stall, 300ms);
  EXPECT_EQ(second.cfg.queue_limits.soft_duration, 5s);
  EXPECT_EQ(second.cfg.overflow_policy, broker::OverflowPolicy::kBlock);
  EXPECT_EQ(second.cfg.history, (std::vector<std::string>{"a.*=10,1m", "b=5"}));
}

TEST(SettingsTest, DefaultsAreBrokerConfigsOwn) {
  BrokerApp b;
  ASSERT_EQ(b.parse({}), std::nullopt);
  EXPECT_EQ(table_values(b.cfg), table_values(broker::BrokerConfig{}));
  for (const Setting<broker::BrokerConfig>& s : broker_settings()) {
    if (s.kind != Setting<broker::BrokerConfig>::Kind::kValue || !s.show_default) continue;
    EXPECT_EQ(b.app.get_option("--" + s.name)->get_default_str(), s.format(broker::BrokerConfig{})) << s.name;
  }
}

// The names before the units rule keep working, as flags, variables and file
// keys, with their bare numbers in their old unit.
TEST(SettingsTest, OldNamesKeepTheirBareNumbersOldUnit) {
  BrokerApp flags;
  ASSERT_EQ(flags.parse({"--max-stall-ms", "300", "--soft-seconds", "5", "--max-block-ms", "20", "--auth-timeout-ms",
                         "1500", "--tls-handshake-timeout-ms", "250"}),
            std::nullopt);
  EXPECT_EQ(flags.cfg.max_stall, 300ms);
  EXPECT_EQ(flags.cfg.queue_limits.soft_duration, 5s);
  EXPECT_EQ(flags.cfg.max_block, 20ms);
  EXPECT_EQ(flags.cfg.auth_timeout, 1500ms);
  EXPECT_EQ(flags.cfg.tls.handshake_timeout, 250ms);

  test::TempDir dir;
  write_file(dir.file("old.toml"), "max-block-ms = 40\n");
  const ScopedEnv stall("RINGCAST_MAX_STALL_MS", "250");
  BrokerApp env_and_file;
  ASSERT_EQ(env_and_file.parse({"--config", dir.file("old.toml")}), std::nullopt);
  EXPECT_EQ(env_and_file.cfg.max_stall, 250ms);
  EXPECT_EQ(env_and_file.cfg.max_block, 40ms);
}

TEST(SettingsTest, NewDurationNamesNeedAUnit) {
  BrokerApp bare;
  EXPECT_EQ(bare.parse({"--max-stall", "200"}), kUsageExit);
  BrokerApp zero;
  ASSERT_EQ(zero.parse({"--max-block", "0"}), std::nullopt);
  EXPECT_EQ(zero.cfg.max_block, 0ms);
  BrokerApp with_unit;
  ASSERT_EQ(with_unit.parse({"--max-stall", "2s"}), std::nullopt);
  EXPECT_EQ(with_unit.cfg.max_stall, 2s);
}

TEST(SettingsTest, BothNamesOfOneSettingAreAUsageError) {
  BrokerApp both;
  EXPECT_EQ(both.parse({"--max-stall", "2s", "--max-stall-ms", "300"}), kUsageExit);
}

TEST(SettingsTest, BadValuesAreUsageErrors) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{{"--hard-limit", "lots"},
                                                                                    {"--overflow-policy", "drop"},
                                                                                    {"--fsync", "sometimes"},
                                                                                    {"--ws-port", "70000"},
                                                                                    {"--max-args", "-1"},
                                                                                    {"--session-ttl", "5w"}}) {
    BrokerApp b;
    EXPECT_EQ(b.parse(args), kUsageExit) << args.front();
  }
}

// --- the executables --------------------------------------------------------

struct Outcome {
  int exit = -1;
  std::string out;
  std::string err;
};

Outcome run(const char* exe, std::vector<std::string> args, std::vector<std::string> env = {}) {
  args.insert(args.begin(), exe);
  test::SpawnOptions options;
  options.err = test::Stream::kPipe;
  options.env_set = std::move(env);
  test::ChildProcess child = test::ChildProcess::spawn(args, options);
  Outcome r;
  r.exit = test::exit_code(child.wait_exit(test::deadline_in(20s)));
  r.out = child.stdout_text();
  r.err = child.stderr_text();
  return r;
}

// The `key=value` lines of --print-config.
std::map<std::string, std::string> settings_of(const std::string& printed) {
  std::map<std::string, std::string> out;
  std::istringstream in(printed);
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find('=');
    if (line.empty() || line.front() == '#' || eq == std::string::npos) continue;
    out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

// Every option line of --help ("  --name ..." or "  -h,--name ...") shows its
// RINGCAST_ variable, except --help and --print-config: reading the help text
// covers flags that only the executable registers.
void expect_every_flag_names_its_variable(const char* exe) {
  const Outcome help = run(exe, {"--help"});
  ASSERT_EQ(help.exit, 0) << help.err;
  const std::regex option_line(R"(^\s+(?:-\w,)?--([a-z0-9-]+).*$)");
  std::istringstream in(help.out);
  std::size_t seen = 0;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, option_line)) continue;
    const std::string name = m[1];
    if (name == "help" || name == "print-config") {
      EXPECT_EQ(line.find("(Env:"), std::string::npos) << line;
      continue;
    }
    EXPECT_NE(line.find("(Env:" + env_name(name) + ")"), std::string::npos) << line;
    ++seen;
  }
  EXPECT_GE(seen, 20u) << help.out;
  EXPECT_NE(help.out.find("RINGCAST_"), std::string::npos);
}

TEST(BrokerSettingsTest, EveryFlagInHelpNamesItsVariable) { expect_every_flag_names_its_variable(BROKER_EXE); }

TEST(RelaySettingsTest, EveryFlagInHelpNamesItsVariable) { expect_every_flag_names_its_variable(RELAY_EXE); }

// One run covers all four levels: hard-limit only in the file, soft-limit also
// in the environment, write-budget also as a flag, pace-bytes nowhere.
void expect_precedence(const char* exe, std::vector<std::string> extra_args) {
  test::TempDir dir;
  const std::string file = dir.file("settings.toml");
  write_file(file, "hard-limit = \"1mb\"\nsoft-limit = \"2mb\"\nwrite-budget = \"3mb\"\n");
  std::vector<std::string> args{"--config", file, "--write-budget", "300mb", "--print-config"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  const Outcome r = run(exe, args, {"RINGCAST_SOFT_LIMIT=20mb", "RINGCAST_WRITE_BUDGET=30mb"});
  ASSERT_EQ(r.exit, 0) << r.err;
  const auto s = settings_of(r.out);
  EXPECT_EQ(s.at("hard-limit"), "\"1mb\"");
  EXPECT_EQ(s.at("soft-limit"), "\"20mb\"");
  EXPECT_EQ(s.at("write-budget"), "\"300mb\"");
  EXPECT_EQ(s.at("pace-bytes"), "\"1mb\"");
}

TEST(BrokerSettingsTest, FileIsOverriddenByEnvironmentWhichIsOverriddenByFlag) { expect_precedence(BROKER_EXE, {}); }

TEST(RelaySettingsTest, FileIsOverriddenByEnvironmentWhichIsOverriddenByFlag) {
  expect_precedence(RELAY_EXE, {"--ring", "/dev/shm/unused.ring=x"});
}

// INFO server's limit lines from a running broker (the relay's included).
std::string info_server(int port) {
  const int fd = test::connect_loopback(port);
  std::string reply;
  if (fd < 0) return reply;
  if (test::send_all(fd, "INFO server\r\n")) {
    test::read_until(fd, reply, "soft_limit_seconds:", test::deadline_in(20s));
  }
  ::close(fd);
  return reply;
}

int port_of(const std::string& listening_line) {
  const auto colon = listening_line.rfind(':');
  return colon == std::string::npos ? 0 : std::stoi(listening_line.substr(colon + 1));
}

TEST(BrokerSettingsTest, RunningBrokerTakesItsSettingsFromFileAndEnvironment) {
  test::TempDir dir;
  const std::string file = dir.file("broker.toml");
  write_file(file, "port = 1\nhard-limit = \"4mb\"\nsoft-limit = \"2mb\"\nio-threads = 1\n");
  test::SpawnOptions options;
  options.env_set = {"RINGCAST_PORT=0", "RINGCAST_SOFT_LIMIT=3mb"};  // port 1 would need root
  auto broker = test::ChildProcess::spawn({BROKER_EXE, "--config", file}, options);
  const auto line = broker.read_line();
  ASSERT_TRUE(line.has_value());
  const std::string info = info_server(port_of(*line));
  EXPECT_NE(info.find("hard_limit_bytes:4194304\r\n"), std::string::npos) << info;
  EXPECT_NE(info.find("soft_limit_bytes:3145728\r\n"), std::string::npos) << info;
  EXPECT_EQ(test::exit_code(broker.stop()), 0);
}

TEST(RelaySettingsTest, RunningRelayTakesItsRingsFromTheFileAndListensWhereTheEnvironmentSays) {
  test::TempDir dir;
  const std::string file = dir.file("relay.toml");
  write_file(file, "ring = [\"" + dir.file("a.ring") + "=a\", \"" + dir.file("b.ring") +
                       "=b\"]\nlisten = \"127.0.0.1:1\"\nhard-limit = \"16mb\"\n");
  test::SpawnOptions options;
  options.err = test::Stream::kPipe;
  options.env_set = {"RINGCAST_LISTEN=127.0.0.1:0"};
  auto relay = test::ChildProcess::spawn({RELAY_EXE, "--config", file}, options);
  const auto line = relay.read_line();
  ASSERT_TRUE(line.has_value()) << relay.stderr_text();
  ASSERT_NE(line->find("ringcast-relay listening on 127.0.0.1:"), std::string::npos) << *line;
  const std::string info = info_server(port_of(*line));
  EXPECT_NE(info.find("hard_limit_bytes:16777216\r\n"), std::string::npos) << info;
  // Both rings from the file are waited for.
  EXPECT_TRUE(relay.read_stderr_until(dir.file("a.ring"), test::deadline_in(20s))) << relay.stderr_text();
  EXPECT_TRUE(relay.read_stderr_until(dir.file("b.ring"), test::deadline_in(20s))) << relay.stderr_text();
  EXPECT_EQ(test::exit_code(relay.stop()), 0);
}

TEST(BrokerSettingsTest, UnknownKeyInTheFileIsAUsageErrorNamingIt) {
  test::TempDir dir;
  write_file(dir.file("bad.toml"), "hard-limt = \"1mb\"\n");
  const Outcome r = run(BROKER_EXE, {"--config", dir.file("bad.toml")});
  EXPECT_EQ(r.exit, kUsageExit);
  EXPECT_NE(r.err.find("unknown setting 'hard-limt'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(dir.file("bad.toml")), std::string::npos) << r.err;
}

TEST(RelaySettingsTest, UnknownKeyInTheFileIsAUsageErrorNamingIt) {
  test::TempDir dir;
  write_file(dir.file("bad.toml"), "rings = [\"/dev/shm/x.ring=x\"]\n");
  const Outcome r = run(RELAY_EXE, {"--config", dir.file("bad.toml")});
  EXPECT_EQ(r.exit, kUsageExit);
  EXPECT_NE(r.err.find("unknown setting 'rings'"), std::string::npos) << r.err;
}

TEST(BrokerSettingsTest, MissingConfigFileIsAUsageError) {
  test::TempDir dir;
  const Outcome flag = run(BROKER_EXE, {"--config", dir.file("missing.toml")});
  EXPECT_EQ(flag.exit, kUsageExit);
  EXPECT_NE(flag.err.find("missing.toml"), std::string::npos) << flag.err;
  const Outcome env = run(BROKER_EXE, {}, {"RINGCAST_CONFIG=" + dir.file("missing.toml")});
  EXPECT_EQ(env.exit, kUsageExit);
  EXPECT_NE(env.err.find("missing.toml"), std::string::npos) << env.err;
}

// --print-config's output is a config file that reads back to itself, and a
// password never appears in it.
TEST(BrokerSettingsTest, PrintedConfigReadsBackWithoutThePassword) {
  test::TempDir dir;
  const Outcome first =
      run(BROKER_EXE, {"--hard-limit", "5mb", "--dedupe", "--print-config"}, {"RINGCAST_REQUIREPASS=hunter2"});
  ASSERT_EQ(first.exit, 0) << first.err;
  EXPECT_EQ(first.out.find("hunter2"), std::string::npos) << first.out;
  EXPECT_EQ(first.out.find("requirepass"), std::string::npos) << first.out;
  write_file(dir.file("printed.toml"), first.out);
  const Outcome second = run(BROKER_EXE, {"--config", dir.file("printed.toml"), "--print-config"});
  ASSERT_EQ(second.exit, 0) << second.err;
  EXPECT_EQ(second.out, first.out);
  EXPECT_EQ(settings_of(second.out).at("hard-limit"), "\"5mb\"");
  EXPECT_EQ(settings_of(second.out).at("dedupe"), "true");
}

// The relay's own old names too: printed under their new names, with units,
// and the printed file reads back to the same settings.
TEST(RelaySettingsTest, PrintedConfigReadsBackToItselfUnderTheNewNames) {
  test::TempDir dir;
  const Outcome first =
      run(RELAY_EXE, {"--ring", "/dev/shm/unused.ring=x", "--nats-ack-timeout-ms", "2000", "--nats-reconnect-wait-ms",
                      "100", "--jetstream-ack-timeout-ms", "700", "--stream-max-bytes", "1GB", "--stream-subjects",
                      "a.>,b.>", "--max-stall-ms", "300", "--print-config"});
  ASSERT_EQ(first.exit, 0) << first.err;
  const auto s = settings_of(first.out);
  EXPECT_EQ(s.at("nats-ack-timeout"), "\"2s\"");
  EXPECT_EQ(s.at("nats-reconnect-wait"), "\"100ms\"");
  EXPECT_EQ(s.at("jetstream-ack-timeout"), "\"700ms\"");
  EXPECT_EQ(s.at("stream-max-bytes"), "\"1gb\"");
  EXPECT_EQ(s.at("max-stall"), "\"300ms\"");
  for (const auto& [key, value] : s) EXPECT_FALSE(key.size() > 3 && key.compare(key.size() - 3, 3, "-ms") == 0) << key;
  write_file(dir.file("printed.toml"), first.out);
  const Outcome second = run(RELAY_EXE, {"--config", dir.file("printed.toml"), "--print-config"});
  ASSERT_EQ(second.exit, 0) << second.err;
  EXPECT_EQ(second.out, first.out);
}

}  // namespace
}  // namespace ringcast::tools
