@0x99cfbe7e27f6cf1f;
# What a worker tells the control plane: who it is, then a heartbeat at an interval.
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("airlock::capnp_schema");
using Common = import "common.capnp";

struct WorkerRegistration {
  schemaVersion @0 :UInt16;
  id @1 :Text;                # wk_...
  name @2 :Text;
  clusterAddress @3 :Text;    # host:port of its CAF endpoint
  dataUrl @4 :Text;           # where clients reach its data plane
  capacity @5 :Common.Resources;
  runtimes @6 :List(Text);    # namespace, microvm
  version @7 :Text;
  startedAtMs @8 :Int64;
  egressCaPublicKey @9 :Text;  # PEM: the key its egress intermediate CA is issued for
  defaultRequest @10 :Common.Resources;  # reserved for a sandbox that names no request
  memoryLimitPercent @11 :UInt32;        # sum of memory limits allowed, % of capacity
  certificate @12 :Text;       # PEM: its cluster certificate, naming `id`
  proof @13 :Text;             # hex signature by that certificate's key (docs/cluster.md)
  sessionSecret @14 :Text;     # hex: what the control plane's calls to its node gate carry
}

struct WorkerHeartbeat {
  schemaVersion @0 :UInt16;
  workerId @1 :Text;
  sequence @2 :UInt64;        # grows by one per heartbeat; gaps mean lost beats
  sentAtMs @3 :Int64;
  allocated @4 :Common.Resources;
  sandboxIds @5 :List(Text);  # what it actually runs, for reconciliation
  loadMilli @6 :UInt32;       # 1-minute load average x 1000
  # allocated above is what its sandboxes requested; these are their limits and
  # what they use now (cpu: millicores over the last interval).
  limited @7 :Common.Resources;
  used @8 :Common.Resources;
  memoryPressure @9 :Bool;    # refusing placements until the host recovers
  pressureReason @10 :Text;
}
