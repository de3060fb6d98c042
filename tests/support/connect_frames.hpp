#pragma once
// Connect's stream framing for tests of the E2B front: envelopes (a flag
// byte, a 4-byte big-endian length, the message) with JSON messages.

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include "schema/base64.hpp"

namespace airlock::test {

using nlohmann::json;

/// The JSON messages of a Connect stream's body, the end-of-stream one last
/// (the envelope whose flag has bit 2).
struct connect_stream {
  std::vector<json> messages;
  json end;
  bool ended = false;
};

inline connect_stream read_envelopes(const std::string& body) {
  connect_stream out;
  size_t at = 0;
  while (at + 5 <= body.size()) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(body.data() + at);
    const size_t size = (size_t{bytes[1]} << 24) | (size_t{bytes[2]} << 16)
                        | (size_t{bytes[3]} << 8) | size_t{bytes[4]};
    auto message = json::parse(body.substr(at + 5, size), nullptr, false);
    if (bytes[0] & 2) {
      out.end = message;
      out.ended = true;
    } else {
      out.messages.push_back(message);
    }
    at += 5 + size;
  }
  return out;
}

/// One Connect envelope (flag 0) holding `message` as JSON.
inline std::string envelope_of(const json& message) {
  auto text = message.dump();
  std::string out(5, '\0');
  for (int i = 0; i < 4; ++i)
    out[1 + i] = static_cast<char>((text.size() >> (8 * (3 - i))) & 0xff);
  return out + text;
}

/// The stdout bytes of a process.Process/Start stream's body (JSON codec).
inline std::string stdout_of(const std::string& body) {
  std::string out;
  for (const auto& message : read_envelopes(body).messages) {
    auto data = message["event"].value("data", json::object());
    if (data.contains("stdout"))
      out += base64_decode(data["stdout"].get<std::string>()).value_or("?");
  }
  return out;
}

} // namespace airlock::test
