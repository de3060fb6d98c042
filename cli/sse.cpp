#include "cli/sse.hpp"

namespace airlock::cli {

status sse_parser::feed(std::string_view bytes, const event_handler& on_event) {
  for (char c : bytes) {
    if (after_cr_) {
      after_cr_ = false;
      if (c == '\n')
        continue;
    }
    if (c == '\r' || c == '\n') {
      after_cr_ = c == '\r';
      take_line(line_, on_event);
      line_.clear();
      continue;
    }
    line_ += c;
    if (++event_bytes_ > options_.event_bytes_max)
      return make_status(errc::too_large, "an event of the stream is larger than "
                                            + std::to_string(options_.event_bytes_max) + " bytes");
  }
  return status::ok();
}

void sse_parser::take_line(std::string_view line, const event_handler& on_event) {
  if (line.empty()) {
    if (has_data_) {
      sse_event event;
      if (!event_type_.empty())
        event.event = event_type_;
      event.data = std::move(data_);
      event.id = last_id_;
      on_event(event);
    }
    event_type_.clear();
    data_.clear();
    has_data_ = false;
    event_bytes_ = 0;
    return;
  }
  if (line.front() == ':')
    return; // a comment, such as the server's heartbeat
  auto colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ')
    value.remove_prefix(1);
  if (field == "event") {
    event_type_ = value;
  } else if (field == "data") {
    if (has_data_)
      data_ += '\n';
    data_ += value;
    has_data_ = true;
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos)
      last_id_ = value;
  }
  // "retry" and unknown fields are ignored: the CLI has its own reconnect policy.
}

} // namespace airlock::cli
