#pragma once
// A bounded byte ring addressed by absolute stream offsets: the output buffer
// of one process stream. Appending beyond the capacity drops the oldest bytes;
// a reader resumes at any offset still inside the retained window.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "schema/errc.hpp"

namespace airlock::worker {

class output_ring {
public:
  /// `capacity_bytes` > 0: the most bytes retained.
  explicit output_ring(size_t capacity_bytes) : buffer_(std::max<size_t>(capacity_bytes, 1)) {}

  /// Appends `bytes`; the oldest bytes fall out of the window when full.
  void append(std::string_view bytes) {
    const size_t cap = buffer_.size();
    if (bytes.size() > cap) { // only the tail can be retained
      end_ += bytes.size() - cap;
      bytes.remove_prefix(bytes.size() - cap);
    }
    for (char c : bytes)
      buffer_[static_cast<size_t>(end_++ % cap)] = c;
  }

  /// Offset of the oldest retained byte.
  uint64_t start_offset() const noexcept {
    return end_ > buffer_.size() ? end_ - buffer_.size() : 0;
  }
  /// Offset one past the newest byte (= total bytes ever appended).
  uint64_t end_offset() const noexcept { return end_; }

  /// Up to `max_bytes` from `offset`. wrong_state ("gone") when `offset` is
  /// before the retained window; invalid_argument when it is past the end.
  result<std::string> read(uint64_t offset, size_t max_bytes) const {
    if (offset < start_offset())
      return make_status(errc::wrong_state,
                         "output before offset " + std::to_string(start_offset())
                           + " was dropped (buffer of " + std::to_string(buffer_.size())
                           + " bytes); resume from offset " + std::to_string(start_offset()));
    if (offset > end_)
      return make_status(errc::invalid_argument, "offset " + std::to_string(offset)
                                                   + " is past the end of the output ("
                                                   + std::to_string(end_) + ")");
    const size_t n = static_cast<size_t>(std::min<uint64_t>(end_ - offset, max_bytes));
    std::string out(n, '\0');
    const size_t cap = buffer_.size();
    for (size_t i = 0; i < n; ++i)
      out[i] = buffer_[static_cast<size_t>((offset + i) % cap)];
    return out;
  }

private:
  std::vector<char> buffer_;
  uint64_t end_ = 0;
};

} // namespace airlock::worker
