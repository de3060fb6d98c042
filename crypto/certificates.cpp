#include "crypto/certificates.hpp"
#include "crypto/certificates_internal.hpp"

#include <algorithm>
#include <ctime>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "schema/egress_rules.hpp"

namespace airlock::crypto {
namespace detail {

std::shared_ptr<X509> own(X509* x) { return {x, X509_free}; }
std::shared_ptr<EVP_PKEY> own(EVP_PKEY* k) { return {k, EVP_PKEY_free}; }

/// The oldest OpenSSL error as text, clearing the queue.
status ssl_failure(errc code, std::string_view what) {
  std::string message(what);
  if (unsigned long e = ERR_get_error(); e != 0) {
    char text[256];
    ERR_error_string_n(e, text, sizeof text);
    message += ": ";
    message += text;
  }
  ERR_clear_error();
  return make_status(code, std::move(message));
}

bio_ptr read_bio(std::string_view pem) {
  return bio_ptr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

std::string drain(BIO* bio) {
  BUF_MEM* mem = nullptr;
  BIO_get_mem_ptr(bio, &mem);
  return mem ? std::string(mem->data, mem->length) : std::string{};
}

result<std::shared_ptr<EVP_PKEY>> new_key() {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  if (key == nullptr)
    return ssl_failure(errc::internal, "generating an EC P-256 key failed");
  return own(key);
}

namespace {

/// A key read from `pem` by `read_pem` (PEM_read_bio_PrivateKey or _PUBKEY).
template <class ReadPem>
result<std::shared_ptr<EVP_PKEY>> parse_key(std::string_view pem, ReadPem read_pem,
                                            std::string_view what) {
  auto bio = read_bio(pem);
  EVP_PKEY* key = bio ? read_pem(bio.get(), nullptr, nullptr, nullptr) : nullptr;
  if (key == nullptr)
    return ssl_failure(errc::invalid_argument,
                       "the " + std::string(what) + " key PEM does not parse");
  return own(key);
}

} // namespace

result<std::shared_ptr<EVP_PKEY>> parse_private_key(std::string_view pem) {
  return parse_key(pem, PEM_read_bio_PrivateKey, "private");
}

result<std::shared_ptr<EVP_PKEY>> parse_public_key(std::string_view pem) {
  return parse_key(pem, PEM_read_bio_PUBKEY, "public");
}

/// Every certificate in `pem`, in order.
result<std::vector<std::shared_ptr<X509>>> parse_certs(std::string_view pem) {
  auto bio = read_bio(pem);
  std::vector<std::shared_ptr<X509>> certs;
  while (bio) {
    X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr);
    if (cert == nullptr)
      break;
    certs.push_back(own(cert));
  }
  ERR_clear_error(); // the end of the input reads as an error
  if (certs.empty())
    return make_status(errc::invalid_argument, "the certificate PEM holds no certificate");
  return certs;
}

std::string key_to_pem(EVP_PKEY* key) {
  bio_ptr out(BIO_new(BIO_s_mem()));
  if (!out || PEM_write_bio_PrivateKey(out.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1)
    return {};
  return drain(out.get());
}

std::string cert_to_pem(X509* cert) {
  bio_ptr out(BIO_new(BIO_s_mem()));
  if (!out || PEM_write_bio_X509(out.get(), cert) != 1)
    return {};
  return drain(out.get());
}

namespace {

bool set_validity(X509* cert, const cert_request& req) {
  if (req.window) {
    time_t not_before = static_cast<time_t>(req.window->first);
    time_t not_after = static_cast<time_t>(req.window->second);
    return X509_time_adj_ex(X509_getm_notBefore(cert), 0, 0, &not_before) != nullptr
           && X509_time_adj_ex(X509_getm_notAfter(cert), 0, 0, &not_after) != nullptr;
  }
  return X509_gmtime_adj(X509_getm_notBefore(cert), -backdate_s) != nullptr
         && X509_time_adj_ex(X509_getm_notAfter(cert), req.valid_days, 0, nullptr) != nullptr;
}

bool set_random_serial(X509* cert) {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1)
    return false;
  bytes[0] &= 0x7f; // a positive INTEGER
  std::unique_ptr<BIGNUM, bn_free> bn(BN_bin2bn(bytes, sizeof bytes, nullptr));
  return bn && BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert)) != nullptr;
}

bool add_extension(X509* cert, X509V3_CTX* ctx, int nid, const std::string& value) {
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, ctx, nid, value.c_str());
  if (ext == nullptr)
    return false;
  int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  return ok == 1;
}

} // namespace

