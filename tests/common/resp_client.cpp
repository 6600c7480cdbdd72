#include "resp_client.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#include "fd_io.hpp"
#include "tcp_loopback.hpp"

namespace ringcast::test {

namespace {

std::size_t bulk_size(std::size_t n) { return 1 + std::to_string(n).size() + 2 + n + 2; }

// The prefix of a message frame, up to and including the payload's "$<n>\r\n".
std::size_t message_head_size(std::string_view channel, std::size_t payload_size) {
  return std::string_view("*3\r\n").size() + bulk_size(std::string_view("message").size()) + bulk_size(channel.size()) +
         1 + std::to_string(payload_size).size() + 2;
}

long long to_ll(std::string_view s) { return std::strtoll(std::string(s).c_str(), nullptr, 10); }

// Parses one scalar at p[0..n); returns the bytes it took, 0 if incomplete.
std::size_t parse_elem(const char* p, std::size_t n, RespElem& e) {
  const void* eol_v = std::memchr(p, '\n', n);
  if (eol_v == nullptr) return 0;
  const auto line = static_cast<std::size_t>(static_cast<const char*>(eol_v) - p) + 1;  // includes \r\n
  e.type = p[0];
  const std::string_view body(p + 1, line < 3 ? 0 : line - 3);
  if (e.type == '$') {
    const long long len = to_ll(body);
    if (len < 0) {
      e.type = '_';
      return line;
    }
    const auto l = static_cast<std::size_t>(len);
    if (n < line + l + 2) return 0;
    e.str = std::string_view(p + line, l);
    return line + l + 2;
  }
  e.str = body;
  if (e.type == ':') e.num = to_ll(body);
  return line;
}

}  // namespace

std::string resp_bulk(std::string_view s) {
  std::string out(1, '$');
  out += std::to_string(s.size());
  out += "\r\n";
  out.append(s);
  out += "\r\n";
  return out;
}

void append_resp_command(std::string& out, std::initializer_list<std::string_view> args) {
  out += '*';
  out += std::to_string(args.size());
  out += "\r\n";
  for (const std::string_view a : args) out += resp_bulk(a);
}

std::string resp_command(std::initializer_list<std::string_view> args) {
  std::string out;
  append_resp_command(out, args);
  return out;
}

std::string resp_message(std::string_view channel, std::string_view payload) {
  return "*3\r\n" + resp_bulk("message") + resp_bulk(channel) + resp_bulk(payload);
}

std::size_t resp_message_size(std::string_view channel, std::size_t payload_size) {
  return message_head_size(channel, payload_size) + payload_size + 2;
}

std::size_t resp_message_payload_offset(std::string_view channel, std::size_t payload_size) {
  return message_head_size(channel, payload_size);
}

std::string resp_subscribe_reply(std::string_view channel, int count) {
  return "*3\r\n" + resp_bulk("subscribe") + resp_bulk(channel) + ":" + std::to_string(count) + "\r\n";
}

std::size_t parse_reply(const char* p, std::size_t n, RespReply& r) {
  if (n == 0) return 0;
  if (p[0] != '*') {
    RespElem e;
    const std::size_t used = parse_elem(p, n, e);
    if (used == 0) return 0;
    r.type = e.type;
    r.str = e.str;
    r.num = e.num;
    r.count = 0;
    return used;
  }
  const void* eol_v = std::memchr(p, '\n', n);
  if (eol_v == nullptr) return 0;
  const auto head = static_cast<std::size_t>(static_cast<const char*>(eol_v) - p) + 1;
  const long long count = to_ll(std::string_view(p + 1, head < 3 ? 0 : head - 3));
  std::size_t used = head;
  r.type = '*';
  r.count = count < 0 ? 0 : static_cast<std::size_t>(count);
  for (std::size_t i = 0; i < r.count; ++i) {
    RespElem e;
    const std::size_t u = parse_elem(p + used, n - used, e);
    if (u == 0) return 0;
    if (i < r.elems.size()) r.elems[i] = e;
    used += u;
  }
  return used;
}

RespClient::RespClient(std::uint16_t port, int rcvbuf) : fd_(connect_loopback(port, rcvbuf)) {}

RespClient::~RespClient() {
  if (fd_ >= 0) ::close(fd_);
}

int RespClient::release() {
  if (pos_ != buf_.size()) return -1;
  return std::exchange(fd_, -1);
}

bool RespClient::send(std::initializer_list<std::string_view> args) { return send_all(fd_, resp_command(args)); }

bool RespClient::take_buffered(RespReply& r) {
  const std::size_t used = parse_reply(buf_.data() + pos_, buf_.size() - pos_, r);
  pos_ += used;
  return used > 0;
}

std::optional<RespReply> RespClient::next(Deadline d) {
  for (;;) {
    RespReply r;
    if (take_buffered(r)) return r;
    if (!read_more(d, 1 << 16)) return std::nullopt;
  }
}

bool RespClient::read_more(Deadline d, std::size_t max_bytes) {
  if (pos_ > 0 && pos_ * 2 >= buf_.size()) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, ms_left(d)) != 1) return false;
  const std::size_t old = buf_.size();
  buf_.resize(old + max_bytes);
  const ssize_t n = ::recv(fd_, buf_.data() + old, max_bytes, 0);
  buf_.resize(old + (n > 0 ? static_cast<std::size_t>(n) : 0));
  return n > 0;
}

std::optional<RespReply> RespClient::call(std::initializer_list<std::string_view> args,
                                          std::chrono::milliseconds timeout) {
  if (!send(args)) return std::nullopt;
  return next(deadline_in(timeout));
}

bool RespClient::subscribe(std::string_view channel, bool pattern) {
  if (!send({pattern ? "PSUBSCRIBE" : "SUBSCRIBE", channel})) return false;
  const auto r = next(deadline_in(std::chrono::seconds(10)));
  return r && r->type == '*' && r->count == 3 && r->elems[0].str == (pattern ? "psubscribe" : "subscribe");
}

}  // namespace ringcast::test
