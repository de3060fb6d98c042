#pragma once
// Helpers the certificate code of this folder shares (certificates.cpp,
// cluster_certificates.cpp): OpenSSL ownership, PEM parsing and writing, and
// one certificate builder. Not part of the library's interface.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include "schema/errc.hpp"

namespace airlock::crypto::detail {

struct bio_free {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct bn_free {
  void operator()(BIGNUM* b) const { BN_free(b); }
};
struct name_free {
  void operator()(X509_NAME* n) const { X509_NAME_free(n); }
};
using bio_ptr = std::unique_ptr<BIO, bio_free>;

inline constexpr int64_t backdate_s = 3600; // tolerate clocks an hour behind ours
inline constexpr int leaf_valid_days = 7;
inline constexpr size_t subject_cn_max = 64; // X.520 upper bound for commonName

std::shared_ptr<X509> own(X509* x);
std::shared_ptr<EVP_PKEY> own(EVP_PKEY* k);

/// `what`, then the oldest OpenSSL error as text; clears the queue.
status ssl_failure(errc code, std::string_view what);

bio_ptr read_bio(std::string_view pem);
std::string drain(BIO* bio);

/// A new EC P-256 key.
result<std::shared_ptr<EVP_PKEY>> new_key();
result<std::shared_ptr<EVP_PKEY>> parse_private_key(std::string_view pem);
result<std::shared_ptr<EVP_PKEY>> parse_public_key(std::string_view pem);
/// Every certificate in `pem`, in order; invalid_argument when there is none.
result<std::vector<std::shared_ptr<X509>>> parse_certs(std::string_view pem);
std::string key_to_pem(EVP_PKEY* key);
std::string cert_to_pem(X509* cert);

/// What one certificate says; `issuer` null for a self-signed one.
struct cert_request {
  std::string common_name;
  EVP_PKEY* subject_key = nullptr;
  X509* issuer = nullptr;
  EVP_PKEY* issuer_key = nullptr;
  int valid_days = 1;
  std::vector<std::pair<int, std::string>> extensions; ///< NID and config value
  /// When set, the validity window in Unix seconds (not before, not after)
  /// instead of backdate_s ago for valid_days.
  std::optional<std::pair<int64_t, int64_t>> window;
};

/// A signed certificate (SHA-256) with a random serial, valid from
/// backdate_s ago for req.valid_days (or over req.window).
result<std::shared_ptr<X509>> build(const cert_request& req);

} // namespace airlock::crypto::detail
