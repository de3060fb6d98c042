#include "gateway/attach_token.hpp"

#include "schema/base64.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "schema/assert.hpp"
#include "schema/atomic_file.hpp"

namespace airlock::gateway {

void evp_pkey_deleter::operator()(evp_pkey_st* key) const noexcept { EVP_PKEY_free(key); }

namespace {

constexpr std::string_view token_prefix = "v1.";
constexpr size_t ed25519_key_bytes = 32;
constexpr size_t ed25519_signature_bytes = 64;
/// A PEM Ed25519 key is about 120 bytes; anything much larger is a wrong file.
constexpr size_t key_file_bytes_max = 64 * 1024;

std::string base64url_encode(std::string_view bytes) {
  return base64_encode(bytes, base64_variant::url);
}

/// Strict: unpadded base64url only, and the unused low bits of the last
/// character must be zero, so that every byte string has exactly one text
/// (a token cannot be altered into another text that still verifies).
std::optional<std::string> base64url_decode(std::string_view text) {
  return base64_decode(text, base64_variant::url, /*strict=*/true);
}

bool same(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

status io_failure(const std::string& what, const std::string& path, int error) {
  return make_status(errc::io_error, what + " " + path + ": " + std::strerror(error));
}

/// The key's raw 32-byte public half.
std::optional<std::string> raw_public_key(evp_pkey_st* key) {
  std::array<unsigned char, ed25519_key_bytes> raw{};
  size_t size = raw.size();
  if (EVP_PKEY_get_raw_public_key(key, raw.data(), &size) != 1 || size != raw.size())
    return std::nullopt;
  return std::string(reinterpret_cast<const char*>(raw.data()), size);
}

/// The PEM text of a fresh Ed25519 key, or a failure.
result<std::string> generate_key_pem() {
  evp_pkey_ptr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"));
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), &BIO_free);
  if (!key || !bio
      || PEM_write_bio_PrivateKey(bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1)
    return make_status(errc::internal, "OpenSSL cannot generate an Ed25519 key");
  char* data = nullptr;
  long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

/// Writes `pem` beside `path` and links it into place: when another process
/// created the key first, theirs stays and we use it. A reader never sees a
/// half-written key.
status create_key_file(const std::string& path, const std::string& pem) {
  if (auto made = make_private_directories(std::filesystem::path(path).parent_path().string());
      !made)
    return made;
  auto created = write_file_atomically(path, pem, 0600, existing_file::keep);
  if (!created && created.code != errc::already_exists)
    return created;
  return status::ok();
}

/// The file's bytes; not_found when it does not exist.
result<std::string> read_key_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? make_status(errc::not_found, "no key file " + path)
                           : io_failure("cannot read", path, errno);
  std::string text(key_file_bytes_max + 1, '\0');
  size_t used = 0;
  ssize_t got = 0;
  while (used < text.size() && (got = ::read(fd, text.data() + used, text.size() - used)) > 0)
    used += static_cast<size_t>(got);
  int error = errno;
  ::close(fd);
  if (got < 0)
    return io_failure("cannot read", path, error);
  if (used > key_file_bytes_max)
    return make_status(errc::invalid_argument, "key file " + path + " is too large to be a key");
  text.resize(used);
  return text;
}

result<evp_pkey_ptr> parse_private_key(const std::string& path, const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
    BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
  evp_pkey_ptr key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!key || EVP_PKEY_get_base_id(key.get()) != EVP_PKEY_ED25519)
    return make_status(errc::invalid_argument,
                       "key file " + path + " holds no Ed25519 private key in PEM");
  return key;
}

std::string encode_payload(const token_claims& claims) {
  nlohmann::json doc = {{"tid", claims.tenant_id},     {"sid", claims.sandbox_id},
                        {"pid", claims.process_id},    {"scope", claims.scope},
                        {"exp", claims.expires_at_ms}, {"aud", claims.audience}};
  return doc.dump();
}

std::optional<token_claims> decode_payload(std::string_view bytes) {
  auto doc = nlohmann::json::parse(bytes, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object())
    return std::nullopt;
  auto text = [&doc](const char* key) -> const std::string* {
    auto it = doc.find(key);
    return it != doc.end() && it->is_string() ? it->get_ptr<const std::string*>() : nullptr;
  };
  auto exp = doc.find("exp");
  const auto *tid = text("tid"), *sid = text("sid"), *pid = text("pid"), *scope = text("scope"),
             *aud = text("aud");
  if (!tid || !sid || !pid || !scope || !aud || exp == doc.end() || !exp->is_number_integer())
    return std::nullopt;
  return token_claims{*tid, *sid, *pid, *scope, exp->get<int64_t>(), *aud};
}

status refused(const std::string& why) {
  return make_status(errc::unauthenticated, "data-plane token refused: " + why);
}

status denied(const std::string& why) {
  return make_status(errc::permission_denied, "data-plane token does not allow this: " + why);
}

} // namespace

