// Codecs of the directory-watch messages of the cluster protocol
// (schema/cluster.hpp); the rest are in cluster.cpp.

#include "schema/capnp_codec.hpp"
#include "schema/cluster.capnp.h"
#include "schema/cluster.hpp"

namespace airlock::schema {

namespace {

namespace cs = airlock::capnp_schema;

} // namespace

std::string encode(const watch_request& x) {
  return detail::to_bytes<cs::WatchRequest>([&x](cs::WatchRequest::Builder b) {
    b.setSchemaVersion(cluster_schema_version);
    b.setVerb(static_cast<cs::WatchVerb>(x.verb));
    b.setWatchId(x.watch_id);
    b.setPath(x.path);
    b.setRecursive(x.recursive);
    b.setWaitMs(x.wait_ms);
  });
}

result<watch_request> decode_watch_request(std::string_view bytes) {
  return detail::from_bytes<cs::WatchRequest, watch_request>(
    bytes, cluster_schema_version, "watch request",
    [](cs::WatchRequest::Reader b) -> result<watch_request> {
      if (!detail::enum_in_range(b.getVerb(), cs::WatchVerb::CLOSE))
        return detail::enum_too_new("watch request");
      watch_request x;
      x.verb = static_cast<watch_verb>(b.getVerb());
      x.watch_id = detail::text(b.getWatchId());
      x.path = detail::text(b.getPath());
      x.recursive = b.getRecursive();
      x.wait_ms = b.getWaitMs();
      return x;
    });
}

std::string encode(const watch_batch& x) {
  return detail::to_bytes<cs::WatchBatch>([&x](cs::WatchBatch::Builder b) {
    b.setSchemaVersion(cluster_schema_version);
    b.setWatchId(x.watch_id);
    auto changes = b.initChanges(detail::count(x.changes.size()));
    for (unsigned i = 0; i < x.changes.size(); ++i) {
      changes[i].setName(x.changes[i].name);
      changes[i].setKind(x.changes[i].kind);
    }
    b.setEnded(x.ended);
    b.setErrorCode(x.error_code);
    b.setErrorMessage(x.error_message);
  });
}

result<watch_batch> decode_watch_batch(std::string_view bytes) {
  return detail::from_bytes<cs::WatchBatch, watch_batch>(
    bytes, cluster_schema_version, "watch batch",
    [](cs::WatchBatch::Reader b) -> result<watch_batch> {
      watch_batch x;
      x.watch_id = detail::text(b.getWatchId());
      x.changes.reserve(b.getChanges().size());
      for (auto change : b.getChanges())
        x.changes.push_back({detail::text(change.getName()), detail::text(change.getKind())});
      x.ended = b.getEnded();
      x.error_code = detail::text(b.getErrorCode());
      x.error_message = detail::text(b.getErrorMessage());
      return x;
    });
}

} // namespace airlock::schema
