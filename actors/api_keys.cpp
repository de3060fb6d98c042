#include "actors/api_keys.hpp"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <array>

#include "schema/hex.hpp"

namespace airlock::actors {

namespace {

constexpr size_t key_id_bytes = 8;
constexpr size_t secret_bytes = 32;
constexpr std::string_view key_prefix = "ak_";

} // namespace

result<std::string> random_hex(size_t size) {
  std::array<unsigned char, 64> bytes{};
  if (size > bytes.size() || RAND_bytes(bytes.data(), static_cast<int>(size)) != 1)
    return make_status(errc::internal, "the OpenSSL random generator failed");
  return schema::to_hex(std::string_view(reinterpret_cast<const char*>(bytes.data()), size));
}

result<api_key> generate_api_key() {
  auto id = random_hex(key_id_bytes);
  if (!id)
    return id.error();
  auto secret = random_hex(secret_bytes);
  if (!secret)
    return secret.error();
  return api_key{std::move(*id), std::move(*secret)};
}

std::string sha256(std::string_view text) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  // EVP_Digest with SHA-256 cannot fail short of memory exhaustion.
  EVP_Digest(text.data(), text.size(), digest.data(), &size, EVP_sha256(), nullptr);
  return {reinterpret_cast<const char*>(digest.data()), size};
}

schema::api_key_record make_key_record(const api_key& key, std::string tenant_id,
                                       schema::api_key_role role, int64_t created_at_ms) {
  schema::api_key_record record;
  record.key_id = key.key_id;
  record.tenant_id = std::move(tenant_id);
  record.secret_sha256 = sha256(key.text());
  record.role = role;
  record.created_at_ms = created_at_ms;
  return record;
}

std::string_view key_id_of(std::string_view text) noexcept {
  constexpr size_t id_chars = key_id_bytes * 2;
  constexpr size_t secret_chars = secret_bytes * 2;
  if (text.size() != key_prefix.size() + id_chars + 1 + secret_chars
      || text.substr(0, key_prefix.size()) != key_prefix
      || text[key_prefix.size() + id_chars] != '_')
    return {};
  return text.substr(key_prefix.size(), id_chars);
}

} // namespace airlock::actors
