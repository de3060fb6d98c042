// envd's directory watches, made of the data plane's own
// GET /v1/sandboxes/{id}/files/watch read in-process: WatchDir as a Connect
// stream, and CreateWatcher / GetWatcherEvents / RemoveWatcher over watchers
// this gateway keeps (bounded in number and in unread events, expired when
// nobody polls them).

#include "gateway/e2b_envd_internal.hpp"

#include <deque>
#include <map>
#include <mutex>

namespace airlock::gateway::envd_detail {

namespace {

filesystem::EventType event_type_of(const std::string& kind) {
  if (kind == "create")
    return filesystem::EVENT_TYPE_CREATE;
  if (kind == "write")
    return filesystem::EVENT_TYPE_WRITE;
  if (kind == "remove")
    return filesystem::EVENT_TYPE_REMOVE;
  if (kind == "rename")
    return filesystem::EVENT_TYPE_RENAME;
  if (kind == "chmod")
    return filesystem::EVENT_TYPE_CHMOD;
  return filesystem::EVENT_TYPE_UNSPECIFIED;
}

/// An `fs` event's change as envd's FilesystemEvent.
std::optional<filesystem::FilesystemEvent> change_of(const internal_event& event) {
  auto change = json::parse(event.data, nullptr, false);
  if (!change.is_object())
    return std::nullopt;
  filesystem::FilesystemEvent out;
  out.set_name(change.value("name", ""));
  out.set_type(event_type_of(change.value("type", "")));
  return out;
}

/// An `error` event's {error: {code, message}} as Connect's error.
connect_error error_of_event(const internal_event& event) {
  auto body = json::parse(event.data, nullptr, false);
  const auto error = body.is_object() ? body.value("error", json::object()) : json::object();
  const auto code = errc_from_string(error.value("code", "internal"));
  return {e2b::connect_code_of(code), error.value("message", "the watch ended")};
}

/// Starts the /v1 watch of the request's path (relative: under the home).
std::shared_ptr<internal_stream> open_watch(const envd_call& call, const std::string& path,
                                            bool recursive, internal_stream_handlers handlers) {
  auto target = call.files("/watch", call.resolve(path));
  if (recursive)
    target += "&recursive=true";
  return call_stream_route(*call.api->inner, http::verb::get, std::move(target), call.token,
                           std::move(handlers));
}

/// WatchDir: start{} once watched, then filesystem{} per change and
/// keepalive{} on a quiet stream, paced by the client. With include_entry,
/// each change that left an entry carries its stat, taken before the next
/// message is sent (so messages keep their order).
class watch_dir_stream : public std::enable_shared_from_this<watch_dir_stream> {
public:
  explicit watch_dir_stream(envd_call call) : call_(std::move(call)) {}

  void start(const filesystem::WatchDirRequest& request) {
    auto self = shared_from_this();
    if (request.include_entry()) {
      directory_ = call_.resolve(request.path());
      include_entry_ = true;
    }
    internal_stream_handlers handlers;
    handlers.event = [self](internal_event event) { self->on_event(event); };
    handlers.answered = [self](http_response answer) { self->refuse(error_of(answer)); };
    handlers.ended = [self](std::string_view reason) {
      if (reason == "closed")
        return self->finish_in_order(std::nullopt);
      self->finish_in_order(
        connect_error{connect_code::unavailable, "the watch ended (" + std::string(reason) + ")"});
    };
    handlers.pace = [self](std::function<void()> resume) {
      {
        std::lock_guard lock(self->mutex_);
        if (!self->queue_.empty()) {
          // Entries are still being read: more input waits for them.
          self->resume_ = std::move(resume);
          return;
        }
      }
      self->pace_output(std::move(resume));
    };
    // Not under the lock: an answer may come on this thread.
    auto input = open_watch(call_, request.path(), request.recursive(), std::move(handlers));
    std::lock_guard lock(mutex_);
    input_ = std::move(input);
  }

private:
  void pace_output(std::function<void()> resume) {
    if (auto out = stream(); out)
      out->when_drained(std::move(resume));
    else
      resume();
  }

  void send(const filesystem::WatchDirResponse& message) {
    if (auto out = stream(); out)
      if (auto bytes = e2b::encode_message(call_.content.codec, message))
        out->send_bytes(e2b::envelope(0, *bytes));
  }

