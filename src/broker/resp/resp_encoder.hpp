// RESP2/RESP3 reply encoding, appending to a caller-owned buffer.
//
// Thread safety: stateless functions; the buffer belongs to the caller.
//
// Where the two protocols differ (null, map, push, verbatim string), the function
// takes the connection's protocol and emits what Redis 7 emits for it: RESP2 gets
// "$-1", a flat array, "*" and a bulk string; RESP3 gets "_", "%", ">" and "=".
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "broker/queue/wire_format.hpp"

namespace ringcast::broker::resp {

void simple(std::string& out, std::string_view s);  // "+s\r\n"
// "-s\r\n"; CR and LF in `s` become spaces, as Redis does, so an error that
// quotes client input cannot break the framing.
void error(std::string& out, std::string_view s);
void integer(std::string& out, long long v);                  // ":v\r\n"
void bulk(std::string& out, std::string_view s);              // "$len\r\ns\r\n"
void null(std::string& out, WireFormat r);                    // "$-1\r\n" | "_\r\n"
void array(std::string& out, std::size_t n);                  // "*n\r\n"
void map(std::string& out, WireFormat r, std::size_t pairs);  // "*2n\r\n" | "%n\r\n"
void push(std::string& out, WireFormat r, std::size_t n);     // "*n\r\n" | ">n\r\n"
// INFO-style text: a bulk string in RESP2, a "txt" verbatim string in RESP3.
void verbatim(std::string& out, WireFormat r, std::string_view text);

}  // namespace ringcast::broker::resp
