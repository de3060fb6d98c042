#include "airlockd/worker_identity.hpp"

#include <algorithm>
#include <ctime>
#include <sys/stat.h>
#include <tuple>

#include <nlohmann/json.hpp>

#include "actors/join_tokens.hpp"
#include "airlockd/certificate_authorities.hpp"
#include "airlockd/http_call.hpp"
#include "crypto/cluster_certificates.hpp"
#include "schema/atomic_file.hpp"

namespace airlock::airlockd {

namespace {

using nlohmann::json;

/// What a CSR names: the issuer chooses the worker id, so any member name does.
constexpr std::string_view requested_name = "joining-worker";

bool exists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0;
}

int64_t now_s() { return static_cast<int64_t>(std::time(nullptr)); }

/// After a renewal that was needed failed (the link may not be up yet).
constexpr std::chrono::seconds renew_retry_interval{10};

} // namespace

worker_identity identity_paths(const std::string& data_dir) {
  const std::string dir = data_dir + "/cluster";
  worker_identity id;
  id.key_path = dir + "/worker.key";
  id.cert_path = dir + "/worker.crt";
  id.control_ca_path = dir + "/control-ca.crt";
  id.worker_ca_path = dir + "/worker-ca.crt";
  return id;
}

result<identity_files> read_identity_files(const worker_identity& id) {
  auto key = read_file(id.key_path, true);
  if (!key)
    return key.error();
  auto certificate = read_file(id.cert_path, false);
  if (!certificate)
    return certificate.error();
  auto worker_ca = read_file(id.worker_ca_path, false);
  if (!worker_ca)
    return worker_ca.error();
  return identity_files{std::move(*certificate), std::move(*key), std::move(*worker_ca)};
}

