#pragma once
// Value types of issue 5's egress control: credentials as a worker's egress
// gateway receives them, and audit records (what the gateway decided, which
// credential it used, which lifecycle change happened). Codecs: schema/egress.capnp.

#include <cstdint>
#include <string>
#include <vector>

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
  std::vector<std::string> hosts; ///< exact names or "*.suffix"
  std::string header;             ///< e.g. "Authorization"
  std::string value;              ///< e.g. "Bearer sk-..." (the secret inside)
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
  std::string decision; ///< "allowed" | "denied" (lifecycle: the operation's state)
  std::string reason;   ///< why, in words an operator can act on
  std::string target;   ///< host[:port], address, or operation kind
  std::string detail;   ///< method and path, credential name, operation id ...
  bool operator==(const audit_record&) const = default;
};

} // namespace airlock::schema
