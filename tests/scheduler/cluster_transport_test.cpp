// The cluster transport end to end in one process: a control-plane actor
// system publishes the scheduler on a loopback port, a worker-side actor
// system joins it with a stub node actor, and everything between them
// crosses a real TCP connection through CAF's middleman (Cap'n Proto bytes
// inside CAF messages).
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <thread>

#include "actors/errors.hpp"
#include "actors/system_config.hpp"
#include "scheduler/cluster_listener.hpp"
#include "scheduler/scheduler_actor.hpp"
#include "tests/scheduler/stub_node.hpp"
#include "tests/support/wait.hpp"
#include "worker/cluster_join.hpp"

namespace airlock::actors {
namespace {

using namespace std::chrono_literals;

constexpr auto request_timeout = 5s;

/// Waits until `condition` holds or `limit` passes.
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds limit = 10s) {
  return airlock::test::wait_for(condition, limit);
}

std::unique_ptr<system_config> cluster_config() {
  actor_system_options options;
  options.scheduler_threads = 2;
  auto config = std::make_unique<system_config>(options);
  middleman_options transport;
  transport.heartbeat_interval_ms = 100;
  transport.connection_timeout_ms = 2'000;
  use_middleman(*config, transport);
  config->set("middleman.workers", size_t{0});
  return config;
}

/// One worker host: its own actor system, a stub node and the join actor.
struct worker_side {
  worker_side(uint16_t port, const wall_clock& clock,
              std::shared_ptr<testing::stub_node_script> script)
      : config(cluster_config()), system(std::make_unique<caf::actor_system>(*config)) {
    node = testing::spawn_stub_node(*system, std::move(script));
    worker::cluster_join_options options;
    options.host = "127.0.0.1";
    options.port = port;
    options.backoff_initial_ms = 20;
    options.backoff_max_ms = 200;
    options.heartbeat_interval_ms = 50;
    worker::cluster_join_deps deps;
    deps.registration.id = "wk_loop";
    deps.registration.name = "loopback";
    deps.registration.cluster_address = "127.0.0.1:0";
    deps.registration.data_url = "http://127.0.0.1:7071";
    deps.registration.capacity = {4000, 8192, 100'000, 16};
    deps.registration.runtimes = {"namespace"};
    deps.node = node;
    deps.clock = &clock;
    join = worker::spawn_cluster_join(*system, options, std::move(deps));
  }

  ~worker_side() { stop(); }

  /// Stops its actors and its actor system, closing its connections.
  void stop() {
    if (!system)
      return;
    caf::anon_send_exit(join, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(node, caf::exit_reason::user_shutdown);
    join = nullptr;
    node = nullptr;
    system.reset();
  }

  std::pair<bool, registration_ack> status() {
    caf::scoped_actor self{*system};
    std::pair<bool, registration_ack> out{false, {}};
    self->request(join, request_timeout, worker::cj_status_atom::value)
      .receive(
        [&out](bool joined, registration_ack& ack) {
          out = {joined, std::move(ack)};
        },
        [](caf::error&) {});
    return out;
  }

  std::unique_ptr<system_config> config;
  std::unique_ptr<caf::actor_system> system;
  node_actor node;
  worker::cluster_join_actor join;
};

/// The control plane: its own actor system with the published scheduler.
struct control_side {
  control_side(uint16_t wanted_port, const wall_clock& clock, entropy_source& entropy)
      : config(cluster_config()), system(std::make_unique<caf::actor_system>(*config)) {
    scheduler::scheduler_options options;
    options.heartbeat_interval_ms = 50;
    options.heartbeat_timeout_ms = 3'000;
    options.check_interval_ms = 50;
    scheduler::scheduler_deps deps;
    deps.token_public_key = token_key();
    deps.clock = &clock;
    deps.entropy = &entropy;
    scheduler = scheduler::spawn_scheduler(*system, options, std::move(deps));
    auto bound = scheduler::publish_scheduler(*system, scheduler, "127.0.0.1", wanted_port);
    EXPECT_TRUE(bound) << bound.error().message;
    port = bound ? *bound : 0;
  }

  ~control_side() {
    caf::anon_send_exit(scheduler, caf::exit_reason::user_shutdown);
    scheduler = nullptr;
    system.reset();
  }

  static std::string token_key() {
    return std::string("\x01\x02\x00\xff", 4) + std::string(28, 'k');
  }

  std::unique_ptr<system_config> config;
  std::unique_ptr<caf::actor_system> system;
  scheduler_actor scheduler;
  uint16_t port = 0;
};

class cluster_transport : public ::testing::Test {
protected:
  cluster_transport() : control(std::make_unique<control_side>(0, clock, entropy)) {}

  ~cluster_transport() override {
    worker.reset();
    control.reset();
  }

  template <class T, class Handle, class... Ts>
  caf::expected<T> ask(const Handle& dest, Ts&&... xs) {
    caf::scoped_actor self{*control->system};
    caf::expected<T> out{caf::make_error(caf::sec::unexpected_response)};
    self->request(dest, request_timeout, std::forward<Ts>(xs)...)
      .receive([&out](T& value) { out = std::move(value); },
               [&out](caf::error& err) { out = std::move(err); });
    return out;
  }

  std::string render(const caf::error& error) { return control->system->render(error); }

  std::optional<worker_view> view(const std::string& id) {
    auto fleet = ask<std::vector<worker_view>>(control->scheduler, sc_workers_atom::value);
    if (fleet)
      for (auto& v : *fleet)
        if (v.registration.id == id)
          return v;
    return std::nullopt;
  }

  bool worker_state_is(const std::string& state) {
    auto v = view("wk_loop");
    return v && v->state == state;
  }

  caf::expected<placement> node_of(const std::string& id) {
    return ask<placement>(control->scheduler, sc_node_atom::value, id);
  }

  system_wall_clock clock;
  seeded_entropy entropy{3};
  std::unique_ptr<control_side> control;
  std::shared_ptr<testing::stub_node_script> script = std::make_shared<testing::stub_node_script>();
  std::unique_ptr<worker_side> worker;
};

exec_spec full_exec_spec() {
  exec_spec spec;
  spec.argv = {"python3", "-c", "print('\xc3\xa9')"};
  spec.env = {{"A", "1"}, {"B", ""}};
  spec.cwd = "/work";
  spec.user = "1000";
  spec.pty = true;
  spec.rows = 33;
  spec.cols = 99;
  spec.stdin_open = true;
  spec.timeout_s = 7;
  return spec;
}

void script_replies(testing::stub_node_script& script) {
  script.exec_reply = {"proc_1", schema::process_state::exited, 3, 9, 1700000000001, 1700000000002,
                       "why"};
  script.output_reply.segments = {{1, 5, "out\0\n"}, {2, 9, std::string("\xff\x00\x01!", 4)}};
  script.output_reply.next_offset = 9;
  script.output_reply.start_offset = 1;
  script.output_reply.exited = true;
  script.output_reply.exit_code = 3;
  script.output_reply.signal = 9;
  script.file_reply.data = std::string("\0file", 5);
  script.file_reply.written = 12;
  script.file_reply.entries = {{"a", "file", 1, 0644, 2, 0, 0, "root", "root", ""},
                               {"d", "dir", 0, 0755, 3, 1, 1, "1", "1", ""}};
  script.file_reply.truncated = true;
  script.file_reply.info = {"x", "symlink", 4, 0777, 5, 0, 0, "root", "root", "/a"};
}

TEST_F(cluster_transport, a_worker_joins_beats_and_serves_calls_over_the_wire) {
  ASSERT_NE(control->port, 0);
  script_replies(*script);
  worker = std::make_unique<worker_side>(control->port, clock, script);
  ASSERT_TRUE(eventually([this] { return worker->status().first; })) << "the worker never joined";
  auto [joined, ack] = worker->status();
  EXPECT_EQ(ack.worker_id, "wk_loop");
  EXPECT_EQ(ack.token_public_key, control_side::token_key());
  EXPECT_EQ(ack.heartbeat_interval_ms, 50u);

  // Heartbeats carry what the owner reports.
  schema::worker_heartbeat load;
  load.allocated = {500, 256, 1024, 1};
  load.sandbox_ids = {"sb_running"};
  load.load_milli = 250;
  caf::anon_send(worker->join, worker::cj_load_atom::value, load);
  ASSERT_TRUE(eventually([this] {
    auto v = view("wk_loop");
    return v && v->sandbox_ids == std::vector<std::string>{"sb_running"};
  }));
  auto v = *view("wk_loop");
  EXPECT_EQ(v.state, "ready");
  EXPECT_EQ(v.allocated, (schema::resources{500, 256, 1024, 1}));
  EXPECT_GT(v.last_heartbeat_at_ms, 0);
  EXPECT_EQ(v.registration.capacity, (schema::resources{4000, 8192, 100'000, 16}));

  auto placed =
    ask<placement>(control->scheduler, sc_place_atom::value,
                   placement_request{"sb_new", "base", {1000, 512, 2048, 1}, {}, {}, {}});
  ASSERT_TRUE(placed) << render(placed.error());
  EXPECT_EQ(placed->worker_id, "wk_loop");
  EXPECT_EQ(placed->data_url, "http://127.0.0.1:7071");
  // Callers get the control plane's relay, which adds the worker's session
  // secret; the calls below cross the wire to the worker's gate and node.
  EXPECT_EQ(placed->node.node(), control->system->node()) << "callers must get the local relay";

  schema::sandbox_record record;
  record.id = "sb_new";
  record.tenant_id = "t1";
  record.spec.template_name = "base";
  record.spec.env = {{"K", "V"}};
  record.worker_id = "wk_loop";
  auto created = ask<node_sandbox>(placed->node, nd_create_atom::value, record);
  ASSERT_TRUE(created) << render(created.error());
  EXPECT_EQ(*created, (node_sandbox{"sb_new", schema::sandbox_state::running}));
  ASSERT_EQ(script->created().size(), 1u);
  EXPECT_EQ(script->created()[0], record);

  auto spec = full_exec_spec();
  auto process = ask<process_view>(placed->node, dp_exec_atom::value, std::string("sb_new"), spec);
  ASSERT_TRUE(process) << render(process.error());
  EXPECT_EQ(*process, script->exec_reply);
  ASSERT_EQ(script->execs().size(), 1u);
  EXPECT_EQ(script->execs()[0].first, "sb_new");
  EXPECT_EQ(script->execs()[0].second, spec);

  output_request request{"proc_1", 17, false, true, 4096, 25};
  auto output =
    ask<output_batch>(placed->node, dp_output_atom::value, std::string("sb_new"), request);
  ASSERT_TRUE(output) << render(output.error());
  EXPECT_EQ(*output, script->output_reply);
  ASSERT_EQ(script->outputs().size(), 1u);
  EXPECT_EQ(script->outputs()[0].second, request);

  file_spec file{file_verb::write, "/a/b", "", std::string("\0data", 5), 3, 4, 0600, false};
  auto written = ask<file_result>(placed->node, dp_file_atom::value, std::string("sb_new"), file);
  ASSERT_TRUE(written) << render(written.error());
  EXPECT_EQ(*written, script->file_reply);
  ASSERT_EQ(script->files().size(), 1u);
  EXPECT_EQ(script->files()[0].second, file);
}

TEST_F(cluster_transport, a_worker_whose_host_dies_is_lost_and_rejoins_when_it_returns) {
  ASSERT_NE(control->port, 0);
  worker = std::make_unique<worker_side>(control->port, clock, script);
  ASSERT_TRUE(eventually([this] { return worker_state_is("ready"); }));
  auto first = node_of("wk_loop");
  ASSERT_TRUE(first);

  worker->stop();
  ASSERT_TRUE(eventually([this] { return worker_state_is("lost"); }))
    << "the scheduler never noticed the worker's host going away";
  auto gone = node_of("wk_loop");
  ASSERT_FALSE(gone);
  EXPECT_EQ(to_status(gone.error()).code, errc::unavailable);

  worker = std::make_unique<worker_side>(control->port, clock, script);
  ASSERT_TRUE(eventually([this] { return worker_state_is("ready"); })) << "it never rejoined";
  auto second = node_of("wk_loop");
  ASSERT_TRUE(second);
  EXPECT_NE(second->node, first->node) << "a rejoin brings a new node handle";
  auto listed = ask<std::vector<node_sandbox>>(second->node, nd_list_atom::value);
  ASSERT_TRUE(listed) << render(listed.error());
  auto fleet = ask<std::vector<worker_view>>(control->scheduler, sc_workers_atom::value);
  ASSERT_TRUE(fleet);
  EXPECT_EQ(fleet->size(), 1u) << "same registration id, same worker";
}

TEST_F(cluster_transport, a_dead_node_actor_makes_the_worker_lost_and_stops_its_join_actor) {
  ASSERT_NE(control->port, 0);
  worker = std::make_unique<worker_side>(control->port, clock, script);
  ASSERT_TRUE(eventually([this] { return worker_state_is("ready"); }));
  caf::scoped_actor watcher{*worker->system};
  watcher->monitor(worker->join);
  caf::anon_send_exit(worker->node, caf::exit_reason::user_shutdown);
  ASSERT_TRUE(eventually([this] { return worker_state_is("lost"); }));
  bool join_stopped = false;
  watcher->receive([&join_stopped](const caf::down_msg&) { join_stopped = true; },
                   caf::after(request_timeout) >> [] {});
  EXPECT_TRUE(join_stopped);
}

TEST_F(cluster_transport, a_worker_reconnects_and_registers_again_when_the_control_plane_restarts) {
  auto port = control->port;
  ASSERT_NE(port, 0);
  worker = std::make_unique<worker_side>(port, clock, script);
  ASSERT_TRUE(eventually([this] { return worker_state_is("ready"); }));

  control.reset();
  ASSERT_TRUE(eventually([this] { return !worker->status().first; }))
    << "the join actor never noticed the lost connection";
  auto [joined, kept] = worker->status();
  EXPECT_EQ(kept.token_public_key, control_side::token_key()) << "the ack is kept while away";

  // A new control plane on the same port: the worker finds it by itself.
  control = std::make_unique<control_side>(port, clock, entropy);
  ASSERT_EQ(control->port, port);
  ASSERT_TRUE(eventually([this] { return worker_state_is("ready"); }))
    << "the worker never registered with the restarted scheduler";
  // The scheduler marks the worker ready before the join actor has read the
  // ack: its own flag follows, a moment later.
  EXPECT_TRUE(eventually([this] { return worker->status().first; }))
    << "the join actor never took the new control plane's ack";
  auto where = node_of("wk_loop");
  ASSERT_TRUE(where) << render(where.error());
  auto listed = ask<std::vector<node_sandbox>>(where->node, nd_list_atom::value);
  EXPECT_TRUE(listed) << render(listed.error());
}

// A peer on another CAF node that is not the worker a sandbox is placed on:
// what the scheduler answers it is decided by the node it calls from.
TEST_F(cluster_transport, a_peer_gets_nothing_of_a_worker_that_is_not_its_own) {
  worker = std::make_unique<worker_side>(control->port, clock, script);
  ASSERT_TRUE(eventually([this] { return worker_state_is("ready"); }));
  auto placed =
    ask<placement>(control->scheduler, sc_place_atom::value,
                   placement_request{"sb_theirs", "base", {100, 64, 256, 1}, {}, {}, {}});
  ASSERT_TRUE(placed) << render(placed.error());
  ASSERT_EQ(placed->worker_id, "wk_loop");

  auto rogue_config = cluster_config();
  caf::actor_system rogue(*rogue_config);
  auto remote = rogue.middleman().remote_actor<scheduler_actor>("127.0.0.1", control->port);
  ASSERT_TRUE(remote) << rogue.render(remote.error());
  caf::scoped_actor self{rogue};
  auto code_of = [&self, &remote](auto reply, auto... xs) {
    using reply_type = decltype(reply);
    errc code = errc::none;
    self->request(*remote, request_timeout, xs...)
      .receive([](reply_type&) {}, [&code](caf::error& error) { code = to_status(error).code; });
    return code;
  };
  using grants = std::vector<schema::credential_grant>;
  EXPECT_EQ(code_of(grants{}, sc_creds_atom::value, std::string("sb_theirs")),
            errc::permission_denied)
    << "another worker's sandbox's credentials";
  EXPECT_EQ(code_of(placement{}, sc_node_atom::value, std::string("wk_loop")),
            errc::permission_denied)
    << "a worker's node";
  EXPECT_EQ(code_of(std::vector<worker_view>{}, sc_workers_atom::value), errc::permission_denied)
    << "the fleet";
  EXPECT_EQ(code_of(placement{}, sc_place_atom::value,
                    placement_request{"sb_x", "base", {100, 64, 256, 1}, {}, {}, {}}),
            errc::permission_denied)
    << "placement";
  schema::worker_heartbeat forged;
  forged.worker_id = "wk_loop";
  forged.sequence = 1'000'000;
  EXPECT_EQ(code_of(bool{}, sc_beat_atom::value, forged), errc::permission_denied)
    << "a heartbeat for another worker";
  EXPECT_EQ(code_of(bool{}, sc_audit_atom::value, std::vector<schema::audit_record>{}),
            errc::permission_denied)
    << "audit records from a peer that is no worker";

  // The worker itself is let through to the credential service (which this
  // control plane does not have), and is still ready.
  caf::scoped_actor own{*worker->system};
  errc asked = errc::none;
  own
    ->request(worker->join, request_timeout, worker::cj_creds_atom::value, std::string("sb_theirs"))
    .receive([&asked](std::vector<schema::credential_grant>&) { asked = errc::none; },
             [&asked](caf::error& error) { asked = to_status(error).code; });
  EXPECT_EQ(asked, errc::unavailable);
  EXPECT_TRUE(worker_state_is("ready"));
}

} // namespace
} // namespace airlock::actors
