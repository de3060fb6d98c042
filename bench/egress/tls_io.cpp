#include "bench/egress/tls_io.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <openssl/err.h>

#include <cctype>
#include <sstream>

namespace airlock::egress_bench {

std::string openssl_error(std::string_view what) {
  std::string text{what};
  if (unsigned long code = ERR_get_error()) {
    char buffer[256];
    ERR_error_string_n(code, buffer, sizeof buffer);
    text += ": ";
    text += buffer;
  }
  ERR_clear_error();
  return text;
}

std::string small_body() {
  std::string body(small_body_bytes, 'x');
  body.back() = '\n';
  return body;
}

void tune_socket(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval timeout{socket_timeout_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
}

bool write_all(SSL* ssl, const char* data, size_t size) {
  while (size > 0) {
    size_t written = 0;
    if (SSL_write_ex(ssl, data, size, &written) != 1)
      return false;
    data += written;
    size -= written;
  }
  return true;
}

bool tls_reader::fill() {
  char chunk[io_chunk_bytes];
  size_t got = 0;
  if (SSL_read_ex(ssl, chunk, sizeof chunk, &got) != 1)
    return false;
  pending.append(chunk, got);
  return true;
}

std::optional<std::string> tls_reader::read_header() {
  for (;;) {
    auto end = pending.find("\r\n\r\n");
    if (end != std::string::npos) {
      std::string header = pending.substr(0, end + 4);
      pending.erase(0, end + 4);
      return header;
    }
    if (pending.size() > header_bytes_max || !fill())
      return std::nullopt;
  }
}

std::string lowercase(std::string text) {
  for (auto& c : text)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::map<std::string, std::string> header_fields(const std::string& header) {
  std::map<std::string, std::string> fields;
  std::istringstream lines{header};
  std::string line;
  std::getline(lines, line);
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    auto colon = line.find(':');
    if (colon == std::string::npos)
      continue;
    auto value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    fields[lowercase(line.substr(0, colon))] = value;
  }
  return fields;
}

} // namespace airlock::egress_bench