namespace {

/// The stored identity, checked: the key is the certificate's and the
/// certificate chains to the worker CA stored beside it.
result<worker_identity> load(worker_identity id) {
  auto files = read_identity_files(id);
  if (!files)
    return files.error();
  const std::string* key = &files->key;
  const std::string* cert = &files->certificate;
  const std::string* worker_ca = &files->worker_ca;
  if (!exists(id.control_ca_path))
    return make_status(errc::corrupt_record, id.control_ca_path + " is missing");
  if (!crypto::key_matches_certificate(*key, *cert))
    return make_status(errc::corrupt_record,
                       id.key_path + " is not the key of " + id.cert_path
                         + "; remove the cluster directory and join again with a new token");
  auto member = crypto::verify_member_certificate(*worker_ca, *cert, now_s());
  if (!member)
    return make_status(errc::permission_denied,
                       id.cert_path + ": " + member.error().message
                         + "; remove the cluster directory and join again with a new token");
  id.worker_id = member->name;
  id.not_after_s = member->not_after_s;
  return id;
}

/// The control plane's {"error": {"message"}} or, failing that, the body.
std::string refusal_of(const http_answer& answer) {
  auto parsed = json::parse(answer.body, nullptr, false);
  if (parsed.is_object() && parsed.contains("error") && parsed["error"].is_object())
    return parsed["error"].value("message", answer.body);
  return "HTTP " + std::to_string(answer.status) + ": " + answer.body.substr(0, 200);
}

/// A new key and a certificate signing request for it: what a join and a
/// renewal send.
struct key_request {
  std::string key;
  std::string csr;
};

result<key_request> new_key_request(const std::vector<std::string>& addresses) {
  auto key = crypto::generate_key_pem();
  if (!key)
    return key.error();
  auto csr = crypto::create_csr(*key, requested_name, addresses);
  if (!csr)
    return csr.error();
  return key_request{std::move(*key), std::move(*csr)};
}

/// The issued certificate's member when it chains to `worker_ca`, names
/// `worker_id` and is for `key`; nullopt otherwise.
std::optional<crypto::verified_member> issued_for(const std::string& worker_ca,
                                                  const std::string& certificate,
                                                  const std::string& worker_id,
                                                  const std::string& key) {
  auto member = crypto::verify_member_certificate(worker_ca, certificate, now_s());
  if (!member || member->name != worker_id || !crypto::key_matches_certificate(key, certificate))
    return std::nullopt;
  return std::move(*member);
}

result<worker_identity> join(worker_identity id, const join_request& request,
                             const actors::logger& log) {
  auto token = actors::parse_join_token(request.token);
  if (!token)
    return token.error();
  auto fresh = new_key_request(request.addresses);
  if (!fresh)
    return fresh.error();
  const std::string* key = &fresh->key;
  const std::string* csr = &fresh->csr;
  const std::string mac_key = token->mac_key();
  json body{{"token_id", token->token_id},
            {"csr", *csr},
            {"name", request.name},
            {"mac", actors::join_request_mac(mac_key, token->token_id, *csr, request.name)}};
  log.info("joining the cluster with a token",
           {{"control_url", request.control_url}, {"token_id", token->token_id}});
  auto answer =
    http_call(request.control_url, "POST", "/v1/cluster/join", body.dump(), {}, request.timeout);
  if (!answer)
    return answer.error();
  if (answer->status != 201)
    return make_status(
      answer->status == 401 || answer->status == 403 ? errc::permission_denied : errc::unavailable,
      "the control plane at " + request.control_url + " refused the join: " + refusal_of(*answer));
  auto reply = json::parse(answer->body, nullptr, false);
  auto text = [&reply](const char* field) {
    return reply.is_object() && reply.contains(field) && reply[field].is_string()
             ? reply[field].get<std::string>()
             : std::string{};
  };
  const std::string worker_id = text("worker_id");
  const std::string certificate = text("certificate");
  const std::string worker_ca = text("worker_ca");
  const std::string control_ca = text("control_ca");
  const uint16_t cluster_port = reply.is_object() && reply.contains("cluster_port")
                                    && reply["cluster_port"].is_number_unsigned()
                                  ? reply["cluster_port"].get<uint16_t>()
                                  : 0;
  // Nothing of the answer is trusted before these checks.
  if (!actors::join_mac_equal(actors::join_answer_mac(mac_key, worker_id, certificate, worker_ca,
                                                      control_ca, cluster_port),
                              text("mac")))
    return make_status(errc::permission_denied,
                       "the answer from " + request.control_url
                         + " is not signed with the token's key: it is not the control plane "
                           "that made the token");
  auto fingerprint = crypto::public_key_fingerprint(control_ca);
  if (!fingerprint || *fingerprint != "sha256:" + token->ca_sha256)
    return make_status(errc::permission_denied,
                       "the control plane at " + request.control_url + " has CA "
                         + (fingerprint ? *fingerprint : std::string("(none)"))
                         + " but the token pins sha256:" + token->ca_sha256
                         + ": the token was made for another control plane");
  auto member = issued_for(worker_ca, certificate, worker_id, *key);
  if (!member)
    return make_status(errc::permission_denied,
                       "the certificate from " + request.control_url
                         + " is not a worker certificate for this worker's key");
  // The key first: a certificate on disk always has its key beside it.
  if (auto made = make_private_directories(id.key_path.substr(0, id.key_path.rfind('/'))); !made)
    return made;
  for (const auto& [path, bytes, mode] :
       {std::tuple{id.key_path, *key, 0600}, std::tuple{id.cert_path, certificate, 0644},
        std::tuple{id.worker_ca_path, worker_ca, 0644},
        std::tuple{id.control_ca_path, control_ca, 0644}})
    if (auto saved = write_file_atomically(path, bytes, static_cast<mode_t>(mode)); !saved)
      return saved;
  id.worker_id = worker_id;
  id.not_after_s = member->not_after_s;
  log.info("joined the cluster", {{"worker_id", worker_id}, {"control_url", request.control_url}});
  return id;
}

} // namespace

