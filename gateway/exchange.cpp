#include "gateway/exchange.hpp"

#include <algorithm>
#include <charconv>

namespace airlock::gateway {

exchange::exchange(http_request request, std::string route_pattern,
                   std::vector<std::pair<std::string, std::string>> path_params,
                   std::weak_ptr<detail::exchange_transport> transport, uint64_t sequence,
                   bool body_streamed)
    : request_(std::move(request)), pattern_(std::move(route_pattern)),
      params_(std::move(path_params)),
      query_(parse_query(std::string_view(request_.target().data(), request_.target().size()))),
      transport_(std::move(transport)), sequence_(sequence), body_streamed_(body_streamed) {}

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

result<std::optional<uint64_t>> exchange::query_uint(std::string_view name, uint64_t max) const {
  auto text = query(name);
  if (!text || text->empty())
    return std::optional<uint64_t>{};
  uint64_t value = 0;
  auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (error != std::errc{} || end != text->data() + text->size() || value > max)
    return make_status(errc::invalid_argument, "?" + std::string(name)
                                                 + "= must be a whole number from 0 to "
                                                 + std::to_string(max));
  return std::optional<uint64_t>(value);
}

void exchange::respond(http_response response) {
  if (!claim())
    return;
  if (auto transport = transport_.lock())
    transport->deliver(sequence_, std::move(response));
}

namespace {

/// A stream nobody will write: already over, for `reason`.
std::shared_ptr<sse_stream> ended_stream(const sse_options& options, stream_body body,
                                         std::string_view reason) {
  auto stream = std::make_shared<sse_stream>(options, std::weak_ptr<detail::sse_writer>{}, body);
  stream->finish(reason);
  return stream;
}

} // namespace

void exchange::read_body_chunk(size_t max_bytes, body_chunk_handler then) {
  max_bytes = std::max<size_t>(max_bytes, 1);
  if (body_streamed_) {
    if (auto transport = transport_.lock())
      return transport->read_body_chunk(sequence_, max_bytes, std::move(then));
    return then(body_failure(make_status(errc::unavailable, "the client went away")));
  }
  body_chunk out;
  {
    std::lock_guard<std::mutex> guard(body_mutex_);
    const auto& body = request_.body();
    out.bytes = body.substr(std::min(body_offset_, body.size()), max_bytes);
    body_offset_ += out.bytes.size();
    out.last = body_offset_ >= body.size();
  }
  then(std::move(out));
}

std::shared_ptr<sse_stream> exchange::open_sse(const sse_options& options) {
  bool first = claim();
  if (first) {
    if (auto transport = transport_.lock())
      return transport->deliver_sse(sequence_, options);
  }
  return ended_stream(options, stream_body::events,
                      first || gone_.load() ? "client_gone" : "closed");
}

std::shared_ptr<sse_stream> exchange::open_body_stream(http_response head,
                                                       const sse_options& options) {
  bool first = claim();
  if (first) {
    if (auto transport = transport_.lock())
      return transport->deliver_body_stream(sequence_, std::move(head), options);
  }
  return ended_stream(options, stream_body::bytes,
                      first || gone_.load() ? "client_gone" : "closed");
}

} // namespace airlock::gateway