token_signer::token_signer(evp_pkey_ptr key, std::string public_key)
    : key_(std::move(key)), public_key_(std::move(public_key)) {}

result<token_signer> token_signer::load_or_create(const std::string& path) {
  auto pem = read_key_file(path);
  if (!pem && pem.code() == errc::not_found) {
    auto fresh = generate_key_pem();
    if (!fresh)
      return fresh.error();
    if (auto created = create_key_file(path, *fresh); !created)
      return created;
    pem = read_key_file(path); // ours, or the one a racing process linked first
  }
  if (!pem)
    return pem.error();
  auto key = parse_private_key(path, *pem);
  if (!key)
    return key.error();
  auto raw = raw_public_key(key->get());
  if (!raw)
    return make_status(errc::internal, "cannot read the public half of " + path);
  return token_signer(std::move(*key), std::move(*raw));
}

std::string token_signer::sign(const token_claims& claims) const {
  std::string text = std::string(token_prefix) + base64url_encode(encode_payload(claims));
  std::array<unsigned char, ed25519_signature_bytes> signature{};
  size_t size = signature.size();
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  // Ed25519 signing with a loaded key fails only when memory runs out.
  bool ok = ctx && EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key_.get()) == 1
            && EVP_DigestSign(ctx.get(), signature.data(), &size,
                              reinterpret_cast<const unsigned char*>(text.data()), text.size())
                 == 1;
  AIRLOCK_ASSERT(ok && size == signature.size(), "Ed25519 signing failed");
  text += '.';
  text += base64url_encode(std::string_view(reinterpret_cast<const char*>(signature.data()), size));
  return text;
}

std::string token_signer::public_key() const { return base64url_encode(public_key_); }

token_verifier::token_verifier(evp_pkey_ptr key, token_verifier_options options)
    : key_(std::move(key)), options_(options) {}

result<token_verifier> token_verifier::from_public_key(std::string_view base64url_raw_key,
                                                       token_verifier_options options) {
  auto raw = base64url_decode(base64url_raw_key);
  if (!raw || raw->size() != ed25519_key_bytes)
    return make_status(errc::invalid_argument,
                       "a data-plane public key is base64url of 32 raw Ed25519 bytes");
  evp_pkey_ptr key(EVP_PKEY_new_raw_public_key(
    EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(raw->data()), raw->size()));
  if (!key)
    return make_status(errc::invalid_argument, "not a valid Ed25519 public key");
  return token_verifier(std::move(key), options);
}

result<token_claims> token_verifier::verify(std::string_view token, int64_t now_ms,
                                            std::string_view sandbox_id,
                                            std::string_view needed_scope,
                                            std::string_view process_id) const {
  if (token.size() > options_.token_bytes_max)
    return refused("longer than " + std::to_string(options_.token_bytes_max) + " bytes");
  if (!token.starts_with(token_prefix))
    return refused("not a v1 token");
  // The prefix holds a dot, so rfind finds one; a token without a second dot
  // finds the prefix's.
  auto dot = token.rfind('.');
  if (dot < token_prefix.size())
    return refused("malformed");
  std::string_view signed_part = token.substr(0, dot);
  auto payload = base64url_decode(signed_part.substr(token_prefix.size()));
  auto signature = base64url_decode(token.substr(dot + 1));
  if (!payload || !signature || signature->size() != ed25519_signature_bytes)
    return refused("malformed");

  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  bool valid =
    ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key_.get()) == 1
    && EVP_DigestVerify(
         ctx.get(), reinterpret_cast<const unsigned char*>(signature->data()), signature->size(),
         reinterpret_cast<const unsigned char*>(signed_part.data()), signed_part.size())
         == 1;
  if (!valid)
    return refused("the signature does not verify");
  auto claims = decode_payload(*payload);
  if (!claims)
    return refused("malformed claims");
  if (now_ms >= claims->expires_at_ms)
    return refused("expired");
  if (!same(claims->sandbox_id, sandbox_id))
    return refused("issued for another sandbox");
  if (!options_.audience.empty() && !same(claims->audience, options_.audience))
    return refused("issued for another worker (get a token from the control plane: POST "
                   "/v1/sandboxes/{id}/token, and send it to the sandbox's data_url)");
  if (claims->scope != "all" && !same(claims->scope, needed_scope))
    return denied("its scope is " + claims->scope + ", this needs " + std::string(needed_scope));
  if (!claims->process_id.empty() && !same(claims->process_id, process_id))
    return denied("it is bound to one process");
  return *claims;
}

} // namespace airlock::gateway
