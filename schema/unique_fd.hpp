#pragma once
// An owning file descriptor: closed exactly once, movable, never copied.
//
// It lives in schema/ because both the guest agent (which may depend only on
// schema/) and the worker (runtime, rootfs, the guest link) hold descriptors,
// and schema/ already carries the small cross-cutting vocabulary everything
// shares (errc.hpp, assert.hpp). Header-only: it adds no code to the library.

#include <unistd.h>

#include <utility>

namespace airlock {

/// Owns one descriptor and closes it on destruction. Move-only. Not
/// thread-safe; the owner decides which thread closes it.
class unique_fd {
public:
  unique_fd() = default;
  explicit unique_fd(int fd) noexcept : fd_(fd) {}
  unique_fd(unique_fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& other) noexcept {
    if (this != &other)
      reset(std::exchange(other.fd_, -1));
    return *this;
  }
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() { reset(); }

  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  explicit operator bool() const noexcept { return valid(); }

  /// Gives up ownership without closing.
  int release() noexcept { return std::exchange(fd_, -1); }

  /// Closes the current descriptor (if any) and takes `fd`.
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = fd;
  }

private:
  int fd_ = -1;
};

} // namespace airlock
