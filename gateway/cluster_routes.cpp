// The cluster's admission (docs/cluster.md): join tokens, the CA bundle
// data-plane clients trust, and the join itself, where a worker with a token
// trades a certificate signing request for a certificate naming the worker
// id the control plane gives it.

#include <string>
#include <utility>

#include "actors/api_keys.hpp"
#include "crypto/cluster_certificates.hpp"
#include "gateway/control_api_internal.hpp"

namespace airlock::gateway::control_detail {

using nlohmann::json;

namespace {

/// The largest join request: a CSR, a name and a MAC, with room for JSON.
constexpr uint64_t join_body_bytes_max = crypto::csr_pem_max + 2048;
constexpr size_t worker_name_max = 64;

http_response no_cluster() {
  return json_error(http::status::not_found, "not_found",
                    "this airlockd admits no workers: it is `serve` (its worker runs in-process); "
                    "run `airlockd control` for a cluster");
}

/// The string field `name` of `body`, or empty when it is missing or not a
/// string (`present` says which).
std::string string_field(const json& body, const char* name, bool& present) {
  auto found = body.find(name);
  present = found != body.end() && found->is_string();
  return present ? found->get<std::string>() : std::string{};
}

/// POST /v1/cluster/tokens {"ttl_s"?, "name"?} (admin) -> 201 {"token",
/// "token_id", "expires_at", "ca_fingerprint"}.
void create_token(api_ptr api, exchange_ptr ex, caller who) {
  const auto& cluster = api->deps.cluster;
  if (!cluster)
    return ex->respond(no_cluster());
  if (!who.admin)
    return ex->respond(json_error(http::status::forbidden, "permission_denied",
                                  "only an admin key may create join tokens"));
  auto body = optional_object_body(*ex);
  if (!body)
    return ex->respond(error_response(body.error()));
  int64_t ttl_s = actors::join_token_ttl_default_s;
  if (auto ttl = body->find("ttl_s"); ttl != body->end()) {
    if (!ttl->is_number_integer())
      return ex->respond(json_error(http::status::bad_request, "invalid_argument",
                                    "ttl_s is a whole number of seconds"));
    ttl_s = ttl->get<int64_t>();
  }
  bool named = false;
  std::string name = string_field(*body, "name", named);
  if (body->contains("name") && !named)
    return ex->respond(
      json_error(http::status::bad_request, "invalid_argument", "name is a string"));
  const std::string fingerprint = cluster->control_ca_fingerprint.substr(7); // after "sha256:"
  auto made = cluster->tokens->create(std::move(name), ttl_s, fingerprint);
  if (!made)
    return ex->respond(error_response(made.error()));
  ex->respond(json_response(http::status::created,
                            {{"token", made->first.text()},
                             {"token_id", made->first.token_id},
                             {"name", made->second.name},
                             {"expires_at", timestamp_json(made->second.expires_at_ms)},
                             {"ca_fingerprint", cluster->control_ca_fingerprint}}));
}

/// GET /v1/cluster/ca: the worker CA (PEM), which signs every worker's data
/// listener; any API key may read it.
void get_ca(api_ptr api, exchange_ptr ex, caller) {
  if (!api->deps.cluster)
    return ex->respond(no_cluster());
  http_response answer{http::status::ok, 11};
  answer.set(http::field::content_type, "application/x-pem-file");
  answer.body() = api->deps.cluster->worker_ca.cert_pem;
  answer.prepare_payload();
  ex->respond(std::move(answer));
}

/// POST /v1/cluster/join {"token_id", "csr", "name", "mac"} (no API key: the
/// MAC under the token's key is the proof) -> 201 {"worker_id",
/// "certificate", "worker_ca", "control_ca", "cluster_port", "mac"}.
/// Blocking (a synced write and a signature, a few milliseconds) on the I/O
/// thread: joins are rare and operator-driven.
void join(api_ptr api, exchange_ptr ex) {
  const auto& cluster = api->deps.cluster;
  if (!cluster)
    return ex->respond(no_cluster());
  auto refuse = [&](std::string_view reason, const status& why) {
    if (cluster->on_refused)
      cluster->on_refused(reason, why.message);
    ex->respond(error_response(why));
  };
  auto body = parse_object(ex->request().body());
  if (!body)
    return refuse("malformed", body.error());
  bool has_id = false, has_csr = false, has_name = false, has_mac = false;
  const std::string token_id = string_field(*body, "token_id", has_id);
  const std::string csr = string_field(*body, "csr", has_csr);
  const std::string name = string_field(*body, "name", has_name);
  const std::string mac = string_field(*body, "mac", has_mac);
  if (!has_id || !has_csr || !has_name || !has_mac)
    return refuse("malformed",
                  make_status(errc::invalid_argument,
                              "a join names token_id, csr, name and mac (strings); "
                              "`airlockd worker --join URL --token TOKEN` sends them"));
  if (name.size() > worker_name_max)
    return refuse("malformed", make_status(errc::invalid_argument,
                                           "a worker's name has at most "
                                             + std::to_string(worker_name_max) + " characters"));
  // The request is checked before the token is spent: a bad CSR costs the
  // worker nothing but a corrected retry.
  if (auto checked = crypto::read_csr(csr); !checked)
    return refuse("bad_csr", checked.error());
  auto id = actors::random_hex(8);
  if (!id)
    return refuse("internal", id.error());
  const std::string worker_id = "wk_" + *id;
  auto key = cluster->tokens->redeem(token_id, mac, csr, name, worker_id);
  if (!key) {
    const auto& why = key.error();
    return refuse(why.code == errc::unauthenticated                  ? "token_invalid"
                  : why.message.find("expired") != std::string::npos ? "token_expired"
                                                                     : "token_used",
                  why);
  }
  auto certificate = crypto::issue_member_certificate(cluster->worker_ca, csr, worker_id,
                                                      cluster->member_valid_days);
  if (!certificate)
    return refuse("internal", certificate.error());
  const std::string answer_mac =
    actors::join_answer_mac(*key, worker_id, *certificate, cluster->worker_ca.cert_pem,
                            cluster->control_ca_pem, cluster->cluster_port);
  ex->respond(json_response(http::status::created, {{"worker_id", worker_id},
                                                    {"certificate", *certificate},
                                                    {"worker_ca", cluster->worker_ca.cert_pem},
                                                    {"control_ca", cluster->control_ca_pem},
                                                    {"cluster_port", cluster->cluster_port},
                                                    {"mac", answer_mac}}));
}

/// DELETE /v1/workers/{id} (admin): forgets a lost worker and revokes its
/// certificate; its next connection is refused.
void remove_worker(api_ptr api, exchange_ptr ex, caller who) {
  const auto& cluster = api->deps.cluster;
  if (!cluster)
    return ex->respond(no_cluster());
  if (!who.admin)
    return ex->respond(json_error(http::status::forbidden, "permission_denied",
                                  "only an admin key may remove workers"));
  const std::string id(ex->path_param("id"));
  call_actor(
    *api->deps.system, api->deps.scheduler, api->call_timeout(),
    [api, ex, id](bool) {
      // Blocking (a synced write) on the I/O thread: removals are rare.
      if (auto revoked = api->deps.cluster->revocations->revoke(id); !revoked)
        return ex->respond(error_response(revoked));
      ex->respond(json_response(http::status::ok, {{"id", id}, {"state", "removed"}}));
    },
    answer_error(ex), actors::sc_remove_atom::value, id);
}

} // namespace

void add_cluster_routes(route_table& routes, const api_ptr& api, const route_options& json_body) {
  using http::verb;
  routes.add_async(verb::post, "/v1/cluster/tokens", authed(api, create_token), json_body);
  routes.add_async(verb::get, "/v1/cluster/ca", authed(api, get_ca));
  routes.add_async(verb::delete_, "/v1/workers/{id}", authed(api, remove_worker));
  routes.add_async(
    verb::post, "/v1/cluster/join", [api](exchange_ptr ex) { join(api, std::move(ex)); },
    route_options{join_body_bytes_max});
}

} // namespace airlock::gateway::control_detail
