@0x8666ba23c4356ff6;
# API keys are stored hashed; the secret is shown once at creation.
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("airlock::capnp_schema");

enum ApiKeyRole {
  tenant @0;
  admin @1;
}

struct ApiKeyRecord {
  schemaVersion @0 :UInt16;
  keyId @1 :Text;             # the public part of the key, also its lookup id
  tenantId @2 :Text;
  secretSha256 @3 :Data;      # SHA-256 of the whole key string
  role @4 :ApiKeyRole;
  createdAtMs @5 :Int64;
  revoked @6 :Bool;
}

# A single-use join token for a worker. Only the MAC key derived from its
# secret is kept (SHA-256 of the secret): the join exchange proves knowledge
# of the secret with an HMAC under that key, so the secret never crosses
# the network.
struct JoinTokenRecord {
  schemaVersion @0 :UInt16;
  tokenId @1 :Text;           # 16 hex digits, the public part of the token
  macKey @2 :Data;            # SHA-256 of the secret
  name @3 :Text;              # the operator's label, may be empty
  createdAtMs @4 :Int64;
  expiresAtMs @5 :Int64;
  usedAtMs @6 :Int64;         # 0 while unused
  usedBy @7 :Text;            # the worker id it admitted
}

# A worker removed from the cluster: its certificate (which names it) is
# refused from then on. Worker ids are never reused.
struct RevokedWorker {
  schemaVersion @0 :UInt16;
  workerId @1 :Text;
  revokedAtMs @2 :Int64;
}
