#include "guest/frame.hpp"

#include "schema/assert.hpp"

namespace airlock::guest {

namespace {

constexpr size_t prefix_bytes = 4;

uint32_t read_length(const char* p) {
  auto b = reinterpret_cast<const unsigned char*>(p);
  return uint32_t{b[0]} | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 | uint32_t{b[3]} << 24;
}

} // namespace

std::string encode_frame(std::string_view payload) {
  AIRLOCK_ASSERT(payload.size() <= UINT32_MAX, "frame payload too large", payload.size());
  auto n = static_cast<uint32_t>(payload.size());
  std::string frame;
  frame.reserve(prefix_bytes + payload.size());
  for (int shift = 0; shift < 32; shift += 8)
    frame.push_back(static_cast<char>((n >> shift) & 0xff));
  frame.append(payload);
  return frame;
}

status frame_reader::feed(std::string_view bytes) {
  if (broken_)
    return make_status(errc::resource_exhausted, "the guest stream exceeded its frame limit");
  buffer_.append(bytes);
  // Check every complete prefix now, not when the frame is taken: the limit
  // must hold before the payload is buffered.
  size_t at = offset_;
  while (buffer_.size() - at >= prefix_bytes) {
    auto length = read_length(buffer_.data() + at);
    if (length > frame_bytes_max_) {
      broken_ = true;
      return make_status(errc::resource_exhausted,
                         "a guest frame of " + std::to_string(length) + " bytes exceeds the "
                           + std::to_string(frame_bytes_max_) + "-byte limit");
    }
    if (buffer_.size() - at - prefix_bytes < length)
      break;
    at += prefix_bytes + length;
  }
  return status::ok();
}

std::optional<std::string> frame_reader::next() {
  if (broken_ || buffered_bytes() < prefix_bytes)
    return std::nullopt;
  auto length = read_length(buffer_.data() + offset_);
  if (buffered_bytes() - prefix_bytes < length)
    return std::nullopt;
  std::string payload = buffer_.substr(offset_ + prefix_bytes, length);
  offset_ += prefix_bytes + length;
  if (offset_ == buffer_.size()) {
    buffer_.clear();
    offset_ = 0;
  } else if (offset_ > buffer_.size() / 2) {
    buffer_.erase(0, offset_); // compact: keep memory proportional to what is pending
    offset_ = 0;
  }
  return payload;
}

} // namespace airlock::guest
