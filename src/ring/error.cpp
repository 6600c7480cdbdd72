#include "ringcast/error.hpp"

#include <cstring>

#include <fmt/format.h>

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
  }
  return "unknown";
}

std::string Error::message() const {
  if (sys_errno != 0) {
    return fmt::format("{}: {}: {}", what, to_string(code), std::strerror(sys_errno));
  }
  if (found != 0 || expected != 0) {
    return fmt::format("{}: {} (found {}, expected {})", what, to_string(code), found, expected);
  }
  return fmt::format("{}: {}", what, to_string(code));
}

}  // namespace ringcast
