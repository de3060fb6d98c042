// egress_bench: the names and sizes both paths share, and the blocking TLS
// byte I/O and HTTP/1.1 header handling of the upstream and the client.

#pragma once

#include <openssl/ssl.h>

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace airlock::egress_bench {

inline constexpr const char* bench_host = "bench.test";
inline constexpr const char* bench_secret = "Bearer bench-secret-0123456789abcdef";
inline constexpr size_t small_body_bytes = 100;
inline constexpr int socket_timeout_s = 60;       ///< a blocked read or write fails the run
inline constexpr size_t header_bytes_max = 65536; ///< request and response headers
inline constexpr size_t io_chunk_bytes = 65536;

/// `what`, then OpenSSL's first queued error if any; clears the queue.
std::string openssl_error(std::string_view what);

/// The body of GET /small: small_body_bytes of 'x', the last a newline.
std::string small_body();

/// TCP_NODELAY and socket_timeout_s on reads and writes.
void tune_socket(int fd);

/// Writes all of data; false on error.
bool write_all(SSL* ssl, const char* data, size_t size);

/// Bytes read from a TLS connection, consumed from the front.
struct tls_reader {
  SSL* ssl = nullptr;
  std::string pending;

  /// Appends what one SSL_read returns; false on EOF or error.
  bool fill();

  /// A header block up to and including "\r\n\r\n"; nullopt on EOF or past the limit.
  std::optional<std::string> read_header();
};

std::string lowercase(std::string text);

/// Header fields of a header block by lowercase name (the first line skipped).
std::map<std::string, std::string> header_fields(const std::string& header);

} // namespace airlock::egress_bench
