// File routes of the data plane (read, list, stat, remove, mkdir, move under
// /v1/sandboxes/{id}/files): each is one call of the sandbox's worker, except
// a large read, streamed a chunk at a time.

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "gateway/data_plane_internal.hpp"

namespace airlock::gateway::data_detail {

namespace {

using namespace detail;
using nlohmann::json;

/// Runs a file operation on ?path= and answers with `answer(result, path)`.
template <class Answer>
void file_call(api_ptr api, exchange_ptr ex, const target& t, actors::file_spec spec,
               Answer answer) {
  auto path = path_of_query(*ex);
  if (!path)
    return ex->respond(error_response(path.error()));
  spec.path = *path;
  call_actor(
    *api->deps.system, t.node, api->timeout() * 4,
    [ex, answer, path = *path](actors::file_result& result) { ex->respond(answer(result, path)); },
    answer_error(ex), actors::dp_file_atom::value, t.sandbox_id, std::move(spec));
}

/// A download larger than one chunk, sent as it is read: the next chunk is
/// asked of the worker only once the previous one is written to the client,
/// so memory holds about two chunks whatever the file's size, no message
/// carries the whole file, and a slow client slows the reads (back-pressure).
struct download : std::enable_shared_from_this<download> {
  api_ptr api;
  target where;
  std::string path;
  uint64_t size = 0;   ///< announced in Content-Length
  uint64_t offset = 0; ///< bytes sent so far
  std::shared_ptr<sse_stream> stream;

  /// Sends `bytes` (from `offset`), then asks for the next chunk once they
  /// are written, or ends the body.
  void sent(std::string bytes) {
    if (bytes.size() > size - offset)
      bytes.resize(size - offset); // the file grew: the body is what was announced
    offset += bytes.size();
    count_forwarded(*api, where, "download", bytes.size());
    if (!stream->send_bytes(bytes) || offset >= size)
      return stream->close();
    stream->when_drained([self = shared_from_this()] { self->next(); });
  }

  void next() {
    actors::file_spec spec;
    spec.verb = actors::file_verb::read;
    spec.path = path;
    spec.offset = offset;
    spec.length = std::min<uint64_t>(api->deps.options.file_chunk_bytes, size - offset);
    // A file that shrank or a read that failed ends the body short: the
    // client sees fewer bytes than Content-Length said, never wrong ones.
    call_actor(
      *api->deps.system, where.node, api->timeout() * 4,
      [self = shared_from_this()](actors::file_result& result) {
        if (result.data.empty())
          return self->stream->close();
        self->sent(std::move(result.data));
      },
      [self = shared_from_this()](caf::error&) { self->stream->close(); },
      actors::dp_file_atom::value, where.sandbox_id, std::move(spec));
  }
};

} // namespace

/// A file of at most one chunk is answered from one read; a larger one is
/// measured (stat), refused past file_bytes_max, and streamed (download).
void read_file(api_ptr api, exchange_ptr ex, target t) {
  auto path = path_of_query(*ex);
  if (!path)
    return ex->respond(error_response(path.error()));
  const uint64_t chunk = api->deps.options.file_chunk_bytes;
  actors::file_spec first;
  first.verb = actors::file_verb::read;
  first.path = *path;
  first.length = chunk;
  call_actor(
    *api->deps.system, t.node, api->timeout() * 4,
    [api, ex, t, path = *path, chunk](actors::file_result& result) {
      if (result.data.size() < chunk) {
        count_forwarded(*api, t, "download", result.data.size());
        http_response response{http::status::ok, 11};
        response.set(http::field::content_type, "application/octet-stream");
        response.body() = std::move(result.data);
        return ex->respond(std::move(response));
      }
      actors::file_spec stat;
      stat.verb = actors::file_verb::stat;
      stat.path = path;
      call_actor(
        *api->deps.system, t.node, api->timeout(),
        [api, ex, t, path, first = std::move(result.data)](actors::file_result& info) mutable {
          const uint64_t size = std::max<uint64_t>(info.info.size_bytes, first.size());
          if (size > api->deps.options.file_bytes_max)
            return ex->respond(json_error(
              http::status::payload_too_large, "too_large",
              path + " is " + std::to_string(size) + " bytes; downloads are limited to "
                + std::to_string(api->deps.options.file_bytes_max)
                + " bytes: read it in parts (a process can split it) or raise the limit"));
          http_response head{http::status::ok, 11};
          head.set(http::field::content_type, "application/octet-stream");
          head.set(http::field::content_length, std::to_string(size));
          sse_options paced;
          paced.queue_events_max = 2;
          paced.queue_bytes_max = 2 * api->deps.options.file_chunk_bytes;
          paced.heartbeat_ms = 0;
          auto sending = std::make_shared<download>();
          sending->api = api;
          sending->where = t;
          sending->path = path;
          sending->size = size;
          sending->stream = ex->open_body_stream(std::move(head), paced);
          sending->sent(std::move(first));
        },
        answer_error(ex), actors::dp_file_atom::value, t.sandbox_id, std::move(stat));
    },
    answer_error(ex), actors::dp_file_atom::value, t.sandbox_id, std::move(first));
}

void list_files(api_ptr api, exchange_ptr ex, target t) {
  actors::file_spec spec;
  spec.verb = actors::file_verb::list;
  file_call(api, ex, t, spec, [](actors::file_result& result, const std::string&) {
    json items = json::array();
    for (const auto& entry : result.entries)
      items.push_back(to_json(entry));
    return json_response(http::status::ok, {{"items", items}, {"truncated", result.truncated}});
  });
}

void stat_file(api_ptr api, exchange_ptr ex, target t) {
  actors::file_spec spec;
  spec.verb = actors::file_verb::stat;
  file_call(api, ex, t, spec, [](actors::file_result& result, const std::string& path) {
    auto body = to_json(result.info);
    body["path"] = path;
    return json_response(http::status::ok, body);
  });
}

void remove_file(api_ptr api, exchange_ptr ex, target t) {
  actors::file_spec spec;
  spec.verb = actors::file_verb::remove;
  auto recursive = flag(*ex, "recursive");
  if (!recursive)
    return ex->respond(error_response(recursive.error()));
  spec.recursive = ex->query("recursive").has_value() && *recursive;
  file_call(api, ex, t, spec, [](actors::file_result&, const std::string& path) {
    return json_response(http::status::ok, {{"path", path}, {"removed", true}});
  });
}

void make_directory(api_ptr api, exchange_ptr ex, target t) {
  actors::file_spec spec;
  spec.verb = actors::file_verb::mkdir;
  spec.mode = 0755;
  file_call(api, ex, t, spec, [](actors::file_result&, const std::string& path) {
    return json_response(http::status::created, {{"path", path}});
  });
}

void move_file(api_ptr api, exchange_ptr ex, target t) {
  actors::file_spec spec;
  spec.verb = actors::file_verb::rename;
  auto to = ex->query("to");
  if (!to || to->empty() || (*to)[0] != '/' || to->size() > path_bytes_max
      || to->find('\0') != std::string::npos)
    return ex->respond(json_error(http::status::bad_request, "invalid_argument",
                                  "?to= is required: the new absolute path, at most "
                                    + std::to_string(path_bytes_max) + " bytes"));
  spec.to = *to;
  file_call(api, ex, t, spec, [to = *to](actors::file_result&, const std::string& path) {
    return json_response(http::status::ok, {{"path", to}, {"from", path}});
  });
}

} // namespace airlock::gateway::data_detail
