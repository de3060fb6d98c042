#include "tests/gateway/test_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>

namespace airlock::gateway::test {

namespace {

int remaining_ms(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

} // namespace

std::unique_ptr<raw_client> raw_client::connect(uint16_t port, int receive_buffer_bytes) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return nullptr;
  if (receive_buffer_bytes > 0)
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer_bytes, sizeof receive_buffer_bytes);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return nullptr;
  }
  return std::unique_ptr<raw_client>(new raw_client(fd));
}

raw_client::~raw_client() { close(); }

void raw_client::close() {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
}

bool raw_client::send(std::string_view bytes, milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!bytes.empty()) {
    pollfd waiting{fd_, POLLOUT, 0};
    if (::poll(&waiting, 1, remaining_ms(deadline)) <= 0)
      return false;
    ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool raw_client::fill(std::chrono::steady_clock::time_point deadline) {
  pollfd waiting{fd_, POLLIN, 0};
  if (::poll(&waiting, 1, remaining_ms(deadline)) <= 0)
    return false;
  char chunk[1 << 16];
  ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
  if (n <= 0)
    return false;
  buffer_.append(chunk, static_cast<size_t>(n));
  return true;
}

std::optional<std::string> raw_client::read_until(std::string_view needle, milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  size_t searched = 0;
  for (;;) {
    size_t at = buffer_.find(needle, searched);
    if (at != std::string::npos) {
      std::string out = buffer_.substr(0, at + needle.size());
      buffer_.erase(0, at + needle.size());
      return out;
    }
    searched = buffer_.size() >= needle.size() ? buffer_.size() - needle.size() + 1 : 0;
    if (!fill(deadline))
      return std::nullopt;
  }
}

std::optional<reply> raw_client::read_reply(milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto head = read_until("\r\n\r\n", timeout);
  if (!head || head->rfind("HTTP/1.", 0) != 0)
    return std::nullopt;
  reply out;
  out.status = std::atoi(head->c_str() + 9);
  size_t line = head->find("\r\n") + 2;
  while (line < head->size() - 2) {
    size_t end = head->find("\r\n", line);
    std::string field = head->substr(line, end - line);
    size_t colon = field.find(':');
    if (colon != std::string::npos) {
      size_t value = field.find_first_not_of(' ', colon + 1);
      out.headers[lower(field.substr(0, colon))] =
        value == std::string::npos ? "" : field.substr(value);
    }
    line = end + 2;
  }
  size_t length = std::strtoull(out.headers["content-length"].c_str(), nullptr, 10);
  while (buffer_.size() < length) {
    if (!fill(deadline))
      return std::nullopt;
  }
  out.body = buffer_.substr(0, length);
  buffer_.erase(0, length);
  return out;
}

bool raw_client::wait_closed(milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    pollfd waiting{fd_, POLLIN, 0};
    if (::poll(&waiting, 1, remaining_ms(deadline)) <= 0)
      return false;
    char chunk[1 << 16];
    ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0)
      return true;
    buffer_.append(chunk, static_cast<size_t>(n));
  }
}

std::string request_text(std::string_view method, std::string_view target,
                         std::string_view extra_headers, std::string_view body) {
  std::string out;
  out.append(method).append(" ").append(target).append(" HTTP/1.1\r\nHost: t\r\n");
  out.append(extra_headers);
  if (!body.empty())
    out.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n");
  out.append("\r\n").append(body);
  return out;
}

} // namespace airlock::gateway::test
