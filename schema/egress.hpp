#pragma once
// Value types of egress control: credentials as a worker's egress
// proxy receives them, and audit records (what the egress proxy decided, which
// credential it used, which lifecycle change happened) and the audit query
// that reads them back. Codecs: schema/egress.capnp.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "schema/errc.hpp"

namespace airlock::schema {

/// How wide a credential applies; the narrowest match wins.
enum class credential_scope : uint8_t { tenant, template_name, sandbox };

/// One credential as the control plane hands it to a worker for one sandbox:
/// the secret already decrypted and rendered into the header value. Lives only
/// in worker memory.
struct credential_grant {
  std::string credential_id;
  std::string name;
  credential_scope scope = credential_scope::tenant;
  std::vector<std::string> hosts;  ///< exact names or "*.suffix"
  std::string header;              ///< e.g. "Authorization"
  std::string value;               ///< e.g. "Bearer sk-..." (the secret inside)
  uint32_t rate_limit_per_min = 0; ///< 0: unlimited
  bool operator==(const credential_grant&) const = default;
};

/// One audit fact. `kind` is one of "egress" (a connection or request
/// decision), "dns" (a resolver answer or refusal), "credential" (a use or a
/// refusal by rate limit) and "lifecycle" (an operation's end).
struct audit_record {
  int64_t at_ms = 0;
  std::string tenant_id;
  std::string sandbox_id;
  std::string kind;
  std::string
    decision; ///< "allowed" | "denied" | "tunnel" (egress) (lifecycle: the operation's state)
  std::string reason; ///< why, in words an operator can act on
  std::string target; ///< host[:port], address, or operation kind
  std::string detail; ///< method and path, credential name, operation id ...
  bool operator==(const audit_record&) const = default;
};

/// What GET /v1/audit asks for: the audit actor's query message and the
/// audit store's filter. Empty strings match anything.
struct audit_query {
  std::string tenant_id; ///< empty: every tenant (admin)
  std::string sandbox_id;
  std::string kind;
  int64_t since_ms = 0; ///< records at or after this time
  size_t limit = 100;   ///< 1..1000 (the API's bounds)
  std::string cursor;   ///< a previous page's next_cursor (opaque hex)
  /// Records examined per call; past it the page ends early with a cursor
  /// so that a narrow filter over a long history stays bounded.
  /// Default: 100000.
  size_t scan_max = 100'000;
};

/// Version written into every egress record; readers refuse newer ones.
inline constexpr uint16_t egress_schema_version = 1;

std::string_view to_string(credential_scope scope) noexcept;
/// "tenant" | "template" | "sandbox".
std::optional<credential_scope> parse_credential_scope(std::string_view text) noexcept;

/// One credential as the control plane stores it (keyspace "credentials").
/// The secret is sealed (crypto/sealed_box.hpp, the id as associated data)
/// and never leaves the control plane in the clear except inside a grant.
struct credential_record {
  std::string id; ///< cred_...
  std::string tenant_id;
  std::string name;
  credential_scope scope = credential_scope::tenant;
  std::string scope_value;         ///< tenant id, template name or sandbox id
  std::vector<std::string> hosts;  ///< exact names or "*.suffix"
  std::string header;              ///< e.g. "Authorization"
  std::string value_template;      ///< contains "{secret}"
  uint32_t rate_limit_per_min = 0; ///< 0: unlimited
  std::string sealed_secret;       ///< nonce(12) || ciphertext || tag(16)
  int64_t created_at_ms = 0;
  bool operator==(const credential_record&) const = default;
};

// Codecs. Decoders fail with corrupt_record (bytes that do not decode) or
// unsupported_version (written by a newer airlock).
std::string encode(const credential_record& x);
result<credential_record> decode_credential(std::string_view bytes);
std::string encode(const credential_grant& x);
result<credential_grant> decode_credential_grant(std::string_view bytes);
std::string encode(const audit_record& x);
result<audit_record> decode_audit_record(std::string_view bytes);

} // namespace airlock::schema
