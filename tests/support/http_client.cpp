#include "tests/support/http_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <sstream>

#include "tests/support/fd_wait.hpp"

namespace airlock::test {

using detail::steady;
using detail::wait_fd;

namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

/// Parses the status line and headers at the start of `buffer` and removes
/// them; nullopt if more bytes are needed, status 0 for bytes that are not a
/// response.
std::optional<http_reply> take_head(std::string& buffer) {
  auto head_end = buffer.find("\r\n\r\n");
  if (head_end == std::string::npos)
    return std::nullopt;
  std::istringstream head(buffer.substr(0, head_end));
  http_reply reply;
  std::string line;
  std::getline(head, line);
  if (line.rfind("HTTP/1.", 0) != 0 || line.size() < 12)
    return http_reply{}; // status 0: not a response
  reply.status = std::stoi(line.substr(9, 3));
  while (std::getline(head, line)) {
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    auto colon = line.find(':');
    if (colon == std::string::npos)
      continue;
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    reply.headers[lower(line.substr(0, colon))] = value;
  }
  buffer.erase(0, head_end + 4);
  return reply;
}

std::optional<size_t> content_length(const http_reply& reply) {
  if (auto found = reply.headers.find("content-length"); found != reply.headers.end())
    return std::stoul(found->second);
  return std::nullopt;
}

/// Parses a complete response at the start of `buffer` and removes it;
/// nullopt if more bytes are needed.
std::optional<http_reply> take_reply(std::string& buffer) {
  auto head_end = buffer.find("\r\n\r\n");
  if (head_end == std::string::npos)
    return std::nullopt;
  // Only the head is copied: a large body arrives in many reads, and copying
  // the whole buffer on each would make reading it quadratic.
  size_t body_at = head_end + 4;
  std::string head = buffer.substr(0, body_at);
  auto reply = take_head(head);
  if (!reply || reply->status == 0)
    return reply;
  size_t length = content_length(*reply).value_or(0);
  if (buffer.size() - body_at < length)
    return std::nullopt;
  reply->body = buffer.substr(body_at, length);
  buffer.erase(0, body_at + length);
  return reply;
}

/// One event from the start of `buffer` (removed), skipping comment lines;
/// nullopt when no complete event is buffered yet.
std::optional<sse_event> take_event(std::string& buffer) {
  for (;;) {
    size_t end = buffer.find("\n\n");
    if (end == std::string::npos)
      return std::nullopt;
    std::istringstream block(buffer.substr(0, end));
    buffer.erase(0, end + 2);
    sse_event event;
    bool any = false;
    bool first_data = true;
    std::string line;
    while (std::getline(block, line)) {
      if (line.empty() || line[0] == ':')
        continue;
      auto colon = line.find(':');
      std::string name = line.substr(0, colon);
      std::string value = colon == std::string::npos ? "" : line.substr(colon + 1);
      if (!value.empty() && value[0] == ' ')
        value.erase(0, 1);
      any = true;
      if (name == "event") {
        event.event = value;
      } else if (name == "id") {
        event.id = value;
      } else if (name == "data") {
        event.data += (first_data ? "" : "\n") + value;
        first_data = false;
      }
    }
    if (any) {
      if (event.event.empty())
        event.event = "message";
      return event;
    }
  }
}

} // namespace

std::optional<http_connection> http_connection::open(const std::string& host, uint16_t port,
                                                     milliseconds timeout,
                                                     int receive_buffer_bytes) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1)
    return std::nullopt;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return std::nullopt;
  http_connection conn(fd);
  if (receive_buffer_bytes > 0)
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer_bytes, sizeof receive_buffer_bytes);
  auto deadline = steady::now() + timeout;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    if (errno != EINPROGRESS || !wait_fd(fd, POLLOUT, deadline))
      return std::nullopt;
    int error = 0;
    socklen_t size = sizeof error;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size);
    if (error != 0)
      return std::nullopt;
  }
  return conn;
}

http_connection::http_connection(http_connection&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), buffer_(std::move(other.buffer_)) {}

http_connection::~http_connection() { close(); }

void http_connection::close() {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
}

bool http_connection::send(std::string_view bytes, milliseconds timeout) {
  size_t sent = 0;
  auto deadline = steady::now() + timeout;
  while (sent < bytes.size()) {
    ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!wait_fd(fd_, POLLOUT, deadline))
        return false;
    } else {
      return false;
    }
  }
  return true;
}

