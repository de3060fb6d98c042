#include "gateway/internal_call.hpp"

#include <nlohmann/json.hpp>

#include <mutex>
#include <utility>

#include "gateway/exchange.hpp"

namespace airlock::gateway {

namespace {

http_response streaming_refused() {
  return json_error(http::status::internal_server_error, "internal",
                    "an internal call reached a streaming route");
}

/// Owns itself until the exchange answers: an in-process call has no
/// connection to keep it alive.
class internal_transport : public detail::exchange_transport,
                           public std::enable_shared_from_this<internal_transport> {
public:
  explicit internal_transport(internal_answer then) : then_(std::move(then)) {}

  void hold() { self_ = shared_from_this(); }

  void deliver(uint64_t, http_response response) override { finish(std::move(response)); }

  std::shared_ptr<sse_stream> deliver_sse(uint64_t, const sse_options& options) override {
    finish(streaming_refused());
    return std::make_shared<sse_stream>(options, std::weak_ptr<detail::sse_writer>{});
  }

  std::shared_ptr<sse_stream> deliver_body_stream(uint64_t, http_response,
                                                  const sse_options& options) override {
    finish(streaming_refused());
    return std::make_shared<sse_stream>(options, std::weak_ptr<detail::sse_writer>{},
                                        stream_body::bytes);
  }

  void read_body_chunk(uint64_t, size_t, body_chunk_handler then) override {
    then(body_failure(
      make_status(errc::unavailable, "an internal call carries its body whole, not streamed")));
  }

private:
  void finish(http_response response) {
    internal_answer then;
    std::shared_ptr<internal_transport> keep;
    {
      std::lock_guard lock(mutex_);
      then = std::move(then_);
      keep = std::move(self_);
    }
    if (then)
      then(std::move(response));
  }

  std::mutex mutex_;
  internal_answer then_;
  std::shared_ptr<internal_transport> self_;
};

/// Reads an event stream a route writes, in place of a connection: parses
/// its text into events and paces the route by when it takes the bytes.
class internal_reader : public detail::sse_writer,
                        public internal_stream,
                        public std::enable_shared_from_this<internal_reader> {
public:
  explicit internal_reader(internal_stream_handlers handlers) : handlers_(std::move(handlers)) {}

  void hold() { self_ = shared_from_this(); }

  /// Keeps `transport` for as long as the reader lives (the exchange holds it weakly).
  void keep_alive(std::shared_ptr<detail::exchange_transport> transport) {
    std::lock_guard lock(mutex_);
    transport_ = std::move(transport);
  }

  void attach(std::shared_ptr<sse_stream> stream) {
    {
      std::lock_guard lock(mutex_);
      stream_ = std::move(stream);
    }
    wake();
  }

  /// A byte body (a file download): its head first, then its bytes as they come.
  void attach_bytes(std::shared_ptr<sse_stream> stream, http_response head) {
    {
      std::lock_guard lock(mutex_);
      bytes_ = true;
    }
    if (handlers_.head)
      handlers_.head(std::move(head));
    attach(std::move(stream));
  }

  /// The route answered without a stream.
  void answered(http_response response) {
    auto keep = release();
    if (handlers_.answered)
      handlers_.answered(std::move(response));
  }

  void stop() override {
    std::shared_ptr<sse_stream> stream;
    {
      std::lock_guard lock(mutex_);
      stream = stream_;
    }
    if (stream)
      stream->finish("client_gone");
    wake();
  }

  // Serialised: one pump at a time; a wake during one runs it again.
  void wake() override {
    {
      std::lock_guard lock(mutex_);
      if (pumping_) {
        again_ = true;
        return;
      }
      pumping_ = true;
    }
    for (;;) {
      pump();
      std::lock_guard lock(mutex_);
      if (!again_) {
        pumping_ = false;
        return;
      }
      again_ = false;
    }
  }

private:
  /// Lets go of itself and the transport (which holds it): the reader lives
  /// on only while the caller of release() keeps what it returns.
  std::shared_ptr<internal_reader> release() {
    std::shared_ptr<detail::exchange_transport> transport;
    std::lock_guard lock(mutex_);
    transport = std::move(transport_);
    return std::move(self_);
  }

  void pump() {
    std::shared_ptr<sse_stream> stream;
    {
      std::lock_guard lock(mutex_);
      if (waiting_ || ended_)
        return;
      stream = stream_;
    }
    if (!stream)
      return;
    auto step = stream->next_step();
    if (step.finish_slow_consumer)
      stream->finish("slow_consumer");
    if (!step.bytes.empty()) {
      bool raw = false;
      {
        std::lock_guard lock(mutex_);
        raw = bytes_;
      }
      if (raw) {
        if (handlers_.bytes)
          handlers_.bytes(std::move(step.bytes));
      } else {
        parse(step.bytes);
      }
      if (!handlers_.pace) {
        stream->write_done();
        {
          std::lock_guard lock(mutex_);
          again_ = true;
        }
        return;
      }
      {
        std::lock_guard lock(mutex_);
        waiting_ = true;
      }
      std::weak_ptr<internal_reader> weak = shared_from_this();
      handlers_.pace([weak, stream] {
        stream->write_done();
        if (auto reader = weak.lock()) {
          {
            std::lock_guard lock(reader->mutex_);
            reader->waiting_ = false;
          }
          reader->wake();
        }
      });
      return;
    }
    if (step.end) {
      stream->finish(step.end_reason);
      {
        std::lock_guard lock(mutex_);
        ended_ = true;
      }
      auto keep = release();
      if (handlers_.ended)
        handlers_.ended(step.end_reason.empty() ? "closed" : step.end_reason);
      return;
    }
    if (step.drained)
      step.drained();
  }

  /// Splits the text into events (a blank line ends one; `:` lines are
  /// comments, such as heartbeats).
  void parse(const std::string& bytes) {
    text_ += bytes;
    size_t end;
    while ((end = text_.find("\n\n")) != std::string::npos) {
      internal_event event;
      bool any = false;
      size_t start = 0;
      const std::string block = text_.substr(0, end);
      text_.erase(0, end + 2);
      while (start <= block.size()) {
        auto stop = block.find('\n', start);
        if (stop == std::string::npos)
          stop = block.size();
        std::string_view line(block.data() + start, stop - start);
        start = stop + 1;
        auto colon = line.find(':');
        if (line.empty() || colon == 0)
          continue;
        auto field = line.substr(0, colon);
        auto value = colon == std::string_view::npos ? std::string_view{} : line.substr(colon + 1);
        if (!value.empty() && value.front() == ' ')
          value.remove_prefix(1);
        if (field == "event") {
          event.event = value;
        } else if (field == "id") {
          event.id = value;
        } else if (field == "data") {
          if (any)
            event.data += '\n';
          event.data += value;
          any = true;
        }
      }
      if (!event.event.empty() || any) {
        if (event.event.empty())
          event.event = "message";
        if (handlers_.event)
          handlers_.event(std::move(event));
      }
    }
  }

  internal_stream_handlers handlers_;
  std::mutex mutex_;
  std::shared_ptr<sse_stream> stream_;
  std::shared_ptr<internal_reader> self_;
  std::shared_ptr<detail::exchange_transport> transport_;
  std::string text_;
  bool pumping_ = false;
  bool again_ = false;
  bool waiting_ = false;
  bool ended_ = false;
  bool bytes_ = false; ///< a byte body, not events
};

/// The transport of a streaming internal call: the route's stream goes to
/// the reader.
class internal_stream_transport : public detail::exchange_transport {
public:
  explicit internal_stream_transport(std::shared_ptr<internal_reader> reader)
      : reader_(std::move(reader)) {}

