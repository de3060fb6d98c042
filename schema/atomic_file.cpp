#include "schema/atomic_file.hpp"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "schema/unique_fd.hpp"

namespace airlock {

namespace {

status failure(std::string_view what, const std::string& path, int err) {
  errc code = errc::io_error;
  switch (err) {
    case EACCES:
    case EPERM: code = errc::permission_denied; break;
    case ENOSPC:
    case EDQUOT: code = errc::resource_exhausted; break;
    case EEXIST: code = errc::already_exists; break;
    default: break;
  }
  return make_status(code, std::string(what) + " " + path + ": " + std::strerror(err));
}

std::string directory_of(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

status write_all(int fd, std::string_view bytes, const std::string& temp) {
  while (!bytes.empty()) {
    auto n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return failure("cannot write", temp, errno);
    if (n == 0)
      return failure("cannot write", temp, EIO);
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return status::ok();
}

/// Steps 2 and 3 on an open temporary file.
status fill(int fd, std::string_view bytes, mode_t mode, const std::string& temp) {
  if (::fchmod(fd, mode) != 0)
    return failure("cannot set the mode of", temp, errno);
  if (auto written = write_all(fd, bytes, temp); !written)
    return written;
  if (::fsync(fd) != 0)
    return failure("cannot sync", temp, errno);
  return status::ok();
}

/// Step 4; the temporary name is gone afterwards whatever happened.
status publish(const std::string& temp, const std::string& path, existing_file if_exists) {
  if (if_exists == existing_file::replace) {
    if (::rename(temp.c_str(), path.c_str()) == 0)
      return status::ok();
    int err = errno;
    ::unlink(temp.c_str());
    return failure("cannot rename " + temp + " to", path, err);
  }
  int linked = ::link(temp.c_str(), path.c_str());
  int err = errno;
  ::unlink(temp.c_str());
  return linked == 0 ? status::ok() : failure("cannot create", path, err);
}

status sync_directory(const std::string& dir) {
  unique_fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd || ::fsync(fd.get()) != 0)
    return failure("cannot sync the directory", dir, errno);
  return status::ok();
}

} // namespace

status write_file_atomically(const std::string& path, std::string_view bytes, mode_t mode,
                             existing_file if_exists) {
  std::string temp = path + ".tmp.XXXXXX";
  // mkostemp fills in the X's and creates the file with O_EXCL and mode 0600.
  unique_fd fd(::mkostemp(temp.data(), O_CLOEXEC));
  if (!fd)
    return failure("cannot create", temp, errno);
  if (auto filled = fill(fd.get(), bytes, mode, temp); !filled) {
    ::unlink(temp.c_str());
    return filled;
  }
  fd.reset();
  if (auto published = publish(temp, path, if_exists); !published)
    return published;
  return sync_directory(directory_of(path));
}

status make_private_directories(const std::string& dir) {
  for (size_t end = dir.find('/', 1); !dir.empty(); end = dir.find('/', end + 1)) {
    std::string prefix = dir.substr(0, end);
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST)
      return failure("cannot create directory", prefix, errno);
    if (end == std::string::npos)
      break;
  }
  return status::ok();
}

} // namespace airlock
