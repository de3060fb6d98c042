#include "storage/keyspace.hpp"

namespace airlock::storage {

std::string_view to_string(keyspace space) noexcept {
  // These are the on-disk column family names: renaming one orphans its data.
  switch (space) {
    case keyspace::meta: return "meta";
    case keyspace::operations: return "operations";
    case keyspace::active_ops: return "active_ops";
    case keyspace::idempotency_keys: return "idempotency_keys";
    case keyspace::sandboxes: return "sandboxes";
    case keyspace::api_keys: return "api_keys";
    case keyspace::workers: return "workers";
    case keyspace::credentials: return "credentials";
    case keyspace::audit: return "audit";
    case keyspace::snapshots: return "snapshots";
    case keyspace::templates: return "templates";
    case keyspace::join_tokens: return "join_tokens";
    case keyspace::revoked_workers: return "revoked_workers";
  }
  return "unknown";
}

} // namespace airlock::storage