bool http_connection::fill(steady::time_point deadline) {
  if (eof_)
    return false;
  for (;;) {
    char chunk[65536];
    ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n > 0) {
      buffer_.append(chunk, static_cast<size_t>(n));
      return true;
    }
    if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      eof_ = true;
      return false;
    }
    if (!wait_fd(fd_, POLLIN, deadline))
      return false;
  }
}

std::optional<std::string> http_connection::read_until(std::string_view needle,
                                                       milliseconds timeout) {
  auto deadline = steady::now() + timeout;
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

std::optional<http_reply> http_connection::read_reply(milliseconds timeout) {
  auto deadline = steady::now() + timeout;
  for (;;) {
    if (auto reply = take_reply(buffer_))
      return reply->status == 0 ? std::nullopt : reply;
    if (!fill(deadline))
      return std::nullopt;
  }
}

std::optional<http_reply> http_connection::read_head(milliseconds timeout) {
  auto deadline = steady::now() + timeout;
  for (;;) {
    if (auto reply = take_head(buffer_))
      return reply->status == 0 ? std::nullopt : reply;
    if (!fill(deadline))
      return std::nullopt;
  }
}

bool http_connection::read_body(http_reply& head, milliseconds timeout) {
  auto deadline = steady::now() + timeout;
  auto length = content_length(head);
  while (!length || buffer_.size() < *length) {
    if (!fill(deadline)) {
      if (length || !eof_)
        return false;
      break; // no Content-Length: the body ends at EOF
    }
  }
  size_t take = length ? *length : buffer_.size();
  head.body = buffer_.substr(0, take);
  buffer_.erase(0, take);
  return true;
}

std::optional<sse_event> http_connection::next_event(milliseconds timeout) {
  auto deadline = steady::now() + timeout;
  for (;;) {
    if (auto event = take_event(buffer_))
      return event;
    if (!fill(deadline))
      return std::nullopt;
  }
}

bool http_connection::wait_closed(milliseconds timeout) {
  auto deadline = steady::now() + timeout;
  for (;;) {
    char chunk[65536];
    ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n > 0)
      buffer_.append(chunk, static_cast<size_t>(n));
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
      return true;
    if (n < 0 && !wait_fd(fd_, POLLIN, deadline))
      return false;
  }
}

std::optional<http_reply> http_get(const std::string& host, uint16_t port, const std::string& path,
                                   const std::string& method) {
  auto conn = http_connection::open(host, port);
  if (!conn)
    return std::nullopt;
  if (!conn->send(method + " " + path + " HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"))
    return std::nullopt;
  return conn->read_reply();
}

namespace {

std::string request_bytes(const http_request& request) {
  std::string bytes = request.method + " " + request.target + " HTTP/1.1\r\n";
  // A test that names the host (virtual hosts) sends only its own.
  if (std::none_of(request.headers.begin(), request.headers.end(),
                   [](const auto& header) { return header.first == "Host"; }))
    bytes += "Host: test\r\n";
  bytes += "Connection: close\r\n";
  for (const auto& [name, value] : request.headers)
    bytes += name + ": " + value + "\r\n";
  bool has_body = !request.body.empty() || request.method == "POST" || request.method == "PUT"
                  || request.method == "PATCH";
  if (has_body)
    bytes += "Content-Length: " + std::to_string(request.body.size()) + "\r\n";
  bytes += "\r\n";
  bytes += request.body;
  return bytes;
}

} // namespace

std::optional<std::pair<http_connection, http_reply>> http_open(const std::string& host,
                                                                uint16_t port,
                                                                const http_request& request,
                                                                milliseconds timeout) {
  auto conn = http_connection::open(host, port, timeout);
  if (!conn || !conn->send(request_bytes(request), timeout))
    return std::nullopt;
  auto head = conn->read_head(timeout);
  if (!head)
    return std::nullopt;
  return std::pair<http_connection, http_reply>(std::move(*conn), std::move(*head));
}

std::optional<http_reply> http_call(const std::string& host, uint16_t port,
                                    const http_request& request, milliseconds timeout) {
  auto opened = http_open(host, port, request, timeout);
  if (!opened || !opened->first.read_body(opened->second, timeout))
    return std::nullopt;
  return std::move(opened->second);
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

} // namespace airlock::test
