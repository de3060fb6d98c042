@0xa0f7f8208762772c;
# The payloads of the messages between the control plane and workers
# (actors/cluster_protocol.hpp). They cross hosts as CAF remote messages whose
# elements are these structs' bytes, so that a control plane and workers of
# different versions still read each other during a rolling upgrade.
# Rule: field ordinals only ever grow (schema/schema.lock pins them).
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("airlock::capnp_schema");
using Common = import "common.capnp";
using Sandbox = import "sandbox.capnp";

struct NodeSandbox {
  schemaVersion @0 :UInt16;
  sandboxId @1 :Text;
  state @2 :Sandbox.SandboxState;
}

struct ExecSpec {
  schemaVersion @0 :UInt16;
  argv @1 :List(Text);          # exactly one of argv and cmd
  cmd @2 :Text;                 # runs /bin/sh -c cmd
  env @3 :List(Common.KeyValue);
  cwd @4 :Text;
  user @5 :Text;
  pty @6 :Bool;
  rows @7 :UInt16;
  cols @8 :UInt16;
  stdinOpen @9 :Bool;
  timeoutS @10 :UInt32;         # 0: none
  # Filled in by the worker before its sandbox actor runs the spec:
  runAs @11 :ProcessUser;       # `user` resolved in the sandbox's /etc/passwd
  reportStartFailure @12 :Bool; # a program that cannot run: a failed process, not an error
  tag @13 :Text;                # the client's name for the process (E2B's tag); may be empty
  requestEnv @14 :List(Common.KeyValue); # the client's env, kept for listings (env is merged)
}

struct ProcessUser {
  setUser @0 :Bool;             # false: as the guest runs (root)
  uid @1 :UInt32;
  gid @2 :UInt32;
  home @3 :Text;                # empty when unknown
}

struct ProcessView {
  schemaVersion @0 :UInt16;
  processId @1 :Text;
  state @2 :Text;               # running | exited
  exitCode @3 :Int32;
  signal @4 :Int32;
  startedAtMs @5 :Int64;
  endedAtMs @6 :Int64;          # 0 while running
  error @7 :Text;               # why it failed to start
  lifecycle @8 :Text;           # starting | running | exited | failed; empty from older workers
  pid @9 :Int32;                # in the sandbox's pid namespace
  stdoutBytes @10 :UInt64;
  stderrBytes @11 :UInt64;
  pty @12 :Bool;
  # What was asked to run (listings show it):
  argv @13 :List(Text);
  cmd @14 :Text;
  cwd @15 :Text;
  env @16 :List(Common.KeyValue); # the client's env only
  tag @17 :Text;
}

struct OutputRequest {
  schemaVersion @0 :UInt16;
  processId @1 :Text;
  offset @2 :UInt64;
  wantStdout @3 :Bool;
  wantStderr @4 :Bool;
  maxBytes @5 :UInt32;          # 0: the worker's default
  waitMs @6 :UInt32;
}

struct OutputSegment {
  schemaVersion @0 :UInt16;     # set only when sent on its own
  fd @1 :UInt8;                 # 1 stdout, 2 stderr
  endOffset @2 :UInt64;
  bytes @3 :Data;
}

struct OutputBatch {
  schemaVersion @0 :UInt16;
  segments @1 :List(OutputSegment);
  nextOffset @2 :UInt64;
  startOffset @3 :UInt64;
  exited @4 :Bool;
  exitCode @5 :Int32;
  signal @6 :Int32;
}

enum FileVerb {
  read @0;
  write @1;
  list @2;
  stat @3;
  mkdir @4;
  remove @5;
  rename @6;
  writeOpen @7;                # a write session: temp file beside the path
  writePart @8;                # appends data to session
  writeCommit @9;              # renames the temp file over the path
  writeAbort @10;              # removes the temp file
}

struct FileSpec {
  schemaVersion @0 :UInt16;
  verb @1 :FileVerb;
  path @2 :Text;
  to @3 :Text;                  # rename target
  data @4 :Data;                # write
  offset @5 :UInt64;
  length @6 :UInt64;            # read; 0: to the end
  mode @7 :UInt32;
  recursive @8 :Bool;
  session @9 :UInt64;           # writePart, writeCommit, writeAbort
}

struct FileEntry {
  schemaVersion @0 :UInt16;     # set only when sent on its own
  name @1 :Text;
  type @2 :Text;                # file | dir | symlink | other
  sizeBytes @3 :UInt64;
  mode @4 :UInt32;
  modifiedAtMs @5 :Int64;
  uid @6 :UInt32;
  gid @7 :UInt32;
  owner @8 :Text;               # the uid's name in the sandbox, else the uid as text
  group @9 :Text;               # the gid's name in the sandbox, else the gid as text
  symlinkTarget @10 :Text;      # a symlink's target, absolute; empty otherwise
}

