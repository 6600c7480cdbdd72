// Checks of BrokerConfig's TLS settings (ringcast/broker/config.hpp, TlsConfig),
// called by validate(): what is wrong with them, named for the operator.
#pragma once

#include <string>

#include <tl/expected.hpp>

#include "ringcast/broker/config.hpp"

namespace ringcast::broker::tls {

// Empty TLS settings pass; with TLS on (a TLS port or ws), the certificate and
// key files are required, a client-certificate mode other than `no` needs the
// CA file, `ws` needs the WebSocket port, and turning off the plain port needs
// the TLS port. The files are read by Broker::start (TlsContext::create).
[[nodiscard]] tl::expected<void, std::string> validate(const BrokerConfig& config);

}  // namespace ringcast::broker::tls
