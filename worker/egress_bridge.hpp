#pragma once
// The egress proxy's audit sink and credential source on a worker: both
// go through the cluster join actor, which batches audit records for the
// control plane and asks it for a sandbox's credentials. Called from the
// egress proxy's network threads; neither call blocks.

#include <caf/actor_system.hpp>

#include <cstdint>
#include <mutex>

#include "worker/cluster_join.hpp"
#include "worker/egress/egress_types.hpp"

namespace airlock::worker {

class cluster_egress_bridge final : public egress::audit_sink, public egress::credential_source {
public:
  /// Bound on one credential fetch. Default: 5000.
  static constexpr uint32_t fetch_timeout_ms = 5000;

  explicit cluster_egress_bridge(caf::actor_system& system) : system_(system) {}

  /// The join actor, once it exists; before that records are dropped
  /// (counted) and fetches fail with unavailable.
  void set_join(cluster_join_actor join);

  void record(schema::audit_record record) override;
  void fetch(const egress::sandbox_view& sandbox,
             std::function<void(result<grants>)> done) override;

  /// Records dropped because no join actor existed yet.
  uint64_t dropped() const;

private:
  caf::actor_system& system_;
  mutable std::mutex mutex_;
  cluster_join_actor join_;
  uint64_t dropped_ = 0;
};

} // namespace airlock::worker
