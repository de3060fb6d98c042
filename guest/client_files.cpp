// The file operations of the guest client: reads, writes (whole, or opened
// and written in parts), listings, stat, mkdir, remove, rename and watches.

#include "guest/client.hpp"

#include "guest/client_internal.hpp"

namespace airlock::guest {

using namespace client_detail;

result<std::string> guest_client::read_file(const std::string& path, int timeout_ms,
                                            uint64_t offset, uint64_t length) {
  auto deadline = now_ms() + timeout_ms;
  auto id = next_request_id();
  if (auto sent = send(file_read_request{id, path, offset, length}, timeout_ms); !sent.is_ok())
    return sent;
  std::string data;
  for (;;) {
    auto message = reply_to(id, deadline);
    if (!message)
      return message.error();
    if (auto* chunk = std::get_if<file_data>(&*message)) {
      data += chunk->bytes;
      if (chunk->eof)
        return data;
    }
  }
}

status guest_client::send_chunks(uint32_t id, std::string_view data, int64_t deadline_ms) {
  size_t chunk_max = std::max<size_t>(hello_.limits.file_chunk_bytes, 1);
  for (size_t at = 0; at < data.size(); at += chunk_max) {
    auto chunk = data.substr(at, chunk_max);
    if (auto sent = send(write_chunk{id, std::string(chunk)}, remaining_ms(deadline_ms));
        !sent.is_ok())
      return sent;
  }
  return status::ok();
}

result<uint64_t> guest_client::write_file(const std::string& path, std::string_view data,
                                          int timeout_ms, uint32_t mode, bool create_parents) {
  auto deadline = now_ms() + timeout_ms;
  auto id = next_request_id();
  if (auto sent = send(write_begin{id, path, mode, create_parents}, timeout_ms); !sent.is_ok())
    return sent;
  if (auto sent = send_chunks(id, data, deadline); !sent.is_ok())
    return sent;
  if (auto sent = send(write_end{id, false}, remaining_ms(deadline)); !sent.is_ok())
    return sent;
  auto message = reply_to(id, deadline);
  if (!message)
    return message.error();
  return std::get<file_done>(*message).bytes;
}

result<uint32_t> guest_client::write_open(const std::string& path, int timeout_ms, uint32_t mode,
                                          bool create_parents) {
  auto id = next_request_id();
  if (auto sent = send(write_begin{id, path, mode, create_parents}, timeout_ms); !sent.is_ok())
    return sent;
  // The guest answers in order: once the pong is here, so is a refusal.
  if (auto fenced = ping(timeout_ms); !fenced)
    return fenced.error();
  if (auto refused = take_error(id); !refused.is_ok())
    return refused;
  return id;
}

status guest_client::write_part(uint32_t id, std::string_view data, int timeout_ms) {
  auto deadline = now_ms() + timeout_ms;
  if (auto sent = send_chunks(id, data, deadline); !sent.is_ok())
    return sent;
  if (auto read = read_available(); !read.is_ok())
    return read;
  return take_error(id);
}

result<uint64_t> guest_client::write_close(uint32_t id, bool abort, int timeout_ms) {
  auto deadline = now_ms() + timeout_ms;
  if (auto sent = send(write_end{id, abort}, timeout_ms); !sent.is_ok())
    return sent;
  auto message = reply_to(id, deadline);
  if (!message)
    return message.error();
  return std::get<file_done>(*message).bytes;
}

status guest_client::take_error(uint32_t id) {
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    auto* e = std::get_if<error_reply>(&*it);
    if (e == nullptr || e->request_id != id)
      continue;
    auto failure = as_status(*e);
    pending_.erase(it);
    return failure;
  }
  return status::ok();
}

result<file_list> guest_client::list(const std::string& path, int timeout_ms) {
  auto id = next_request_id();
  if (auto sent = send(list_request{id, path}, timeout_ms); !sent.is_ok())
    return sent;
  auto message = reply_to(id, now_ms() + timeout_ms);
  if (!message)
    return message.error();
  return std::get<file_list>(std::move(*message));
}

result<file_info> guest_client::stat(const std::string& path, int timeout_ms, bool follow) {
  auto id = next_request_id();
  if (auto sent = send(stat_request{id, path, follow}, timeout_ms); !sent.is_ok())
    return sent;
  auto message = reply_to(id, now_ms() + timeout_ms);
  if (!message)
    return message.error();
  return std::get<file_stat>(*message).info;
}

status guest_client::await_done(uint32_t id, int64_t deadline_ms) {
  auto message = reply_to(id, deadline_ms);
  return message ? status::ok() : message.error();
}

status guest_client::mkdir(const std::string& path, int timeout_ms, uint32_t mode, bool parents) {
  auto id = next_request_id();
  if (auto sent = send(mkdir_request{id, path, mode, parents}, timeout_ms); !sent.is_ok())
    return sent;
  return await_done(id, now_ms() + timeout_ms);
}

status guest_client::remove(const std::string& path, int timeout_ms, bool recursive) {
  auto id = next_request_id();
  if (auto sent = send(remove_request{id, path, recursive}, timeout_ms); !sent.is_ok())
    return sent;
  return await_done(id, now_ms() + timeout_ms);
}

status guest_client::rename(const std::string& from, const std::string& to, int timeout_ms) {
  auto id = next_request_id();
  if (auto sent = send(rename_request{id, from, to}, timeout_ms); !sent.is_ok())
    return sent;
  return await_done(id, now_ms() + timeout_ms);
}

// ---- watches ---------------------------------------------------------------------

result<uint32_t> guest_client::watch(const std::string& path, bool recursive, int timeout_ms,
                                     uint32_t watch_id) {
  if (watch_id == 0)
    watch_id = ++last_watch_id_ == 0 ? ++last_watch_id_ : last_watch_id_;
  if (auto sent = send(watch_start{watch_id, path, recursive}, timeout_ms); !sent.is_ok())
    return sent;
  auto message = wait_for(
    [watch_id](const guest_message& m) {
      if (auto* s = std::get_if<watch_started>(&m))
        return s->watch_id == watch_id;
      auto* e = std::get_if<error_reply>(&m);
      return e != nullptr && e->watch_id == watch_id;
    },
    now_ms() + timeout_ms);
  if (!message)
    return message.error();
  if (auto* e = std::get_if<error_reply>(&*message))
    return as_status(*e);
  return watch_id;
}

status guest_client::unwatch(uint32_t watch_id, int timeout_ms) {
  return send(watch_stop{watch_id}, timeout_ms);
}

} // namespace airlock::guest
