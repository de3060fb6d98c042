#pragma once
// The Connect protocol (connectrpc.com/docs/protocol) over HTTP/1.1, as envd's
// clients speak it: unary calls (the body is one message, an error is a JSON
// body with an HTTP status) and streams (the body is a run of envelopes: one
// flag byte, a 4-byte big-endian length, a message; a stream ends with one
// end-of-stream envelope that carries its error, if any). Both codecs: proto3
// JSON (what the SDKs send) and binary protobuf. Pure functions and one
// incremental reader; the HTTP server is gateway/'s.

#include <google/protobuf/message.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "schema/errc.hpp"

namespace airlock::e2b {

/// How messages are written: proto3 JSON or binary protobuf.
enum class connect_codec : uint8_t { json, proto };

/// What a request's Content-Type says: the codec, and whether the body is a
/// stream of envelopes (application/connect+json) or one message
/// (application/json).
struct connect_content {
  connect_codec codec = connect_codec::json;
  bool streaming = false;
};

/// The content a Content-Type names (parameters such as charset ignored);
/// invalid_argument for any other type (the server answers 415 to it).
result<connect_content> parse_content_type(std::string_view content_type);

/// The Content-Type of a body of `content`.
std::string_view content_type_of(connect_content content) noexcept;

/// Connect's error codes.
enum class connect_code : uint8_t {
  canceled,
  unknown,
  invalid_argument,
  deadline_exceeded,
  not_found,
  already_exists,
  permission_denied,
  resource_exhausted,
  failed_precondition,
  aborted,
  out_of_range,
  unimplemented,
  internal,
  unavailable,
  data_loss,
  unauthenticated,
};

/// The snake_case name clients match on ("not_found").
std::string_view to_string(connect_code code) noexcept;

/// The HTTP status of a unary call that failed with `code`.
unsigned http_status_of(connect_code code) noexcept;

/// The Connect code for an airlock failure.
connect_code connect_code_of(errc code) noexcept;

struct connect_error {
  connect_code code = connect_code::unknown;
  std::string message;
};

/// A failure of airlock's as a Connect error (its code mapped, its message kept).
connect_error to_connect_error(const status& failure);

/// The body of a failed unary call: {"code":"…","message":"…"}.
std::string unary_error_body(const connect_error& error);

/// Envelope flags.
inline constexpr uint8_t envelope_compressed = 0x01;
inline constexpr uint8_t envelope_end_of_stream = 0x02;
/// The envelope's header: the flag byte and the length.
inline constexpr size_t envelope_header_bytes = 5;

/// One envelope: `flags`, then `payload` with its length.
std::string envelope(uint8_t flags, std::string_view payload);

/// The envelope that ends a stream: {} when it succeeded, else
/// {"error":{"code","message"}}. Always JSON, whatever the stream's codec.
std::string end_of_stream(const std::optional<connect_error>& error);

/// One envelope read back.
struct envelope_frame {
  uint8_t flags = 0;
  std::string payload;
};

/// Takes a stream's bytes as they arrive and hands back whole envelopes. A
/// length above `max_message_bytes` is refused (too_large) before its bytes
/// are buffered, so a client cannot make the server hold more than that.
class envelope_reader {
public:
  explicit envelope_reader(size_t max_message_bytes) : max_message_bytes_(max_message_bytes) {}

  /// Appends bytes read from the body.
  void feed(std::string_view bytes) { buffer_.append(bytes); }

  /// The next whole envelope; nullopt while its bytes have not all come.
  result<std::optional<envelope_frame>> next();

  /// Whether bytes of an unfinished envelope are held (at the body's end:
  /// a truncated stream).
  bool partial() const noexcept { return !buffer_.empty(); }

private:
  size_t max_message_bytes_;
  std::string buffer_;
};

/// Reads `bytes` (in `codec`) into `out`. Unknown JSON fields are ignored,
/// as Connect asks of servers, so that newer clients still work.
/// invalid_argument with what was wrong.
status decode_message(connect_codec codec, std::string_view bytes, google::protobuf::Message& out);

/// `message` in `codec`: proto3 JSON (camelCase names, defaults left out,
/// enums by name, int64 as strings) or binary protobuf.
result<std::string> encode_message(connect_codec codec, const google::protobuf::Message& message);

/// The Connect-Timeout-Ms header's value: at most 10 digits; invalid_argument
/// otherwise.
result<uint64_t> parse_timeout_ms(std::string_view header);

} // namespace airlock::e2b
