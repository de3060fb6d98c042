#pragma once
// The output buffer of one process: stdout and stderr interleaved in arrival
// order in one bounded byte ring, with a run list saying which stream each
// stretch of bytes came from. Offsets are absolute: a combined offset counts
// bytes of both streams (what the API's SSE `id:` carries), a stream offset
// counts bytes of one stream (the per-stream read of sbx_read). Appending
// beyond the capacity drops the oldest bytes of both streams together.

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "schema/errc.hpp"
#include "worker/output_ring.hpp"

namespace airlock::worker {

/// A stretch of bytes of one stream, as a combined read returns it.
struct output_piece {
  uint8_t fd = 1;          ///< 1 stdout, 2 stderr
  uint64_t end_offset = 0; ///< combined offset just past its last byte
  std::string bytes;
};

/// What a combined read returns.
struct output_slice {
  std::vector<output_piece> pieces; ///< in order; filtered streams left out
  uint64_t next_offset = 0;         ///< combined offset to read from next
};

class output_log {
public:
  /// `capacity_bytes` > 0: the most bytes of both streams retained.
  /// `runs_max` > 0: the most stream changes retained; a process that
  /// alternates streams byte by byte would otherwise cost a run per byte, so
  /// beyond it the oldest runs are dropped as if the ring had overflowed.
  /// Memory is taken at the first append.
  explicit output_log(size_t capacity_bytes, size_t runs_max = 16384)
      : bytes_(capacity_bytes), capacity_(std::max<size_t>(capacity_bytes, 1)),
        runs_max_(std::max<size_t>(runs_max, 1)) {}

  /// Appends `bytes` of stream `fd` (1 or 2; anything else counts as 2).
  void append(uint8_t fd, std::string_view bytes) {
    if (bytes.empty())
      return;
    const size_t index = fd == 1 ? 0 : 1;
    const uint8_t stream = fd == 1 ? 1 : 2;
    if (!runs_.empty() && runs_.back().fd == stream)
      runs_.back().length += bytes.size();
    else
      runs_.push_back(run{stream, bytes_.end_offset(), stream_end_[index], bytes.size()});
    stream_end_[index] += bytes.size();
    bytes_.append(bytes);
    trim(bytes_.start_offset());
    if (runs_.size() > runs_max_)
      trim(runs_[runs_.size() - runs_max_].offset);
  }

  /// Combined offset of the oldest retained byte.
  uint64_t start_offset() const noexcept {
    return runs_.empty() ? bytes_.end_offset() : runs_.front().offset;
  }
  /// Combined offset one past the newest byte (= bytes of both streams).
  uint64_t end_offset() const noexcept { return bytes_.end_offset(); }
  /// Bytes ever appended to stream `fd`.
  uint64_t stream_end(uint8_t fd) const noexcept { return stream_end_[fd == 1 ? 0 : 1]; }
  /// Stream offset of the oldest retained byte of stream `fd`.
  uint64_t stream_start(uint8_t fd) const noexcept {
    for (const auto& r : runs_)
      if (r.fd == fd)
        return r.stream_offset;
    return stream_end(fd);
  }

  /// Up to `max_bytes` of the wanted streams from combined `offset`. Bytes of
  /// an unwanted stream are skipped: next_offset moves past them. gone when
  /// `offset` is before the retained window; invalid_argument past the end.
  result<output_slice> read(uint64_t offset, size_t max_bytes, bool want_stdout,
                            bool want_stderr) const {
    if (offset < start_offset())
      return dropped(errc::gone, start_offset());
    if (offset > end_offset())
      return past_end(offset, end_offset());
    output_slice out;
    out.next_offset = offset;
    size_t taken = 0;
    auto it = std::upper_bound(runs_.begin(), runs_.end(), offset,
                               [](uint64_t at, const run& r) { return at < r.offset + r.length; });
    for (; it != runs_.end(); ++it) {
      const uint64_t from = std::max(it->offset, offset);
      const uint64_t available = it->offset + it->length - from;
      const bool wanted = it->fd == 1 ? want_stdout : want_stderr;
      if (!wanted) {
        out.next_offset = from + available;
        continue;
      }
      const auto n = static_cast<size_t>(std::min<uint64_t>(available, max_bytes - taken));
      if (n == 0)
        break;
      auto bytes = bytes_.read(from, n);
      if (!bytes)
        return bytes.error(); // unreachable: the runs lie inside the ring
      out.pieces.push_back(output_piece{it->fd, from + n, std::move(*bytes)});
      out.next_offset = from + n;
      taken += n;
      if (n < available)
        break;
    }
    return out;
  }

  /// Up to `max_bytes` of stream `fd` from stream `offset`. wrong_state when
  /// `offset` is before the stream's retained bytes (the message names the
  /// offset to resume from); invalid_argument past the end.
  result<std::string> read_stream(uint8_t fd, uint64_t offset, size_t max_bytes) const {
    const uint64_t start = stream_start(fd);
    if (offset < start)
      return dropped(errc::wrong_state, start);
    if (offset > stream_end(fd))
      return past_end(offset, stream_end(fd));
    std::string out;
    for (const auto& r : runs_) {
      if (r.fd != fd || r.stream_offset + r.length <= offset)
        continue;
      if (out.size() >= max_bytes)
        break;
      const uint64_t skip = offset > r.stream_offset ? offset - r.stream_offset : 0;
      const auto n =
        static_cast<size_t>(std::min<uint64_t>(r.length - skip, max_bytes - out.size()));
      auto bytes = bytes_.read(r.offset + skip, n);
      if (!bytes)
        return bytes.error(); // unreachable: the runs lie inside the ring
      out += *bytes;
      offset = r.stream_offset + skip + n;
    }
    return out;
  }

private:
  struct run {
    uint8_t fd = 1;
    uint64_t offset = 0;        ///< combined offset of its first byte
    uint64_t stream_offset = 0; ///< its stream's offset of its first byte
    uint64_t length = 0;
  };

  /// Forgets every byte before combined offset `start`.
  void trim(uint64_t start) {
    while (!runs_.empty() && runs_.front().offset + runs_.front().length <= start)
      runs_.pop_front();
    if (!runs_.empty() && runs_.front().offset < start) {
      const uint64_t cut = start - runs_.front().offset;
      runs_.front().offset += cut;
      runs_.front().stream_offset += cut;
      runs_.front().length -= cut;
    }
  }

  status dropped(errc code, uint64_t start) const {
    return make_status(code, "output before offset " + std::to_string(start)
                               + " was dropped (buffer of " + std::to_string(capacity_)
                               + " bytes); resume from offset " + std::to_string(start));
  }

  static status past_end(uint64_t offset, uint64_t end) {
    return make_status(errc::invalid_argument, "offset " + std::to_string(offset)
                                                 + " is past the end of the output ("
                                                 + std::to_string(end) + ")");
  }

  output_ring bytes_;
  size_t capacity_;
  size_t runs_max_;
  std::deque<run> runs_; ///< cover exactly the retained bytes, oldest first
  std::array<uint64_t, 2> stream_end_{};
};

} // namespace airlock::worker
