// One pub/sub message as a publisher hands it to the broker: views of bytes the
// caller owns until the publish call returns.
#pragma once

#include <string_view>

namespace ringcast::broker {

struct Message {
  std::string_view channel;
  std::string_view payload;
};

}  // namespace ringcast::broker