result<std::shared_ptr<X509>> build(const cert_request& req) {
  auto cert = own(X509_new());
  std::unique_ptr<X509_NAME, name_free> subject(X509_NAME_new());
  if (!cert || !subject)
    return ssl_failure(errc::internal, "allocating a certificate failed");
  auto cn = reinterpret_cast<const unsigned char*>(req.common_name.c_str());
  bool ok = X509_set_version(cert.get(), 2) == 1 && set_random_serial(cert.get())
            && X509_NAME_add_entry_by_txt(subject.get(), "CN", MBSTRING_UTF8, cn, -1, -1, 0) == 1
            && X509_set_subject_name(cert.get(), subject.get()) == 1
            && X509_set_issuer_name(cert.get(),
                                    req.issuer ? X509_get_subject_name(req.issuer) : subject.get())
                 == 1
            && set_validity(cert.get(), req) && X509_set_pubkey(cert.get(), req.subject_key) == 1;
  if (!ok)
    return ssl_failure(errc::internal, "filling in a certificate failed");
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, req.issuer ? req.issuer : cert.get(), cert.get(), nullptr, nullptr, 0);
  for (const auto& [nid, value] : req.extensions)
    if (!add_extension(cert.get(), &ctx, nid, value))
      return ssl_failure(errc::internal, "adding extension " + value + " failed");
  if (X509_sign(cert.get(), req.issuer_key, EVP_sha256()) == 0)
    return ssl_failure(errc::internal, "signing a certificate failed");
  return cert;
}

} // namespace detail

using namespace detail;

namespace {

/// A CA certificate's request: `constraints` is its basicConstraints value;
/// every CA signs certificates and revocation lists, and names its keys.
cert_request ca_request(std::string_view common_name, EVP_PKEY* subject_key, X509* issuer,
                        EVP_PKEY* issuer_key, int valid_days, std::string constraints) {
  return cert_request{std::string(common_name),
                      subject_key,
                      issuer,
                      issuer_key,
                      valid_days,
                      {{NID_basic_constraints, std::move(constraints)},
                       {NID_key_usage, "critical,keyCertSign,cRLSign"},
                       {NID_subject_key_identifier, "hash"},
                       {NID_authority_key_identifier, "keyid:always"}},
                      std::nullopt};
}

status check_request(std::string_view common_name, int valid_days) {
  if (common_name.empty() || common_name.size() > subject_cn_max)
    return make_status(errc::invalid_argument, "a CA name must have 1 to 64 characters");
  if (valid_days < 1)
    return make_status(errc::invalid_argument, "a certificate must be valid for at least a day");
  return status::ok();
}

} // namespace

result<std::string> generate_key_pem() {
  auto key = new_key();
  if (!key)
    return key.error();
  return key_to_pem(key->get());
}

result<std::string> public_key_pem(std::string_view private_key_pem) {
  auto key = parse_private_key(private_key_pem);
  if (!key)
    return key.error();
  bio_ptr out(BIO_new(BIO_s_mem()));
  if (!out || PEM_write_bio_PUBKEY(out.get(), key->get()) != 1)
    return ssl_failure(errc::internal, "writing a public key failed");
  return drain(out.get());
}

result<key_and_cert> create_root_ca(std::string_view common_name, int valid_days) {
  if (auto bad = check_request(common_name, valid_days); !bad)
    return bad;
  auto key = new_key();
  if (!key)
    return key.error();
  auto cert =
    build(ca_request(common_name, key->get(), nullptr, key->get(), valid_days, "critical,CA:TRUE"));
  if (!cert)
    return cert.error();
  return key_and_cert{key_to_pem(key->get()), cert_to_pem(cert->get())};
}

