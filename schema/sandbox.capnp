@0xc8262bd6073c57b5;
# A sandbox: its spec as the API accepted it and its lifecycle state.
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("airlock::capnp_schema");
using Common = import "common.capnp";

enum SandboxState {
  creating @0;
  running @1;
  pausing @2;
  paused @3;
  resuming @4;
  suspending @5;
  suspended @6;
  restoring @7;
  destroying @8;
  destroyed @9;
  error @10;
}

enum EgressProfile {
  none @0;
  allowlist @1;
  open @2;
}

struct EgressPolicy {
  profile @0 :EgressProfile;
  allow @1 :List(Text);       # exact names or "*." wildcards, optional ":port"
}

# What happens to a sandbox idle for idleTimeoutS.
enum IdleAction {
  suspend @0;
  delete @1;
}

struct SandboxSpec {
  template @0 :Text;
  cpuMillis @1 :UInt32;
  memoryMb @2 :UInt32;
  diskMb @3 :UInt32;
  env @4 :List(Common.KeyValue);
  metadata @5 :List(Common.KeyValue);
  idleTimeoutS @6 :UInt32;
  egress @7 :EgressPolicy;
  fromCheckpoint @8 :Text;
  # What placement reserves (the fields above are limits); 0: the worker's default.
  cpuRequestMillis @9 :UInt32;
  memoryRequestMb @10 :UInt32;
  diskRequestMb @11 :UInt32;
  onIdle @12 :IdleAction;
  maxLifetimeS @13 :UInt32;            # 0: none; counts running time only
  checkpointIntervalS @14 :UInt32;     # 0: no automatic checkpoints
  checkpointsMax @15 :UInt32 = 20;     # automatic checkpoints kept
  templateVersion @16 :UInt32;         # 0: a template without versions
  templateWorkerName @17 :Text;        # its name in the worker's rootfs ("": template)
  templateWorkerId @18 :Text;          # the worker holding that version ("": any)
  fromPool @19 :Bool;                  # the create claims the warm pool member of its id
}

struct SandboxRecord {
  schemaVersion @0 :UInt16;
  id @1 :Text;                # sb_...
  tenantId @2 :Text;
  state @3 :SandboxState;
  spec @4 :SandboxSpec;
  workerId @5 :Text;
  dataUrl @6 :Text;
  errorReason @7 :Common.ErrorInfo;
  createdAtMs @8 :Int64;
  updatedAtMs @9 :Int64;
  lastActiveAtMs @10 :Int64;
  lastOperationId @11 :Text;
  snapshotId @12 :Text;       # the suspend snapshot while suspended
  # Running time before the current stretch (paused and suspended time do
  # not count against maxLifetimeS), and when the current stretch began (0:
  # not running).
  lifetimeUsedMs @13 :Int64;
  runningSinceMs @14 :Int64;
}

enum SnapshotKind {
  checkpoint @0;
  suspend @1;
}

# A frozen copy of a sandbox's files (and, in the microvm runtime, memory).
# Restorable or forkable only once `complete`: every byte has landed.
struct SnapshotRecord {
  schemaVersion @0 :UInt16;
  id @1 :Text;                # ckpt_...
  kind @2 :SnapshotKind;
  sandboxId @3 :Text;
  tenantId @4 :Text;
  template @5 :Text;
  templateVersion @6 :Text;
  runtime @7 :Text;
  workerId @8 :Text;          # the worker that holds it
  memoryPersisted @9 :Bool;
  sizeBytes @10 :UInt64;
  label @11 :Text;
  automatic @12 :Bool;
  createdAtMs @13 :Int64;
  complete @14 :Bool;
}
