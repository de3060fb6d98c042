#pragma once
// credential_actor: the control plane's credentials (POST/GET/DELETE
// /v1/credentials) and the grants a worker's egress proxy fetches for one
// sandbox. Secrets are sealed with AES-256-GCM under the master key
// (crypto/sealed_box.hpp, the credential id as associated data) before they
// reach the store, and leave only inside a grant over the cluster link. No
// reply to the API ever carries the secret or its sealed form.
//
// Messages are local to the control plane (values all the same); the
// scheduler's sc_creds delegates here.

#include <caf/atom.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "actors/clock.hpp"
#include "actors/cluster_protocol.hpp" // inspect() of credential_grant, credential_record, page
#include "actors/log.hpp"
#include "actors/sandbox_registry.hpp"
#include "schema/egress.hpp"
#include "schema/page.hpp"
#include "schema/sandbox.hpp"
#include "storage/kv_store.hpp"

namespace airlock::actors {

using cr_create_atom = caf::atom_constant<caf::atom("crcreate")>;
using cr_list_atom = caf::atom_constant<caf::atom("crlist")>;
using cr_get_atom = caf::atom_constant<caf::atom("crget")>;
using cr_delete_atom = caf::atom_constant<caf::atom("crdelete")>;
using cr_grants_atom = caf::atom_constant<caf::atom("crgrants")>;

/// Bounds on a credential. Every field's default is what the API documents.
struct credential_limits {
  /// Longest name. Default: 128.
  size_t name_bytes_max = 128;
  /// Host patterns per credential. Default: 64.
  size_t hosts_max = 64;
  /// Longest header name. Default: 128.
  size_t header_bytes_max = 128;
  /// Longest value template. Default: 1024.
  size_t value_template_bytes_max = 1'024;
  /// Longest secret. Default: 8192.
  size_t secret_bytes_max = 8'192;
  /// Largest rate limit per minute. Default: 1000000.
  uint32_t rate_limit_per_min_max = 1'000'000;
  /// Credentials one tenant may hold; past it a create is refused with
  /// resource_exhausted. Default: 1000.
  size_t per_tenant_max = 1'000;
};

/// POST /v1/credentials after JSON parsing. `tenant_id` is whose it is.
struct credential_request {
  std::string tenant_id;
  std::string name;
  schema::credential_scope scope = schema::credential_scope::tenant;
  std::string scope_value; ///< tenant id, template name or sandbox id
  std::vector<std::string> hosts;
  std::string header;
  std::string value_template;
  std::string secret;
  uint32_t rate_limit_per_min = 0;
};

/// Checks a request against `limits`: a name, a scope value, host patterns
/// that parse as allow rules (no pass-through: a credential needs TLS
/// termination), a header that is an HTTP token and not one the egress proxy owns
/// (Host, Content-Length, Transfer-Encoding, Connection and the other
/// hop-by-hop headers), a value template containing "{secret}", a secret
/// of 1..secret_bytes_max bytes, and no CR, LF or NUL anywhere in the header
/// value (no header injection). Returns the host patterns normalized
/// (lowercase), or invalid_argument with a sentence naming the field.
/// The secret never shows when a message is printed (logs, test failures).
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, credential_request& x) {
  auto name = caf::meta::type_name("credential_request");
  if constexpr (std::is_same_v<Inspector, caf::detail::stringification_inspector>) {
    std::string secret = x.secret.empty() ? "" : "<hidden>";
    return f(name, x.tenant_id, x.name, x.scope, x.scope_value, x.hosts, x.header, x.value_template,
             secret, x.rate_limit_per_min);
  } else {
    return f(name, x.tenant_id, x.name, x.scope, x.scope_value, x.hosts, x.header, x.value_template,
             x.secret, x.rate_limit_per_min);
  }
}

result<std::vector<std::string>> validate_credential_request(const credential_request& request,
                                                             const credential_limits& limits);

/// The grants for `sandbox`, narrowest scope first (sandbox, template,
/// tenant; creation order within one): every credential of the sandbox's
/// tenant whose scope matches it, its secret opened with `master_key` and
/// rendered into the value template. A credential whose secret does not open
/// is left out and its id added to `unreadable` (when given).
std::vector<schema::credential_grant>
grants_for(const std::vector<schema::credential_record>& credentials,
           const schema::sandbox_record& sandbox, std::string_view master_key,
           std::vector<std::string>* unreadable = nullptr);

/// A page of credentials (sealed_secret always empty).
using credential_page = schema::page<schema::credential_record>;

struct credential_actor_options {
  credential_limits limits;
  /// Bound on the registry lookup behind cr_grants. Default: 10000.
  uint32_t registry_timeout_ms = 10'000;
};

/// What the credential actor works with; the pointees outlive it.
struct credential_actor_deps {
  storage::kv_store* store = nullptr;
  std::string master_key; ///< 32 bytes (crypto::load_or_create_key_file)
  const wall_clock* clock = nullptr;
  entropy_source* entropy = nullptr; ///< thread-safe (system_entropy)
  sandbox_registry_actor registry;
  std::optional<logger> log;
};

using credential_actor = caf::typed_actor<
  /// Stores a new credential and replies with it (no secret). Errors:
  /// invalid_argument, resource_exhausted (per_tenant_max), io_error.
  /// Not idempotent: each call makes a new id.
  caf::replies_to<cr_create_atom, credential_request>::with<schema::credential_record>,
  /// Credentials of a tenant (tenant "" lists all), limit, cursor.
  /// Idempotent.
  caf::replies_to<cr_list_atom, std::string /*tenant*/, uint32_t /*limit*/,
                  std::string /*cursor*/>::with<credential_page>,
  /// One credential (id, tenant; "" sees all). Errors: not_found (also
  /// another tenant's). Idempotent.
  caf::replies_to<cr_get_atom, std::string, std::string>::with<schema::credential_record>,
  /// Deletes it (id, tenant). Errors: not_found. Not idempotent by design:
  /// a second delete answers 404.
  caf::replies_to<cr_delete_atom, std::string, std::string>::with<bool>,
  /// The grants for sandbox `id` (looked up in the registry for its tenant
  /// and template). Errors: not_found, unavailable (registry), io_error.
  /// Idempotent.
  caf::replies_to<cr_grants_atom, std::string>::with<std::vector<schema::credential_grant>>>;

credential_actor spawn_credential_actor(caf::actor_system& system, credential_actor_deps deps,
                                        credential_actor_options options = {});

} // namespace airlock::actors
