// The body of every tool's main(). Every expected failure returns a status;
// this catches the unexpected (out of memory, a failed write) so that the
// stack unwinds (children are stopped and reaped by their owners, the
// terminal is restored) and the tool exits 1 with its name and the reason,
// instead of aborting through std::terminate.
#pragma once

#include <exception>
#include <string_view>

#include <fmt/format.h>

namespace ringcast::tools {

template <class Body>
int guarded_main(std::string_view tool, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: {}\n", tool, e.what());
  } catch (...) {
    fmt::print(stderr, "{}: unexpected error\n", tool);
  }
  return 1;
}

}  // namespace ringcast::tools
