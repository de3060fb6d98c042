#include "schema/sandbox.hpp"

#include <array>

#include "schema/capnp_codec.hpp"
#include "schema/sandbox.capnp.h"

namespace airlock::schema {

namespace {

namespace cs = airlock::capnp_schema;

constexpr std::array<std::string_view, 11> sandbox_state_names{
  "creating",  "running",   "pausing",    "paused",    "resuming", "suspending",
  "suspended", "restoring", "destroying", "destroyed", "error"};

constexpr std::array<std::string_view, 3> egress_profile_names{"none", "allowlist", "open"};

template <class Array>
auto parse_name(const Array& names, std::string_view text) -> std::optional<size_t> {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == text)
      return i;
  return std::nullopt;
}

void fill_spec(cs::SandboxSpec::Builder b, const sandbox_spec& s) {
  b.setTemplate(s.template_name);
  b.setCpuMillis(s.cpu_millis);
  b.setMemoryMb(s.memory_mb);
  b.setDiskMb(s.disk_mb);
  b.setCpuRequestMillis(s.cpu_request_millis);
  b.setMemoryRequestMb(s.memory_request_mb);
  b.setDiskRequestMb(s.disk_request_mb);
  detail::fill_pairs(b.initEnv(detail::count(s.env.size())), s.env);
  detail::fill_pairs(b.initMetadata(detail::count(s.metadata.size())), s.metadata);
  b.setIdleTimeoutS(s.idle_timeout_s);
  auto egress = b.initEgress();
  egress.setProfile(static_cast<cs::EgressProfile>(s.egress.profile));
  detail::fill_texts(egress.initAllow(detail::count(s.egress.allow.size())), s.egress.allow);
  b.setFromCheckpoint(s.from_checkpoint);
  b.setOnIdle(static_cast<cs::IdleAction>(s.on_idle));
  b.setMaxLifetimeS(s.max_lifetime_s);
  b.setCheckpointIntervalS(s.checkpoint_interval_s);
  b.setCheckpointsMax(s.checkpoints_max);
  b.setTemplateVersion(s.template_version);
  b.setTemplateWorkerName(s.template_worker_name);
  b.setTemplateWorkerId(s.template_worker_id);
  b.setFromPool(s.from_pool);
}

result<sandbox_spec> read_spec(cs::SandboxSpec::Reader b) {
  sandbox_spec s;
  if (!detail::enum_in_range(b.getEgress().getProfile(), cs::EgressProfile::OPEN)
      || !detail::enum_in_range(b.getOnIdle(), cs::IdleAction::DELETE))
    return detail::enum_too_new("sandbox");
  s.template_name = detail::text(b.getTemplate());
  s.cpu_millis = b.getCpuMillis();
  s.memory_mb = b.getMemoryMb();
  s.disk_mb = b.getDiskMb();
  s.cpu_request_millis = b.getCpuRequestMillis();
  s.memory_request_mb = b.getMemoryRequestMb();
  s.disk_request_mb = b.getDiskRequestMb();
  s.env = detail::read_pairs<decltype(s.env)>(b.getEnv());
  s.metadata = detail::read_pairs<decltype(s.metadata)>(b.getMetadata());
  s.idle_timeout_s = b.getIdleTimeoutS();
  s.egress.profile = static_cast<egress_profile>(b.getEgress().getProfile());
  s.egress.allow = detail::read_texts(b.getEgress().getAllow());
  s.from_checkpoint = detail::text(b.getFromCheckpoint());
  s.on_idle = static_cast<idle_action>(b.getOnIdle());
  s.max_lifetime_s = b.getMaxLifetimeS();
  s.checkpoint_interval_s = b.getCheckpointIntervalS();
  s.checkpoints_max = b.getCheckpointsMax();
  s.template_version = b.getTemplateVersion();
  s.template_worker_name = detail::text(b.getTemplateWorkerName());
  s.template_worker_id = detail::text(b.getTemplateWorkerId());
  s.from_pool = b.getFromPool();
  return s;
}

} // namespace

std::string_view to_string(idle_action action) noexcept {
  return action == idle_action::delete_sandbox ? "delete" : "suspend";
}

std::optional<idle_action> parse_idle_action(std::string_view text) noexcept {
  if (text == "suspend")
    return idle_action::suspend;
  if (text == "delete")
    return idle_action::delete_sandbox;
  return std::nullopt;
}

std::string_view to_string(sandbox_state state) noexcept {
  return sandbox_state_names.at(static_cast<size_t>(state));
}

std::optional<sandbox_state> parse_sandbox_state(std::string_view text) noexcept {
  if (auto i = parse_name(sandbox_state_names, text))
    return static_cast<sandbox_state>(*i);
  return std::nullopt;
}

std::string_view to_string(egress_profile profile) noexcept {
  return egress_profile_names.at(static_cast<size_t>(profile));
}

std::optional<egress_profile> parse_egress_profile(std::string_view text) noexcept {
  if (auto i = parse_name(egress_profile_names, text))
    return static_cast<egress_profile>(*i);
  return std::nullopt;
}

