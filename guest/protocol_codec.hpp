#pragma once
// What the two halves of the guest protocol codec share (internal to guest/):
// frame assembly into a std::string, text and data conversions, the decode
// bounds, and the start_request codec, which lives apart in
// start_request_codec.cpp because the process request it carries is the part
// of the protocol most likely to change. host_message_codec.cpp holds
// host -> guest, guest_message_codec.cpp guest -> host. Not a public header.

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/io.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "guest/protocol.hpp"
#include "schema/capnp_codec.hpp"
#include "schema/guest.capnp.h"

namespace airlock::guest::codec {

namespace cs = airlock::capnp_schema;

/// Bounds what a decoder walks, whatever a frame claims.
inline constexpr uint64_t decode_traversal_words_max = uint64_t{4} * 1024 * 1024;
inline constexpr int decode_nesting_max = 16;

/// Appends to a std::string so that a message is serialized once, in place.
class string_output final : public kj::OutputStream {
public:
  explicit string_output(std::string& out) : out_(out) {}
  void write(const void* buffer, size_t size) override {
    out_.append(static_cast<const char*>(buffer), size);
  }

private:
  std::string& out_;
};

/// Appends the 4-byte little-endian length prefix and the serialized message.
inline void append_builder(std::string& out, capnp::MessageBuilder& builder) {
  auto bytes = capnp::computeSerializedSizeInWords(builder) * sizeof(capnp::word);
  auto n = static_cast<uint32_t>(bytes);
  for (int shift = 0; shift < 32; shift += 8)
    out.push_back(static_cast<char>((n >> shift) & 0xff));
  string_output stream(out);
  capnp::writeMessage(stream, builder);
}

using schema::detail::as_data;

inline capnp::Text::Reader as_text(const std::string& text) { return {text.data(), text.size()}; }

inline std::string to_string(capnp::Text::Reader text) { return schema::detail::text(text); }

inline std::string to_string(capnp::Data::Reader data) { return schema::detail::data(data); }

/// Bytes a message will need, so that large payloads land in one segment.
inline size_t first_segment_words(size_t payload_bytes) {
  return payload_bytes / sizeof(capnp::word) + 64;
}

/// Builds the envelope `Envelope` around `message` with `Filler`'s visitor.
template <class Envelope, class Filler, class Message>
void build(capnp::MallocMessageBuilder& builder, const Message& message) {
  auto root = builder.initRoot<Envelope>();
  root.setSchemaVersion(protocol_version);
  std::visit(Filler{root}, message);
}

/// Decodes one envelope within the decode bounds; `read_root` turns the root
/// reader into the message variant.
template <class Envelope, class Message, class ReadRoot>
result<Message> decode(std::string_view payload, std::string_view what, ReadRoot read_root) {
  std::string subject = std::string(what) + " frame";
  return schema::detail::read_message<Envelope, Message>(
    payload, subject, {decode_traversal_words_max, decode_nesting_max},
    [&subject, &read_root](typename Envelope::Reader root) -> result<Message> {
      if (root.getSchemaVersion() == 0)
        return make_status(errc::corrupt_record, subject + " has no version");
      return read_root(root);
    });
}

/// The start_request codec (start_request_codec.cpp).
void fill(cs::GuestStart::Builder b, const start_request& m);
start_request read(cs::GuestStart::Reader r);

} // namespace airlock::guest::codec
