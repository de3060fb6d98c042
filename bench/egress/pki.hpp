// egress_bench: the certificates (one root the client trusts, an intermediate
// each for the upstream and the egress proxy) and the TLS contexts made from them.

#pragma once

#include <openssl/ssl.h>

#include <memory>
#include <string>

#include "crypto/certificates.hpp"
#include "schema/errc.hpp"

namespace airlock::egress_bench {

struct bench_pki {
  crypto::key_and_cert root;
  crypto::leaf_minter::leaf upstream_leaf;
  std::string proxy_key_pem;
  std::string proxy_chain_pem; ///< the egress proxy's intermediate, then the root
};

/// A fresh root, the upstream's leaf for bench.test and the egress proxy's CA.
result<bench_pki> make_pki();

struct ssl_ctx_deleter {
  void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
};
using ssl_ctx_ptr = std::unique_ptr<SSL_CTX, ssl_ctx_deleter>;

/// The upstream's server context: `leaf` and its chain.
result<ssl_ctx_ptr> server_context(const crypto::leaf_minter::leaf& leaf);

/// A client context that trusts only `root_pem` and checks the name bench.test.
result<ssl_ctx_ptr> client_context(const std::string& root_pem);

} // namespace airlock::egress_bench
