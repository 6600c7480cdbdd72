// The live page served on `GET /` of the WebSocket port: src/broker/ws/page.html,
// embedded into the library at build time (src/broker/CMakeLists.txt).
#pragma once

#include <string_view>

namespace ringcast::broker::ws {

[[nodiscard]] std::string_view live_page_html() noexcept;

}  // namespace ringcast::broker::ws
