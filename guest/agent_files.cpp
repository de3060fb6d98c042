#include "guest/agent_state.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace airlock::guest {

namespace {

/// Request ids of writes that failed at begin, whose later chunks are dropped
/// silently; older ones are forgotten.
constexpr size_t failed_writes_remembered = 64;

} // namespace

status guest_agent::state::admit_request(uint32_t id, const std::string& path,
                                         bool opens_stream) const {
  if (id == 0)
    return make_status(errc::invalid_argument, "request id 0 is reserved");
  if (opens_stream && (reads.count(id) != 0 || writes.count(id) != 0))
    return make_status(errc::already_exists, "request id is already open");
  if (opens_stream && open_streams() >= options.streams_max)
    return make_status(errc::resource_exhausted,
                       "too many open streams (limit " + std::to_string(options.streams_max) + ")");
  return check_path(path, options.path_bytes_max);
}

void guest_agent::state::reply(uint32_t id, const status& outcome, uint64_t bytes) {
  if (outcome.is_ok())
    send(file_done{id, bytes});
  else
    send_error(0, id, outcome, true);
}

void guest_agent::state::on(const file_read_request& m) {
  if (auto ok = admit_request(m.request_id, m.path, true); !ok.is_ok())
    return send_error(0, m.request_id, ok, true);
  auto fd = open_for_read(m.path);
  if (!fd)
    return send_error(0, m.request_id, fd.error(), true);
  struct stat st {};
  uint64_t file_bytes = ::fstat(fd->get(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  uint64_t available = file_bytes > m.offset ? file_bytes - m.offset : 0;
  auto& r = reads[m.request_id];
  r.fd = std::move(*fd);
  r.offset = m.offset;
  r.remaining = m.length == 0 ? available : std::min(m.length, available);
}

void guest_agent::state::pump_reads() {
  bool progress = true;
  while (progress && !reads.empty() && outbound_bytes() < options.file_read_outbound_bytes) {
    progress = false;
    for (auto it = reads.begin(); it != reads.end();) {
      if (outbound_bytes() >= options.file_read_outbound_bytes)
        return;
      bool done = send_read_chunk(it->first, it->second);
      it = done ? reads.erase(it) : std::next(it);
      progress = true;
    }
  }
}

bool guest_agent::state::send_read_chunk(uint32_t id, file_read_stream& r) {
  auto want = static_cast<size_t>(std::min<uint64_t>(options.file_chunk_bytes, r.remaining));
  ensure_scratch(want);
  ssize_t n = 0;
  if (want > 0) {
    do {
      n = ::pread(r.fd.get(), scratch.data(), want, static_cast<off_t>(r.offset));
    } while (n < 0 && errno == EINTR);
  }
  if (n < 0) {
    send_error(0, id, errno_status(errno, "read"), true);
    return true;
  }
  auto got = static_cast<uint64_t>(n);
  bool eof = n == 0 || got >= r.remaining; // a file that shrank ends early
  send(file_data{id, r.offset, std::string(scratch.data(), got), eof});
  r.offset += got;
  r.remaining -= std::min(got, r.remaining);
  return eof;
}

void guest_agent::state::on(const write_begin& m) {
  if (auto ok = admit_request(m.request_id, m.path, true); !ok.is_ok())
    return fail_write(m.request_id, ok);
  auto writer = atomic_writer::begin(m.path, m.mode, m.create_parents, ++write_counter);
  if (!writer)
    return fail_write(m.request_id, writer.error());
  writes.emplace(m.request_id, std::move(*writer));
}

void guest_agent::state::fail_write(uint32_t id, const status& failure) {
  send_error(0, id, failure, true);
  failed_writes.push_back(id);
  if (failed_writes.size() > failed_writes_remembered)
    failed_writes.pop_front();
}

atomic_writer* guest_agent::state::find_write(uint32_t id) {
  auto it = writes.find(id);
  if (it != writes.end())
    return &it->second;
  if (std::find(failed_writes.begin(), failed_writes.end(), id) == failed_writes.end())
    send_error(0, id, make_status(errc::not_found, "no write in progress with this id"), true);
  return nullptr;
}

void guest_agent::state::on(const write_chunk& m) {
  auto* writer = find_write(m.request_id);
  if (writer == nullptr)
    return;
  if (auto wrote = writer->write(m.bytes); !wrote.is_ok()) {
    writes.erase(m.request_id);
    fail_write(m.request_id, wrote);
  }
}

void guest_agent::state::on(const write_end& m) {
  auto* writer = find_write(m.request_id);
  if (writer == nullptr)
    return;
  auto outcome = m.abort ? (writer->abort(), status::ok()) : writer->commit();
  auto bytes = writer->bytes_written();
  writes.erase(m.request_id);
  if (outcome.is_ok())
    return reply(m.request_id, outcome, bytes);
  fail_write(m.request_id, outcome);
}

void guest_agent::state::on(const list_request& m) {
  if (auto ok = admit_request(m.request_id, m.path, false); !ok.is_ok())
    return send_error(0, m.request_id, ok, true);
  // Names are most of a reply; half a frame leaves room for the rest.
  auto listing = list_dir(m.path, options.list_entries_max, options.frame_bytes_max / 2);
  if (!listing)
    return send_error(0, m.request_id, listing.error(), true);
  send(file_list{m.request_id, std::move(listing->entries), listing->truncated});
}

void guest_agent::state::on(const stat_request& m) {
  if (auto ok = admit_request(m.request_id, m.path, false); !ok.is_ok())
    return send_error(0, m.request_id, ok, true);
  auto info = stat_path(m.path, m.follow_symlinks);
  if (!info)
    return send_error(0, m.request_id, info.error(), true);
  send(file_stat{m.request_id, std::move(*info)});
}

void guest_agent::state::on(const mkdir_request& m) {
  if (auto ok = admit_request(m.request_id, m.path, false); !ok.is_ok())
    return send_error(0, m.request_id, ok, true);
  reply(m.request_id, make_dirs(m.path, m.mode, m.parents));
}

void guest_agent::state::on(const remove_request& m) {
  if (auto ok = admit_request(m.request_id, m.path, false); !ok.is_ok())
    return send_error(0, m.request_id, ok, true);
  reply(m.request_id, remove_path(m.path, m.recursive, options.remove_depth_max));
}

void guest_agent::state::on(const rename_request& m) {
  if (auto ok = admit_request(m.request_id, m.from, false); !ok.is_ok())
    return send_error(0, m.request_id, ok, true);
  if (auto ok = check_path(m.to, options.path_bytes_max); !ok.is_ok())
    return send_error(0, m.request_id, ok, true);
  reply(m.request_id, rename_path(m.from, m.to));
}

} // namespace airlock::guest
