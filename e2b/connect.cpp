#include "e2b/connect.hpp"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <nlohmann/json.hpp>
#include <utility>

namespace airlock::e2b {

namespace {

/// Connect's Connect-Timeout-Ms: "a positive integer of at most 10 digits".
constexpr size_t timeout_digits_max = 10;

std::string lowercase(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t'))
    text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t'))
    text.remove_suffix(1);
  return text;
}

struct code_row {
  connect_code code;
  std::string_view name;
  unsigned http_status;
};

// The HTTP statuses are Connect's own table (a unary error's status).
constexpr std::array<code_row, 16> code_table{{
  {connect_code::canceled, "canceled", 499},
  {connect_code::unknown, "unknown", 500},
  {connect_code::invalid_argument, "invalid_argument", 400},
  {connect_code::deadline_exceeded, "deadline_exceeded", 504},
  {connect_code::not_found, "not_found", 404},
  {connect_code::already_exists, "already_exists", 409},
  {connect_code::permission_denied, "permission_denied", 403},
  {connect_code::resource_exhausted, "resource_exhausted", 429},
  {connect_code::failed_precondition, "failed_precondition", 400},
  {connect_code::aborted, "aborted", 409},
  {connect_code::out_of_range, "out_of_range", 400},
  {connect_code::unimplemented, "unimplemented", 501},
  {connect_code::internal, "internal", 500},
  {connect_code::unavailable, "unavailable", 503},
  {connect_code::data_loss, "data_loss", 500},
  {connect_code::unauthenticated, "unauthenticated", 401},
}};

const code_row& row_of(connect_code code) noexcept { return code_table[static_cast<size_t>(code)]; }

} // namespace

result<connect_content> parse_content_type(std::string_view content_type) {
  auto type = lowercase(trimmed(content_type.substr(0, content_type.find(';'))));
  if (type == "application/json")
    return connect_content{connect_codec::json, false};
  if (type == "application/proto")
    return connect_content{connect_codec::proto, false};
  if (type == "application/connect+json")
    return connect_content{connect_codec::json, true};
  if (type == "application/connect+proto")
    return connect_content{connect_codec::proto, true};
  return make_status(errc::invalid_argument,
                     "content type \"" + std::string(content_type).substr(0, 100)
                       + "\" is not Connect's: send application/json or application/proto "
                         "(unary), application/connect+json or application/connect+proto "
                         "(streams)");
}

std::string_view content_type_of(connect_content content) noexcept {
  if (content.streaming)
    return content.codec == connect_codec::json ? "application/connect+json"
                                                : "application/connect+proto";
  return content.codec == connect_codec::json ? "application/json" : "application/proto";
}

std::string_view to_string(connect_code code) noexcept { return row_of(code).name; }

unsigned http_status_of(connect_code code) noexcept { return row_of(code).http_status; }

connect_code connect_code_of(errc code) noexcept {
  switch (code) {
    case errc::invalid_argument: return connect_code::invalid_argument;
    case errc::not_found:
    case errc::gone: return connect_code::not_found;
    case errc::already_exists: return connect_code::already_exists;
    case errc::wrong_state:
    case errc::conflict: return connect_code::failed_precondition;
    case errc::timeout:
    case errc::deadline_exceeded: return connect_code::deadline_exceeded;
    case errc::cancelled: return connect_code::canceled;
    case errc::unavailable: return connect_code::unavailable;
    case errc::resource_exhausted:
    case errc::too_large: return connect_code::resource_exhausted;
    case errc::unauthenticated: return connect_code::unauthenticated;
    case errc::permission_denied: return connect_code::permission_denied;
    case errc::unimplemented:
    case errc::unknown_kind: return connect_code::unimplemented;
    case errc::corrupt_record: return connect_code::data_loss;
    case errc::none:
    case errc::unsupported_version:
    case errc::io_error:
    case errc::outcome_unknown:
    case errc::internal: break;
  }
  return connect_code::internal;
}

connect_error to_connect_error(const status& failure) {
  return {connect_code_of(failure.code), failure.message};
}

std::string unary_error_body(const connect_error& error) {
  return nlohmann::json{{"code", to_string(error.code)}, {"message", error.message}}.dump();
}

std::string envelope(uint8_t flags, std::string_view payload) {
  std::string out;
  out.reserve(envelope_header_bytes + payload.size());
  const auto size = static_cast<uint32_t>(payload.size());
  out.push_back(static_cast<char>(flags));
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((size >> shift) & 0xff));
  out.append(payload);
  return out;
}

std::string end_of_stream(const std::optional<connect_error>& error) {
  nlohmann::json body = nlohmann::json::object();
  if (error)
    body["error"] = {{"code", to_string(error->code)}, {"message", error->message}};
  return envelope(envelope_end_of_stream, body.dump());
}

result<std::optional<envelope_frame>> envelope_reader::next() {
  if (buffer_.size() < envelope_header_bytes)
    return std::optional<envelope_frame>{};
  const auto* bytes = reinterpret_cast<const unsigned char*>(buffer_.data());
  const uint32_t size = (uint32_t{bytes[1]} << 24) | (uint32_t{bytes[2]} << 16)
                        | (uint32_t{bytes[3]} << 8) | uint32_t{bytes[4]};
  if (size > max_message_bytes_)
    return make_status(errc::too_large, "a message of " + std::to_string(size)
                                          + " bytes is over the limit of "
                                          + std::to_string(max_message_bytes_) + " bytes");
  if (buffer_.size() < envelope_header_bytes + size)
    return std::optional<envelope_frame>{};
  envelope_frame frame;
  frame.flags = bytes[0];
  frame.payload = buffer_.substr(envelope_header_bytes, size);
  buffer_.erase(0, envelope_header_bytes + size);
  return std::optional<envelope_frame>{std::move(frame)};
}

status decode_message(connect_codec codec, std::string_view bytes, google::protobuf::Message& out) {
  const auto& type = out.GetDescriptor()->full_name();
  if (codec == connect_codec::proto) {
    if (!out.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
      return make_status(errc::invalid_argument, "the body is not a binary " + type + " message");
    return status::ok();
  }
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  auto parsed = google::protobuf::util::JsonStringToMessage(
    google::protobuf::StringPiece(bytes.data(), bytes.size()), &out, options);
  if (!parsed.ok())
    return make_status(errc::invalid_argument, "the body is not a JSON " + type
                                                 + " message: " + parsed.message().as_string());
  return status::ok();
}

result<std::string> encode_message(connect_codec codec, const google::protobuf::Message& message) {
  std::string out;
  if (codec == connect_codec::proto) {
    if (!message.SerializeToString(&out))
      return make_status(errc::internal,
                         "cannot write a " + message.GetDescriptor()->full_name() + " message");
    return out;
  }
  auto written = google::protobuf::util::MessageToJsonString(message, &out);
  if (!written.ok())
    return make_status(errc::internal, "cannot write a " + message.GetDescriptor()->full_name()
                                         + " message as JSON: " + written.message().as_string());
  return out;
}

result<uint64_t> parse_timeout_ms(std::string_view header) {
  uint64_t value = 0;
  auto [end, error] = std::from_chars(header.data(), header.data() + header.size(), value);
  if (header.empty() || header.size() > timeout_digits_max || error != std::errc{}
      || end != header.data() + header.size())
    return make_status(errc::invalid_argument, "Connect-Timeout-Ms \""
                                                 + std::string(header.substr(0, 20))
                                                 + "\" is not a number of at most 10 digits");
  return value;
}

} // namespace airlock::e2b
