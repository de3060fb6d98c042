#pragma once
// Join tokens: how a new worker proves the operator admitted it, and how it
// knows the control plane it joins is the right one (kubeadm's bootstrap
// token plus discovery CA hash, in one string).
//
// Text: "alj_" + token id (16 hex digits) + "_" + secret (64 hex digits) +
// "_" + the control-plane CA's public-key SHA-256 (64 hex digits).
//
// The secret never crosses the network: the join request and its answer each
// carry an HMAC-SHA256 keyed with SHA-256(secret), which is all the control
// plane keeps. Whoever sees the exchange learns neither the secret nor a way
// to redeem the token, and a forged answer fails the worker's check. A token
// is redeemed once (the record says when and by whom) and expires.

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "actors/clock.hpp"
#include "schema/auth.hpp"
#include "schema/errc.hpp"
#include "storage/kv_store.hpp"

namespace airlock::actors {

inline constexpr int64_t join_token_ttl_default_s = 3600;
inline constexpr int64_t join_token_ttl_min_s = 60;
inline constexpr int64_t join_token_ttl_max_s = 7 * 24 * 3600;
inline constexpr size_t join_token_name_max = 64;

struct join_token {
  std::string token_id;   ///< 16 hex digits
  std::string secret_hex; ///< 64 hex digits
  std::string ca_sha256;  ///< 64 hex digits: the pinned control-plane CA key's hash

  std::string text() const;
  /// SHA-256 of the secret: the MAC key both sides use.
  std::string mac_key() const;
};

/// Reads a token's text; invalid_argument with a sentence for any other shape.
result<join_token> parse_join_token(std::string_view text);

/// Lower-case hex HMAC-SHA256 under `mac_key` of `parts`, each preceded by
/// its length so that no two lists of parts sign alike.
std::string join_mac(std::string_view mac_key, std::initializer_list<std::string_view> parts);

/// Constant-time equality of two MACs (hex text).
bool join_mac_equal(std::string_view a, std::string_view b) noexcept;

/// The MAC of a join request: it binds the token id, the certificate
/// signing request and the worker's chosen name.
std::string join_request_mac(std::string_view mac_key, std::string_view token_id,
                             std::string_view csr_pem, std::string_view name);

/// The MAC of a join's answer: the worker id given, the certificate, both
/// CA certificates and the cluster port, so a forged answer cannot swap any.
std::string join_answer_mac(std::string_view mac_key, std::string_view worker_id,
                            std::string_view certificate_pem, std::string_view worker_ca_pem,
                            std::string_view control_ca_pem, uint16_t cluster_port);

/// The control plane's join tokens in its store. Thread-safe; blocking (a
/// synced write per change): call it from a request thread, never from an
/// event-based actor.
class join_token_book {
public:
  join_token_book(storage::kv_store& store, const wall_clock& clock)
      : store_(store), clock_(clock) {}

  /// A new token for `name` (at most join_token_name_max printable
  /// characters) living `ttl_s` seconds, pinning `ca_sha256_hex`.
  /// invalid_argument for a name or lifetime out of bounds.
  result<std::pair<join_token, schema::join_token_record>> create(std::string name, int64_t ttl_s,
                                                                  std::string ca_sha256_hex);

  /// Redeems `token_id` for `worker_id` when `request_mac` is
  /// join_request_mac of `csr_pem` and `name` under its key; returns the key,
  /// to sign the answer.
  /// unauthenticated (the same sentence for an unknown id and a wrong MAC)
  /// or, with a valid MAC, permission_denied for a used or expired token.
  /// A wrong MAC changes nothing.
  result<std::string> redeem(std::string_view token_id, std::string_view request_mac,
                             std::string_view csr_pem, std::string_view name,
                             std::string_view worker_id);

private:
  storage::kv_store& store_;
  const wall_clock& clock_;
  std::mutex mutex_; ///< one redemption at a time: a token admits one worker
};

/// Removed workers, whose certificates (which name them) the control plane
/// refuses. Loaded whole at construction (a fleet's removals are few);
/// thread-safe: revoke blocks on a synced write, is_revoked never blocks on
/// the store.
class revocation_list {
public:
  /// Reads every revocation of `store`; corrupt_record or io_error.
  static result<std::unique_ptr<revocation_list>> load(storage::kv_store& store,
                                                       const wall_clock& clock);

  /// Revokes `worker_id` for good (idempotent).
  status revoke(const std::string& worker_id);
  bool is_revoked(const std::string& worker_id) const;

private:
  revocation_list(storage::kv_store& store, const wall_clock& clock)
      : store_(store), clock_(clock) {}

  storage::kv_store& store_;
  const wall_clock& clock_;
  mutable std::mutex mutex_;
  std::set<std::string, std::less<>> revoked_;
};

} // namespace airlock::actors
