#pragma once
// What guest/client.cpp (channel, streams, credit) and guest/client_files.cpp
// (the file operations) share: the clock, matching a reply to its request, and
// waiting for a matching message. Private to those two files.

#include <ctime>

#include <algorithm>

#include "guest/client.hpp"

namespace airlock::guest {
namespace client_detail {

inline int64_t now_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

inline int remaining_ms(int64_t deadline_ms) {
  return static_cast<int>(std::clamp<int64_t>(deadline_ms - now_ms(), 0, 1'000'000));
}

/// The request a message answers, 0 when none.
inline uint32_t request_of(const guest_message& m) {
  if (auto* d = std::get_if<file_data>(&m))
    return d->request_id;
  if (auto* s = std::get_if<file_stat>(&m))
    return s->request_id;
  if (auto* l = std::get_if<file_list>(&m))
    return l->request_id;
  if (auto* d = std::get_if<file_done>(&m))
    return d->request_id;
  if (auto* r = std::get_if<error_reply>(&m))
    return r->request_id;
  if (auto* s = std::get_if<stats_reply>(&m))
    return s->request_id;
  if (auto* r = std::get_if<refreshed>(&m))
    return r->request_id;
  return 0;
}

inline status as_status(const error_reply& e) { return make_status(e.code, e.message); }

} // namespace client_detail

template <class Match>
result<guest_message> guest_client::wait_for(Match&& match, int64_t deadline_ms) {
  size_t scanned = 0;
  for (;;) {
    for (; scanned < pending_.size(); ++scanned) {
      if (!match(pending_[scanned]))
        continue;
      auto message = std::move(pending_[scanned]);
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(scanned));
      return message;
    }
    if (auto received = receive(deadline_ms); !received.is_ok())
      return received;
  }
}

} // namespace airlock::guest
