#include "ringcast/error.hpp"

#include <cstring>
#include <string>

namespace ringcast {

std::string_view to_string(Errc code) noexcept {
  switch (code) {
    case Errc::ok:
      return "ok";
    case Errc::full:
      return "full";
    case Errc::empty:
      return "empty";
    case Errc::no_consumer_slot:
      return "no_consumer_slot";
    case Errc::invalid_consumer:
      return "invalid_consumer";
    case Errc::payload_too_large:
      return "payload_too_large";
    case Errc::layout_mismatch:
      return "layout_mismatch";
    case Errc::io_error:
      return "io_error";
    case Errc::not_ready:
      return "not_ready";
    case Errc::producer_busy:
      return "producer_busy";
    case Errc::not_producer:
      return "not_producer";
    case Errc::lapped:
      return "lapped";
    case Errc::stalled:
      return "stalled";
    case Errc::producer_dead:
      return "producer_dead";
    case Errc::timed_out:
      return "timed_out";
    case Errc::already_exists:
      return "already_exists";
    case Errc::buffer_too_small:
      return "buffer_too_small";
  }
  return "unknown";
}

std::string error_message(std::string_view what, std::string_view detail, int sys_errno) {
  std::string text(what);
  auto append = [&text](std::string_view part) {
    if (part.empty()) return;
    if (!text.empty()) text += ": ";
    text += part;
  };
  append(detail);
  if (sys_errno != 0) append(std::strerror(sys_errno));
  return text;
}

std::string Error::message() const {
  std::string text = error_message(what, to_string(code), sys_errno);
  if (sys_errno == 0 && code == Errc::payload_too_large && expected != 0) {
    text += " (" + std::to_string(found) + " bytes, at most " + std::to_string(expected) + ")";
  } else if (sys_errno == 0 && expected != 0) {
    text += " (found " + std::to_string(found) + ", expected " + std::to_string(expected) + ")";
  } else if (sys_errno == 0 && found != 0) {
    text += " (found " + std::to_string(found) + ")";
  }
  // The next step, where the code alone names one.
  if (code == Errc::already_exists) text += "; replace it with CreateOptions::replace (ringcast create --force)";
  if (code == Errc::no_consumer_slot) {
    text += "; entries of consumers that died are freed by reap_dead_consumers (ringcast reap RING)";
  }
  return path.empty() ? text : path + ": " + text;
}

}  // namespace ringcast
