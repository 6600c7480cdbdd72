#include "broker/ws/metrics_route.hpp"

#include <openssl/crypto.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>

#include "broker/auth/auth_stats.hpp"
#include "broker/core/broker_core.hpp"
#include "ringcast/broker/token.hpp"

namespace ringcast::broker::ws {

namespace {

constexpr std::string_view kScheme = "bearer";  // RFC 6750 section 2.1; schemes are case-insensitive

// The credential of `Authorization: Bearer <credential>`, or empty.
std::string_view bearer_credential(std::string_view authorization) noexcept {
  if (authorization.size() <= kScheme.size() || authorization[kScheme.size()] != ' ') return {};
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    if ((authorization[i] | 0x20) != kScheme[i]) return {};
  }
  std::string_view credential = authorization.substr(kScheme.size());
  credential.remove_prefix(std::min(credential.find_first_not_of(' '), credential.size()));
  return credential;
}

// Compared in time that depends only on the lengths, as AUTH's password.
bool is_password(std::string_view credential, const std::string& password) noexcept {
  return !password.empty() && credential.size() == password.size() &&
         CRYPTO_memcmp(credential.data(), password.data(), password.size()) == 0;
}

HttpResponse refuse(unsigned status, std::string_view error, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  r.body += '\n';
  r.extra_headers = "WWW-Authenticate: Bearer realm=\"ringcast\"";
  if (!error.empty()) r.extra_headers.append(", error=\"").append(error).append("\"");
  r.extra_headers += "\r\n";
  return r;
}

}  // namespace

HttpRoutes::Handler metrics_route(BrokerCore& core) {
  return [&core](const HttpRequest& request) {
    const BrokerConfig& cfg = core.config();
    if (!cfg.requirepass.empty() || !cfg.token_secret.empty()) {
      const std::string_view credential = bearer_credential(request.authorization);
      AuthStats& stats = core.auth_stats();
      if (credential.empty()) {
        return refuse(401, {}, "authentication required: send Authorization: Bearer <password or token>");
      }
      if (!is_password(credential, cfg.requirepass)) {
        // A wrong credential is a guess, delayed as AUTH's are (per address:
        // the connection closes after every response).
        if (cfg.token_secret.empty()) {
          stats.count_password_refused();
          HttpResponse r = refuse(401, "invalid_token", "wrong password");
          r.delay = stats.record_failure(request.peer, "wrong password on /metrics", 1, /*closing=*/false);
          return r;
        }
        const auto grant = verify_token(credential, cfg.token_secret);
        if (!grant) {
          stats.count_token_refused(grant.error());
          HttpResponse r = refuse(401, "invalid_token", std::string(describe(grant.error())));
          r.delay = stats.record_failure(request.peer, std::string(describe(grant.error())) + " on /metrics", 1,
                                         /*closing=*/false);
          return r;
        }
        if (grant->subscribe) {
          stats.count_permission_denied();
          return refuse(403, "insufficient_scope",
                        "the token may not read every channel: /metrics needs a token without a subscribe claim");
        }
      }
    }
    return HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", core.metrics_text(), {}};
  };
}

}  // namespace ringcast::broker::ws
