// The text of CLIENT LIST and CLIENT INFO, from the core's ConnectionStats:
// one line per connection, Redis-style key=value fields.
#pragma once

#include <span>
#include <string>

#include "ringcast/broker/stats.hpp"

namespace ringcast::broker {

// One connection's line, "\n" included.
[[nodiscard]] std::string client_line(const ConnectionStats& c);
// Every line, in the order given (the core's: by id).
[[nodiscard]] std::string client_list(std::span<const ConnectionStats> clients);

}  // namespace ringcast::broker
