// libFuzzer target for PopSub's JSON commands (src/broker/ws/json_command.hpp):
// any bytes give a command or an error sentence, never a crash, a leak or deep
// recursion; a command keeps the parser's promises. The same bytes then run
// through a WebSocket session (as a binary message, so that bytes which are not
// UTF-8 reach the JSON parser too) beside a session subscribed to everything.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "broker/ws/json_command.hpp"
#include "ws_fuzz_support.hpp"

namespace {

using ringcast::broker::ws::JsonCommand;

void check(const JsonCommand& c) {
  switch (c.type) {
    case JsonCommand::Type::kAuth:
      if (c.token.empty()) std::abort();
      break;
    case JsonCommand::Type::kSubscribe:
    case JsonCommand::Type::kUnsubscribe:
      if (c.topic.empty()) std::abort();
      break;
    case JsonCommand::Type::kPublish:
      if (c.topic.empty() || c.qos > 1) std::abort();
      break;
    case JsonCommand::Type::kAck:
      if (!c.message_id) std::abort();
      break;
    case JsonCommand::Type::kLogin:  // PopSub's; no fields are kept
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto r = ringcast::broker::ws::parse_json_command(text);
  if (r) {
    check(*r);
  } else if (r.error().empty()) {
    std::abort();
  }
  if (size > 4000) return 0;  // over the fuzz core's ws_max_message
  namespace f = ringcast::broker::ws::fuzz;
  (void)f::listener();
  auto s = f::upgraded_session();
  (void)s->on_input(f::masked_frame(0x2, text));
  f::drain(*s);
  f::drain(f::listener());
  s->detach();
  return 0;
}