  /// Queues `message` behind any change still waiting for its entry; the
  /// caller that makes the queue non-empty drains it, alone.
  void enqueue(filesystem::WatchDirResponse message) {
    const bool wants_entry = include_entry_ && message.has_filesystem()
                             && message.filesystem().type() != filesystem::EVENT_TYPE_REMOVE
                             && message.filesystem().type() != filesystem::EVENT_TYPE_RENAME;
    {
      std::lock_guard lock(mutex_);
      if (!queue_.empty() || wants_entry) {
        queue_.push_back({std::move(message), wants_entry});
        if (queue_.size() > 1)
          return;
      }
    }
    if (wants_entry)
      return drain();
    send(message);
  }

  /// Ends the stream once the queue is sent.
  void finish_in_order(std::optional<connect_error> error) {
    {
      std::lock_guard lock(mutex_);
      if (!queue_.empty()) {
        finish_after_ = std::move(error);
        return;
      }
    }
    finish(std::move(error));
  }

  /// Sends queued messages in order (each leaves the queue once sent, so
  /// later ones queue behind it), reading the entry of each change that
  /// wants one first; a change whose entry is gone again goes without.
  void drain() {
    std::unique_lock lock(mutex_);
    while (!queue_.empty() && !queue_.front().wants_entry) {
      auto message = queue_.front().message;
      lock.unlock();
      send(message);
      lock.lock();
      queue_.pop_front();
    }
    if (queue_.empty()) {
      auto resume = std::exchange(resume_, nullptr);
      auto ending = std::exchange(finish_after_, std::nullopt);
      lock.unlock();
      if (ending)
        return finish(std::move(*ending));
      if (resume)
        pace_output(std::move(resume));
      return;
    }
    const auto path = directory_ + "/" + queue_.front().message.filesystem().name();
    lock.unlock();
    auto self = shared_from_this();
    call_.v1(http::verb::get, call_.files("/stat", path), {}, [self, path](http_response answer) {
      std::unique_lock relock(self->mutex_);
      auto& front = self->queue_.front();
      if (answer.result_int() == 200)
        if (auto entry = json::parse(answer.body(), nullptr, false); entry.is_object())
          fill_entry(entry, path, *front.message.mutable_filesystem()->mutable_entry());
      front.wants_entry = false;
      relock.unlock();
      self->drain();
    });
  }

  void on_event(const internal_event& event) {
    filesystem::WatchDirResponse message;
    if (event.event == "ready") {
      open();
      message.mutable_start();
    } else if (event.event == "fs") {
      auto change = change_of(event);
      if (!change)
        return;
      *message.mutable_filesystem() = std::move(*change);
    } else if (event.event == "keepalive") {
      message.mutable_keepalive();
    } else if (event.event == "error") {
      return finish_in_order(error_of_event(event));
    } else {
      return;
    }
    enqueue(std::move(message));
  }

  /// The client's stream: 200 once the directory is watched.
  void open() {
    http_response head{http::status::ok, 11};
    head.set(http::field::content_type, std::string(e2b::content_type_of(call_.content)));
    sse_options paced;
    paced.heartbeat_ms = 0;
    auto out = call_.ex->open_body_stream(std::move(head), paced);
    {
      std::lock_guard lock(mutex_);
      out_ = out;
    }
    out->on_close([self = shared_from_this()](std::string_view) {
      std::shared_ptr<internal_stream> input;
      {
        std::lock_guard lock(self->mutex_);
        input = self->input_;
      }
      if (input)
        input->stop(); // the /v1 stream's end stops the watch in the sandbox
    });
  }

  std::shared_ptr<sse_stream> stream() {
    std::lock_guard lock(mutex_);
    return out_;
  }

  /// Before the stream opened: the error alone (bad path, missing directory).
  void refuse(const connect_error& error) {
    if (ended_.exchange(true))
      return;
    refuse_stream(call_.ex, call_.content, error);
  }

  void finish(std::optional<connect_error> error) {
    auto out = stream();
    if (!out) {
      if (error)
        refuse(*error);
      else
        refuse({connect_code::internal, "the watch ended before it started"});
      return;
    }
    if (ended_.exchange(true))
      return;
    out->send_bytes(e2b::end_of_stream(error));
    out->close();
  }

