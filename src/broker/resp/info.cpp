#include "broker/resp/info.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <memory>

#include <fmt/format.h>

#include "broker/guarantees/channel_history.hpp"

namespace ringcast::broker {

std::string info_reply(BrokerCore& core, std::span<const std::string> sections) {
  const std::shared_ptr<const InfoProvider> provider = core.info_provider();
  std::string text;
  auto add = [&text](const std::string& part) {
    if (part.empty()) return;
    if (!text.empty()) text += "\r\n";
    text += part;
  };
  std::vector<std::string> wanted;
  for (const std::string& s : sections) {
    std::string l(s);
    std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    wanted.push_back(std::move(l));
  }
  if (wanted.empty()) wanted.emplace_back();  // bare INFO: the default sections
  for (const std::string& section : wanted) {
    add(info_text(core, section));
    if (provider) add((*provider)(section));
  }
  return text;
}

std::string info_text(BrokerCore& core, std::string_view section) {
  const BrokerConfig& config = core.config();
  std::string sec(section);
  std::transform(sec.begin(), sec.end(), sec.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const bool all = sec.empty() || sec == "all" || sec == "default" || sec == "everything";
  const BrokerStats st = core.stats();
  std::string out;
  auto begin = [&](std::string_view title) {
    if (!out.empty()) out += "\r\n";
    out += fmt::format("# {}\r\n", title);
  };
  if (all || sec == "server") {
    const auto up = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - core.started());
    begin("Server");
    out += fmt::format(
        "ringcast_broker_version:0.1.0\r\nredis_version:7.0.0\r\nredis_mode:standalone\r\n"
        "tcp_port:{}\r\nio_threads:{}\r\nuptime_in_seconds:{}\r\ndedupe:{}\r\n"
        "overflow_policy:{}\r\nhard_limit_bytes:{}\r\nsoft_limit_bytes:{}\r\n"
        "soft_limit_seconds:{}\r\npace_bytes:{}\r\nmax_stall_ms:{}\r\nmax_block_ms:{}\r\n",
        core.port(), core.io_threads(), up.count(), config.dedupe ? "yes" : "no", to_string(config.overflow_policy),
        config.queue_limits.hard_bytes, config.queue_limits.soft_bytes,
        std::chrono::duration_cast<std::chrono::seconds>(config.queue_limits.soft_duration).count(),
        core.flow().pace_bytes(), config.max_stall.count(), config.max_block.count());
  }
  if (all || sec == "clients") {
    begin("Clients");
    out += fmt::format("connected_clients:{}\r\nmaxclients:{}\r\n", st.connected_clients, config.max_connections);
  }
  if (all || sec == "stats") {
    begin("Stats");
    out += fmt::format(
        "total_connections_received:{}\r\nrejected_connections:{}\r\naccept_backoffs:{}\r\n"
        "total_commands_processed:{}\r\nmessages_published:{}\r\ndeliveries:{}\r\n"
        "dropped_hard_limit:{}\r\ndropped_soft_limit:{}\r\ndropped_disconnect:{}\r\n"
        "slow_client_disconnects:{}\r\nrefused_publishes:{}\r\npublisher_stalls:{}\r\n"
        "publisher_stall_usec:{}\r\nslow_subscribers:{}\r\nconflated:{}\r\n",
        st.total_connections, st.rejected_connections, st.accept_backoffs, st.commands_processed, st.messages_published,
        st.deliveries, st.dropped_hard_limit, st.dropped_soft_limit, st.dropped_disconnect, st.slow_disconnects,
        st.refused_publishes, st.publisher_stalls, st.publisher_stall_ns / 1000, st.slow_subscribers, st.conflated);
  }
  if (all || sec == "pubsub") {
    begin("Pubsub");
    out += fmt::format("pubsub_channels:{}\r\npubsub_patterns:{}\r\npubsubshard_channels:{}\r\n", st.channels,
                       st.patterns, st.shard_channels);
  }
  if (all || sec == "auth") {
    begin("Auth");
    out += core.auth_stats().info_fields();
  }
  if (config.tls.enabled() && (all || sec == "tls")) {
    begin("TLS");
    out += fmt::format("tls_port:{}\r\ntls_ws:{}\r\ntls_auth_clients:{}\r\n", config.tls.port ? core.tls_port() : 0,
                       config.tls.ws ? "yes" : "no", to_string(config.tls.auth_clients));
    out += core.tls_stats().info_fields();
  }
  if (all || sec == "qos1") {
    begin("Qos1");
    out += fmt::format(
        "qos1_ack_timeout_ms:{}\r\nqos1_max_retries:{}\r\nqos1_max_in_flight:{}\r\nqos1_session_ttl_ms:{}\r\n",
        config.ack_timeout.count(), config.max_retries, config.max_in_flight, config.session_ttl.count());
    out += core.qos1().info_fields(core.durable().counts());
  }
  const ChannelHistory* history = core.history();
  if (history != nullptr && (all || sec == "history")) {
    begin("History");
    out += history->info_fields();
  }
  if (all || sec == "drops") {
    // Per-connection loss, listed only for connections that lost something, so
    // INFO stays short with many healthy clients.
    begin("Drops");
    for (const ConnectionStats& c : core.connection_stats()) {
      const std::uint64_t total = c.dropped_hard_limit + c.dropped_soft_limit + c.dropped_disconnect + c.conflated;
      if (total == 0) continue;
      out += fmt::format("client_{}:name={},policy={},hard_limit={},soft_limit={},disconnect={},conflated={}\r\n", c.id,
                         c.name, to_string(c.policy), c.dropped_hard_limit, c.dropped_soft_limit, c.dropped_disconnect,
                         c.conflated);
    }
  }
  return out;
}

}  // namespace ringcast::broker
