// File uploads (PUT /v1/sandboxes/{id}/files): the body is read from the
// client a chunk at a time and each chunk is sent to the worker before the
// next is read, so the listener holds about one chunk whatever the file's
// size, no message carries more than a chunk, and a client sends no faster
// than the worker writes (back-pressure through TCP). A worker's own listener
// and a relaying control plane do the same.

#include <charconv>
#include <memory>
#include <string>
#include <utility>

#include "gateway/data_plane_internal.hpp"

namespace airlock::gateway::data_detail {

namespace {

using namespace detail;
using nlohmann::json;

http_response created(const std::string& path, uint64_t size) {
  return json_response(http::status::created, {{"path", path}, {"size_bytes", size}});
}

/// One upload in progress. Each step runs on the thread that completed the
/// previous one (an I/O thread after a body read, a CAF thread after a
/// worker's reply); the steps never overlap, so it needs no lock.
struct upload : std::enable_shared_from_this<upload> {
  api_ptr api;
  exchange_ptr ex;
  target where;
  std::string path;
  uint32_t mode = 0644;
  uint64_t session = 0; ///< the worker's write session, once open
  uint64_t written = 0; ///< bytes the worker has taken

  std::chrono::milliseconds timeout() const { return api->timeout() * 4; }

  void send(actors::file_spec spec, std::function<void(actors::file_result&)> next) {
    auto self = shared_from_this();
    call_actor(
      *api->deps.system, where.node, timeout(),
      [next = std::move(next)](actors::file_result& result) { next(result); },
      [self](caf::error& error) { self->fail(error); }, actors::dp_file_atom::value,
      where.sandbox_id, std::move(spec));
  }

  void start() {
    ex->read_body_chunk(api->deps.options.file_chunk_bytes,
                        [self = shared_from_this()](body_chunk first) {
                          if (!first.outcome.is_ok())
                            return; // the server answered (413, 400) or the client went away
                          if (first.last)
                            return self->write_whole(std::move(first.bytes));
                          self->open(std::move(first.bytes));
                        });
  }

  /// A body of at most one chunk: one message, as any small file operation.
  void write_whole(std::string bytes) {
    actors::file_spec spec;
    spec.verb = actors::file_verb::write;
    spec.path = path;
    spec.mode = mode;
    const uint64_t size = bytes.size();
    spec.data = std::move(bytes);
    count_forwarded(*api, where, "upload", size);
    send(std::move(spec), [self = shared_from_this(), size](actors::file_result&) {
      self->ex->respond(created(self->path, size));
    });
  }

  void open(std::string first) {
    actors::file_spec spec;
    spec.verb = actors::file_verb::write_open;
    spec.path = path;
    spec.mode = mode;
    auto bytes = std::make_shared<std::string>(std::move(first));
    send(std::move(spec), [self = shared_from_this(), bytes](actors::file_result& opened) {
      self->session = opened.session;
      self->send_part(std::move(*bytes), false);
    });
  }

  void send_part(std::string bytes, bool last) {
    if (ex->client_gone())
      return abort();
    actors::file_spec spec;
    spec.verb = actors::file_verb::write_part;
    spec.session = session;
    spec.offset = written;
    const uint64_t size = bytes.size();
    spec.data = std::move(bytes);
    send(std::move(spec), [self = shared_from_this(), size, last](actors::file_result&) {
      self->written += size;
      count_forwarded(*self->api, self->where, "upload", size);
      if (last)
        return self->commit();
      self->read_next();
    });
  }

  void read_next() {
    ex->read_body_chunk(api->deps.options.file_chunk_bytes,
                        [self = shared_from_this()](body_chunk next) {
                          if (!next.outcome.is_ok())
                            return self->abort();
                          if (next.bytes.empty() && next.last)
                            return self->commit();
                          self->send_part(std::move(next.bytes), next.last);
                        });
  }

  void commit() {
    actors::file_spec spec;
    spec.verb = actors::file_verb::write_commit;
    spec.session = session;
    session = 0; // the worker forgets it either way
    send(std::move(spec), [self = shared_from_this()](actors::file_result& result) {
      self->ex->respond(created(self->path, result.written));
    });
  }

  void fail(caf::error& error) {
    ex->respond(error_response(to_status(error)));
    abort();
  }

  /// Tells the worker to drop the session (its temporary file) now rather
  /// than when it expires; nobody waits for the answer.
  void abort() {
    if (session == 0)
      return;
    actors::file_spec spec;
    spec.verb = actors::file_verb::write_abort;
    spec.session = session;
    session = 0;
    call_actor(
      *api->deps.system, where.node, api->timeout(), [](actors::file_result&) {},
      [](caf::error&) {}, actors::dp_file_atom::value, where.sandbox_id, std::move(spec));
  }
};

} // namespace

void write_file(api_ptr api, exchange_ptr ex, target t) {
  auto path = path_of_query(*ex);
  if (!path)
    return ex->respond(error_response(path.error()));
  auto sending = std::make_shared<upload>();
  if (auto mode = ex->query("mode")) {
    uint32_t value = 0;
    auto [end, problem] = std::from_chars(mode->data(), mode->data() + mode->size(), value, 8);
    if (problem != std::errc{} || end != mode->data() + mode->size() || value > 07777)
      return ex->respond(json_error(http::status::bad_request, "invalid_argument",
                                    "?mode= must be octal, e.g. 0644"));
    sending->mode = value;
  }
  sending->api = std::move(api);
  sending->ex = std::move(ex);
  sending->where = std::move(t);
  sending->path = std::move(*path);
  sending->start();
}

} // namespace airlock::gateway::data_detail
