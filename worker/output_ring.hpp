#pragma once
// A bounded byte ring addressed by absolute stream offsets: the output buffer
// of one process stream. Appending beyond the capacity drops the oldest bytes;
// a reader resumes at any offset still inside the retained window.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "schema/errc.hpp"

namespace airlock::worker {

class output_ring {
public:
  /// `capacity_bytes` > 0: the most bytes retained. Memory is taken at the
  /// first append, so a silent process costs nothing.
  explicit output_ring(size_t capacity_bytes) : capacity_(std::max<size_t>(capacity_bytes, 1)) {}

  /// Appends `bytes`; the oldest bytes fall out of the window when full.
  void append(std::string_view bytes) {
    if (bytes.empty())
      return;
    if (buffer_.empty())
      buffer_.resize(capacity_);
    const size_t cap = capacity_;
    if (bytes.size() > cap) { // only the tail can be retained
      end_ += bytes.size() - cap;
      bytes.remove_prefix(bytes.size() - cap);
    }
    const auto at = static_cast<size_t>(end_ % cap);
    const size_t first = std::min(bytes.size(), cap - at);
    std::memcpy(buffer_.data() + at, bytes.data(), first);
    std::memcpy(buffer_.data(), bytes.data() + first, bytes.size() - first);
    end_ += bytes.size();
  }

  /// Offset of the oldest retained byte.
  uint64_t start_offset() const noexcept { return end_ > capacity_ ? end_ - capacity_ : 0; }
  /// Offset one past the newest byte (= total bytes ever appended).
  uint64_t end_offset() const noexcept { return end_; }

  /// Up to `max_bytes` from `offset`. wrong_state ("gone") when `offset` is
  /// before the retained window; invalid_argument when it is past the end.
  result<std::string> read(uint64_t offset, size_t max_bytes) const {
    if (offset < start_offset()) {
      return make_status(errc::wrong_state,
                         "output before offset " + std::to_string(start_offset())
                           + " was dropped (buffer of " + std::to_string(capacity_)
                           + " bytes); resume from offset " + std::to_string(start_offset()));
    }
    if (offset > end_) {
      return make_status(errc::invalid_argument, "offset " + std::to_string(offset)
                                                   + " is past the end of the output ("
                                                   + std::to_string(end_) + ")");
    }
    const size_t n = static_cast<size_t>(std::min<uint64_t>(end_ - offset, max_bytes));
    std::string out(n, '\0');
    if (n == 0)
      return out;
    const size_t cap = capacity_;
    const auto at = static_cast<size_t>(offset % cap);
    const size_t first = std::min(n, cap - at);
    std::memcpy(out.data(), buffer_.data() + at, first);
    std::memcpy(out.data() + first, buffer_.data(), n - first);
    return out;
  }

private:
  size_t capacity_;
  std::vector<char> buffer_; ///< empty until the first append, then capacity_ bytes
  uint64_t end_ = 0;
};

} // namespace airlock::worker
