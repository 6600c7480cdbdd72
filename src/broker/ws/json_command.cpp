#include "broker/ws/json_command.hpp"

#include <optional>

#include <nlohmann/json.hpp>

#include "broker/util/base64.hpp"

namespace ringcast::broker::ws {

namespace {

using nlohmann::json;
using Error = tl::unexpected<std::string>;

std::string field_error(std::string_view type, std::string_view name, std::string_view what) {
  std::string s(type);
  s += ": \"";
  s += name;
  s += "\" ";
  s += what;
  return s;
}

// The string field `name`: required and non-empty, or an error naming it.
tl::expected<std::string, std::string> required_string(const json& obj, std::string_view type, const char* name) {
  const auto it = obj.find(name);
  if (it == obj.end()) return Error(field_error(type, name, "is missing"));
  if (!it->is_string()) return Error(field_error(type, name, "must be a string"));
  const auto& s = it->get_ref<const std::string&>();
  if (s.empty()) return Error(field_error(type, name, "must not be empty"));
  return s;
}

// A message id: a string, or a non-negative integer as its decimal text.
tl::expected<std::string, std::string> message_id(const json& v, std::string_view type) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_unsigned()) return std::to_string(v.get<std::uint64_t>());
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0) return std::to_string(v.get<std::int64_t>());
  return Error(field_error(type, "message_id", "must be a string or a non-negative integer"));
}

tl::expected<std::string, std::string> payload(const json& obj) {
  const auto it = obj.find("payload");
  if (it == obj.end()) return Error(field_error("publish", "payload", "is missing"));
  const auto enc = obj.find("encoding");
  if (enc != obj.end()) {
    if (!enc->is_string() || enc->get_ref<const std::string&>() != "base64") {
      return Error(field_error("publish", "encoding", "must be \"base64\" (or absent)"));
    }
    if (!it->is_string())
      return Error(field_error("publish", "payload", "must be a string with \"encoding\":\"base64\""));
    std::string bytes;
    if (!base64_decode(it->get_ref<const std::string&>(), Base64::kStandard, bytes)) {
      return Error(field_error("publish", "payload", "is not valid base64"));
    }
    return bytes;
  }
  if (it->is_string()) return it->get<std::string>();
  return it->dump();  // compact JSON text
}

// A non-negative integer that fits 64 bits.
std::optional<std::uint64_t> unsigned_of(const json& v) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0) return static_cast<std::uint64_t>(v.get<std::int64_t>());
  return std::nullopt;
}

// subscribe's "since" {offset, epoch} and "history" N, into `cmd`.
std::optional<std::string> recovery_fields(const json& obj, JsonCommand& cmd) {
  const auto since = obj.find("since");
  const auto history = obj.find("history");
  const bool has_since = since != obj.end() && !since->is_null();
  const bool has_history = history != obj.end() && !history->is_null();
  if (has_since && has_history) return "subscribe: \"since\" and \"history\" exclude each other";
  if (has_since) {
    const auto offset = since->is_object() ? since->find("offset") : since->end();
    const auto epoch = since->is_object() ? since->find("epoch") : since->end();
    if (offset == since->end() || epoch == since->end() || !epoch->is_string() || !unsigned_of(*offset)) {
      return "subscribe: \"since\" must be {\"offset\": a non-negative integer, \"epoch\": a string}";
    }
    cmd.since = JsonCommand::Since{*unsigned_of(*offset), epoch->get<std::string>()};
  }
  if (has_history) {
    const auto n = unsigned_of(*history);
    if (!n) return field_error("subscribe", "history", "must be a non-negative integer");
    cmd.history = *n;
  }
  return std::nullopt;
}

}  // namespace

