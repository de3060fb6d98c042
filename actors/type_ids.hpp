#pragma once
// The one type-ID block of airlock's actor messages. Append only: the IDs are
// positional, and a remote node maps them by name.

#include <caf/type_id.hpp>

#include "actors/messages.hpp"
#include "schema/operation.hpp"

CAF_BEGIN_TYPE_ID_BLOCK(airlock, caf::first_custom_type_id)
  CAF_ADD_TYPE_ID(airlock, (airlock::schema::operation_record))
  CAF_ADD_TYPE_ID(airlock, (airlock::actors::operation_request))
  CAF_ADD_TYPE_ID(airlock, (airlock::actors::create_reply))
  CAF_ADD_TYPE_ID(airlock, (airlock::actors::step_request))
  CAF_ADD_TYPE_ID(airlock, (airlock::actors::step_outcome))
  CAF_ADD_TYPE_ID(airlock, (airlock::actors::engine_stats))
CAF_END_TYPE_ID_BLOCK(airlock)