  struct queued {
    filesystem::WatchDirResponse message;
    bool wants_entry = false;
  };

  envd_call call_;
  bool include_entry_ = false;
  std::string directory_; ///< the watched directory, absolute
  std::mutex mutex_;
  std::deque<queued> queue_;     ///< messages behind a change waiting for its entry
  std::function<void()> resume_; ///< the input's pace, held while the queue drains
  /// How the stream ends once the queue is sent (set when it ended meanwhile).
  std::optional<std::optional<connect_error>> finish_after_;
  std::shared_ptr<sse_stream> out_;
  std::shared_ptr<internal_stream> input_;
  std::atomic<bool> ended_{false};
};

} // namespace

void fs_watch_dir(const envd_call& call, const filesystem::WatchDirRequest& request) {
  std::make_shared<watch_dir_stream>(call)->start(request);
}

// ---- CreateWatcher, GetWatcherEvents, RemoveWatcher ---------------------------

struct watcher_table::watcher {
  std::string sandbox_id;
  std::string token;
  std::shared_ptr<internal_stream> input;
  std::deque<filesystem::FilesystemEvent> events;
  std::optional<connect_error> failure; ///< the watch ended with it
  bool ended = false;
  int64_t used_ms = 0;
  std::function<void(std::optional<connect_error>)> on_ready; ///< the CreateWatcher waiting
};

watcher_table::watcher_table(const wall_clock& clock, e2b_envd_options options)
    : clock_(clock), options_(std::move(options)) {}

watcher_table::~watcher_table() = default;

std::vector<std::shared_ptr<internal_stream>> watcher_table::sweep_locked(int64_t now) {
  std::vector<std::shared_ptr<internal_stream>> stop;
  for (auto it = watchers_.begin(); it != watchers_.end();) {
    if (now - it->second.used_ms >= int64_t{options_.watcher_idle_ms}) {
      stop.push_back(it->second.input);
      it = watchers_.erase(it);
    } else {
      ++it;
    }
  }
  return stop;
}

void watcher_table::stop_all(const std::vector<std::shared_ptr<internal_stream>>& streams) {
  for (const auto& input : streams)
    if (input)
      input->stop();
}

void watcher_table::create(const envd_call& call, const filesystem::CreateWatcherRequest& request) {
  const auto now = clock_.now_ms();
  std::vector<std::shared_ptr<internal_stream>> expired;
  std::string id;
  bool full = false;
  {
    std::lock_guard lock(mutex_);
    expired = sweep_locked(now);
    full = watchers_.size() >= options_.watchers_max;
    if (!full) {
      id = "wch_" + std::to_string(++next_id_);
      auto& w = watchers_[id];
      w.sandbox_id = call.sandbox_id;
      w.token = call.token;
      w.used_ms = now;
      w.on_ready = [call, id](std::optional<connect_error> error) {
        if (error)
          return call.fail(*error);
        filesystem::CreateWatcherResponse response;
        response.set_watcher_id(id);
        call.reply(response);
      };
    }
  }
  stop_all(expired);
  if (full)
    return call.fail({connect_code::resource_exhausted,
                      std::to_string(options_.watchers_max)
                        + " watchers are open on this server, its limit: remove one (or let an "
                          "unpolled one expire)"});
  std::weak_ptr<watcher_table> weak = weak_from_this();
  internal_stream_handlers handlers;
  handlers.event = [weak, id](internal_event event) {
    if (auto self = weak.lock())
      self->on_event(id, event);
  };
  handlers.answered = [weak, id](http_response answer) {
    if (auto self = weak.lock())
      self->on_end(id, error_of(answer));
  };
  handlers.ended = [weak, id](std::string_view reason) {
    auto self = weak.lock();
    if (!self)
      return;
    if (reason == "closed")
      return self->on_end(id, std::nullopt);
    self->on_end(id, connect_error{connect_code::unavailable,
                                   "the watch ended (" + std::string(reason) + ")"});
  };
  auto input = open_watch(call, request.path(), request.recursive(), std::move(handlers));
  std::lock_guard lock(mutex_);
  if (auto it = watchers_.find(id); it != watchers_.end())
    it->second.input = std::move(input);
}

void watcher_table::on_event(const std::string& id, const internal_event& event) {
  std::function<void(std::optional<connect_error>)> ready;
  std::shared_ptr<internal_stream> stop;
  {
    std::lock_guard lock(mutex_);
    auto it = watchers_.find(id);
    if (it == watchers_.end())
      return;
    auto& w = it->second;
    if (event.event == "ready") {
      ready = std::move(w.on_ready);
      w.on_ready = nullptr;
    } else if (event.event == "error") {
      w.failure = error_of_event(event);
      w.ended = true;
    } else if (event.event == "fs" && !w.ended) {
      if (w.events.size() >= options_.watcher_events_max) {
        w.failure = connect_error{connect_code::resource_exhausted,
                                  "more than " + std::to_string(options_.watcher_events_max)
                                    + " events waited for GetWatcherEvents; the watcher ended"};
        w.ended = true;
        stop = w.input;
      } else if (auto change = change_of(event)) {
        w.events.push_back(std::move(*change));
      }
    }
  }
  if (ready)
    ready(std::nullopt);
  if (stop)
    stop->stop();
}

void watcher_table::on_end(const std::string& id, std::optional<connect_error> error) {
  std::function<void(std::optional<connect_error>)> ready;
  {
    std::lock_guard lock(mutex_);
    auto it = watchers_.find(id);
    if (it == watchers_.end())
      return;
    auto& w = it->second;
    if (w.on_ready) {
      // It never started: CreateWatcher fails and nothing is kept.
      ready = std::move(w.on_ready);
      watchers_.erase(it);
    } else {
      w.ended = true;
      if (!w.failure)
        w.failure = error;
    }
  }
  if (ready)
    ready(error.value_or(connect_error{connect_code::internal, "the watch ended at once"}));
}

void watcher_table::events(const envd_call& call, const std::string& id) {
  const auto now = clock_.now_ms();
  filesystem::GetWatcherEventsResponse response;
  std::optional<connect_error> failure;
  std::vector<std::shared_ptr<internal_stream>> expired;
  {
    std::lock_guard lock(mutex_);
    expired = sweep_locked(now);
    auto it = watchers_.find(id);
    if (it == watchers_.end() || it->second.sandbox_id != call.sandbox_id
        || it->second.token != call.token || it->second.on_ready) {
      failure =
        connect_error{connect_code::not_found,
                      "no watcher " + id + " (removed, ended or expired after "
                        + std::to_string(options_.watcher_idle_ms / 1000) + " s without a call)"};
    } else {
      auto& w = it->second;
      w.used_ms = now;
      for (auto& event : w.events)
        *response.add_events() = std::move(event);
      w.events.clear();
      // The events come first; the reason it ended with the next call.
      if (w.ended && response.events_size() == 0) {
        failure = w.failure.value_or(connect_error{connect_code::not_found, "the watch ended"});
        watchers_.erase(it);
      }
    }
  }
  stop_all(expired);
  if (failure)
    return call.fail(*failure);
  call.reply(response);
}

void watcher_table::remove(const envd_call& call, const std::string& id) {
  std::shared_ptr<internal_stream> input;
  {
    std::lock_guard lock(mutex_);
    auto it = watchers_.find(id);
    if (it == watchers_.end() || it->second.sandbox_id != call.sandbox_id
        || it->second.token != call.token)
      return call.fail({connect_code::not_found, "no watcher " + id});
    input = it->second.input;
    watchers_.erase(it);
  }
  if (input)
    input->stop();
  call.reply(filesystem::RemoveWatcherResponse{});
}

size_t watcher_table::size() const {
  std::lock_guard lock(mutex_);
  return watchers_.size();
}

void fs_create_watcher(const envd_call& call, const pb::Message& message) {
  call.api->watchers->create(call, dynamic_cast<const filesystem::CreateWatcherRequest&>(message));
}

void fs_get_watcher_events(const envd_call& call, const pb::Message& message) {
  call.api->watchers->events(
    call, dynamic_cast<const filesystem::GetWatcherEventsRequest&>(message).watcher_id());
}

void fs_remove_watcher(const envd_call& call, const pb::Message& message) {
  call.api->watchers->remove(
    call, dynamic_cast<const filesystem::RemoveWatcherRequest&>(message).watcher_id());
}

} // namespace airlock::gateway::envd_detail
