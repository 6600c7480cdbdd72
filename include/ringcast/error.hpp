// ringcast error vocabulary.
//
// Three tiers (see docs/design.md):
//  * Hot-path operations (try_push, try_recv, lag, ...) are noexcept and return
//    a small [[nodiscard]] status: an Errc or a struct carrying one.
//  * Setup operations (create, open, register_consumer, ...) return
//    Result<T> = tl::expected<T, Error>; Error carries an Errc, the errno of the
//    failing system call (0 if none), a static description of what failed
//    and the path or name the call was given. Text is built only when
//    message() is called.
//  * Contract violations are asserts, documented with REQUIRES.
// No exception crosses the library boundary.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <tl/expected.hpp>

namespace ringcast {

enum class Errc : std::uint8_t {
  ok = 0,
  full,               // try_push: the slowest active consumer is `capacity` behind
  empty,              // try_recv: the consumer has read everything published
  no_consumer_slot,   // register_consumer: all kMaxConsumers entries are taken
  invalid_consumer,   // id out of range, or not registered through this handle
  payload_too_large,  // try_push / try_claim: payload longer than the ring's max_message
  layout_mismatch,    // open: bad magic, version, slot size, capacity or file size
  io_error,           // a system call failed; Error::sys_errno says why
  not_ready,          // open: the creator has not finished initialising the file
  producer_busy,      // another live handle holds the producer role
  not_producer,       // try_push on a handle that could not claim the producer role
  lapped,             // try_recv (lossy ring): the producer overwrote unread messages
  stalled,            // try_recv: a slot stayed half-written past the bounded wait
  producer_dead,      // try_recv: a slot is half-written and its producer has died
  timed_out,          // recv_wait / push_wait: the timeout elapsed
  already_exists,     // create: the path exists and replacement was not requested
  buffer_too_small,   // try_recv: the next message is longer than the caller's buffer (nothing consumed)
};

// A stable, lower-case name for each code ("full", "layout_mismatch", ...).
[[nodiscard]] std::string_view to_string(Errc code) noexcept;

struct Error {
  Errc code = Errc::ok;
  int sys_errno = 0;      // errno of the failing call, 0 when not a system error
  const char* what = "";  // static text naming the step that failed
  // A layout_mismatch on a field: the file's value and the one this build
  // needs (layout version, slot size, file size, expected capacity). Both 0
  // when the failure names no value.
  std::uint64_t found = 0;
  std::uint64_t expected = 0;
  // The file (or shared-memory name) that create, open and their _shm forms
  // were given; empty for the other calls.
  std::string path{};

  // "<path>: <what>: <code>", with ": <strerror>" when sys_errno is set,
  // " (found F, expected E)" for a field mismatch and the next step where
  // there is one:
  // "/dev/shm/a.ring: open: unsupported layout version: layout_mismatch (found 3, expected 2)",
  // "/dev/shm/a.ring: create: path exists: already_exists; replace it with CreateOptions::replace
  // (ringcast create --force)".
  [[nodiscard]] std::string message() const;
};

template <class T>
using Result = tl::expected<T, Error>;

// "<what>: <detail>: <strerror(sys_errno)>", leaving out an empty part and the
// strerror when sys_errno is 0: the text every setup error of the public
// headers builds in message() (Error, broker::BrokerError, relay::RelayError;
// docs/design.md, "Error model"). Allocates; for messages, never a hot path.
[[nodiscard]] std::string error_message(std::string_view what, std::string_view detail, int sys_errno);

[[nodiscard]] inline tl::unexpected<Error> make_error(Errc code, const char* what, int sys_errno = 0) noexcept {
  return tl::unexpected<Error>(Error{code, sys_errno, what});
}

// A layout_mismatch naming the file's value and the one this build needs.
[[nodiscard]] inline tl::unexpected<Error> make_mismatch(const char* what, std::uint64_t found,
                                                         std::uint64_t expected) noexcept {
  return tl::unexpected<Error>(Error{Errc::layout_mismatch, 0, what, found, expected});
}

}  // namespace ringcast
