#pragma once
// Framing of the guest channel: each Cap'n Proto message travels as a 4-byte
// little-endian length and the bytes. The reader enforces a frame size limit
// before it buffers anything, so a hostile guest cannot make the host
// allocate without bound.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "schema/errc.hpp"

namespace airlock::guest {

/// Default limit of one frame's payload: 1 MiB.
inline constexpr size_t frame_bytes_max_default = 1u << 20;

/// Length prefix plus `payload`. Precondition: payload fits in 32 bits.
std::string encode_frame(std::string_view payload);

/// Reassembles frames from a byte stream that arrives in arbitrary chunks.
class frame_reader {
public:
  explicit frame_reader(size_t frame_bytes_max = frame_bytes_max_default)
      : frame_bytes_max_(frame_bytes_max) {}

  /// Appends received bytes. Fails with resource_exhausted as soon as a
  /// length prefix announces more than the limit; the stream is then unusable.
  status feed(std::string_view bytes);

  /// The next complete frame's payload, if one has arrived.
  std::optional<std::string> next();

  /// Bytes held for frames that are not complete yet.
  size_t buffered_bytes() const noexcept { return buffer_.size() - offset_; }

private:
  size_t frame_bytes_max_;
  std::string buffer_;
  size_t offset_ = 0;
  bool broken_ = false;
};

} // namespace airlock::guest
