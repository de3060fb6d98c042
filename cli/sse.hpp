#pragma once
// An incremental parser of text/event-stream (the WHATWG "server-sent events"
// format): bytes go in as the network delivers them, whole events come out.

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "schema/errc.hpp"

namespace airlock::cli {

struct sse_event {
  std::string event = "message"; ///< the `event:` field; "message" when absent
  std::string data;              ///< `data:` lines joined with '\n'
  std::string id;                ///< the last `id:` seen so far (it persists across events)
};

struct sse_parser_options {
  /// Largest event (its field bytes) accepted; a larger one fails the stream
  /// instead of growing memory. Default: 16777216 (16 MiB).
  size_t event_bytes_max = size_t{16} << 20;
};

/// Feed it chunks in order; it calls back once per complete event. Lines end
/// with LF, CRLF or CR (also when the CR and the LF arrive in different
/// chunks); lines starting with ':' are comments; an event is dispatched at a
/// blank line, and only when it has data (as the standard says).
class sse_parser {
public:
  using event_handler = std::function<void(const sse_event&)>;

  explicit sse_parser(sse_parser_options options = {}) : options_(options) {}

  /// Parses `bytes`; too_large once an event exceeds event_bytes_max (the
  /// parser is then unusable).
  status feed(std::string_view bytes, const event_handler& on_event);

  /// The last `id:` received, for Last-Event-ID on a reconnect.
  const std::string& last_event_id() const { return last_id_; }

private:
  void take_line(std::string_view line, const event_handler& on_event);

  sse_parser_options options_;
  std::string line_;      ///< the incomplete line so far
  bool after_cr_ = false; ///< the previous chunk ended in CR: skip a leading LF
  std::string event_type_;
  std::string data_;
  bool has_data_ = false;
  std::string last_id_;
  size_t event_bytes_ = 0;
};

} // namespace airlock::cli
