#pragma once
// The one type-ID block of airlock's actor messages. Append only: the IDs are
// positional, and a remote node maps them by name.

#include <caf/type_id.hpp>

#include <vector>

#include "actors/api_key_actor.hpp"
#include "actors/audit_actor.hpp"
#include "actors/cluster_protocol.hpp"
#include "actors/credential_actor.hpp"
#include "actors/messages.hpp"
#include "actors/pool_actor.hpp"
#include "actors/sandbox_registry.hpp"
#include "schema/operation.hpp"

CAF_BEGIN_TYPE_ID_BLOCK(airlock, caf::first_custom_type_id)
CAF_ADD_TYPE_ID(airlock, (airlock::schema::operation_record))
CAF_ADD_TYPE_ID(airlock, (airlock::actors::operation_request))
CAF_ADD_TYPE_ID(airlock, (airlock::actors::create_reply))
CAF_ADD_TYPE_ID(airlock, (airlock::actors::step_request))
CAF_ADD_TYPE_ID(airlock, (airlock::actors::step_outcome))
CAF_ADD_TYPE_ID(airlock, (airlock::actors::engine_stats))
// The cluster protocol (actors/cluster_protocol.hpp): everything a worker
// and the control plane send each other, so either side can decode it.
CAF_ADD_TYPE_ID(airlock, (airlock::schema::sandbox_record))
CAF_ADD_TYPE_ID(airlock, (airlock::schema::worker_registration))
CAF_ADD_TYPE_ID(airlock, (airlock::schema::worker_heartbeat))
CAF_ADD_TYPE_ID(airlock, (airlock::schema::node_sandbox))
CAF_ADD_TYPE_ID(airlock, (std::vector<airlock::schema::node_sandbox>))
CAF_ADD_TYPE_ID(airlock, (airlock::schema::exec_spec))
CAF_ADD_TYPE_ID(airlock, (airlock::schema::process_view))
CAF_ADD_TYPE_ID(airlock, (std::vector<airlock::schema::process_view>))
CAF_ADD_TYPE_ID(airlock, (airlock::schema::output_request))
CAF_ADD_TYPE_ID(airlock, (airlock::schema::output_segment))
CAF_ADD_TYPE_ID(airlock, (airlock::schema::output_batch))
CAF_ADD_TYPE_ID(airlock, (airlock::schema::file_spec))
CAF_ADD_TYPE_ID(airlock, (airlock::schema::file_entry))
CAF_ADD_TYPE_ID(airlock, (airlock::schema::file_result))
CAF_ADD_TYPE_ID(airlock, (airlock::schema::placement_request))
CAF_ADD_TYPE_ID(airlock, (airlock::schema::registration_ack))
CAF_ADD_TYPE_ID(airlock, (airlock::schema::worker_view))
CAF_ADD_TYPE_ID(airlock, (std::vector<airlock::schema::worker_view>))
CAF_ADD_TYPE_ID(airlock, (airlock::actors::placement))
CAF_ADD_TYPE_ID(airlock, (airlock::actors::node_actor))
CAF_ADD_TYPE_ID(airlock, (airlock::actors::scheduler_actor))
// Egress control: credentials to workers, audit records from them.
CAF_ADD_TYPE_ID(airlock, (airlock::schema::credential_grant))
CAF_ADD_TYPE_ID(airlock, (std::vector<airlock::schema::credential_grant>))
CAF_ADD_TYPE_ID(airlock, (airlock::schema::audit_record))
CAF_ADD_TYPE_ID(airlock, (std::vector<airlock::schema::audit_record>))
// Control-plane values (registry, audit, credentials): local to one host,
// announced all the same so that every message airlock sends is a value.
CAF_ADD_TYPE_ID(airlock, (airlock::actors::caller_identity))
CAF_ADD_TYPE_ID(airlock, (airlock::actors::sandbox_query))
CAF_ADD_TYPE_ID(airlock, (airlock::actors::sandbox_page))
CAF_ADD_TYPE_ID(airlock, (airlock::actors::sandbox_patch))
CAF_ADD_TYPE_ID(airlock, (airlock::actors::operation_query))
CAF_ADD_TYPE_ID(airlock, (airlock::actors::operation_page))
CAF_ADD_TYPE_ID(airlock, (airlock::actors::sandbox_verb))
CAF_ADD_TYPE_ID(airlock, (airlock::schema::audit_query))
CAF_ADD_TYPE_ID(airlock, (airlock::actors::audit_page))
CAF_ADD_TYPE_ID(airlock, (airlock::actors::credential_request))
CAF_ADD_TYPE_ID(airlock, (airlock::schema::credential_record))
CAF_ADD_TYPE_ID(airlock, (airlock::actors::credential_page))
// Snapshots (docs/snapshots.md).
CAF_ADD_TYPE_ID(airlock, (airlock::schema::snapshot_record))
CAF_ADD_TYPE_ID(airlock, (std::vector<airlock::schema::snapshot_record>))
// Templates (docs/templates.md).
CAF_ADD_TYPE_ID(airlock, (airlock::schema::template_build))
CAF_ADD_TYPE_ID(airlock, (airlock::schema::template_built))
CAF_ADD_TYPE_ID(airlock, (airlock::schema::template_progress))
CAF_ADD_TYPE_ID(airlock, (airlock::schema::template_record))
CAF_ADD_TYPE_ID(airlock, (std::vector<airlock::schema::template_record>))
CAF_ADD_TYPE_ID(airlock, (airlock::schema::template_version))
// Warm pools (docs/pools.md).
CAF_ADD_TYPE_ID(airlock, (airlock::schema::pool_settings))
CAF_ADD_TYPE_ID(airlock, (airlock::actors::pool_view))
CAF_ADD_TYPE_ID(airlock, (std::map<std::string, airlock::actors::pool_view>))
// Directory watches (the data plane's /files/watch).
CAF_ADD_TYPE_ID(airlock, (airlock::schema::watch_request))
CAF_ADD_TYPE_ID(airlock, (airlock::schema::watch_batch))
// Resource use (the data plane's /usage, E2B's metrics).
CAF_ADD_TYPE_ID(airlock, (airlock::schema::sandbox_usage))
CAF_END_TYPE_ID_BLOCK(airlock)
