#include "worker/message_types.hpp"

#include <caf/type_id.hpp>

#include <vector>

#include "actors/type_ids.hpp"
#include "worker/node_state.hpp"
#include "worker/sandbox_actor.hpp"
#include "worker/worker_actor.hpp"

// Append only, like airlock's block: the IDs are positional. The process
// request and row (schema::exec_spec, process_view) are in airlock's block.
CAF_BEGIN_TYPE_ID_BLOCK(airlock_worker, caf::id_block::airlock::end)
CAF_ADD_TYPE_ID(airlock_worker, (airlock::worker::create_sandbox_request))
CAF_ADD_TYPE_ID(airlock_worker, (airlock::worker::sandbox_entry))
CAF_ADD_TYPE_ID(airlock_worker, (std::vector<airlock::worker::sandbox_entry>))
CAF_ADD_TYPE_ID(airlock_worker, (airlock::worker::recover_report))
CAF_ADD_TYPE_ID(airlock_worker, (airlock::status))
CAF_ADD_TYPE_ID(airlock_worker, (airlock::worker::read_request))
CAF_ADD_TYPE_ID(airlock_worker, (airlock::worker::read_reply))
CAF_ADD_TYPE_ID(airlock_worker, (airlock::worker::output_read))
CAF_ADD_TYPE_ID(airlock_worker, (airlock::worker::output_reply))
CAF_ADD_TYPE_ID(airlock_worker, (airlock::worker::file_request))
CAF_ADD_TYPE_ID(airlock_worker, (airlock::worker::file_reply))
CAF_ADD_TYPE_ID(airlock_worker, (airlock::worker::guest_event))
CAF_ADD_TYPE_ID(airlock_worker, (airlock::worker::job_result))
CAF_ADD_TYPE_ID(airlock_worker, (airlock::worker::sandbox_stats))
CAF_ADD_TYPE_ID(airlock_worker, (airlock::worker::node_detail::template_outcome))
CAF_END_TYPE_ID_BLOCK(airlock_worker)

namespace airlock::worker {

void add_worker_message_types(caf::actor_system_config& config) {
  config.add_message_types<caf::id_block::airlock_worker>();
}

} // namespace airlock::worker
