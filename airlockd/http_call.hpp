#pragma once
// One blocking HTTP request from airlockd to another airlockd's API: a
// worker redeeming its join token, `airlockd token create`. Bounded in time
// and in the size of the answer.

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "schema/errc.hpp"

namespace airlock::airlockd {

struct http_answer {
  unsigned status = 0;
  std::string body;
};

/// The largest answer body read.
inline constexpr uint64_t http_answer_bytes_max = 1 << 20;

/// `method` (GET, POST, ...) of `target` at `base_url` (http://HOST:PORT),
/// with a JSON `body` when not empty and `bearer` as the Authorization
/// header when not empty. unavailable when the server cannot be reached or
/// does not answer within `timeout`; invalid_argument for a URL of another
/// shape.
result<http_answer> http_call(std::string_view base_url, std::string_view method,
                              std::string_view target, std::string_view body,
                              std::string_view bearer, std::chrono::milliseconds timeout);

} // namespace airlock::airlockd
