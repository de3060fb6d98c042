// egress_bench: the client, blocking OpenSSL trusting only the bench's root,
// the same code for both paths (SNI and certificate name bench.test).

#pragma once

#include <openssl/ssl.h>

#include <cstdint>
#include <memory>
#include <string>

#include "bench/egress/tls_io.hpp"
#include "schema/errc.hpp"

namespace airlock::egress_bench {

/// One TLS connection to 127.0.0.1:port for the name bench.test.
class tls_connection {
public:
  static result<std::unique_ptr<tls_connection>> open(SSL_CTX* ctx, uint16_t port);

  ~tls_connection();
  tls_connection(const tls_connection&) = delete;
  tls_connection& operator=(const tls_connection&) = delete;

  /// GET `path`; checks status 200 and a Content-Length of `expected_bytes`,
  /// reads the body (compared with `expected_body` when given, else counted
  /// and discarded). Returns the body's length.
  result<uint64_t> get(const std::string& path, uint64_t expected_bytes,
                       const std::string* expected_body);

private:
  tls_connection() = default;

  result<uint64_t> read_body(const std::string& path, uint64_t expected_bytes,
                             const std::string* expected_body);

  int fd_ = -1;
  SSL* ssl_ = nullptr;
  tls_reader reader_;
};

} // namespace airlock::egress_bench
