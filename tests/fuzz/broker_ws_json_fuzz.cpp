// libFuzzer target for PopSub's JSON commands (src/broker/ws/json_command.hpp):
// any bytes give a command or an error sentence, never a crash, a leak or deep
// recursion; a command keeps the parser's promises.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "broker/ws/json_command.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using ringcast::broker::ws::JsonCommand;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto r = ringcast::broker::ws::parse_json_command(text);
  if (!r) {
    if (r.error().empty()) std::abort();
    return 0;
  }
  switch (r->type) {
    case JsonCommand::Type::kAuth:
      if (r->token.empty()) std::abort();
      break;
    case JsonCommand::Type::kSubscribe:
    case JsonCommand::Type::kUnsubscribe:
      if (r->topic.empty()) std::abort();
      break;
    case JsonCommand::Type::kPublish:
      if (r->topic.empty() || r->qos > 1) std::abort();
      break;
    case JsonCommand::Type::kAck:
      if (!r->message_id) std::abort();
      break;
  }
  return 0;
}
