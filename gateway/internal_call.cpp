#include "gateway/internal_call.hpp"

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

} // namespace

void call_route(const route_table& routes, http::verb method, std::string target, std::string body,
                std::string_view api_key, internal_answer then) {
  http_request request{method, target, 11};
  request.set(http::field::host, "internal");
  request.set(http::field::authorization, "Bearer " + std::string(api_key));
  if (!body.empty())
    request.set(http::field::content_type, "application/json");
  request.body() = std::move(body);
  request.prepare_payload();
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
  if (route.options.stream_body)
    return then(streaming_refused());
  auto transport = std::make_shared<internal_transport>(std::move(then));
  transport->hold();
  auto ex = std::make_shared<exchange>(std::move(request), route.pattern, std::move(match.params),
                                       transport, 0);
  route.async_handler(std::move(ex));
}

} // namespace airlock::gateway
