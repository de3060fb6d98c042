#include "tests/scheduler/stub_node.hpp"

#include <caf/typed_event_based_actor.hpp>

#include "actors/errors.hpp"

namespace airlock::testing {

void stub_node_script::record_create(schema::sandbox_record record) {
  std::lock_guard lock(mutex_);
  created_.push_back(std::move(record));
}
void stub_node_script::record_exec(std::string sandbox_id, actors::exec_spec spec) {
  std::lock_guard lock(mutex_);
  execs_.emplace_back(std::move(sandbox_id), std::move(spec));
}
void stub_node_script::record_output(std::string sandbox_id, actors::output_request request) {
  std::lock_guard lock(mutex_);
  outputs_.emplace_back(std::move(sandbox_id), std::move(request));
}
void stub_node_script::record_file(std::string sandbox_id, actors::file_spec spec) {
  std::lock_guard lock(mutex_);
  files_.emplace_back(std::move(sandbox_id), std::move(spec));
}
void stub_node_script::record_egress(schema::sandbox_record record) {
  std::lock_guard lock(mutex_);
  egresses_.push_back(std::move(record));
}
std::vector<schema::sandbox_record> stub_node_script::egresses() const {
  std::lock_guard lock(mutex_);
  return egresses_;
}
std::vector<schema::sandbox_record> stub_node_script::created() const {
  std::lock_guard lock(mutex_);
  return created_;
}
std::vector<std::pair<std::string, actors::exec_spec>> stub_node_script::execs() const {
  std::lock_guard lock(mutex_);
  return execs_;
}
std::vector<std::pair<std::string, actors::output_request>> stub_node_script::outputs() const {
  std::lock_guard lock(mutex_);
  return outputs_;
}
std::vector<std::pair<std::string, actors::file_spec>> stub_node_script::files() const {
  std::lock_guard lock(mutex_);
  return files_;
}

namespace {

using namespace airlock::actors;
using schema::sandbox_state;

node_actor::behavior_type stub_node(node_actor::pointer, std::shared_ptr<stub_node_script> s) {
  return {
    [s](nd_create_atom, schema::sandbox_record& record) {
      auto id = record.id;
      s->record_create(std::move(record));
      return node_sandbox{id, sandbox_state::running};
    },
    [](nd_pause_atom, std::string& id) {
      return node_sandbox{id, sandbox_state::paused};
    },
    [](nd_resume_atom, std::string& id) {
      return node_sandbox{id, sandbox_state::running};
    },
    [](nd_destroy_atom, std::string& id) {
      return node_sandbox{id, sandbox_state::destroyed};
    },
    [s](nd_list_atom) {
      std::vector<node_sandbox> out;
      for (const auto& record : s->created())
        out.push_back(node_sandbox{record.id, sandbox_state::running});
      return out;
    },
    [s](dp_exec_atom, std::string& id, exec_spec& spec) {
      s->record_exec(std::move(id), std::move(spec));
      return s->exec_reply;
    },
    [s](dp_output_atom, std::string& id, output_request& request) {
      s->record_output(std::move(id), std::move(request));
      return s->output_reply;
    },
    [](dp_stdin_atom, std::string&, std::string&, std::string&, bool) { return true; },
    [](dp_signal_atom, std::string&, std::string&, int32_t) { return true; },
    [](dp_resize_atom, std::string&, std::string&, uint16_t, uint16_t) { return true; },
    [s](dp_proc_atom, std::string&, std::string&, uint32_t) { return s->exec_reply; },
    [s](dp_procs_atom, std::string&) { return std::vector<process_view>{s->exec_reply}; },
    [s](dp_file_atom, std::string& id, file_spec& spec) {
      s->record_file(std::move(id), std::move(spec));
      return s->file_reply;
    },
    [](actors::dp_usage_atom, std::string&) -> caf::result<actors::sandbox_usage> {
      return make_error(errc::unimplemented);
    },
    [](actors::dp_watch_atom, std::string&,
       actors::watch_request&) -> caf::result<actors::watch_batch> {
      return make_error(errc::unimplemented, "the stub node watches nothing");
    },
    [s](nd_egress_atom, schema::sandbox_record& record) {
      auto id = record.id;
      s->record_egress(std::move(record));
      return node_sandbox{id, sandbox_state::running};
    },
    [](actors::nd_metrics_atom) { return std::string{"stub_node_figure 1\n"}; },
    // No load of its own: a join keeps the figures its test gave it (cj_load).
    [](actors::nd_load_atom) -> caf::result<schema::worker_heartbeat> {
      return make_error(errc::unavailable, "the stub node reports no load");
    },
    [](actors::nd_ckpt_atom, std::string&, std::string&, bool) -> caf::result<uint64_t> {
      return uint64_t{0};
    },
    [](actors::nd_ckptdel_atom, std::string&) -> caf::result<bool> { return true; },
    [](actors::nd_ckpts_atom) { return std::vector<std::string>{}; },
    [](actors::nd_recreate_atom, schema::sandbox_record& record) -> caf::result<node_sandbox> {
      return make_error(errc::not_found, "the stub node keeps no files of " + record.id);
    },
    [](actors::dp_quiet_atom, std::string&) { return int64_t{-1}; },
    [](actors::nd_spool_atom, std::string&, uint64_t, std::string&, bool) -> caf::result<uint64_t> {
      return make_error(errc::unimplemented, "the stub node takes no uploads");
    },
    [](actors::nd_tbuild_atom, actors::template_build&) -> caf::result<actors::template_built> {
      return make_error(errc::unimplemented, "the stub node builds no templates");
    },
    [](actors::nd_tdel_atom, std::string&) { return true; },
    [](actors::nd_twatch_atom, std::string& name, uint64_t,
       bool) -> caf::result<schema::template_progress> {
      return make_error(errc::not_found, "no build of " + name + " on the stub node");
    },
    [](actors::nd_claim_atom, schema::sandbox_record& record) -> caf::result<node_sandbox> {
      return make_error(errc::not_found, "the stub node holds no pool member " + record.id);
    },
  };
}

} // namespace

node_actor spawn_stub_node(caf::actor_system& system, std::shared_ptr<stub_node_script> script) {
  return system.spawn(stub_node, std::move(script));
}

} // namespace airlock::testing
