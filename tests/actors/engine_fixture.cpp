#include "engine_fixture.hpp"

namespace airlock::testing {

namespace {

struct scripted_runner_state {
  std::shared_ptr<runner_script> script;
  std::deque<caf::response_promise> held;
};

caf::behavior scripted_runner(caf::stateful_actor<scripted_runner_state>* self,
                              std::shared_ptr<runner_script> script) {
  self->state.script = std::move(script);
  auto handle = [self](bool check,
                       actors::step_request& request) -> caf::result<actors::step_outcome> {
    auto& st = self->state;
    st.script->calls.push_back({check, request});
    auto answer = st.script->answer(check, request);
    if (answer)
      return std::move(*answer);
    st.held.push_back(self->make_response_promise());
    return caf::delegated<actors::step_outcome>{}; // answered on release
  };
  return {
    [handle](actors::step_run_atom, actors::step_request& request) {
      return handle(false, request);
    },
    [handle](actors::step_check_atom, actors::step_request& request) {
      return handle(true, request);
    },
    [self](release_atom, actors::step_outcome& outcome) {
      if (self->state.held.empty())
        return;
      auto promise = self->state.held.front();
      self->state.held.pop_front();
      promise.deliver(std::move(outcome));
    },
  };
}

caf::actor_system_config& prepared(actors::system_config& config) {
  actors::use_test_scheduler(config);
  return config;
}

} // namespace

actors::step_runner_actor spawn_scripted_runner(caf::actor_system& system,
                                                std::shared_ptr<runner_script> script) {
  return caf::actor_cast<actors::step_runner_actor>(
    system.spawn(scripted_runner, std::move(script)));
}

engine_fixture::engine_fixture()
    : system(prepared(config)),
      sched(dynamic_cast<caf::scheduler::test_coordinator&>(system.scheduler())) {
  options.operation.step_timeout_ms = 1'000;
  options.operation.retry_delay_ms = 100;
  options.operation.retry_delay_max_ms = 100;
  options.default_timeout_ms = 60'000;
}

engine_fixture::~engine_fixture() {
  if (engine)
    caf::anon_send_exit(engine, caf::exit_reason::user_shutdown);
  if (runner)
    caf::anon_send_exit(runner, caf::exit_reason::user_shutdown);
  run();
  // Pending timers would keep the test scheduler alive.
  while (sched.trigger_timeouts() > 0)
    run();
}

void engine_fixture::start_engine(actors::procedure_table extra) {
  actors::operation_engine_deps deps;
  deps.store = store.get();
  deps.journal = &journal;
  deps.clock = &clock;
  deps.entropy = &entropy;
  deps.procedures = std::move(extra);
  runner = spawn_scripted_runner(system, script);
  deps.procedures.emplace("test.op", runner);
  engine = actors::spawn_operation_engine(system, options, std::move(deps));
  run();
}

void engine_fixture::advance_ms(int64_t ms) {
  // Step by step so that periodic and chained timers fire in order.
  for (int64_t i = 0; i < ms; i += 10) {
    clock.advance_ms(10);
    sched.advance_time(std::chrono::milliseconds(10));
    run();
  }
}

caf::expected<actors::create_reply> engine_fixture::create(std::string key, std::string params,
                                                           std::string tenant) {
  actors::operation_request request{"test.op",         "sb_target",    std::move(tenant),
                                    std::move(params), std::move(key), 0};
  return ask<actors::create_reply>(engine, actors::op_create_atom::value, std::move(request));
}

schema::operation_record engine_fixture::stored(const std::string& id) {
  storage::operation_store operations{*store};
  auto found = operations.get(id);
  EXPECT_TRUE(found && *found) << "operation " << id << " is not in the store";
  return found && *found ? **found : schema::operation_record{};
}

schema::operation_record engine_fixture::get(const std::string& id) {
  auto record =
    ask<schema::operation_record>(engine, actors::op_get_atom::value, id, std::string{});
  EXPECT_TRUE(record) << system.render(record.error());
  return record ? *record : schema::operation_record{};
}

} // namespace airlock::testing