  void deliver(uint64_t, http_response response) override {
    reader_->answered(std::move(response));
  }

  std::shared_ptr<sse_stream> deliver_sse(uint64_t, const sse_options& options) override {
    auto stream = std::make_shared<sse_stream>(options, std::weak_ptr<detail::sse_writer>(reader_));
    reader_->attach(stream);
    return stream;
  }

  std::shared_ptr<sse_stream> deliver_body_stream(uint64_t, http_response head,
                                                  const sse_options& options) override {
    auto stream = std::make_shared<sse_stream>(options, std::weak_ptr<detail::sse_writer>(reader_),
                                               stream_body::bytes);
    reader_->attach_bytes(stream, std::move(head));
    return stream;
  }

  void read_body_chunk(uint64_t, size_t, body_chunk_handler then) override {
    then(body_failure(make_status(errc::unavailable, "a streaming internal call sends no body")));
  }

private:
  std::shared_ptr<internal_reader> reader_;
};

http_request internal_request(http::verb method, const std::string& target, std::string body,
                              std::string_view api_key) {
  http_request request{method, target, 11};
  request.set(http::field::host, "internal");
  request.set(http::field::authorization, "Bearer " + std::string(api_key));
  if (!body.empty())
    request.set(http::field::content_type, "application/json");
  request.body() = std::move(body);
  request.prepare_payload();
  return request;
}

} // namespace

std::shared_ptr<internal_stream>
call_stream_route(const route_table& routes, http::verb method, std::string target,
                  std::string_view api_key, internal_stream_handlers handlers,
                  const std::vector<std::pair<std::string, std::string>>& headers) {
  auto reader = std::make_shared<internal_reader>(std::move(handlers));
  reader->hold();
  auto request = internal_request(method, target, {}, api_key);
  for (const auto& [name, value] : headers)
    request.set(name, value);
  const auto path = std::string(path_of(target));
  const std::string method_name(http::to_string(method));
  auto match = routes.match(method, path);
  if (match.result != route_match::outcome::found || !match.route->async_handler) {
    reader->answered(match.result == route_match::outcome::method_not_allowed
                       ? route_method_not_allowed(method_name, path, match.allow)
                       : route_not_found(method_name, path));
    return reader;
  }
  // The exchange holds the transport weakly; the stream holds the reader,
  // and the reader itself until it ends.
  auto transport = std::make_shared<internal_stream_transport>(reader);
  auto ex = std::make_shared<exchange>(std::move(request), match.route->pattern,
                                       std::move(match.params), transport, 0);
  reader->keep_alive(transport);
  match.route->async_handler(std::move(ex));
  return reader;
}

void call_route(const route_table& routes, http::verb method, std::string target, std::string body,
                std::string_view api_key, internal_answer then) {
  auto request = internal_request(method, target, std::move(body), api_key);
  const auto path = std::string(path_of(target));
  const std::string method_name(http::to_string(method));
  auto match = routes.match(method, path);
  if (match.result == route_match::outcome::not_found)
    return then(route_not_found(method_name, path));
  if (match.result == route_match::outcome::method_not_allowed)
    return then(route_method_not_allowed(method_name, path, match.allow));
  const auto& route = *match.route;
  if (!route.async_handler)
    return then(route.handler(request));
  // A route that streams its body reads it in chunks from the exchange,
  // which slices them from the buffered body here.
  if (route.options.body_bytes_max != 0 && request.body().size() > route.options.body_bytes_max)
    return then(json_error(http::status::payload_too_large, "too_large",
                           "the body is over the route's limit of "
                             + std::to_string(route.options.body_bytes_max) + " bytes"));
  auto transport = std::make_shared<internal_transport>(std::move(then));
  transport->hold();
  auto ex = std::make_shared<exchange>(std::move(request), route.pattern, std::move(match.params),
                                       transport, 0);
  route.async_handler(std::move(ex));
}

std::string error_message_of(const http_response& answer) {
  auto body = nlohmann::json::parse(answer.body(), nullptr, false);
  std::string message = "airlock answered " + std::to_string(answer.result_int());
  if (body.is_object() && body.contains("error") && body["error"].is_object())
    message = body["error"].value("message", message);
  return message;
}

} // namespace airlock::gateway
