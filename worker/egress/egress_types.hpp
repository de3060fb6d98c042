#pragma once
// The egress proxy's seams: who a connection belongs to, where audit
// records go, where credentials come from and how names resolve. The worker
// implements the sinks and sources over the cluster link; tests use doubles.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "schema/egress.hpp"
#include "schema/errc.hpp"
#include "schema/sandbox.hpp"

namespace airlock::worker::egress {

/// What the egress proxy knows of one sandbox, keyed by its (unspoofable) IPv4
/// source address.
struct sandbox_view {
  std::string sandbox_id;
  std::string tenant_id;
  std::string template_name;
  std::string address; ///< the sandbox's IPv4 address, dotted
  schema::egress_policy policy;
};

/// Receives audit records. Must not block: implementations queue.
class audit_sink {
public:
  virtual ~audit_sink() = default;
  virtual void record(schema::audit_record record) = 0;
};

/// Credentials that apply to one sandbox. `done` may run on any thread.
class credential_source {
public:
  virtual ~credential_source() = default;
  using grants = std::vector<schema::credential_grant>;
  virtual void fetch(const sandbox_view& sandbox, std::function<void(result<grants>)> done) = 0;
};

/// Resolves a name to IPv4 addresses (host byte order). May block: the
/// egress proxy calls it off its network threads.
class name_resolver {
public:
  virtual ~name_resolver() = default;
  virtual result<std::vector<uint32_t>> resolve(std::string_view name) = 0;
};

} // namespace airlock::worker::egress
