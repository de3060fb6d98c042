#pragma once
// X.509 certificates for the egress proxy's TLS termination. A cluster root
// CA (its key stays with the control plane) signs one intermediate per worker
// for a key the worker generated; the worker's leaf_minter signs short-lived
// server certificates for the names sandboxes connect to. Sandboxes trust the
// root; no CA key ever enters a sandbox. EC P-256 and SHA-256 throughout.

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "schema/errc.hpp"

namespace airlock::crypto {

/// A private key and its certificate, both PEM.
struct key_and_cert {
  std::string key_pem;
  std::string cert_pem;
};

/// A self-signed root CA (CA:TRUE, keyCertSign and cRLSign) with a new EC
/// P-256 key, valid from one hour ago for `valid_days`.
/// errc::invalid_argument for an empty name or valid_days < 1.
result<key_and_cert> create_root_ca(std::string_view common_name, int valid_days);

/// A new EC P-256 private key (PKCS#8 PEM).
result<std::string> generate_key_pem();

/// The public key (SubjectPublicKeyInfo PEM) of a private key PEM.
/// errc::invalid_argument when the PEM does not parse.
result<std::string> public_key_pem(std::string_view private_key_pem);

/// Signs an intermediate CA certificate for `public_key_pem` with the root
/// (CA:TRUE, pathlen:0, keyCertSign and cRLSign), valid from one hour ago for
/// `valid_days`. errc::invalid_argument when a PEM does not parse or the key
/// does not match the root's certificate.
result<std::string> issue_intermediate(const key_and_cert& root, std::string_view public_key_pem,
                                       std::string_view common_name, int valid_days);

/// Mints TLS server certificates for host names, signed by an intermediate CA,
/// all for one leaf key made at creation. Minted certificates are cached
/// (least recently used goes first) and minted again once half their validity
/// has passed. Thread-safe.
class leaf_minter {
public:
  /// A minted certificate and what a TLS server needs with it. The X509 and
  /// EVP_PKEY objects are shared and immutable; hand them to OpenSSL with
  /// SSL_use_certificate / SSL_use_PrivateKey (which take their own
  /// reference), never modify them.
  struct leaf {
    std::shared_ptr<X509> cert;
    std::shared_ptr<EVP_PKEY> key;
    std::vector<std::shared_ptr<X509>> chain; ///< the intermediate, then the rest of chain_pem
  };

  /// `chain_pem`: the intermediate's certificate first (it must match
  /// `intermediate_key_pem`), then the certificates above it (the root).
  /// errc::invalid_argument when the PEMs do not parse or do not match.
  static result<std::unique_ptr<leaf_minter>>
  create(std::string intermediate_key_pem, std::string chain_pem, size_t cache_max = 1024);

  /// A certificate for `dns_name` (SAN dNSName, serverAuth, valid 7 days from
  /// one hour ago). errc::invalid_argument for a name that is not a valid
  /// host name (IP literals included).
  result<leaf> for_name(std::string_view dns_name);

  /// Certificates minted so far (not served from the cache).
  uint64_t minted() const;

  leaf_minter(const leaf_minter&) = delete;
  leaf_minter& operator=(const leaf_minter&) = delete;
  ~leaf_minter();

private:
  struct cached {
    std::shared_ptr<X509> cert;
    int64_t minted_at_s = 0;
    std::list<std::string>::iterator order;
  };

  leaf_minter() = default;
  result<std::shared_ptr<X509>> mint(const std::string& name);

  std::shared_ptr<EVP_PKEY> issuer_key_;
  std::shared_ptr<EVP_PKEY> leaf_key_;
  std::vector<std::shared_ptr<X509>> chain_;
  size_t cache_max_ = 1024;

  mutable std::mutex mutex_;
  std::unordered_map<std::string, cached> cache_;
  std::list<std::string> lru_; ///< most recently used first
  uint64_t minted_ = 0;
};

} // namespace airlock::crypto
