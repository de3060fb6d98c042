#include "gateway/exchange.hpp"

namespace airlock::gateway {

exchange::exchange(http_request request, std::string route_pattern,
                   std::vector<std::pair<std::string, std::string>> path_params,
                   std::weak_ptr<detail::exchange_transport> transport, uint64_t sequence)
    : request_(std::move(request)), pattern_(std::move(route_pattern)),
      params_(std::move(path_params)),
      query_(parse_query(std::string_view(request_.target().data(), request_.target().size()))),
      transport_(std::move(transport)), sequence_(sequence) {}

std::string_view exchange::path_param(std::string_view name) const {
  for (const auto& [key, value] : params_) {
    if (key == name)
      return value;
  }
  return {};
}

std::optional<std::string> exchange::query(std::string_view name) const {
  for (const auto& [key, value] : query_) {
    if (key == name)
      return value;
  }
  return std::nullopt;
}

void exchange::respond(http_response response) {
  if (!claim())
    return;
  if (auto transport = transport_.lock())
    transport->deliver(sequence_, std::move(response));
}

std::shared_ptr<sse_stream> exchange::open_sse(const sse_options& options) {
  bool first = claim();
  if (first) {
    if (auto transport = transport_.lock())
      return transport->deliver_sse(sequence_, options);
  }
  // Nobody will write this stream: hand back one that is already over.
  auto stream = std::make_shared<sse_stream>(options, std::weak_ptr<detail::sse_writer>{});
  stream->finish(first || gone_.load() ? "client_gone" : "closed");
  return stream;
}

} // namespace airlock::gateway
