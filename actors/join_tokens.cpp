#include "actors/join_tokens.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>

#include "actors/api_keys.hpp"
#include "schema/hex.hpp"

namespace airlock::actors {

namespace {

constexpr std::string_view token_prefix = "alj_";
constexpr size_t id_digits = 16;
constexpr size_t secret_digits = 64;
constexpr size_t fingerprint_digits = 64;

bool all_hex(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool printable(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
}

status not_valid() {
  return make_status(errc::unauthenticated,
                     "the join token is not valid for this control plane; create one with "
                     "`airlockd token create` on it");
}

} // namespace

std::string join_token::text() const {
  return std::string(token_prefix) + token_id + "_" + secret_hex + "_" + ca_sha256;
}

std::string join_token::mac_key() const { return sha256(secret_hex); }

result<join_token> parse_join_token(std::string_view text) {
  const size_t length =
    token_prefix.size() + id_digits + 1 + secret_digits + 1 + fingerprint_digits;
  auto shape = [] {
    return make_status(errc::invalid_argument,
                       "a join token reads alj_<16 hex digits>_<64 hex digits>_<64 hex digits>, "
                       "as `airlockd token create` prints it");
  };
  if (text.size() != length || text.substr(0, token_prefix.size()) != token_prefix)
    return shape();
  join_token token;
  size_t at = token_prefix.size();
  token.token_id = std::string(text.substr(at, id_digits));
  at += id_digits;
  if (text[at++] != '_')
    return shape();
  token.secret_hex = std::string(text.substr(at, secret_digits));
  at += secret_digits;
  if (text[at++] != '_')
    return shape();
  token.ca_sha256 = std::string(text.substr(at, fingerprint_digits));
  if (!all_hex(token.token_id) || !all_hex(token.secret_hex) || !all_hex(token.ca_sha256))
    return shape();
  return token;
}

std::string join_mac(std::string_view mac_key, std::initializer_list<std::string_view> parts) {
  std::string message;
  for (auto part : parts) {
    message += std::to_string(part.size());
    message += ':';
    message += part;
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(EVP_sha256(), mac_key.data(), static_cast<int>(mac_key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest, &size);
  return schema::to_hex(std::string_view(reinterpret_cast<const char*>(digest), size));
}

bool join_mac_equal(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string join_request_mac(std::string_view mac_key, std::string_view token_id,
                             std::string_view csr_pem, std::string_view name) {
  return join_mac(mac_key, {"airlock join request", token_id, csr_pem, name});
}

std::string join_answer_mac(std::string_view mac_key, std::string_view worker_id,
                            std::string_view certificate_pem, std::string_view worker_ca_pem,
                            std::string_view control_ca_pem, uint16_t cluster_port) {
  const std::string port = std::to_string(cluster_port);
  return join_mac(mac_key, {"airlock join answer", worker_id, certificate_pem, worker_ca_pem,
                            control_ca_pem, port});
}

result<std::pair<join_token, schema::join_token_record>>
join_token_book::create(std::string name, int64_t ttl_s, std::string ca_sha256_hex) {
  if (name.size() > join_token_name_max || !printable(name))
    return make_status(errc::invalid_argument, "a join token's name has at most "
                                                 + std::to_string(join_token_name_max)
                                                 + " printable ASCII characters");
  if (ttl_s < join_token_ttl_min_s || ttl_s > join_token_ttl_max_s)
    return make_status(errc::invalid_argument,
                       "a join token lives " + std::to_string(join_token_ttl_min_s) + " to "
                         + std::to_string(join_token_ttl_max_s) + " seconds");
  if (ca_sha256_hex.size() != fingerprint_digits || !all_hex(ca_sha256_hex))
    return make_status(errc::invalid_argument, "the CA fingerprint is not 64 hex digits");
  auto id = random_hex(id_digits / 2);
  if (!id)
    return id.error();
  auto secret = random_hex(secret_digits / 2);
  if (!secret)
    return secret.error();
  join_token token{std::move(*id), std::move(*secret), std::move(ca_sha256_hex)};
  schema::join_token_record record;
  record.token_id = token.token_id;
  record.mac_key = token.mac_key();
  record.name = std::move(name);
  record.created_at_ms = clock_.now_ms();
  record.expires_at_ms = record.created_at_ms + ttl_s * 1000;
  if (auto saved =
        store_.put(storage::keyspace::join_tokens, record.token_id, schema::encode(record));
      !saved)
    return saved;
  return std::pair{std::move(token), std::move(record)};
}

result<std::string> join_token_book::redeem(std::string_view token_id, std::string_view request_mac,
                                            std::string_view csr_pem, std::string_view name,
                                            std::string_view worker_id) {
  if (token_id.size() != id_digits || !all_hex(token_id))
    return not_valid();
  std::lock_guard lock(mutex_);
  auto stored = store_.get(storage::keyspace::join_tokens, token_id);
  if (!stored)
    return stored.error();
  if (!stored->has_value())
    return not_valid();
  auto record = schema::decode_join_token(**stored);
  if (!record)
    return record.error();
  if (!join_mac_equal(join_request_mac(record->mac_key, token_id, csr_pem, name), request_mac))
    return not_valid();
  const int64_t now = clock_.now_ms();
  if (record->used_at_ms != 0)
    return make_status(errc::permission_denied,
                       "the join token was used already (by " + record->used_by
                         + "); a token admits one worker: create another with `airlockd token "
                           "create`");
  if (now >= record->expires_at_ms)
    return make_status(errc::permission_denied,
                       "the join token has expired; create another with `airlockd token create`");
  record->used_at_ms = now;
  record->used_by = std::string(worker_id);
  if (auto saved =
        store_.put(storage::keyspace::join_tokens, record->token_id, schema::encode(*record));
      !saved)
    return saved;
  return record->mac_key;
}

result<std::unique_ptr<revocation_list>> revocation_list::load(storage::kv_store& store,
                                                               const wall_clock& clock) {
  std::unique_ptr<revocation_list> list(new revocation_list(store, clock));
  status failed = status::ok();
  auto scanned = store.scan(storage::keyspace::revoked_workers, "", "",
                            [&](std::string_view, std::string_view value) {
                              auto record = schema::decode_revoked_worker(value);
                              if (!record) {
                                failed = record.error();
                                return false;
                              }
                              list->revoked_.insert(record->worker_id);
                              return true;
                            });
  if (!scanned)
    return scanned;
  if (!failed)
    return failed;
  return list;
}

status revocation_list::revoke(const std::string& worker_id) {
  schema::revoked_worker_record record{worker_id, clock_.now_ms()};
  if (auto saved =
        store_.put(storage::keyspace::revoked_workers, worker_id, schema::encode(record));
      !saved)
    return saved;
  std::lock_guard lock(mutex_);
  revoked_.insert(worker_id);
  return status::ok();
}

bool revocation_list::is_revoked(const std::string& worker_id) const {
  std::lock_guard lock(mutex_);
  return revoked_.count(worker_id) != 0;
}

} // namespace airlock::actors
