#pragma once
// A node actor for scheduler and transport tests: canned replies chosen by
// the test, and a log of what each call received, so a test can prove that
// every field crossed the wire intact.

#include <caf/actor_system.hpp>

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "actors/cluster_protocol.hpp"

namespace airlock::testing {

/// Shared between the test and the stub (which may run on another actor
/// system's threads). Set the replies before spawning; read the logs through
/// the accessors.
class stub_node_script {
public:
  actors::process_view exec_reply;
  actors::output_batch output_reply;
  actors::file_result file_reply;

  void record_create(schema::sandbox_record record);
  void record_exec(std::string sandbox_id, actors::exec_spec spec);
  void record_output(std::string sandbox_id, actors::output_request request);
  void record_file(std::string sandbox_id, actors::file_spec spec);
  void record_egress(schema::sandbox_record record);

  std::vector<schema::sandbox_record> created() const;
  std::vector<std::pair<std::string, actors::exec_spec>> execs() const;
  std::vector<std::pair<std::string, actors::output_request>> outputs() const;
  std::vector<std::pair<std::string, actors::file_spec>> files() const;
  std::vector<schema::sandbox_record> egresses() const;

private:
  mutable std::mutex mutex_;
  std::vector<schema::sandbox_record> created_;
  std::vector<std::pair<std::string, actors::exec_spec>> execs_;
  std::vector<std::pair<std::string, actors::output_request>> outputs_;
  std::vector<std::pair<std::string, actors::file_spec>> files_;
  std::vector<schema::sandbox_record> egresses_;
};

/// nd_create answers {id, running}; pause/resume/destroy answer the matching
/// state; nd_list lists what was created; dp_exec, dp_output and dp_file
/// answer the script's replies; the other dp_* calls answer true or the
/// exec reply; nd_egress records the record and answers {id, running}.
actors::node_actor spawn_stub_node(caf::actor_system& system,
                                   std::shared_ptr<stub_node_script> script);

} // namespace airlock::testing
