// The sandbox actor's file pass-through: read, write, list, stat, mkdir,
// remove and rename as guest jobs, each bounded in bytes and time.

#include <algorithm>
#include <limits>
#include <string>

#include "actors/errors.hpp"
#include "worker/sandbox_state.hpp"

namespace airlock::worker::sandbox_detail {

int file_timeout_ms(const sandbox_actor_options& options, uint64_t bytes) {
  const uint64_t rate = std::max<uint64_t>(options.file_rate_bytes_per_s_min, 1);
  const uint64_t extra = bytes * 1000 / rate;
  return static_cast<int>(std::min<uint64_t>(options.guest_call_timeout_ms + extra,
                                             uint64_t{std::numeric_limits<int>::max()}));
}

namespace {

status too_large(const std::string& path, uint64_t size, uint64_t bytes_max) {
  return make_status(errc::too_large, path + ": " + std::to_string(size)
                                        + " bytes is more than the limit of "
                                        + std::to_string(bytes_max)
                                        + " bytes of one file transfer; read it in ranges "
                                          "(offset and length)");
}

/// A read: stat first, so a directory and an oversized file are refused
/// before any byte moves; the read asks for one byte more than the limit to
/// notice files that report no size (procfs) or grew since.
job_result read_file_op(guest::guest_client& client, const file_request& req,
                        const sandbox_actor_options& options) {
  job_result out;
  const uint64_t bytes_max = options.file_bytes_max;
  auto info = client.stat(req.path, options.guest_call_timeout_ms, true);
  if (!info) {
    out.outcome = info.error();
    return out;
  }
  if (info->type == guest::file_type::directory) {
    out.outcome = make_status(errc::invalid_argument, req.path + " is a directory");
    return out;
  }
  const uint64_t available = info->size > req.offset ? info->size - req.offset : 0;
  const uint64_t wanted = req.length == 0 ? available : std::min(req.length, available);
  if (wanted > bytes_max || req.length > bytes_max) {
    out.outcome = too_large(req.path, std::max(wanted, req.length), bytes_max);
    return out;
  }
  const uint64_t length = req.length == 0 ? bytes_max + 1 : req.length;
  auto data = client.read_file(req.path, file_timeout_ms(options, wanted), req.offset, length);
  if (!data)
    out.outcome = data.error();
  else if (data->size() > bytes_max)
    out.outcome = too_large(req.path, data->size(), bytes_max);
  else
    out.file.data = std::move(*data);
  return out;
}

job_result run_file_op(guest::guest_client& client, const file_request& req,
                       const sandbox_actor_options& options) {
  job_result out;
  const int timeout = options.guest_call_timeout_ms;
  switch (req.op) {
    case file_op::read: return read_file_op(client, req, options);
    case file_op::write: {
      if (req.data.size() > options.file_bytes_max) {
        out.outcome = too_large(req.path, req.data.size(), options.file_bytes_max);
        break;
      }
      auto written = client.write_file(
        req.path, req.data, file_timeout_ms(options, req.data.size()), req.mode, req.parents);
      if (written)
        out.file.bytes = *written;
      else
        out.outcome = written.error();
      break;
    }
    case file_op::list: {
      auto listed = client.list(req.path, timeout);
      if (listed) {
        out.file.entries = std::move(listed->entries);
        out.file.truncated = listed->truncated;
      } else
        out.outcome = listed.error();
      break;
    }
    case file_op::stat: {
      auto info = client.stat(req.path, timeout, req.follow);
      if (info)
        out.file.info = std::move(*info);
      else
        out.outcome = info.error();
      break;
    }
    case file_op::mkdir:
      out.outcome = client.mkdir(req.path, timeout, req.mode, req.parents);
      break;
    case file_op::remove: out.outcome = client.remove(req.path, timeout, req.recursive); break;
    case file_op::rename: out.outcome = client.rename(req.path, req.to, timeout); break;
    case file_op::write_open:
    case file_op::write_part:
    case file_op::write_commit:
    case file_op::write_abort: // sessions live on the actor (handle_write_session)
      out.outcome = make_status(errc::internal, "a write session operation posted as a job");
      break;
  }
  return out;
}

} // namespace

caf::result<file_reply> handle_file(self_ptr self, file_request& request) {
  auto& st = self->state;
  if (st.paused)
    return make_error(errc::wrong_state, "sandbox " + st.parts.id
                                           + " is paused: file operations would block; resume it");
  switch (request.op) {
    case file_op::write_open:
    case file_op::write_part:
    case file_op::write_commit:
    case file_op::write_abort: return handle_write_session(self, request);
    default: break;
  }
  auto promise = self->make_response_promise<file_reply>();
  auto posted = post_guest(
    self,
    [request = std::move(request), options = st.options](guest::guest_client& client) {
      return run_file_op(client, request, options);
    },
    [promise](job_result& done) mutable {
      if (done.outcome)
        promise.deliver(std::move(done.file));
      else
        promise.deliver(make_error(done.outcome));
    });
  if (!posted)
    promise.deliver(make_error(posted)); // the promise owns the reply now
  return promise;
}

} // namespace airlock::worker::sandbox_detail