result<std::optional<worker_identity>>
load_or_join(const std::string& data_dir, const join_request& request, const actors::logger& log) {
  auto id = identity_paths(data_dir);
  if (exists(id.cert_path) || exists(id.key_path)) {
    auto loaded = load(std::move(id));
    if (!loaded)
      return loaded.error();
    return std::optional<worker_identity>(std::move(*loaded));
  }
  if (request.token.empty())
    return std::optional<worker_identity>();
  auto joined = join(std::move(id), request, log);
  if (!joined)
    return joined.error();
  return std::optional<worker_identity>(std::move(*joined));
}

result<std::shared_ptr<member_credentials>>
member_credentials::load(const worker_identity& identity, std::vector<std::string> addresses) {
  auto files = read_identity_files(identity);
  if (!files)
    return files.error();
  std::shared_ptr<member_credentials> out(new member_credentials(identity));
  out->addresses_ = std::move(addresses);
  out->certificate_ = std::move(files->certificate);
  out->key_ = std::move(files->key);
  out->worker_ca_ = std::move(files->worker_ca);
  out->not_after_s_ = identity.not_after_s;
  return out;
}

std::string member_credentials::certificate() const {
  std::lock_guard lock(mutex_);
  return certificate_;
}

result<std::string> member_credentials::sign(const std::string& message) const {
  std::lock_guard lock(mutex_);
  return crypto::sign_message(key_, message);
}

int64_t member_credentials::not_after_s() const {
  std::lock_guard lock(mutex_);
  return not_after_s_;
}

bool member_credentials::names_addresses() const {
  std::lock_guard lock(mutex_);
  auto named = crypto::certificate_ip_addresses(certificate_);
  return std::all_of(addresses_.begin(), addresses_.end(), [&named](const std::string& address) {
    return std::find(named.begin(), named.end(), address) != named.end();
  });
}

status
member_credentials::renew(const std::function<result<std::string>(const std::string& csr)>& issue) {
  auto fresh = new_key_request(addresses_);
  if (!fresh)
    return fresh.error();
  auto certificate = issue(fresh->csr);
  if (!certificate)
    return certificate.error();
  auto member = issued_for(worker_ca_, *certificate, identity_.worker_id, fresh->key);
  if (!member)
    return make_status(errc::permission_denied,
                       "the renewed certificate is not a certificate of this worker for its new "
                       "key; the old one stays");
  if (auto saved = write_file_atomically(identity_.key_path, fresh->key, 0600); !saved)
    return saved;
  if (auto saved = write_file_atomically(identity_.cert_path, *certificate, 0644); !saved)
    return saved;
  std::lock_guard lock(mutex_);
  key_ = std::move(fresh->key);
  certificate_ = std::move(*certificate);
  not_after_s_ = member->not_after_s;
  return status::ok();
}

certificate_renewer::certificate_renewer(std::shared_ptr<member_credentials> credentials,
                                         issuer issue, int64_t renew_before_s,
                                         std::chrono::milliseconds check_interval,
                                         const actors::logger& log)
    : credentials_(std::move(credentials)), issue_(std::move(issue)),
      renew_before_s_(renew_before_s), check_interval_(check_interval),
      log_(log.with_component("certificate")), thread_([this] { run(); }) {}

certificate_renewer::~certificate_renewer() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void certificate_renewer::run() {
  std::unique_lock lock(mutex_);
  auto next_check = std::chrono::milliseconds(0);
  while (!wake_.wait_for(lock, next_check, [this] { return stopping_; })) {
    next_check = check_interval_;
    bool expiring = credentials_->not_after_s() - now_s() <= renew_before_s_;
    if (!expiring && credentials_->names_addresses())
      continue;
    lock.unlock();
    auto renewed = credentials_->renew(issue_);
    if (renewed) {
      log_.info("renewed this worker's certificate",
                {{"not_after_s", credentials_->not_after_s()},
                 {"reason", expiring ? "expiring" : "addresses"}});
    } else {
      next_check = std::min(check_interval_, std::chrono::milliseconds(renew_retry_interval));
      log_.warn("could not renew this worker's certificate; trying again",
                {{"error", renewed.message}, {"retry_ms", next_check.count()}});
    }
    lock.lock();
  }
}

} // namespace airlock::airlockd