std::string encode(const sandbox_record& r) {
  return detail::to_bytes<cs::SandboxRecord>([&r](cs::SandboxRecord::Builder b) {
    b.setSchemaVersion(sandbox_schema_version);
    b.setId(r.id);
    b.setTenantId(r.tenant_id);
    b.setState(static_cast<cs::SandboxState>(r.state));
    fill_spec(b.initSpec(), r.spec);
    b.setWorkerId(r.worker_id);
    b.setDataUrl(r.data_url);
    if (r.error_reason) {
      auto e = b.initErrorReason();
      e.setCode(r.error_reason->code);
      e.setMessage(r.error_reason->message);
    }
    b.setCreatedAtMs(r.created_at_ms);
    b.setUpdatedAtMs(r.updated_at_ms);
    b.setLastActiveAtMs(r.last_active_at_ms);
    b.setLastOperationId(r.last_operation_id);
    b.setSnapshotId(r.snapshot_id);
    b.setLifetimeUsedMs(r.lifetime_used_ms);
    b.setRunningSinceMs(r.running_since_ms);
  });
}

std::string_view to_string(snapshot_kind kind) noexcept {
  return kind == snapshot_kind::suspend ? "suspend" : "checkpoint";
}

std::string encode(const snapshot_record& r) {
  return detail::to_bytes<cs::SnapshotRecord>([&r](cs::SnapshotRecord::Builder b) {
    b.setSchemaVersion(sandbox_schema_version);
    b.setId(r.id);
    b.setKind(static_cast<cs::SnapshotKind>(r.kind));
    b.setSandboxId(r.sandbox_id);
    b.setTenantId(r.tenant_id);
    b.setTemplate(r.template_name);
    b.setTemplateVersion(r.template_version);
    b.setRuntime(r.runtime);
    b.setWorkerId(r.worker_id);
    b.setMemoryPersisted(r.memory_persisted);
    b.setSizeBytes(r.size_bytes);
    b.setLabel(r.label);
    b.setAutomatic(r.automatic);
    b.setCreatedAtMs(r.created_at_ms);
    b.setComplete(r.complete);
  });
}

result<snapshot_record> decode_snapshot(std::string_view bytes) {
  return detail::from_bytes<cs::SnapshotRecord, snapshot_record>(
    bytes, sandbox_schema_version, "snapshot",
    [](cs::SnapshotRecord::Reader b) -> result<snapshot_record> {
      if (!detail::enum_in_range(b.getKind(), cs::SnapshotKind::SUSPEND))
        return detail::enum_too_new("snapshot");
      snapshot_record r;
      r.id = detail::text(b.getId());
      r.kind = static_cast<snapshot_kind>(b.getKind());
      r.sandbox_id = detail::text(b.getSandboxId());
      r.tenant_id = detail::text(b.getTenantId());
      r.template_name = detail::text(b.getTemplate());
      r.template_version = detail::text(b.getTemplateVersion());
      r.runtime = detail::text(b.getRuntime());
      r.worker_id = detail::text(b.getWorkerId());
      r.memory_persisted = b.getMemoryPersisted();
      r.size_bytes = b.getSizeBytes();
      r.label = detail::text(b.getLabel());
      r.automatic = b.getAutomatic();
      r.created_at_ms = b.getCreatedAtMs();
      r.complete = b.getComplete();
      return r;
    });
}

result<sandbox_record> decode_sandbox(std::string_view bytes) {
  return detail::from_bytes<cs::SandboxRecord, sandbox_record>(
    bytes, sandbox_schema_version, "sandbox",
    [](cs::SandboxRecord::Reader b) -> result<sandbox_record> {
      if (!detail::enum_in_range(b.getState(), cs::SandboxState::ERROR))
        return detail::enum_too_new("sandbox");
      auto spec = read_spec(b.getSpec());
      if (!spec)
        return spec.error();
      sandbox_record r;
      r.id = detail::text(b.getId());
      r.tenant_id = detail::text(b.getTenantId());
      r.state = static_cast<sandbox_state>(b.getState());
      r.spec = std::move(*spec);
      r.worker_id = detail::text(b.getWorkerId());
      r.data_url = detail::text(b.getDataUrl());
      if (b.hasErrorReason())
        r.error_reason = error_info{detail::text(b.getErrorReason().getCode()),
                                    detail::text(b.getErrorReason().getMessage())};
      r.created_at_ms = b.getCreatedAtMs();
      r.updated_at_ms = b.getUpdatedAtMs();
      r.last_active_at_ms = b.getLastActiveAtMs();
      r.last_operation_id = detail::text(b.getLastOperationId());
      r.snapshot_id = detail::text(b.getSnapshotId());
      r.lifetime_used_ms = b.getLifetimeUsedMs();
      r.running_since_ms = b.getRunningSinceMs();
      return r;
    });
}

} // namespace airlock::schema
