#include "schema/template_record.hpp"

#include <algorithm>

#include "schema/capnp_codec.hpp"
#include "schema/template.capnp.h"

namespace airlock::schema {

namespace cs = capnp_schema;

std::string_view to_string(template_version_state state) noexcept {
  switch (state) {
    case template_version_state::building: return "building";
    case template_version_state::ready: return "ready";
    case template_version_state::failed: return "failed";
  }
  return "unknown";
}

template_version* template_record::find(uint32_t version) {
  for (auto& v : versions)
    if (v.version == version)
      return &v;
  return nullptr;
}

const template_version* template_record::find(uint32_t version) const {
  return const_cast<template_record*>(this)->find(version);
}

uint32_t template_record::next_version() const {
  uint32_t highest = 0;
  for (const auto& v : versions)
    highest = std::max(highest, v.version);
  return highest + 1;
}

std::string encode(const template_record& r) {
  return detail::to_bytes<cs::TemplateRecord>([&r](cs::TemplateRecord::Builder b) {
    b.setSchemaVersion(template_schema_version);
    b.setName(r.name);
    b.setTenantId(r.tenant_id);
    b.setCurrentVersion(r.current_version);
    b.setCreatedAtMs(r.created_at_ms);
    b.setUpdatedAtMs(r.updated_at_ms);
    auto pool = b.initPool();
    pool.setSize(r.pool.size);
    pool.setCpuMillis(r.pool.cpu_millis);
    pool.setMemoryMb(r.pool.memory_mb);
    pool.setDiskMb(r.pool.disk_mb);
    auto list = b.initVersions(detail::count(r.versions.size()));
    for (unsigned i = 0; i < r.versions.size(); ++i) {
      const auto& v = r.versions[i];
      auto out = list[i];
      out.setVersion(v.version);
      out.setState(static_cast<cs::TemplateVersionState>(v.state));
      out.setSource(v.source_json);
      out.setDigest(v.digest);
      out.setSizeBytes(v.size_bytes);
      out.setFiles(v.files);
      out.setBuildLogTail(v.build_log_tail);
      detail::fill_pairs(out.initEnv(detail::count(v.env.size())), v.env);
      out.setWorkdir(v.workdir);
      out.setUser(v.user);
      out.setStartCmd(v.start_cmd);
      out.setReadyCmd(v.ready_cmd);
      out.setDefaultRuntime(v.default_runtime);
      out.setCreatedAtMs(v.created_at_ms);
      out.setWorkerId(v.worker_id);
      out.setOperationId(v.operation_id);
      if (v.error) {
        out.getError().setCode(v.error->code);
        out.getError().setMessage(v.error->message);
      }
      out.setWorkerName(v.worker_name);
    }
  });
}

result<template_record> decode_template(std::string_view bytes) {
  return detail::from_bytes<cs::TemplateRecord, template_record>(
    bytes, template_schema_version, "template",
    [](cs::TemplateRecord::Reader b) -> result<template_record> {
      template_record r;
      r.name = detail::text(b.getName());
      r.tenant_id = detail::text(b.getTenantId());
      r.current_version = b.getCurrentVersion();
      r.created_at_ms = b.getCreatedAtMs();
      r.updated_at_ms = b.getUpdatedAtMs();
      if (b.hasPool()) {
        auto pool = b.getPool();
        r.pool =
          pool_settings{pool.getSize(), pool.getCpuMillis(), pool.getMemoryMb(), pool.getDiskMb()};
      }
      for (auto in : b.getVersions()) {
        if (!detail::enum_in_range(in.getState(), cs::TemplateVersionState::FAILED))
          return detail::enum_too_new("template");
        template_version v;
        v.version = in.getVersion();
        v.state = static_cast<template_version_state>(in.getState());
        v.source_json = detail::text(in.getSource());
        v.digest = detail::text(in.getDigest());
        v.size_bytes = in.getSizeBytes();
        v.files = in.getFiles();
        v.build_log_tail = detail::text(in.getBuildLogTail());
        v.env = detail::read_pairs<std::vector<std::pair<std::string, std::string>>>(in.getEnv());
        v.workdir = detail::text(in.getWorkdir());
        v.user = detail::text(in.getUser());
        v.start_cmd = detail::text(in.getStartCmd());
        v.ready_cmd = detail::text(in.getReadyCmd());
        v.default_runtime = detail::text(in.getDefaultRuntime());
        v.created_at_ms = in.getCreatedAtMs();
        v.worker_id = detail::text(in.getWorkerId());
        v.operation_id = detail::text(in.getOperationId());
        if (in.hasError() && in.getError().getCode().size() > 0)
          v.error = error_info{detail::text(in.getError().getCode()),
                               detail::text(in.getError().getMessage())};
        v.worker_name = detail::text(in.getWorkerName());
        r.versions.push_back(std::move(v));
      }
      return r;
    });
}

} // namespace airlock::schema
