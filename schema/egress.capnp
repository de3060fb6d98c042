@0xec77459f2bdc302e;
# Egress control: credentials as the control plane stores them, the
# grants a worker's egress proxy receives, and audit records.
# Rule: field ordinals only ever grow (schema/schema.lock pins them).
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("airlock::capnp_schema");

enum CredentialScope {
  tenant @0;
  template @1;
  sandbox @2;
}

# One stored credential (keyspace "credentials", key = its id). The secret is
# sealed (AES-256-GCM under the data directory's master key, the id as
# associated data); it is never stored or sent in the clear.
struct Credential {
  schemaVersion @0 :UInt16;
  id @1 :Text;                  # cred_...
  tenantId @2 :Text;
  name @3 :Text;
  scopeKind @4 :CredentialScope;
  scopeValue @5 :Text;          # tenant id, template name or sandbox id
  hosts @6 :List(Text);         # exact names or "*.suffix"
  header @7 :Text;              # e.g. Authorization
  valueTemplate @8 :Text;       # contains "{secret}"
  rateLimitPerMin @9 :UInt32;   # 0: unlimited
  sealedSecret @10 :Data;       # nonce(12) || ciphertext || tag(16)
  createdAtMs @11 :Int64;
}

# A credential as a worker's egress proxy receives it over the cluster link: the
# secret rendered into the header value. Kept only in worker memory.
struct CredentialGrant {
  schemaVersion @0 :UInt16;
  credentialId @1 :Text;
  name @2 :Text;
  scope @3 :CredentialScope;
  hosts @4 :List(Text);
  header @5 :Text;
  value @6 :Text;
  rateLimitPerMin @7 :UInt32;
}

struct AuditRecord {
  schemaVersion @0 :UInt16;
  atMs @1 :Int64;
  tenantId @2 :Text;
  sandboxId @3 :Text;
  kind @4 :Text;                # egress | dns | credential | lifecycle
  decision @5 :Text;
  reason @6 :Text;
  target @7 :Text;
  detail @8 :Text;
}
