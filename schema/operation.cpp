#include "schema/operation.hpp"

#include <array>

#include "schema/capnp_codec.hpp"
#include "schema/operation.capnp.h"

namespace airlock::schema {

namespace {

namespace cs = airlock::capnp_schema;

constexpr std::array<std::string_view, 5> operation_state_names{"pending", "running", "succeeded",
                                                                "failed", "cancelled"};

} // namespace

std::string_view to_string(operation_state state) noexcept {
  return operation_state_names.at(static_cast<size_t>(state));
}

std::optional<operation_state> parse_operation_state(std::string_view text) noexcept {
  for (size_t i = 0; i < operation_state_names.size(); ++i)
    if (operation_state_names[i] == text)
      return static_cast<operation_state>(i);
  return std::nullopt;
}

std::string encode(const operation_record& r) {
  return detail::to_bytes<cs::OperationRecord>([&r](cs::OperationRecord::Builder b) {
    b.setSchemaVersion(operation_schema_version);
    b.setId(r.id);
    b.setKind(r.kind);
    b.setTargetId(r.target_id);
    b.setTenantId(r.tenant_id);
    b.setState(static_cast<cs::OperationState>(r.state));
    if (r.error) {
      auto e = b.initError();
      e.setCode(r.error->code);
      e.setMessage(r.error->message);
    }
    b.setResultJson(r.result_json);
    b.setCreatedAtMs(r.created_at_ms);
    b.setUpdatedAtMs(r.updated_at_ms);
    b.setIdempotencyKey(r.idempotency_key);
    b.setParamsJson(r.params_json);
    b.setStep(r.step);
    b.setStepStarted(r.step_started);
    b.setStepData(detail::as_data(r.step_data));
    b.setCancelRequested(r.cancel_requested);
    b.setDeadlineMs(r.deadline_ms);
    b.setAttempts(r.attempts);
    b.setSequence(r.sequence);
    b.setProgressJson(r.progress_json);
  });
}

result<operation_record> decode_operation(std::string_view bytes) {
  return detail::from_bytes<cs::OperationRecord, operation_record>(
    bytes, operation_schema_version, "operation",
    [](cs::OperationRecord::Reader b) -> result<operation_record> {
      if (!detail::enum_in_range(b.getState(), cs::OperationState::CANCELLED))
        return detail::enum_too_new("operation");
      operation_record r;
      r.id = detail::text(b.getId());
      r.kind = detail::text(b.getKind());
      r.target_id = detail::text(b.getTargetId());
      r.tenant_id = detail::text(b.getTenantId());
      r.state = static_cast<operation_state>(b.getState());
      if (b.hasError())
        r.error =
          error_info{detail::text(b.getError().getCode()), detail::text(b.getError().getMessage())};
      r.result_json = detail::text(b.getResultJson());
      r.created_at_ms = b.getCreatedAtMs();
      r.updated_at_ms = b.getUpdatedAtMs();
      r.idempotency_key = detail::text(b.getIdempotencyKey());
      r.params_json = detail::text(b.getParamsJson());
      r.step = b.getStep();
      r.step_started = b.getStepStarted();
      r.step_data = detail::data(b.getStepData());
      r.cancel_requested = b.getCancelRequested();
      r.deadline_ms = b.getDeadlineMs();
      r.attempts = b.getAttempts();
      r.sequence = b.getSequence();
      r.progress_json = detail::text(b.getProgressJson());
      return r;
    });
}

} // namespace airlock::schema
