#include "relay/jetstream_error.hpp"

#include <fmt/format.h>

namespace ringcast::relay {

std::string jetstream_error(std::string_view step, natsStatus s, jsErrCode jerr) {
  std::string text = fmt::format("{}: {}", step, natsStatus_GetText(s));
  if (jerr != 0) text += fmt::format(" (JetStream error {})", static_cast<int>(jerr));
  const char* last = nats_GetLastError(nullptr);
  if (last != nullptr && *last != '\0') text += fmt::format(": {}", last);
  return text;
}

}  // namespace ringcast::relay
