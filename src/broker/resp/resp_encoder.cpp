#include "broker/resp/resp_encoder.hpp"

#include <charconv>

namespace ringcast::broker::resp {

namespace {

void header(std::string& out, char type, long long n) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, n);
  out.push_back(type);
  out.append(buf, r.ptr);
  out.append("\r\n", 2);
}

}  // namespace

void simple(std::string& out, std::string_view s) {
  out.push_back('+');
  out.append(s);
  out.append("\r\n", 2);
}

void error(std::string& out, std::string_view s) {
  out.push_back('-');
  const std::size_t start = out.size();
  out.append(s);
  for (std::size_t i = start; i < out.size(); ++i) {
    if (out[i] == '\r' || out[i] == '\n') out[i] = ' ';
  }
  out.append("\r\n", 2);
}

void integer(std::string& out, long long v) { header(out, ':', v); }

void bulk(std::string& out, std::string_view s) {
  header(out, '$', static_cast<long long>(s.size()));
  out.append(s);
  out.append("\r\n", 2);
}

void null(std::string& out, WireFormat r) { out.append(r == WireFormat::kResp3 ? "_\r\n" : "$-1\r\n"); }

void array(std::string& out, std::size_t n) { header(out, '*', static_cast<long long>(n)); }

void map(std::string& out, WireFormat r, std::size_t pairs) {
  if (r == WireFormat::kResp3) {
    header(out, '%', static_cast<long long>(pairs));
  } else {
    header(out, '*', static_cast<long long>(pairs) * 2);
  }
}

void push(std::string& out, WireFormat r, std::size_t n) {
  header(out, r == WireFormat::kResp3 ? '>' : '*', static_cast<long long>(n));
}

void verbatim(std::string& out, WireFormat r, std::string_view text) {
  if (r != WireFormat::kResp3) {
    bulk(out, text);
    return;
  }
  header(out, '=', static_cast<long long>(text.size()) + 4);
  out.append("txt:", 4);
  out.append(text);
  out.append("\r\n", 2);
}

}  // namespace ringcast::broker::resp
