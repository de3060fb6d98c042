#include "schema/egress.hpp"

#include "schema/capnp_codec.hpp"
#include "schema/egress.capnp.h"

namespace airlock::schema {

namespace {

namespace cs = airlock::capnp_schema;

} // namespace

std::string_view to_string(credential_scope scope) noexcept {
  switch (scope) {
    case credential_scope::tenant: return "tenant";
    case credential_scope::template_name: return "template";
    case credential_scope::sandbox: return "sandbox";
  }
  return "unknown";
}

std::optional<credential_scope> parse_credential_scope(std::string_view text) noexcept {
  for (auto scope :
       {credential_scope::tenant, credential_scope::template_name, credential_scope::sandbox})
    if (to_string(scope) == text)
      return scope;
  return std::nullopt;
}

std::string encode(const credential_record& x) {
  return detail::to_bytes<cs::Credential>([&x](cs::Credential::Builder b) {
    b.setSchemaVersion(egress_schema_version);
    b.setId(x.id);
    b.setTenantId(x.tenant_id);
    b.setName(x.name);
    b.setScopeKind(static_cast<cs::CredentialScope>(x.scope));
    b.setScopeValue(x.scope_value);
    detail::fill_texts(b.initHosts(detail::count(x.hosts.size())), x.hosts);
    b.setHeader(x.header);
    b.setValueTemplate(x.value_template);
    b.setRateLimitPerMin(x.rate_limit_per_min);
    b.setSealedSecret(detail::as_data(x.sealed_secret));
    b.setCreatedAtMs(x.created_at_ms);
  });
}

result<credential_record> decode_credential(std::string_view bytes) {
  return detail::from_bytes<cs::Credential, credential_record>(
    bytes, egress_schema_version, "credential",
    [](cs::Credential::Reader b) -> result<credential_record> {
      if (!detail::enum_in_range(b.getScopeKind(), cs::CredentialScope::SANDBOX))
        return detail::enum_too_new("credential");
      credential_record x;
      x.id = detail::text(b.getId());
      x.tenant_id = detail::text(b.getTenantId());
      x.name = detail::text(b.getName());
      x.scope = static_cast<credential_scope>(b.getScopeKind());
      x.scope_value = detail::text(b.getScopeValue());
      x.hosts = detail::read_texts(b.getHosts());
      x.header = detail::text(b.getHeader());
      x.value_template = detail::text(b.getValueTemplate());
      x.rate_limit_per_min = b.getRateLimitPerMin();
      x.sealed_secret = detail::data(b.getSealedSecret());
      x.created_at_ms = b.getCreatedAtMs();
      return x;
    });
}

std::string encode(const credential_grant& x) {
  return detail::to_bytes<cs::CredentialGrant>([&x](cs::CredentialGrant::Builder b) {
    b.setSchemaVersion(egress_schema_version);
    b.setCredentialId(x.credential_id);
    b.setName(x.name);
    b.setScope(static_cast<cs::CredentialScope>(x.scope));
    detail::fill_texts(b.initHosts(detail::count(x.hosts.size())), x.hosts);
    b.setHeader(x.header);
    b.setValue(x.value);
    b.setRateLimitPerMin(x.rate_limit_per_min);
  });
}

result<credential_grant> decode_credential_grant(std::string_view bytes) {
  return detail::from_bytes<cs::CredentialGrant, credential_grant>(
    bytes, egress_schema_version, "credential grant",
    [](cs::CredentialGrant::Reader b) -> result<credential_grant> {
      if (!detail::enum_in_range(b.getScope(), cs::CredentialScope::SANDBOX))
        return detail::enum_too_new("credential grant");
      credential_grant x;
      x.credential_id = detail::text(b.getCredentialId());
      x.name = detail::text(b.getName());
      x.scope = static_cast<credential_scope>(b.getScope());
      x.hosts = detail::read_texts(b.getHosts());
      x.header = detail::text(b.getHeader());
      x.value = detail::text(b.getValue());
      x.rate_limit_per_min = b.getRateLimitPerMin();
      return x;
    });
}

std::string encode(const audit_record& x) {
  return detail::to_bytes<cs::AuditRecord>([&x](cs::AuditRecord::Builder b) {
    b.setSchemaVersion(egress_schema_version);
    b.setAtMs(x.at_ms);
    b.setTenantId(x.tenant_id);
    b.setSandboxId(x.sandbox_id);
    b.setKind(x.kind);
    b.setDecision(x.decision);
    b.setReason(x.reason);
    b.setTarget(x.target);
    b.setDetail(x.detail);
  });
}

result<audit_record> decode_audit_record(std::string_view bytes) {
  return detail::from_bytes<cs::AuditRecord, audit_record>(
    bytes, egress_schema_version, "audit record",
    [](cs::AuditRecord::Reader b) -> result<audit_record> {
      audit_record x;
      x.at_ms = b.getAtMs();
      x.tenant_id = detail::text(b.getTenantId());
      x.sandbox_id = detail::text(b.getSandboxId());
      x.kind = detail::text(b.getKind());
      x.decision = detail::text(b.getDecision());
      x.reason = detail::text(b.getReason());
      x.target = detail::text(b.getTarget());
      x.detail = detail::text(b.getDetail());
      return x;
    });
}

} // namespace airlock::schema
