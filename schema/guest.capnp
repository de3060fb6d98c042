@0xf5dc01b59413bf70;
# The host <-> guest channel: one stream socket between the worker and
# airlock-guest (PID 1 inside a sandbox). Each message is one HostToGuest or
# GuestToHost envelope, serialized flat and sent in a length-prefixed frame
# (guest/frame.hpp). Processes and file transfers are multiplexed by id.
# Rule: field ordinals only ever grow; union members are only ever added.
# docs/guest-protocol.md describes the rules (ids, flow control, limits).
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("airlock::capnp_schema");
using Common = import "common.capnp";

# ---- host -> guest --------------------------------------------------------

struct GuestStart {
  streamId @0 :UInt32;           # chosen by the host, nonzero, unique among open streams
  argv @1 :List(Text);           # argv[0] is searched in PATH when it has no '/'
  shell @2 :Text;                # non-empty: run /bin/sh -c shell instead of argv
  env @3 :List(Common.KeyValue); # the whole environment; nothing is inherited
  cwd @4 :Text;                  # absolute; empty means /
  setUser @5 :Bool;              # false: run as the agent's own user
  uid @6 :UInt32;
  gid @7 :UInt32;
  pty @8 :Bool;                  # stdout and stderr share one terminal (fd 1)
  rows @9 :UInt16;
  cols @10 :UInt16;
  stdin @11 :Bool;               # false: stdin is /dev/null
  windowBytes @12 :UInt32;       # output credit window; 0 = the guest's default
}

struct GuestStdin {
  streamId @0 :UInt32;
  bytes @1 :Data;                # counts against the stdin credit window
}

struct GuestCloseStdin {
  streamId @0 :UInt32;
}

struct GuestSignal {
  streamId @0 :UInt32;
  signo @1 :Int32;
  group @2 :Bool;                # signal the whole process group
}

struct GuestResize {
  streamId @0 :UInt32;
  rows @1 :UInt16;
  cols @2 :UInt16;
}

struct GuestCredit {
  streamId @0 :UInt32;
  bytes @1 :UInt32;              # more bytes the receiver may now send on this stream
}

struct GuestFileRead {
  requestId @0 :UInt32;
  path @1 :Text;
  offset @2 :UInt64;
  length @3 :UInt64;             # 0 = to the end of the file
}

struct GuestWriteBegin {
  requestId @0 :UInt32;
  path @1 :Text;
  mode @2 :UInt32;               # permission bits; 0 = 0644
  createParents @3 :Bool;
}

struct GuestWriteChunk {
  requestId @0 :UInt32;
  bytes @1 :Data;
}

struct GuestWriteEnd {
  requestId @0 :UInt32;
  abort @1 :Bool;                # true: discard the temporary file
}

struct GuestListDir {
  requestId @0 :UInt32;
  path @1 :Text;
}

struct GuestStat {
  requestId @0 :UInt32;
  path @1 :Text;
  followSymlinks @2 :Bool;
}

struct GuestMkdir {
  requestId @0 :UInt32;
  path @1 :Text;
  mode @2 :UInt32;               # 0 = 0755
  parents @3 :Bool;              # mkdir -p: create ancestors, succeed if present
}

struct GuestRemove {
  requestId @0 :UInt32;
  path @1 :Text;
  recursive @2 :Bool;
}

struct GuestRename {
  requestId @0 :UInt32;
  from @1 :Text;
  to @2 :Text;
}

struct GuestPing {
  nonce @0 :UInt64;
}

struct GuestStatsRequest {
  requestId @0 :UInt32;
}

struct GuestWatchStart {
  watchId @0 :UInt32;            # chosen by the host, nonzero, unique among open watches
  path @1 :Text;                 # absolute; must be a directory
  recursive @2 :Bool;            # also every subdirectory, now and as they are created
}

struct GuestWatchStop {
  watchId @0 :UInt32;            # unknown ids are ignored (idempotent)
}

# After a VM is restored from a memory snapshot (or cloned from a base one)
# its kernel's random state and clock are the snapshot's: every clone would
# draw the same random numbers. The host hands over fresh entropy and its
# wall clock; the agent credits the entropy (RNDADDENTROPY), reseeds the CRNG
# (RNDRESEEDCRNG), sets CLOCK_REALTIME and, when given, the hostname and
# eth0's address and route (a restored VM's network is a new slot's), then
# answers `refreshed` and a fresh `hello` (the worker's session after a
# restore is a new one: the agent's first hello went to the old socket).
struct GuestRefresh {
  requestId @0 :UInt32;
  entropy @1 :Data;              # credited as entropy; at most 4096 bytes
  realtimeNs @2 :Int64;          # the host's CLOCK_REALTIME; 0: leave the clock
  hostname @3 :Text;             # "": keep the current one
  network @4 :Text;              # eth0's new "ADDRESS/PREFIX,GATEWAY"; "": keep
}

struct HostToGuest {
  schemaVersion @0 :UInt16;      # the sender's protocol version
  union {
    start @1 :GuestStart;
    stdin @2 :GuestStdin;
    closeStdin @3 :GuestCloseStdin;
    signal @4 :GuestSignal;
    resize @5 :GuestResize;
    credit @6 :GuestCredit;
    fileRead @7 :GuestFileRead;
    writeBegin @8 :GuestWriteBegin;
    writeChunk @9 :GuestWriteChunk;
    writeEnd @10 :GuestWriteEnd;
    listDir @11 :GuestListDir;
    stat @12 :GuestStat;
    mkdir @13 :GuestMkdir;
    remove @14 :GuestRemove;
    rename @15 :GuestRename;
    ping @16 :GuestPing;
    stats @17 :GuestStatsRequest;
    watchStart @18 :GuestWatchStart;
    watchStop @19 :GuestWatchStop;
    refresh @20 :GuestRefresh;
  }
}

