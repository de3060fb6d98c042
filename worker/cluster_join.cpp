#include "worker/cluster_join.hpp"

#include <caf/actor_cast.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <chrono>
#include <deque>
#include <set>

#include "actors/api_keys.hpp"
#include "actors/errors.hpp"
#include "actors/session_gate.hpp"
#include "schema/assert.hpp"

namespace airlock::worker {

namespace {

using actors::registration_ack;
using actors::scheduler_actor;
using std::chrono::milliseconds;

struct join_state {
  static inline const char* name = "airlock.cluster_join";

  cluster_join_options options;
  cluster_join_deps deps;
  scheduler_actor scheduler;     ///< the connected scheduler, if any
  bool joined = false;           ///< registered over the current connection
  bool registering = false;      ///< an sc_register is in flight
  bool beat_in_flight = false;   ///< at most one beat waits for its answer
  registration_ack ack;          ///< the last one received
  uint64_t session = 0;          ///< grows per connection; stale timers and replies see a newer one
  uint32_t backoff_ms = 0;       ///< 0: the next reconnect waits backoff_initial_ms
  uint32_t beat_failures = 0;    ///< in a row
  uint64_t sequence = 0;         ///< of the last beat sent
  schema::worker_heartbeat load; ///< what the owner last reported
  std::deque<schema::audit_record> audit; ///< waiting for the control plane
  bool flush_scheduled = false;
  bool audit_in_flight = false;
  uint64_t audit_dropped = 0; ///< since start, oldest first when the buffer is full
  /// Over the network only (not `serve`): what the control plane is given
  /// to call instead of the node (actors/session_gate.hpp), and the actor
  /// that sends this actor's calls to the scheduler, so that this actor never
  /// talks to another node itself and no peer can address it.
  actors::node_actor gate;
  caf::actor uplink;
  std::string uplink_secret; ///< never leaves this process
};

using self_ptr = cluster_join_actor::stateful_pointer<join_state>;

/// Asks the scheduler `xs...` and runs `on_answer` or `on_error` with the
/// reply: through the uplink over the network, directly in `serve`.
template <class OnAnswer, class OnError, class... Ts>
void ask(self_ptr self, OnAnswer on_answer, OnError on_error, Ts&&... xs) {
  auto& st = self->state;
  const auto timeout = milliseconds(st.options.request_timeout_ms);
  if (!st.uplink) {
    self->request(st.scheduler, timeout, std::forward<Ts>(xs)...)
      .then(std::move(on_answer), std::move(on_error));
    return;
  }
  // The uplink's own request has the same bound; this one waits a little
  // longer so that the uplink's timeout is what the caller sees.
  self
    ->request(st.uplink, timeout + milliseconds(1000), actors::uplink_call_atom::value,
              st.uplink_secret, caf::actor_cast<caf::actor>(st.scheduler),
              caf::make_message(std::forward<Ts>(xs)...), st.options.request_timeout_ms)
    .then(std::move(on_answer), std::move(on_error));
}

/// Forgets the current connection and schedules the next attempt after the
/// backoff, which doubles up to backoff_max_ms.
void reconnect_later(self_ptr self) {
  auto& st = self->state;
  if (st.scheduler) {
    self->demonitor(st.scheduler.address());
    st.scheduler = nullptr;
  }
  st.joined = false;
  st.registering = false;
  st.beat_in_flight = false;
  ++st.session;
  st.backoff_ms = st.backoff_ms == 0 ? st.options.backoff_initial_ms
                                     : std::min(st.backoff_ms * 2, st.options.backoff_max_ms);
  self->delayed_send(self, milliseconds(st.backoff_ms), cj_connect_atom::value, st.session);
}

void schedule_beat(self_ptr self) {
  auto& st = self->state;
  auto interval = st.ack.heartbeat_interval_ms != 0 ? st.ack.heartbeat_interval_ms
                                                    : st.options.heartbeat_interval_ms;
  self->delayed_send(self, milliseconds(interval), cj_beat_atom::value, st.session);
}

void do_register(self_ptr self) {
  auto& st = self->state;
  st.registering = true;
  auto session = st.session;
  if (st.deps.certificate)
    st.deps.registration.certificate = st.deps.certificate();
  if (st.deps.prove) {
    // Bound to this process's node: the proof is worth nothing elsewhere.
    auto proof = st.deps.prove(schema::registration_proof_message(
      st.deps.registration.id, caf::to_string(self->system().node())));
    if (!proof) {
      reconnect_later(self);
      return;
    }
    st.deps.registration.proof = std::move(*proof);
  }
  ask(
    self,
    [self, session](registration_ack& ack) {
      auto& now = self->state;
      if (session != now.session)
        return;
      now.registering = false;
      now.joined = true;
      now.backoff_ms = 0;
      now.beat_failures = 0;
      now.ack = std::move(ack);
      if (now.deps.on_joined)
        now.deps.on_joined(now.ack);
      schedule_beat(self);
    },
    [self, session](caf::error&) {
      if (session == self->state.session)
        reconnect_later(self);
    },
    actors::sc_register_atom::value, st.deps.registration, st.gate ? st.gate : st.deps.node);
}

/// Watches `scheduler` (a connection or process that goes away is a down
/// message) and registers with it.
void join_scheduler(self_ptr self, scheduler_actor scheduler) {
  auto& st = self->state;
  st.scheduler = std::move(scheduler);
  self->monitor(st.scheduler);
  do_register(self);
}

void on_connected(self_ptr self, caf::strong_actor_ptr& remote, std::set<std::string>& ifs) {
  // A listener without a published actor, or one publishing something other
  // than a scheduler (a different airlock protocol), is not ours to join.
  if (!remote || !self->system().assignable<scheduler_actor>(ifs)) {
    reconnect_later(self);
    return;
  }
  join_scheduler(self, caf::actor_cast<scheduler_actor>(std::move(remote)));
}

void on_connect(self_ptr self, uint64_t session) {
  auto& st = self->state;
  if (session != st.session || st.scheduler)
    return;
  if (st.deps.local_scheduler)
    return join_scheduler(self, st.deps.local_scheduler);
  // The middleman runs the blocking TCP connect and handshake; this actor
  // only waits for its answer.
  auto middleman =
    st.deps.connector ? st.deps.connector : self->system().middleman().actor_handle();
  self
    ->request(middleman, milliseconds(st.options.connect_timeout_ms), caf::connect_atom::value,
              st.options.host, st.options.port)
    .then(
      [self, session](const caf::node_id&, caf::strong_actor_ptr& remote,
                      std::set<std::string>& ifs) {
        if (session == self->state.session)
          on_connected(self, remote, ifs);
      },
      [self, session](caf::error&) {
        if (session == self->state.session)
          reconnect_later(self);
      });
}

schema::worker_heartbeat next_beat(join_state& st) {
  auto beat = st.load;
  beat.worker_id = st.deps.registration.id;
  beat.sequence = ++st.sequence;
  beat.sent_at_ms = st.deps.clock->now_ms();
  return beat;
}

void on_beat_failed(self_ptr self, const caf::error& error) {
  auto& st = self->state;
  if (to_status(error).code == errc::not_found) {
    // The scheduler forgot us (it restarted, or saw our node go down). A new
    // session on the same connection retires the old beat timer, so the
    // registration's answer starts the only one.
    st.joined = false;
    if (!st.registering) {
      ++st.session;
      do_register(self);
    }
    return;
  }
  if (++st.beat_failures >= st.options.beat_failures_max)
    reconnect_later(self);
}

void send_beat(self_ptr self, uint64_t session) {
  auto& st = self->state;
  ask(
    self,
    [self, session](bool) {
      if (session != self->state.session)
        return;
      self->state.beat_in_flight = false;
      self->state.beat_failures = 0;
    },
    [self, session](caf::error& error) {
      if (session != self->state.session)
        return;
      self->state.beat_in_flight = false;
      on_beat_failed(self, error);
    },
    actors::sc_beat_atom::value, next_beat(st));
}

/// Each beat carries the node's load as of now; a node that does not answer
/// in time leaves the previous figures in the beat rather than delaying it.
void on_beat_timer(self_ptr self, uint64_t session) {
  auto& st = self->state;
  if (session != st.session || !st.joined)
    return;
  schedule_beat(self);
  if (st.beat_in_flight)
    return;
  st.beat_in_flight = true;
  if (!st.deps.node)
    return send_beat(self, session);
  self
    ->request(st.deps.node, milliseconds(st.options.request_timeout_ms),
              actors::nd_load_atom::value)
    .then(
      [self, session](schema::worker_heartbeat& load) {
        if (session != self->state.session)
          return;
        self->state.load = std::move(load);
        send_beat(self, session);
      },
      [self, session](caf::error&) {
        if (session == self->state.session)
          send_beat(self, session);
      });
}

void schedule_flush(self_ptr self) {
  auto& st = self->state;
  if (st.flush_scheduled || st.audit.empty())
    return;
  st.flush_scheduled = true;
  self->delayed_send(self, milliseconds(st.options.audit_flush_ms), cj_flush_atom::value);
}

void add_audit(self_ptr self, std::vector<schema::audit_record>& records) {
  auto& st = self->state;
  for (auto& record : records) {
    if (st.audit.size() >= st.options.audit_buffer_max) {
      st.audit.pop_front();
      ++st.audit_dropped;
    }
    st.audit.push_back(std::move(record));
  }
  schedule_flush(self);
}

/// One batch at a time; a failed batch goes back to the front of the queue.
void flush_audit(self_ptr self) {
  auto& st = self->state;
  st.flush_scheduled = false;
  if (st.audit_in_flight || st.audit.empty())
    return;
  if (!st.joined) {
    schedule_flush(self);
    return;
  }
  size_t count = std::min(st.audit.size(), st.options.audit_batch_max);
  std::vector<schema::audit_record> batch(std::make_move_iterator(st.audit.begin()),
                                          std::make_move_iterator(st.audit.begin() + count));
  st.audit.erase(st.audit.begin(), st.audit.begin() + count);
  st.audit_in_flight = true;
  ask(
    self,
    [self](bool) {
      self->state.audit_in_flight = false;
      schedule_flush(self);
    },
    [self, batch](caf::error&) mutable {
      self->state.audit_in_flight = false;
      std::vector<schema::audit_record> again = std::move(batch);
      auto& queue = self->state.audit;
      queue.insert(queue.begin(), std::make_move_iterator(again.begin()),
                   std::make_move_iterator(again.end()));
      while (queue.size() > self->state.options.audit_buffer_max) {
        queue.pop_front();
        ++self->state.audit_dropped;
      }
      schedule_flush(self);
    },
    actors::sc_audit_atom::value, batch);
}

/// Asks the connected scheduler `atom, x` and delivers its answer of type
/// Answer; unavailable while not joined.
template <class Answer, class Atom, class Argument>
caf::result<Answer> ask_scheduler(self_ptr self, Atom atom, const Argument& x,
                                  std::string_view what) {
  auto& st = self->state;
  if (!st.joined)
    return make_error(errc::unavailable, "this worker is not joined to the control plane; "
                                           + std::string(what)
                                           + " are unavailable until it reconnects");
  auto promise = self->make_response_promise<Answer>();
  ask(
    self, [promise](Answer& answer) mutable { promise.deliver(std::move(answer)); },
    [promise](caf::error& error) mutable { promise.deliver(std::move(error)); }, atom, x);
  return promise;
}

cluster_join_actor::behavior_type cluster_join(self_ptr self, cluster_join_options options,
                                               cluster_join_deps deps) {
  AIRLOCK_ASSERT(deps.node && deps.clock != nullptr, "cluster_join_deps incomplete");
  if (!deps.local_scheduler) {
    AIRLOCK_ASSERT(options.port != 0, "cluster_join needs the control plane's port");
    AIRLOCK_ASSERT(self->system().has_middleman(), "cluster_join needs use_middleman");
  }
  auto& st = self->state;
  st.options = std::move(options);
  st.options.backoff_initial_ms = std::max<uint32_t>(st.options.backoff_initial_ms, 1);
  st.options.backoff_max_ms = std::max(st.options.backoff_max_ms, st.options.backoff_initial_ms);
  st.options.beat_failures_max = std::max<uint32_t>(st.options.beat_failures_max, 1);
  st.deps = std::move(deps);
  if (!st.deps.local_scheduler) {
    // Over the network the node hides behind a gate that only the control
    // plane's calls pass (they carry the secret of this registration), and
    // this actor's calls go out through the uplink.
    auto session_secret = actors::random_hex(actors::session_secret_bytes);
    auto uplink_secret = actors::random_hex(actors::session_secret_bytes);
    AIRLOCK_ASSERT(session_secret && uplink_secret, "no randomness for the session secrets");
    st.deps.registration.session_secret = *session_secret;
    st.gate = actors::spawn_node_gate(self->system(), st.deps.node, std::move(*session_secret));
    st.uplink_secret = std::move(*uplink_secret);
    st.uplink = actors::spawn_scheduler_uplink(self->system(), st.uplink_secret);
    self->link_to(st.uplink);
  }
  // Without its node this worker has nothing to offer: stop, so the owner
  // sees it and the scheduler's monitor has already marked the worker lost.
  self->monitor(st.deps.node);
  self->set_down_handler([self](caf::down_msg& down) {
    auto& state = self->state;
    if (down.source == state.deps.node.address())
      self->quit(down.reason);
    else if (state.scheduler && down.source == state.scheduler.address())
      reconnect_later(self);
  });
  self->send(self, cj_connect_atom::value, st.session);
  return {
    [self](cj_load_atom, schema::worker_heartbeat& load) { self->state.load = std::move(load); },
    [self](cj_status_atom) {
      return caf::result<bool, registration_ack>(self->state.joined, self->state.ack);
    },
    [self](cj_audit_atom, std::vector<schema::audit_record>& records) { add_audit(self, records); },
    [self](cj_creds_atom, const std::string& id) {
      return ask_scheduler<std::vector<schema::credential_grant>>(
        self, actors::sc_creds_atom::value, id, "credentials");
    },
    [self](cj_renew_atom, const std::string& csr) {
      return ask_scheduler<std::string>(self, actors::sc_renew_atom::value, csr,
                                        "certificate renewals");
    },
    [self](cj_flush_atom) { flush_audit(self); },
    [self](cj_connect_atom, uint64_t session) { on_connect(self, session); },
    [self](cj_beat_atom, uint64_t session) { on_beat_timer(self, session); },
  };
}

} // namespace

cluster_join_actor spawn_cluster_join(caf::actor_system& system, cluster_join_options options,
                                      cluster_join_deps deps) {
  return system.spawn(cluster_join, std::move(options), std::move(deps));
}

} // namespace airlock::worker