result<std::string> issue_intermediate(const key_and_cert& root, std::string_view public_key_pem,
                                       std::string_view common_name, int valid_days) {
  if (auto bad = check_request(common_name, valid_days); !bad)
    return bad;
  auto root_key = parse_private_key(root.key_pem);
  auto root_certs = parse_certs(root.cert_pem);
  auto subject_key = parse_public_key(public_key_pem);
  if (!root_key)
    return root_key.error();
  if (!root_certs)
    return root_certs.error();
  if (!subject_key)
    return subject_key.error();
  X509* root_cert = root_certs->front().get();
  if (X509_check_private_key(root_cert, root_key->get()) != 1)
    return ssl_failure(errc::invalid_argument, "the root key does not match its certificate");
  // pathlen:0: an intermediate signs leaves only, never another CA.
  auto cert = build(ca_request(common_name, subject_key->get(), root_cert, root_key->get(),
                               valid_days, "critical,CA:TRUE,pathlen:0"));
  if (!cert)
    return cert.error();
  return cert_to_pem(cert->get());
}

// ---- leaf_minter ----

leaf_minter::~leaf_minter() = default;

result<std::unique_ptr<leaf_minter>> leaf_minter::create(std::string intermediate_key_pem,
                                                         std::string chain_pem, size_t cache_max) {
  auto key = parse_private_key(intermediate_key_pem);
  if (!key)
    return key.error();
  auto chain = parse_certs(chain_pem);
  if (!chain)
    return chain.error();
  X509* issuer = chain->front().get();
  if (X509_check_private_key(issuer, key->get()) != 1)
    return ssl_failure(errc::invalid_argument,
                       "the intermediate key does not match the chain's first certificate");
  if (X509_check_ca(issuer) < 1)
    return make_status(errc::invalid_argument, "the chain's first certificate is not a CA");
  auto leaf_key = new_key();
  if (!leaf_key)
    return leaf_key.error();
  std::unique_ptr<leaf_minter> minter(new leaf_minter());
  minter->issuer_key_ = std::move(*key);
  minter->leaf_key_ = std::move(*leaf_key);
  minter->chain_ = std::move(*chain);
  minter->cache_max_ = std::max<size_t>(cache_max, 1);
  return minter;
}

result<std::shared_ptr<X509>> leaf_minter::mint(const std::string& name) {
  std::string cn = name.size() <= subject_cn_max ? name : std::string("airlock egress");
  cert_request req{cn,
                   leaf_key_.get(),
                   chain_.front().get(),
                   issuer_key_.get(),
                   leaf_valid_days,
                   {{NID_basic_constraints, "critical,CA:FALSE"},
                    {NID_key_usage, "critical,digitalSignature"},
                    {NID_ext_key_usage, "serverAuth"},
                    {NID_subject_alt_name, "DNS:" + name},
                    {NID_subject_key_identifier, "hash"},
                    {NID_authority_key_identifier, "keyid:always"}},
                   std::nullopt};
  return build(req);
}

result<leaf_minter::leaf> leaf_minter::for_name(std::string_view dns_name) {
  // The name lands in an extension config string: only [a-z0-9.-] may pass.
  auto name = schema::normalize_host_name(dns_name);
  if (!name)
    return make_status(errc::invalid_argument, "certificates are minted for host names only");
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  const int64_t refresh_after_s = int64_t{leaf_valid_days} * 86400 / 2;
  std::lock_guard lock(mutex_);
  if (auto hit = cache_.find(*name); hit != cache_.end()) {
    if (now - hit->second.minted_at_s < refresh_after_s) {
      lru_.splice(lru_.begin(), lru_, hit->second.order);
      return leaf{hit->second.cert, leaf_key_, chain_};
    }
    lru_.erase(hit->second.order);
    cache_.erase(hit);
  }
  auto cert = mint(*name);
  if (!cert)
    return cert.error();
  ++minted_;
  while (cache_.size() >= cache_max_) {
    cache_.erase(lru_.back());
    lru_.pop_back();
  }
  lru_.push_front(*name);
  cache_.emplace(*name, cached{*cert, now, lru_.begin()});
  return leaf{*cert, leaf_key_, chain_};
}

uint64_t leaf_minter::minted() const {
  std::lock_guard lock(mutex_);
  return minted_;
}

} // namespace airlock::crypto
