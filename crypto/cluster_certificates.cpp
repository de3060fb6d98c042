#include "crypto/cluster_certificates.hpp"

#include <openssl/asn1.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>

#include <optional>

#include "crypto/certificates_internal.hpp"
#include "schema/hex.hpp"

namespace airlock::crypto {

using namespace detail;

namespace {

struct req_free {
  void operator()(X509_REQ* r) const { X509_REQ_free(r); }
};
using req_ptr = std::unique_ptr<X509_REQ, req_free>;

struct store_free {
  void operator()(X509_STORE* s) const { X509_STORE_free(s); }
};
struct store_ctx_free {
  void operator()(X509_STORE_CTX* c) const { X509_STORE_CTX_free(c); }
};

status bad_request(std::string message) {
  ERR_clear_error();
  return make_status(errc::invalid_argument, std::move(message));
}

/// The subject's common name, empty when there is none or it is not text.
std::string common_name_of(const X509_NAME* name) {
  int at = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
  if (at < 0)
    return {};
  const ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, at));
  unsigned char* utf8 = nullptr;
  int length = ASN1_STRING_to_UTF8(&utf8, data);
  if (length < 0)
    return {};
  std::string out(reinterpret_cast<char*>(utf8), static_cast<size_t>(length));
  OPENSSL_free(utf8);
  return out;
}

bool is_p256(EVP_PKEY* key) {
  char group[64] = {};
  size_t length = 0;
  return EVP_PKEY_get_base_id(key) == EVP_PKEY_EC
         && EVP_PKEY_get_utf8_string_param(key, "group", group, sizeof group, &length) == 1
         && std::string_view(group, length) == "prime256v1";
}

bool is_ip_literal(const std::string& text) {
  unsigned char bytes[16];
  return ::inet_pton(AF_INET, text.c_str(), bytes) == 1
         || ::inet_pton(AF_INET6, text.c_str(), bytes) == 1;
}

struct general_names_free {
  void operator()(GENERAL_NAMES* names) const { GENERAL_NAMES_free(names); }
};
using general_names_ptr = std::unique_ptr<GENERAL_NAMES, general_names_free>;

/// An IP SAN's octets as text; empty for a length that is neither v4 nor v6.
std::string ip_text(const ASN1_OCTET_STRING* octets) {
  char text[INET6_ADDRSTRLEN] = {};
  int length = ASN1_STRING_length(octets);
  int family = length == 4 ? AF_INET : length == 16 ? AF_INET6 : 0;
  if (family == 0
      || ::inet_ntop(family, ASN1_STRING_get0_data(octets), text, sizeof text) == nullptr)
    return {};
  return text;
}

int64_t unix_seconds(const ASN1_TIME* time) {
  struct tm parts {};
  if (ASN1_TIME_to_tm(time, &parts) != 1)
    return 0;
  return static_cast<int64_t>(timegm(&parts));
}

} // namespace

bool is_member_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > 63)
    return false;
  auto allowed = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  };
  for (char c : name)
    if (!allowed(c))
      return false;
  return name.front() != '-' && name.front() != '_';
}

result<std::string> create_csr(std::string_view key_pem, std::string_view common_name,
                               const std::vector<std::string>& ip_addresses) {
  if (!is_member_name(common_name))
    return bad_request("a member name has 1 to 63 of a-z, 0-9, '-' and '_'");
  if (ip_addresses.size() > member_addresses_max)
    return bad_request("a member names at most " + std::to_string(member_addresses_max)
                       + " IP addresses");
  general_names_ptr names(GENERAL_NAMES_new());
  for (const auto& address : ip_addresses) {
    ASN1_OCTET_STRING* octets = is_ip_literal(address) ? a2i_IPADDRESS(address.c_str()) : nullptr;
    if (octets == nullptr)
      return bad_request("'" + address.substr(0, 64) + "' is not an IP address");
    GENERAL_NAME* name = GENERAL_NAME_new();
    if (name == nullptr || sk_GENERAL_NAME_push(names.get(), name) == 0) {
      GENERAL_NAME_free(name);
      ASN1_OCTET_STRING_free(octets);
      return ssl_failure(errc::internal, "making a certificate signing request failed");
    }
    GENERAL_NAME_set0_value(name, GEN_IPADD, octets);
  }
  auto key = parse_private_key(key_pem);
  if (!key)
    return key.error();
  req_ptr req(X509_REQ_new());
  std::unique_ptr<X509_NAME, name_free> subject(X509_NAME_new());
  const std::string cn(common_name);
  bool ok =
    req && subject
    && X509_NAME_add_entry_by_txt(subject.get(), "CN", MBSTRING_UTF8,
                                  reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0)
         == 1
    && X509_REQ_set_version(req.get(), 0) == 1
    && X509_REQ_set_subject_name(req.get(), subject.get()) == 1
    && X509_REQ_set_pubkey(req.get(), key->get()) == 1;
  if (ok && !ip_addresses.empty()) {
    STACK_OF(X509_EXTENSION)* extensions = sk_X509_EXTENSION_new_null();
    X509_EXTENSION* alt_names = X509V3_EXT_i2d(NID_subject_alt_name, 0, names.get());
    ok = extensions != nullptr && alt_names != nullptr
         && sk_X509_EXTENSION_push(extensions, alt_names) != 0;
    if (!ok)
      X509_EXTENSION_free(alt_names);
    ok = ok && X509_REQ_add_extensions(req.get(), extensions) == 1;
    sk_X509_EXTENSION_pop_free(extensions, X509_EXTENSION_free);
  }
  ok = ok && X509_REQ_sign(req.get(), key->get(), EVP_sha256()) > 0;
  if (!ok)
    return ssl_failure(errc::internal, "making a certificate signing request failed");
  bio_ptr out(BIO_new(BIO_s_mem()));
  if (!out || PEM_write_bio_X509_REQ(out.get(), req.get()) != 1)
    return ssl_failure(errc::internal, "writing a certificate signing request failed");
  return drain(out.get());
}

