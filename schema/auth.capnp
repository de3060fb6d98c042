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