struct FileResult {
  schemaVersion @0 :UInt16;
  data @1 :Data;
  written @2 :UInt64;
  entries @3 :List(FileEntry);
  truncated @4 :Bool;
  info @5 :FileEntry;
  session @6 :UInt64;           # writeOpen: the session to write to
}

struct PlacementRequest {
  schemaVersion @0 :UInt16;
  sandboxId @1 :Text;
  templateName @2 :Text;
  needs @3 :Common.Resources;     # limits
  requests @4 :Common.Resources;  # reserved; a zero field takes the worker's default
  snapshotWorker @5 :Text;        # holds the snapshot the sandbox starts from; empty: none
  runtime @6 :Text;               # namespace | microvm; empty: namespace
}

# A template version for a worker to make (template.build).
struct TemplateBuild {
  schemaVersion @0 :UInt16;
  workerName @1 :Text;            # the version's name in the worker's rootfs
  spoolId @2 :Text;               # the uploaded archive (ndspool)
  format @3 :Text;                # oci | docker | tar
  compressedBytesMax @4 :UInt64;
  uncompressedBytesMax @5 :UInt64;
  entriesMax @6 :UInt64;
  pathBytesMax @7 :UInt32;
  startCmd @8 :Text;              # replaces the image's Entrypoint and Cmd when set
  recipeJson @9 :Text;            # format "recipe": the build's from, run steps and defaults
  baseWorkerName @10 :Text;       # format "recipe" from a template: that version's name here
}

# What a built template version holds and defaults to.
struct TemplateBuilt {
  schemaVersion @0 :UInt16;
  digest @1 :Text;
  sizeBytes @2 :UInt64;
  files @3 :UInt64;
  env @4 :List(Common.KeyValue);
  workdir @5 :Text;
  user @6 :Text;
  startCmd @7 :Text;
  logTail @8 :Text;
}

# Where a template build on a worker stands, with a piece of its log.
struct TemplateProgress {
  schemaVersion @0 :UInt16;
  building @1 :Bool;              # false: the build ended (or ran before this worker started)
  step @2 :Text;                  # e.g. "debootstrap", "layer 2/5", "run 3/4"
  percent @3 :Int32;              # of the whole build; -1 = unknown
  bytesDone @4 :UInt64;           # of the step's input read so far
  bytesTotal @5 :UInt64;          # of the step's input; 0 = unknown
  logOffset @6 :UInt64;           # where `log` starts in the whole build log
  log @7 :Text;                   # the log from logOffset (at most a chunk)
  logEnd @8 :UInt64;              # the log's size so far
}

struct RegistrationAck {
  schemaVersion @0 :UInt16;
  workerId @1 :Text;
  tokenPublicKey @2 :Data;      # raw Ed25519 public key
  heartbeatIntervalMs @3 :UInt32;
  egressCaChain @4 :Text;       # PEM: the worker's egress intermediate, then the root
}

struct WorkerView {
  schemaVersion @0 :UInt16;
  registration @1 :Data;        # a WorkerRegistration message (worker.capnp)
  state @2 :Text;               # ready | cordoned | draining | lost
  allocated @3 :Common.Resources;   # as the worker last reported it
  lastHeartbeatAtMs @4 :Int64;
  reserved @5 :Common.Resources;    # placed, not yet released nor in a heartbeat
  sandboxIds @6 :List(Text);        # as the worker last reported them
  limited @7 :Common.Resources;     # sum of its sandboxes' limits, last reported
  used @8 :Common.Resources;        # what they use, last reported
  memoryPressure @9 :Bool;
  pressureReason @10 :Text;
}

# Directory watches (the data plane's /files/watch): open one, read its
# changes (waiting up to waitMs), close it.
enum WatchVerb {
  open @0;
  read @1;
  close @2;
}

struct WatchRequest {
  schemaVersion @0 :UInt16;
  verb @1 :WatchVerb;
  watchId @2 :Text;             # read, close: from open
  path @3 :Text;                # open: an absolute directory
  recursive @4 :Bool;           # open
  waitMs @5 :UInt32;            # read: wait this long for a change
}

struct WatchChange {
  name @0 :Text;                # relative to the watched directory
  kind @1 :Text;                # create | write | remove | rename | chmod
}

struct WatchBatch {
  schemaVersion @0 :UInt16;
  watchId @1 :Text;
  changes @2 :List(WatchChange);
  ended @3 :Bool;               # the watch is over; nothing follows
  errorCode @4 :Text;           # why it ended (errc name); empty: closed
  errorMessage @5 :Text;
}

# A sandbox's resource use as its worker reads it (the data plane's /usage).
struct SandboxUsage {
  schemaVersion @0 :UInt16;
  sampledAtMs @1 :Int64;        # Unix ms of the reading
  cpuUsageNs @2 :UInt64;        # CPU time since the sandbox started
  cpuUsedPct @3 :Float64;       # since the previous reading (or the start)
  memoryBytes @4 :UInt64;
  diskUsedBytes @5 :UInt64;     # what its root filesystem references
  processes @6 :UInt64;
}
