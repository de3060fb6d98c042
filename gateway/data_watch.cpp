// GET /v1/sandboxes/{id}/files/watch?path=&recursive=: a directory watch as
// server-sent events (`ready`, then `fs` per change, `error` when the watch
// ends for a reason). The changes are pulled from the worker one read at a
// time, the next once the client has taken the last, as process output is.

#include <caf/send.hpp>

#include <chrono>
#include <memory>
#include <string>

#include "gateway/api_common.hpp"
#include "gateway/data_plane_internal.hpp"

namespace airlock::gateway::data_detail {

namespace {

using detail::answer_error;
using detail::exchange_ptr;
using nlohmann::json;

/// One open watch stream: reads from the worker while the client takes them.
class watch_stream : public std::enable_shared_from_this<watch_stream> {
public:
  watch_stream(api_ptr api, target where, std::string watch_id, std::shared_ptr<sse_stream> out)
      : api_(std::move(api)), where_(std::move(where)), watch_id_(std::move(watch_id)),
        out_(std::move(out)), last_sent_ms_(api_->deps.clock->now_ms()) {}

  /// Stops the watch in the worker when the client goes (idempotent there).
  void close_when_gone() {
    out_->on_close([api = api_, where = where_, id = watch_id_](std::string_view) {
      actors::watch_request close;
      close.verb = actors::watch_verb::close;
      close.watch_id = id;
      call_actor(
        *api->deps.system, where.node, api->timeout(), [](actors::watch_batch&) {},
        [](caf::error&) {}, actors::dp_watch_atom::value, where.sandbox_id, std::move(close));
    });
  }

  void read() {
    actors::watch_request request;
    request.verb = actors::watch_verb::read;
    request.watch_id = watch_id_;
    request.wait_ms = api_->deps.options.output_wait_ms;
    auto self = shared_from_this();
    call_actor(
      *api_->deps.system, where_.node, std::chrono::milliseconds(request.wait_ms) + api_->timeout(),
      [self](actors::watch_batch& batch) { self->forward(batch); },
      [self](caf::error& error) { self->fail(to_status(error)); }, actors::dp_watch_atom::value,
      where_.sandbox_id, std::move(request));
  }

private:
  void forward(const actors::watch_batch& batch) {
    const auto now = api_->deps.clock->now_ms();
    for (const auto& change : batch.changes)
      if (!out_->send("fs", json{{"name", change.name}, {"type", change.kind}}.dump()))
        return;
    if (!batch.changes.empty())
      last_sent_ms_ = now;
    if (batch.ended) {
      if (!batch.error_code.empty())
        return fail(make_status(errc_from_string(batch.error_code), batch.error_message));
      return out_->close();
    }
    // A quiet stream still carries an event now and then, for clients that
    // read events only (envd's keepalive; an SSE comment is invisible to them).
    if (now - last_sent_ms_ >= int64_t{api_->deps.options.watch_keepalive_ms}) {
      last_sent_ms_ = now;
      out_->send("keepalive", "{}");
    }
    out_->when_drained([self = shared_from_this()] {
      if (!self->out_->closed())
        self->read();
    });
  }

  void fail(const status& why) {
    json body = {{"error", {{"code", to_string(why.code)}, {"message", why.message}}}};
    out_->send("error", body.dump());
    out_->close();
  }

  api_ptr api_;
  target where_;
  std::string watch_id_;
  std::shared_ptr<sse_stream> out_;
  int64_t last_sent_ms_;
};

} // namespace

void watch_files(api_ptr api, exchange_ptr ex, target t) {
  auto path = path_of_query(*ex);
  if (!path)
    return ex->respond(error_response(path.error()));
  auto recursive = flag(*ex, "recursive");
  if (!recursive)
    return ex->respond(error_response(recursive.error()));
  actors::watch_request open;
  open.verb = actors::watch_verb::open;
  open.path = *path;
  open.recursive = ex->query("recursive").has_value() && *recursive;
  // The open decides the HTTP status (404, 400) before the stream starts.
  call_actor(
    *api->deps.system, t.node, api->timeout(),
    [api, ex, t, open](actors::watch_batch& opened) {
      auto out = ex->open_sse(api->deps.options.sse);
      keep_active_while_open(*api, out, t.sandbox_id);
      auto watch = std::make_shared<watch_stream>(api, t, opened.watch_id, out);
      watch->close_when_gone();
      out->send("ready", json{{"path", open.path}, {"recursive", open.recursive}}.dump());
      watch->read();
    },
    answer_error(ex), actors::dp_watch_atom::value, t.sandbox_id, open);
}

} // namespace airlock::gateway::data_detail
