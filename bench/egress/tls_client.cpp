#include "bench/egress/tls_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace airlock::egress_bench {

result<std::unique_ptr<tls_connection>> tls_connection::open(SSL_CTX* ctx, uint16_t port) {
  std::unique_ptr<tls_connection> conn{new tls_connection()};
  conn->fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (conn->fd_ < 0)
    return make_status(errc::unavailable, std::string("socket: ") + std::strerror(errno));
  tune_socket(conn->fd_);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  if (::connect(conn->fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0)
    return make_status(errc::unavailable,
                       "connect to port " + std::to_string(port) + ": " + std::strerror(errno));
  conn->ssl_ = SSL_new(ctx);
  SSL* ssl = conn->ssl_;
  if (!ssl || SSL_set_fd(ssl, conn->fd_) != 1 || SSL_set_tlsext_host_name(ssl, bench_host) != 1
      || SSL_set1_host(ssl, bench_host) != 1)
    return make_status(errc::internal, openssl_error("client SSL setup"));
  if (SSL_connect(ssl) != 1) {
    long verify = SSL_get_verify_result(ssl);
    std::string what = "TLS handshake on port " + std::to_string(port);
    if (verify != X509_V_OK)
      what += std::string(" (") + X509_verify_cert_error_string(verify) + ")";
    return make_status(errc::unavailable, openssl_error(what));
  }
  conn->reader_.ssl = ssl;
  return conn;
}

tls_connection::~tls_connection() {
  if (ssl_) {
    SSL_shutdown(ssl_); // close_notify, so the peer ends the connection cleanly
    SSL_free(ssl_);
  }
  if (fd_ >= 0)
    ::close(fd_);
  ERR_clear_error();
}

result<uint64_t> tls_connection::get(const std::string& path, uint64_t expected_bytes,
                                     const std::string* expected_body) {
  std::string request =
    "GET " + path + " HTTP/1.1\r\nHost: " + bench_host + "\r\nUser-Agent: egress_bench\r\n\r\n";
  if (!write_all(ssl_, request.data(), request.size()))
    return make_status(errc::unavailable, openssl_error("sending GET " + path));
  auto header = reader_.read_header();
  if (!header)
    return make_status(errc::unavailable, openssl_error("no response header for GET " + path));
  if (header->rfind("HTTP/1.1 200 ", 0) != 0)
    return make_status(errc::invalid_argument, "GET " + path + " answered "
                                                 + header->substr(0, header->find('\r')) + ": "
                                                 + reader_.pending.substr(0, 200));
  auto fields = header_fields(*header);
  if (fields["content-length"] != std::to_string(expected_bytes))
    return make_status(errc::invalid_argument, "GET " + path + ": Content-Length '"
                                                 + fields["content-length"] + "', expected "
                                                 + std::to_string(expected_bytes));
  return read_body(path, expected_bytes, expected_body);
}

result<uint64_t> tls_connection::read_body(const std::string& path, uint64_t expected_bytes,
                                           const std::string* expected_body) {
  std::string kept;
  uint64_t received = 0;
  auto& pending = reader_.pending;
  for (;;) {
    auto take = static_cast<size_t>(std::min<uint64_t>(pending.size(), expected_bytes - received));
    if (expected_body)
      kept.append(pending, 0, take);
    pending.erase(0, take);
    received += take;
    if (received == expected_bytes)
      break;
    if (!reader_.fill())
      return make_status(errc::invalid_argument,
                         openssl_error("GET " + path + ": body ended after "
                                       + std::to_string(received) + " of "
                                       + std::to_string(expected_bytes) + " bytes"));
  }
  if (expected_body && kept != *expected_body)
    return make_status(errc::invalid_argument,
                       "GET " + path + ": body differs from the upstream's");
  return received;
}

} // namespace airlock::egress_bench
