#include "actors/credential_actor.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <memory>

#include "actors/errors.hpp"
#include "crypto/sealed_box.hpp"
#include "schema/assert.hpp"
#include "schema/egress_rules.hpp"
#include "storage/egress_store.hpp"

namespace airlock::actors {

namespace {

using schema::credential_scope;

status bad(std::string message) { return make_status(errc::invalid_argument, std::move(message)); }

bool is_token_char(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
    return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (auto& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool has_control(std::string_view text) {
  return text.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos;
}

status validate_header(const credential_request& r, const credential_limits& limits) {
  if (r.header.empty() || r.header.size() > limits.header_bytes_max
      || !std::all_of(r.header.begin(), r.header.end(), is_token_char))
    return bad("inject.header must be an HTTP header name (letters, digits and !#$%&'*+-.^_`|~) "
               "of 1.."
               + std::to_string(limits.header_bytes_max) + " bytes");
  // Headers that frame the request or the connection belong to the egress proxy.
  static constexpr std::array<std::string_view, 9> reserved = {
    "host", "content-length", "transfer-encoding", "connection", "upgrade", "keep-alive",
    "te",   "trailer",        "proxy-connection"};
  if (std::find(reserved.begin(), reserved.end(), lower(r.header)) != reserved.end())
    return bad(
      "inject.header may not be " + r.header
      + ": the egress proxy owns Host, Content-Length, Transfer-Encoding, Connection and the "
        "other hop-by-hop headers");
  if (r.value_template.find("{secret}") == std::string::npos
      || r.value_template.size() > limits.value_template_bytes_max || has_control(r.value_template))
    return bad("inject.value_template must contain {secret}, be at most "
               + std::to_string(limits.value_template_bytes_max)
               + " bytes and hold no CR, LF or NUL");
  return status::ok();
}

result<std::vector<std::string>> validate_hosts(const credential_request& r,
                                                const credential_limits& limits) {
  if (r.hosts.empty() || r.hosts.size() > limits.hosts_max)
    return bad("hosts must list 1.." + std::to_string(limits.hosts_max) + " host patterns");
  std::vector<std::string> out;
  for (const auto& host : r.hosts) {
    auto rule = schema::parse_allow_rule(host);
    if (!rule)
      return bad("hosts: " + rule.error().message);
    if (rule->passthrough)
      return bad("hosts: " + host
                 + " is a pass-through rule; a credential is injected only "
                   "where the egress proxy terminates TLS");
    out.push_back((rule->wildcard ? "*." : "") + rule->name
                  + (rule->port ? ":" + std::to_string(rule->port) : ""));
  }
  return out;
}

std::string render(std::string_view value_template, std::string_view secret) {
  std::string out;
  constexpr std::string_view marker = "{secret}";
  size_t at = 0;
  for (size_t found; (found = value_template.find(marker, at)) != std::string_view::npos;
       at = found + marker.size()) {
    out.append(value_template.substr(at, found - at));
    out.append(secret);
  }
  out.append(value_template.substr(at));
  return out;
}

/// How well a credential's scope fits a sandbox: higher is narrower; 0 no fit.
int fit(const schema::credential_record& c, const schema::sandbox_record& sandbox) {
  if (c.tenant_id != sandbox.tenant_id)
    return 0;
  switch (c.scope) {
    case credential_scope::sandbox: return c.scope_value == sandbox.id ? 3 : 0;
    case credential_scope::template_name:
      return c.scope_value == sandbox.spec.template_name ? 2 : 0;
    case credential_scope::tenant: return c.scope_value == sandbox.tenant_id ? 1 : 0;
  }
  return 0;
}

} // namespace

result<std::vector<std::string>> validate_credential_request(const credential_request& r,
                                                             const credential_limits& limits) {
  if (r.name.empty() || r.name.size() > limits.name_bytes_max || has_control(r.name))
    return bad("name must be 1.." + std::to_string(limits.name_bytes_max)
               + " bytes without control characters");
  if (r.scope_value.empty() || r.scope_value.size() > 256)
    return bad("scope must name exactly one of tenant, template or sandbox with a value");
  if (auto header = validate_header(r, limits); !header)
    return header;
  if (r.secret.empty() || r.secret.size() > limits.secret_bytes_max || has_control(r.secret))
    return bad("secret must be 1.." + std::to_string(limits.secret_bytes_max)
               + " bytes without CR, LF or NUL");
  if (r.rate_limit_per_min > limits.rate_limit_per_min_max)
    return bad("rate_limit_per_min must be 0.." + std::to_string(limits.rate_limit_per_min_max));
  return validate_hosts(r, limits);
}

std::vector<schema::credential_grant>
grants_for(const std::vector<schema::credential_record>& credentials,
           const schema::sandbox_record& sandbox, std::string_view master_key,
           std::vector<std::string>* unreadable) {
  std::vector<std::pair<int, const schema::credential_record*>> fitting;
  for (const auto& c : credentials)
    if (int score = fit(c, sandbox); score > 0)
      fitting.emplace_back(score, &c);
  // Stable: creation (id) order within one scope.
  std::stable_sort(fitting.begin(), fitting.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<schema::credential_grant> out;
  for (const auto& [score, c] : fitting) {
    auto secret = crypto::open(master_key, c->sealed_secret, c->id);
    if (!secret) {
      if (unreadable)
        unreadable->push_back(c->id);
      continue;
    }
    out.push_back(schema::credential_grant{c->id, c->name, c->scope, c->hosts, c->header,
                                           render(c->value_template, *secret),
                                           c->rate_limit_per_min});
    std::fill(secret->begin(), secret->end(), '\0');
  }
  return out;
}

namespace {

struct credential_state {
  // Not an aggregate: CAF would otherwise try to build it from the actor pointer.
  credential_state() = default;
  static inline const char* name = "airlock.credentials";
  credential_actor_deps deps;
  credential_actor_options options;
  std::unique_ptr<storage::credential_store> store;
};

using credential_pointer = credential_actor::stateful_pointer<credential_state>;

schema::credential_record without_secret(schema::credential_record record) {
  record.sealed_secret.clear();
  return record;
}

/// Every credential of a tenant; bounded by per_tenant_max.
result<std::vector<schema::credential_record>> all_of_tenant(const credential_state& st,
                                                             const std::string& tenant) {
  std::vector<schema::credential_record> out;
  std::string cursor;
  do {
    auto listed = st.store->list(tenant, 1000, cursor);
    if (!listed)
      return listed.error();
    for (auto& record : listed->items)
      out.push_back(std::move(record));
    cursor = listed->next_cursor;
  } while (!cursor.empty() && out.size() <= st.options.limits.per_tenant_max);
  return out;
}

caf::result<schema::credential_record> on_create(credential_pointer self,
                                                 credential_request& request) {
  auto& st = self->state;
  auto hosts = validate_credential_request(request, st.options.limits);
  if (!hosts)
    return make_error(hosts.error());
  auto existing = all_of_tenant(st, request.tenant_id);
  if (!existing)
    return make_error(existing.error());
  if (existing->size() >= st.options.limits.per_tenant_max)
    return make_error(errc::resource_exhausted, "tenant " + request.tenant_id + " already holds "
                                                  + std::to_string(st.options.limits.per_tenant_max)
                                                  + " credentials; delete some first");
  schema::credential_record record;
  record.created_at_ms = st.deps.clock->now_ms();
  record.id = make_id("cred_", record.created_at_ms, *st.deps.entropy);
  auto sealed = crypto::seal(st.deps.master_key, request.secret, record.id);
  std::fill(request.secret.begin(), request.secret.end(), '\0');
  if (!sealed)
    return make_error(sealed.error());
  record.tenant_id = request.tenant_id;
  record.name = request.name;
  record.scope = request.scope;
  record.scope_value = request.scope_value;
  record.hosts = std::move(*hosts);
  record.header = request.header;
  record.value_template = request.value_template;
  record.rate_limit_per_min = request.rate_limit_per_min;
  record.sealed_secret = std::move(*sealed);
  if (auto saved = st.store->put(record); !saved)
    return make_error(saved);
  return without_secret(std::move(record));
}

result<schema::credential_record> find(const credential_state& st, const std::string& id,
                                       const std::string& tenant) {
  auto found = st.store->get(id);
  if (!found)
    return found.error();
  if (!found->has_value() || (!tenant.empty() && (*found)->tenant_id != tenant))
    return make_status(errc::not_found, "no credential " + id);
  return std::move(**found);
}

caf::result<std::vector<schema::credential_grant>> on_grants(credential_pointer self,
                                                             const std::string& sandbox_id) {
  auto promise = self->make_response_promise<std::vector<schema::credential_grant>>();
  self
    ->request(self->state.deps.registry,
              std::chrono::milliseconds(self->state.options.registry_timeout_ms),
              rg_get_atom::value, sandbox_id, std::string{})
    .then(
      [self, promise](schema::sandbox_record& sandbox) mutable {
        auto& st = self->state;
        auto credentials = all_of_tenant(st, sandbox.tenant_id);
        if (!credentials) {
          promise.deliver(make_error(credentials.error()));
          return;
        }
        std::vector<std::string> unreadable;
        auto grants = grants_for(*credentials, sandbox, st.deps.master_key, &unreadable);
        if (st.deps.log)
          for (const auto& id : unreadable)
            st.deps.log->warn("a credential's secret does not open with this master key; it is "
                              "not injected (was credentials.key replaced?)",
                              {{"credential_id", id}});
        promise.deliver(std::move(grants));
      },
      [promise](caf::error& error) mutable { promise.deliver(std::move(error)); });
  return promise;
}

credential_actor::behavior_type credential_behavior(credential_pointer self) {
  return {
    [self](cr_create_atom, credential_request& request) { return on_create(self, request); },
    [self](cr_list_atom, const std::string& tenant, uint32_t limit,
           const std::string& cursor) -> caf::result<credential_page> {
      auto listed = self->state.store->list(tenant, limit, cursor);
      if (!listed)
        return make_error(listed.error());
      for (auto& record : listed->items)
        record.sealed_secret.clear();
      return std::move(*listed);
    },
    [self](cr_get_atom, const std::string& id,
           const std::string& tenant) -> caf::result<schema::credential_record> {
      auto found = find(self->state, id, tenant);
      if (!found)
        return make_error(found.error());
      return without_secret(std::move(*found));
    },
    [self](cr_delete_atom, const std::string& id, const std::string& tenant) -> caf::result<bool> {
      auto found = find(self->state, id, tenant);
      if (!found)
        return make_error(found.error());
      if (auto erased = self->state.store->erase(id); !erased)
        return make_error(erased);
      return true;
    },
    [self](cr_grants_atom, const std::string& sandbox_id) { return on_grants(self, sandbox_id); },
  };
}

} // namespace

credential_actor spawn_credential_actor(caf::actor_system& system, credential_actor_deps deps,
                                        credential_actor_options options) {
  AIRLOCK_ASSERT(deps.store && deps.clock && deps.entropy, "credential_actor_deps incomplete");
  return system.spawn([deps = std::move(deps), options](credential_pointer self) mutable {
    self->state.store = std::make_unique<storage::credential_store>(*deps.store);
    self->state.deps = std::move(deps);
    self->state.options = options;
    return credential_behavior(self);
  });
}

} // namespace airlock::actors
