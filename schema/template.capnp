@0xc1442c10f4f52d87;
# A template: a named root filesystem that sandboxes start from, in versions.
# Each build makes a new version; the current one is what a create without a
# version gets.
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("airlock::capnp_schema");
using Common = import "common.capnp";

enum TemplateVersionState {
  building @0;
  ready @1;
  failed @2;
}

struct TemplateVersion {
  version @0 :UInt32;              # 1, 2, ...
  state @1 :TemplateVersionState;
  source @2 :Text;                 # JSON: how it was made ({"builtin"}, {"archive"}, {"template"})
  digest @3 :Text;                 # "sha256:..." of its content's source
  sizeBytes @4 :UInt64;
  files @5 :UInt64;
  buildLogTail @6 :Text;
  env @7 :List(Common.KeyValue);   # defaults; a create's env overrides them
  workdir @8 :Text;
  user @9 :Text;
  startCmd @10 :Text;
  readyCmd @11 :Text;
  defaultRuntime @12 :Text;
  createdAtMs @13 :Int64;
  workerId @14 :Text;              # the worker that holds its files ("": any builds it)
  operationId @15 :Text;           # its build
  error @16 :Common.ErrorInfo;     # set when failed
  workerName @17 :Text;            # its name in the worker's rootfs
}

# A warm pool: sandboxes of the current version kept running, owned by no
# tenant, that a matching create claims instead of starting one.
struct PoolSettings {
  size @0 :UInt32;                 # members kept per worker that can hold the version
  cpuMillis @1 :UInt32;            # members' limits (0: the create defaults)
  memoryMb @2 :UInt32;
  diskMb @3 :UInt32;
}

struct TemplateRecord {
  schemaVersion @0 :UInt16;
  name @1 :Text;
  tenantId @2 :Text;               # "": shared by every tenant (the built-in ones)
  currentVersion @3 :UInt32;       # 0: none ready yet
  versions @4 :List(TemplateVersion);
  createdAtMs @5 :Int64;
  updatedAtMs @6 :Int64;
  pool @7 :PoolSettings;
}
