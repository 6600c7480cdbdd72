// The error of a relay setting that cannot work (RelayError::kInvalidConfig),
// as the option parsers (options.cpp) and the checks of a whole configuration
// (validate.cpp) return it.
#pragma once

#include <string>
#include <utility>

#include <tl/expected.hpp>

#include "ringcast/relay/error.hpp"

namespace ringcast::relay {

inline tl::unexpected<RelayError> invalid_config(std::string detail) {
  return tl::unexpected(RelayError{RelayError::Code::kInvalidConfig, 0, std::move(detail)});
}

}  // namespace ringcast::relay
