@0xbca2fcec614812fa;
# Types shared by every stored and sent airlock record.
# Rule: field ordinals only ever grow. schema/schema.lock pins every field;
# tests/schema fails when one is renumbered, retyped or removed.
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("airlock::capnp_schema");

struct ErrorInfo {
  code @0 :Text;      # snake_case, as in the HTTP API
  message @1 :Text;   # a human sentence that says what to do next
}

struct KeyValue {
  key @0 :Text;
  value @1 :Text;
}

struct Resources {
  cpuMillis @0 :UInt32;
  memoryMb @1 :UInt32;
  diskMb @2 :UInt32;
  sandboxes @3 :UInt32;
}
