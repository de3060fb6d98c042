#pragma once
// The control plane's egress-control routes (API.md): credentials
// (POST/GET/DELETE /v1/credentials) and the audit log (GET /v1/audit),
// tenant-scoped (an admin key sees every tenant). The secret of a credential
// goes in once and never comes back out: no answer and no log line carries it.
//
// The JSON conversions are free functions so that they are tested without a
// server.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "actors/credential_actor.hpp"
#include "gateway/api_routes.hpp"
#include "schema/egress.hpp"

namespace airlock::gateway {

/// The body of POST /v1/credentials: {"name", "scope": {"tenant"|"template"|
/// "sandbox": "…"}, "hosts": [...], "inject": {"header", "value_template"},
/// "secret", "rate_limit_per_min"?}. A tenant scope may be `true` or "" for
/// the caller's own tenant. The tenant of the result is left empty (the
/// route decides it). Errors: invalid_argument naming the field; the
/// semantic checks are actors::validate_credential_request's.
result<actors::credential_request> parse_credential_request(const nlohmann::json& body);

/// A credential as the API shows it: never the secret, sealed or not.
nlohmann::json to_json(const schema::credential_record& record);

/// An audit record as GET /v1/audit shows it.
nlohmann::json to_json(const schema::audit_record& record);

/// "2024-05-01T12:00:00Z", with optional fraction, or Unix milliseconds.
std::optional<int64_t> parse_time_ms(std::string_view text);

/// Adds the credential and audit routes (deps.credentials and deps.audit may
/// be empty: then those routes answer 503).
void add_egress_routes(route_table& routes, const control_api_deps& deps);

/// After a PATCH changed a sandbox's egress: tells its worker (through the
/// scheduler) so that new connections use the new policy. Fire and forget:
/// a worker that is away gets the policy with its next create; the failure
/// is logged.
void push_egress_to_worker(const control_api_deps& deps, schema::sandbox_record record);

} // namespace airlock::gateway
