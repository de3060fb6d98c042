#include "worker/egress_bridge.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>

#include <chrono>

#include "actors/errors.hpp"

namespace airlock::worker {

void cluster_egress_bridge::set_join(cluster_join_actor join) {
  std::lock_guard guard(mutex_);
  join_ = std::move(join);
}

uint64_t cluster_egress_bridge::dropped() const {
  std::lock_guard guard(mutex_);
  return dropped_;
}

void cluster_egress_bridge::record(schema::audit_record record) {
  cluster_join_actor join;
  {
    std::lock_guard guard(mutex_);
    if (!join_) {
      ++dropped_;
      return;
    }
    join = join_;
  }
  // The join actor batches; one message per record keeps this call cheap.
  caf::anon_send(join, cj_audit_atom::value, std::vector<schema::audit_record>{std::move(record)});
}

void cluster_egress_bridge::fetch(const egress::sandbox_view& sandbox,
                                  std::function<void(result<grants>)> done) {
  cluster_join_actor join;
  {
    std::lock_guard guard(mutex_);
    join = join_;
  }
  if (!join) {
    done(make_status(errc::unavailable, "the worker has not joined the control plane yet"));
    return;
  }
  // A short-lived actor asks, so that the caller's thread never waits.
  system_.spawn(
    [join, id = sandbox.sandbox_id, done = std::move(done)](caf::event_based_actor* self) mutable {
      self->request(join, std::chrono::milliseconds(fetch_timeout_ms), cj_creds_atom::value, id)
        .then([done](std::vector<schema::credential_grant>& found) { done(std::move(found)); },
              [done](caf::error& error) { done(to_status(error)); });
    });
}

} // namespace airlock::worker