tl::expected<JsonCommand, std::string> parse_json_command(std::string_view text) {
  bool too_deep = false;
  const json::parser_callback_t depth_check = [&too_deep](int depth, json::parse_event_t, json&) {
    if (depth > kMaxJsonDepth) too_deep = true;
    return !too_deep;  // stop building what is too deep
  };
  const json msg = json::parse(text.begin(), text.end(), depth_check, /*allow_exceptions=*/false);
  if (too_deep) return Error("message nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  if (msg.is_discarded()) return Error("message is not valid JSON");
  if (!msg.is_object()) return Error("message must be a JSON object");
  const auto t = msg.find("type");
  if (t == msg.end()) return Error("message has no \"type\"");
  if (!t->is_string()) return Error("\"type\" must be a string");
  const std::string& type = t->get_ref<const std::string&>();

  JsonCommand cmd;
  if (type == "auth") {
    cmd.type = JsonCommand::Type::kAuth;
    auto token = required_string(msg, type, "token");
    if (!token) return Error(std::move(token.error()));
    cmd.token = std::move(*token);
    return cmd;
  }
  if (type == "subscribe" || type == "unsubscribe" || type == "publish") {
    cmd.type = type == "subscribe"     ? JsonCommand::Type::kSubscribe
               : type == "unsubscribe" ? JsonCommand::Type::kUnsubscribe
                                       : JsonCommand::Type::kPublish;
    auto topic = required_string(msg, type, "topic");
    if (!topic) return Error(std::move(topic.error()));
    cmd.topic = std::move(*topic);
    if (cmd.type != JsonCommand::Type::kUnsubscribe) {
      // null is absent: PopSub's clients serialise `qos: Option<u8>` as null.
      if (const auto q = msg.find("qos"); q != msg.end() && !q->is_null()) {
        if (!q->is_number_integer() || (q->get<std::int64_t>() != 0 && q->get<std::int64_t>() != 1)) {
          return Error(field_error(type, "qos", "must be 0 or 1"));
        }
        cmd.qos = static_cast<std::uint8_t>(q->get<std::int64_t>());
        cmd.qos_given = true;
      }
    }
    if (cmd.type == JsonCommand::Type::kSubscribe) {
      if (const auto id = msg.find("client_id"); id != msg.end() && !id->is_null()) {
        if (!id->is_string() || id->get_ref<const std::string&>().empty() ||
            id->get_ref<const std::string&>().find('\0') != std::string::npos) {
          return Error(field_error(type, "client_id", "must be a non-empty string without NUL"));
        }
        cmd.client_id = id->get<std::string>();
      }
      if (auto wrong = recovery_fields(msg, cmd)) return Error(std::move(*wrong));
    }
    if (cmd.type != JsonCommand::Type::kPublish) return cmd;
    auto p = payload(msg);
    if (!p) return Error(std::move(p.error()));
    cmd.payload = std::move(*p);
    if (const auto id = msg.find("message_id"); id != msg.end() && !id->is_null()) {
      auto m = message_id(*id, type);
      if (!m) return Error(std::move(m.error()));
      cmd.message_id = std::move(*m);
    }
    return cmd;
  }
  if (type == "ack") {
    cmd.type = JsonCommand::Type::kAck;
    const auto id = msg.find("message_id");
    if (id == msg.end()) return Error(field_error(type, "message_id", "is missing"));
    auto m = message_id(*id, type);
    if (!m) return Error(std::move(m.error()));
    cmd.message_id = std::move(*m);
    if (const auto tp = msg.find("topic"); tp != msg.end() && !tp->is_null()) {
      if (!tp->is_string()) return Error(field_error(type, "topic", "must be a string"));
      cmd.topic = tp->get<std::string>();
    }
    return cmd;
  }
  if (type == "login") {
    // PopSub's username/password step; its fields are not needed to refuse it.
    cmd.type = JsonCommand::Type::kLogin;
    return cmd;
  }
  // The type is echoed only when short (a client's typo), never a whole message.
  std::string err = "unknown type";
  if (type.size() <= 32) err += " \"" + type + "\"";
  return Error(err + " (expected auth, subscribe, unsubscribe, publish or ack)");
}

}  // namespace ringcast::broker::ws
