@0xc2f96fe609c6a50c;
# An operation: one asynchronous lifecycle change, persisted at every step.
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("airlock::capnp_schema");
using Common = import "common.capnp";

enum OperationState {
  pending @0;
  running @1;
  succeeded @2;
  failed @3;
  cancelled @4;
}

struct OperationRecord {
  schemaVersion @0 :UInt16;   # readers refuse versions newer than they know
  id @1 :Text;                # op_...
  kind @2 :Text;              # e.g. sandbox.create
  targetId @3 :Text;          # the resource it changes (sb_..., tpl_..., wk_...)
  tenantId @4 :Text;
  state @5 :OperationState;
  error @6 :Common.ErrorInfo; # set only when state is failed or cancelled
  resultJson @7 :Text;        # set only when state is succeeded
  createdAtMs @8 :Int64;      # unix epoch milliseconds
  updatedAtMs @9 :Int64;
  idempotencyKey @10 :Text;
  paramsJson @11 :Text;       # the operation's input, as the API received it
  step @12 :UInt32;           # index of the step to run next
  stepStarted @13 :Bool;      # step `step` began but its outcome was not recorded
  stepData @14 :Data;         # per-kind progress carried from step to step
  cancelRequested @15 :Bool;
  deadlineMs @16 :Int64;      # unix ms after which the operation fails; 0 = none
  attempts @17 :UInt32;       # how many times the current step was started
  sequence @18 :UInt64;       # transition counter: bumps on every persisted change
  progressJson @19 :Text;     # the last progress a long step reported (JSON object); "" = none
}