# ---- guest -> host --------------------------------------------------------

struct GuestLimits {
  frameBytesMax @0 :UInt32;
  streamsMax @1 :UInt32;
  processesMax @2 :UInt32;
  pathBytesMax @3 :UInt32;
  fileChunkBytes @4 :UInt32;
  outputChunkBytes @5 :UInt32;
  windowBytes @6 :UInt32;        # default output window per process
  windowBytesMax @7 :UInt32;     # largest window a start may ask for
  stdinWindowBytes @8 :UInt32;   # stdin credit per process the host starts with
  listEntriesMax @9 :UInt32;
}

struct GuestHello {
  protocolVersion @0 :UInt16;
  limits @1 :GuestLimits;
  pid @2 :Int32;                 # 1 inside a sandbox
  agentVersion @3 :Text;
}

struct GuestStarted {
  streamId @0 :UInt32;
  pid @1 :Int32;
  ptyPath @2 :Text;
}

struct GuestOutput {
  streamId @0 :UInt32;
  fd @1 :UInt8;                  # 1 or 2
  sequence @2 :UInt64;           # per stream, both fds, from 0, no gaps
  offset @3 :UInt64;             # byte offset of bytes within this fd's output
  bytes @4 :Data;
}

struct GuestExited {
  streamId @0 :UInt32;
  exitCode @1 :Int32;            # -1 when killed by a signal
  signal @2 :Int32;              # 0 unless killed by a signal
  stdoutBytes @3 :UInt64;
  stderrBytes @4 :UInt64;
  bufferedBytesMax @5 :UInt64;   # most output bytes the guest held for this stream at once
}

enum GuestFileType {
  other @0;
  regular @1;
  directory @2;
  symlink @3;
}

struct GuestFileInfo {
  name @0 :Text;                 # the last path component
  type @1 :GuestFileType;
  size @2 :UInt64;
  mode @3 :UInt32;               # permission bits
  uid @4 :UInt32;
  gid @5 :UInt32;
  mtimeNs @6 :Int64;
  owner @7 :Text;                # the uid's name in the sandbox's /etc/passwd; empty: not looked up
  group @8 :Text;                # the gid's name in its /etc/group; empty: not looked up
  symlinkTarget @9 :Text;        # a symlink's target, absolute; empty otherwise
}

struct GuestFileData {
  requestId @0 :UInt32;
  offset @1 :UInt64;
  bytes @2 :Data;
  eof @3 :Bool;                  # the last chunk of this read
}

struct GuestFileStat {
  requestId @0 :UInt32;
  info @1 :GuestFileInfo;
}

struct GuestFileList {
  requestId @0 :UInt32;
  entries @1 :List(GuestFileInfo);
  truncated @2 :Bool;            # more entries than listEntriesMax or one frame holds
}

struct GuestFileDone {
  requestId @0 :UInt32;
  bytes @1 :UInt64;              # bytes written, for writes
}

struct GuestError {
  streamId @0 :UInt32;           # 0 when about a request or the channel
  requestId @1 :UInt32;          # 0 when about a stream or the channel
  code @2 :Text;                 # airlock::errc in snake_case
  message @3 :Text;
  ended @4 :Bool;                # no further message will carry this id
  watchId @5 :UInt32;            # 0 unless about a watch
}

struct GuestPong {
  nonce @0 :UInt64;
}

struct GuestStats {
  requestId @0 :UInt32;
  processesStarted @1 :UInt64;
  processesRunning @2 :UInt32;
  reapedTotal @3 :UInt64;        # every child reaped, including orphans
  orphansReaped @4 :UInt64;      # reaped children the agent did not start
  openStreams @5 :UInt32;
  outboundBytes @6 :UInt64;
  outboundBytesMax @7 :UInt64;
  streamBufferedBytesMax @8 :UInt64;
  framesReceived @9 :UInt64;
  framesSent @10 :UInt64;
}

struct GuestWatchStarted {
  watchId @0 :UInt32;
  directories @1 :UInt32;        # directories watched (1 unless recursive)
}

enum GuestWatchKind {
  create @0;                     # IN_CREATE, IN_MOVED_TO
  write @1;                      # IN_MODIFY
  remove @2;                     # IN_DELETE
  rename @3;                     # IN_MOVED_FROM
  chmod @4;                      # IN_ATTRIB
}

struct GuestWatchEvent {
  name @0 :Text;                 # relative to the watched directory (sub/f.txt)
  kind @1 :GuestWatchKind;
}

struct GuestWatchEvents {
  watchId @0 :UInt32;
  events @1 :List(GuestWatchEvent);
}

struct GuestRefreshed {
  requestId @0 :UInt32;
  clockStepNs @1 :Int64;         # how far CLOCK_REALTIME moved (the snapshot's age, roughly)
  streamIdMax @2 :UInt32;        # highest stream id still open (processes started before the snapshot)
}

struct GuestToHost {
  schemaVersion @0 :UInt16;
  union {
    hello @1 :GuestHello;
    started @2 :GuestStarted;
    output @3 :GuestOutput;
    exited @4 :GuestExited;
    stdinCredit @5 :GuestCredit;
    fileData @6 :GuestFileData;
    fileStat @7 :GuestFileStat;
    fileList @8 :GuestFileList;
    fileDone @9 :GuestFileDone;
    error @10 :GuestError;
    pong @11 :GuestPong;
    stats @12 :GuestStats;
    watchStarted @13 :GuestWatchStarted;
    watchEvents @14 :GuestWatchEvents;
    refreshed @15 :GuestRefreshed;
  }
}
