// A running sandbox changes policy or hands: a new egress policy (nd_egress),
// and a create's claim of a warm pool member (nd_claim, docs/pools.md), which
// makes the member the creator's sandbox without restarting anything.

#include <chrono>
#include <string>

#include "actors/errors.hpp"
#include "worker/node_state.hpp"

namespace airlock::worker::node_detail {

/// A new egress policy for a running sandbox: its new connections follow it.
caf::result<node_sandbox> handle_egress(self_ptr self, const schema::sandbox_record& record) {
  auto& egress = self->state.context.egress;
  if (!egress || !egress->enabled())
    return make_error(errc::unimplemented,
                      "this worker runs without an egress proxy (--egress=false): nothing "
                      "leaves its sandboxes whatever the policy");
  auto it = self->state.sandboxes.find(record.id);
  if (it == self->state.sandboxes.end() || !egress->set_policy(record.id, record.spec.egress))
    return make_error(errc::not_found, "sandbox " + record.id + " does not run on this worker");
  it->second.record.spec.egress = record.spec.egress;
  return node_sandbox{record.id, it->second.state};
}

/// A create claims warm pool member `record.id`: from now on it is
/// `record`'s sandbox. Its processes started after this get record's env
/// (merged_env reads the tracked record), its new connections its egress
/// policy and tenant, its cgroup the record's CPU and memory limits.
caf::result<node_sandbox> handle_claim(self_ptr self, const schema::sandbox_record& record) {
  auto it = self->state.sandboxes.find(record.id);
  if (it == self->state.sandboxes.end())
    return make_error(errc::not_found, "no sandbox " + record.id + " on this worker");
  const auto& held = it->second.record;
  if (held.tenant_id == record.tenant_id && held.spec.from_pool)
    return node_sandbox{record.id, it->second.state}; // this claim, done already
  if (held.tenant_id != actors::pool_tenant)
    return make_error(errc::already_exists,
                      "sandbox " + record.id + " is not a warm pool member any more");
  if (it->second.state == sandbox_state::creating) {
    // Being made or brought back after a restart: claim it once it runs.
    auto promise = self->make_response_promise<node_sandbox>();
    it->second.after_create.push_back([self, record, promise]() mutable {
      self
        ->request(caf::actor_cast<actors::node_actor>(self),
                  std::chrono::milliseconds(2 * opts(self).call_timeout_ms),
                  actors::nd_claim_atom::value, record)
        .then([promise](node_sandbox& done) mutable { promise.deliver(std::move(done)); },
              [promise](caf::error& err) mutable { promise.deliver(std::move(err)); });
    });
    return promise;
  }
  if (it->second.state != sandbox_state::running)
    return make_error(errc::wrong_state, "warm pool member " + record.id + " is "
                                           + std::string(schema::to_string(it->second.state)));
  auto promise = self->make_response_promise<node_sandbox>();
  self
    ->request(self->state.context.worker, std::chrono::milliseconds(opts(self).call_timeout_ms),
              wk_claim_atom::value, record.id, record.tenant_id, record.spec.cpu_millis,
              record.spec.memory_mb)
    .then(
      [self, record, promise](bool) mutable {
        auto found = self->state.sandboxes.find(record.id);
        if (found == self->state.sandboxes.end()) {
          promise.deliver(
            make_error(errc::not_found, "sandbox " + record.id + " ended while claimed"));
          return;
        }
        if (auto& egress = self->state.context.egress; egress && egress->enabled())
          egress->set_owner(record.id, record.tenant_id, record.spec.egress);
        found->second.record = record;
        promise.deliver(node_sandbox{record.id, found->second.state});
      },
      [promise](caf::error& err) mutable { promise.deliver(err); });
  return promise;
}

} // namespace airlock::worker::node_detail