namespace {

/// The one request in `csr_pem`, its signature checked.
result<req_ptr> parse_csr(std::string_view csr_pem) {
  if (csr_pem.size() > csr_pem_max)
    return bad_request("the certificate signing request is larger than "
                       + std::to_string(csr_pem_max) + " bytes");
  auto bio = read_bio(csr_pem);
  req_ptr req(bio ? PEM_read_bio_X509_REQ(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!req)
    return bad_request("the certificate signing request is not a PEM CERTIFICATE REQUEST");
  if (req_ptr second(PEM_read_bio_X509_REQ(bio.get(), nullptr, nullptr, nullptr)); second)
    return bad_request("send one certificate signing request, not several");
  ERR_clear_error();
  EVP_PKEY* key = X509_REQ_get0_pubkey(req.get());
  if (key == nullptr || !is_p256(key))
    return bad_request("the certificate signing request's key must be EC P-256");
  if (X509_REQ_verify(req.get(), key) != 1)
    return bad_request("the certificate signing request is not signed by its own key");
  return req;
}

/// The IP addresses a request asks for; invalid_argument for other kinds of
/// alternative names or too many.
result<std::vector<std::string>> requested_addresses(X509_REQ* req) {
  std::vector<std::string> out;
  STACK_OF(X509_EXTENSION)* extensions = X509_REQ_get_extensions(req);
  if (extensions == nullptr) {
    ERR_clear_error();
    return out;
  }
  std::unique_ptr<STACK_OF(X509_EXTENSION), void (*)(STACK_OF(X509_EXTENSION)*)> owned(
    extensions,
    [](STACK_OF(X509_EXTENSION) * list) { sk_X509_EXTENSION_pop_free(list, X509_EXTENSION_free); });
  for (int i = 0; i < sk_X509_EXTENSION_num(extensions); ++i) {
    X509_EXTENSION* extension = sk_X509_EXTENSION_value(extensions, i);
    if (OBJ_obj2nid(X509_EXTENSION_get_object(extension)) != NID_subject_alt_name)
      continue;
    general_names_ptr names(static_cast<GENERAL_NAMES*>(X509V3_EXT_d2i(extension)));
    if (!names)
      return bad_request("the certificate signing request's alternative names do not parse");
    for (int n = 0; n < sk_GENERAL_NAME_num(names.get()); ++n) {
      const GENERAL_NAME* name = sk_GENERAL_NAME_value(names.get(), n);
      std::string text = name->type == GEN_IPADD ? ip_text(name->d.iPAddress) : "";
      if (text.empty())
        return bad_request("a certificate signing request may ask only for IP addresses as "
                           "alternative names");
      out.push_back(std::move(text));
    }
  }
  if (out.size() > member_addresses_max)
    return bad_request("a member names at most " + std::to_string(member_addresses_max)
                       + " IP addresses");
  return out;
}

} // namespace

result<csr_subject> read_csr(std::string_view csr_pem) {
  auto req = parse_csr(csr_pem);
  if (!req)
    return req.error();
  csr_subject subject;
  subject.common_name = common_name_of(X509_REQ_get_subject_name(req->get()));
  if (!is_member_name(subject.common_name))
    return bad_request("the certificate signing request must name a member (1 to 63 of a-z, "
                       "0-9, '-' and '_')");
  auto addresses = requested_addresses(req->get());
  if (!addresses)
    return addresses.error();
  subject.ip_addresses = std::move(*addresses);
  bio_ptr out(BIO_new(BIO_s_mem()));
  if (!out || PEM_write_bio_PUBKEY(out.get(), X509_REQ_get0_pubkey(req->get())) != 1)
    return ssl_failure(errc::internal, "writing a public key failed");
  subject.public_key_pem = drain(out.get());
  return subject;
}

namespace {

result<std::string> issue_member(const key_and_cert& ca, std::string_view csr_pem,
                                 std::string_view name, int valid_days,
                                 std::optional<std::pair<int64_t, int64_t>> window,
                                 const std::vector<std::string>& ip_addresses) {
  if (!is_member_name(name))
    return bad_request("a member name has 1 to 63 of a-z, 0-9, '-' and '_'");
  if (window ? window->second <= window->first : valid_days < 1)
    return bad_request("a certificate must be valid for some time");
  auto subject = read_csr(csr_pem);
  if (!subject)
    return subject.error();
  auto req = parse_csr(csr_pem);
  if (!req)
    return req.error();
  std::string alt_names = "DNS:" + std::string(name);
  std::vector<std::string> addresses = subject->ip_addresses;
  addresses.insert(addresses.end(), ip_addresses.begin(), ip_addresses.end());
  for (const auto& address : addresses) {
    if (!is_ip_literal(address))
      return bad_request("'" + address.substr(0, 64) + "' is not an IP address");
    alt_names += ",IP:" + address;
  }
  auto ca_key = parse_private_key(ca.key_pem);
  auto ca_certs = parse_certs(ca.cert_pem);
  if (!ca_key)
    return ca_key.error();
  if (!ca_certs)
    return ca_certs.error();
  X509* issuer = ca_certs->front().get();
  if (X509_check_private_key(issuer, ca_key->get()) != 1)
    return ssl_failure(errc::invalid_argument, "the CA key does not match its certificate");
  cert_request member{std::string(name),
                      X509_REQ_get0_pubkey(req->get()),
                      issuer,
                      ca_key->get(),
                      valid_days,
                      {{NID_basic_constraints, "critical,CA:FALSE"},
                       {NID_key_usage, "critical,digitalSignature"},
                       {NID_ext_key_usage, "serverAuth,clientAuth"},
                       {NID_subject_alt_name, alt_names},
                       {NID_subject_key_identifier, "hash"},
                       {NID_authority_key_identifier, "keyid:always"}},
                      window};
  auto cert = build(member);
  if (!cert)
    return cert.error();
  return cert_to_pem(cert->get());
}

} // namespace

result<std::string> issue_member_certificate(const key_and_cert& ca, std::string_view csr_pem,
                                             std::string_view name, int valid_days,
                                             const std::vector<std::string>& ip_addresses) {
  return issue_member(ca, csr_pem, name, valid_days, std::nullopt, ip_addresses);
}

result<std::string> issue_member_certificate_between(const key_and_cert& ca,
                                                     std::string_view csr_pem,
                                                     std::string_view name, int64_t not_before_s,
                                                     int64_t not_after_s) {
  return issue_member(ca, csr_pem, name, 1, std::pair{not_before_s, not_after_s}, {});
}

result<std::string> public_key_fingerprint(std::string_view cert_pem) {
  auto certs = parse_certs(cert_pem);
  if (!certs)
    return certs.error();
  unsigned char* der = nullptr;
  int length = i2d_X509_PUBKEY(X509_get_X509_PUBKEY(certs->front().get()), &der);
  if (length <= 0)
    return ssl_failure(errc::internal, "encoding a public key failed");
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(der, static_cast<size_t>(length), digest);
  OPENSSL_free(der);
  return "sha256:"
         + schema::to_hex(std::string_view(reinterpret_cast<const char*>(digest), sizeof digest));
}

result<verified_member> verify_member_certificate(std::string_view ca_pem,
                                                  std::string_view cert_pem, int64_t now_s) {
  auto roots = parse_certs(ca_pem);
  if (!roots)
    return roots.error();
  auto chain = parse_certs(cert_pem);
  if (!chain)
    return chain.error();
  std::unique_ptr<X509_STORE, store_free> store(X509_STORE_new());
  std::unique_ptr<X509_STORE_CTX, store_ctx_free> context(X509_STORE_CTX_new());
  STACK_OF(X509)* untrusted = sk_X509_new_null();
  if (!store || !context || untrusted == nullptr) {
    sk_X509_free(untrusted);
    return ssl_failure(errc::internal, "allocating a certificate store failed");
  }
  for (const auto& root : *roots)
    X509_STORE_add_cert(store.get(), root.get());
  for (size_t i = 1; i < chain->size(); ++i)
    sk_X509_push(untrusted, (*chain)[i].get());
  X509* leaf = chain->front().get();
  bool ready = X509_STORE_CTX_init(context.get(), store.get(), leaf, untrusted) == 1;
  if (ready) {
    X509_STORE_CTX_set_time(context.get(), 0, static_cast<time_t>(now_s));
    X509_STORE_CTX_set_purpose(context.get(), X509_PURPOSE_SSL_CLIENT);
  }
  const int verified = ready ? X509_verify_cert(context.get()) : -1;
  const int reason = X509_STORE_CTX_get_error(context.get());
  sk_X509_free(untrusted);
  ERR_clear_error();
  if (verified != 1)
    return make_status(errc::permission_denied,
                       std::string("the certificate does not verify against the cluster CA: ")
                         + X509_verify_cert_error_string(reason));
  if (X509_check_ca(leaf) != 0)
    return make_status(errc::permission_denied, "a CA certificate is not a member certificate");
  verified_member member;
  member.name = common_name_of(X509_get_subject_name(leaf));
  if (!is_member_name(member.name))
    return make_status(errc::permission_denied, "the certificate names no member");
  const ASN1_INTEGER* serial = X509_get0_serialNumber(leaf);
  std::unique_ptr<BIGNUM, bn_free> number(ASN1_INTEGER_to_BN(serial, nullptr));
  if (number) {
    char* hex = BN_bn2hex(number.get());
    member.serial_hex = hex ? hex : "";
    OPENSSL_free(hex);
    for (char& c : member.serial_hex)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  member.not_after_s = unix_seconds(X509_get0_notAfter(leaf));
  return member;
}

namespace {

struct md_ctx_free {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};

} // namespace

result<std::string> sign_message(std::string_view key_pem, std::string_view message) {
  auto key = parse_private_key(key_pem);
  if (!key)
    return key.error();
  std::unique_ptr<EVP_MD_CTX, md_ctx_free> context(EVP_MD_CTX_new());
  size_t size = 0;
  if (!context || EVP_DigestSignInit(context.get(), nullptr, EVP_sha256(), nullptr, key->get()) != 1
      || EVP_DigestSign(context.get(), nullptr, &size,
                        reinterpret_cast<const unsigned char*>(message.data()), message.size())
           != 1)
    return ssl_failure(errc::internal, "signing failed");
  std::string signature(size, '\0');
  if (EVP_DigestSign(context.get(), reinterpret_cast<unsigned char*>(signature.data()), &size,
                     reinterpret_cast<const unsigned char*>(message.data()), message.size())
      != 1)
    return ssl_failure(errc::internal, "signing failed");
  signature.resize(size);
  return schema::to_hex(signature);
}

bool verify_message(std::string_view cert_pem, std::string_view message,
                    std::string_view signature_hex) {
  if (signature_hex.size() % 2 != 0 || signature_hex.size() > 512)
    return false;
  std::string signature;
  for (size_t i = 0; i < signature_hex.size(); i += 2) {
    const int high = schema::hex_digit_value(signature_hex[i]);
    const int low = schema::hex_digit_value(signature_hex[i + 1]);
    if (high < 0 || low < 0)
      return false;
    signature.push_back(static_cast<char>(high * 16 + low));
  }
  auto certs = parse_certs(cert_pem);
  if (!certs)
    return false;
  EVP_PKEY* key = X509_get0_pubkey(certs->front().get());
  std::unique_ptr<EVP_MD_CTX, md_ctx_free> context(EVP_MD_CTX_new());
  const bool valid =
    key != nullptr && context
    && EVP_DigestVerifyInit(context.get(), nullptr, EVP_sha256(), nullptr, key) == 1
    && EVP_DigestVerify(context.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                        signature.size(), reinterpret_cast<const unsigned char*>(message.data()),
                        message.size())
         == 1;
  ERR_clear_error();
  return valid;
}

bool key_matches_certificate(std::string_view key_pem, std::string_view cert_pem) {
  auto key = parse_private_key(key_pem);
  auto certs = parse_certs(cert_pem);
  const bool matches =
    key && certs && X509_check_private_key(certs->front().get(), key->get()) == 1;
  ERR_clear_error();
  return matches;
}

result<int64_t> certificate_not_after(std::string_view cert_pem) {
  auto certs = parse_certs(cert_pem);
  if (!certs)
    return certs.error();
  return unix_seconds(X509_get0_notAfter(certs->front().get()));
}

std::vector<std::string> certificate_ip_addresses(std::string_view cert_pem) {
  std::vector<std::string> out;
  auto certs = parse_certs(cert_pem);
  if (!certs)
    return out;
  general_names_ptr names(static_cast<GENERAL_NAMES*>(
    X509_get_ext_d2i(certs->front().get(), NID_subject_alt_name, nullptr, nullptr)));
  for (int n = 0; names && n < sk_GENERAL_NAME_num(names.get()); ++n) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names.get(), n);
    if (name->type == GEN_IPADD)
      if (auto text = ip_text(name->d.iPAddress); !text.empty())
        out.push_back(std::move(text));
  }
  ERR_clear_error();
  return out;
}

} // namespace airlock::crypto
