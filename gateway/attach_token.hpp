#pragma once
// Data-plane tokens: the control plane signs, workers verify.
//
// A worker serves a sandbox's processes and files to whoever holds a token the
// control plane signed for that sandbox; it never sees API keys and holds only
// the public key, so a compromised worker cannot mint tokens for sandboxes on
// other workers. Ed25519 through OpenSSL 3 EVP.
//
// Token text: "v1." + base64url(payload) + "." + base64url(signature), no
// padding. The payload is compact JSON
//   {"tid": tenant, "sid": sandbox, "pid": process or "", "scope": "...", "exp": ms,
//    "aud": worker id}
// and the signature covers the ASCII bytes "v1." + base64url(payload), so the
// version prefix is signed too. Tokens are bearer secrets: never log one.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "schema/errc.hpp"

// OpenSSL's key type, kept out of this header.
struct evp_pkey_st;

namespace airlock::gateway {

/// What a token allows. Scopes: "files", "processes" or "all" (both).
struct token_claims {
  std::string tenant_id;
  std::string sandbox_id;
  std::string process_id;    ///< empty: any process of the sandbox
  std::string scope;         ///< "files" | "processes" | "all"
  int64_t expires_at_ms = 0; ///< Unix time; the token is refused from this instant on
  /// The worker the token is for (the sandbox's worker when it was minted):
  /// another worker refuses it, so a token that leaks from (or is replayed
  /// to) one worker opens nothing on the others.
  std::string audience;
};

/// Frees an EVP_PKEY; lets the classes below hold one in a unique_ptr.
struct evp_pkey_deleter {
  void operator()(evp_pkey_st* key) const noexcept;
};
using evp_pkey_ptr = std::unique_ptr<evp_pkey_st, evp_pkey_deleter>;

/// Mints tokens. Control plane only: the private key never leaves it.
/// Thread-safe after construction (sign() only reads the key). Move-only.
class token_signer {
public:
  /// Loads the Ed25519 private key from `path` (PKCS#8 PEM). When the file
  /// does not exist, generates a key and writes it with mode 0600 (missing
  /// parent directories are created with mode 0700); two processes racing to
  /// create it end up with the same key, since the file appears atomically and
  /// the loser loads the winner's. io_error when the file cannot be read or
  /// written, invalid_argument when it holds no Ed25519 private key, internal
  /// when OpenSSL cannot generate a key.
  static result<token_signer> load_or_create(const std::string& path);

  /// The token text for `claims` ("v1.<base64url payload>.<base64url sig>").
  /// Claims are not validated here: the caller builds them from its own records.
  std::string sign(const token_claims& claims) const;

  /// The raw 32-byte public key, base64url without padding: what workers get.
  std::string public_key() const;

private:
  token_signer(evp_pkey_ptr key, std::string public_key);

  evp_pkey_ptr key_;
  std::string public_key_; ///< raw 32 bytes
};

/// Limits of token_verifier.
struct token_verifier_options {
  /// Longest token text accepted; a longer one is refused before any decoding,
  /// so a client cannot make the verifier allocate or hash much. Default: 4096.
  size_t token_bytes_max = 4096;
  /// This worker's id: a token whose audience differs is refused. Empty: no
  /// audience check (the control plane's own listener, which serves every
  /// worker's sandboxes). Default: empty.
  std::string audience;
};

/// Checks tokens with the control plane's public key. Thread-safe after
/// construction (verify() only reads the key). Move-only.
class token_verifier {
public:
  /// `base64url_raw_key`: what token_signer::public_key() returned.
  /// invalid_argument when it is not base64url of exactly 32 bytes.
  static result<token_verifier> from_public_key(std::string_view base64url_raw_key,
                                                token_verifier_options options = {});

  /// The token's claims when it may be used for `needed_scope` ("files" or
  /// "processes") on sandbox `sandbox_id` at `now_ms`, and, when `process_id`
  /// is not empty, on that process. Fails with a sentence that never quotes the
  /// token:
  /// - unauthenticated: malformed, over token_bytes_max, a signature that does
  ///   not verify (forged, or another key), expired (now_ms >= expires_at_ms),
  ///   issued for another sandbox, or for another worker than the options'
  ///   audience;
  /// - permission_denied: a scope that does not cover `needed_scope` ("all"
  ///   covers both), or a token bound to one process used for another process
  ///   or for a route that names no process (an attach token is not a
  ///   sandbox-wide token).
  result<token_claims> verify(std::string_view token, int64_t now_ms, std::string_view sandbox_id,
                              std::string_view needed_scope,
                              std::string_view process_id = {}) const;

private:
  token_verifier(evp_pkey_ptr key, token_verifier_options options);

  evp_pkey_ptr key_;
  token_verifier_options options_;
};

} // namespace airlock::gateway
