#include "airlockd/certificate_authorities.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

#include "schema/atomic_file.hpp"

namespace airlock::airlockd {

namespace {

constexpr int root_valid_days = 3650;
constexpr int intermediate_valid_days = 365;

bool exists(const std::string& path) {
  struct stat info {};
  return ::lstat(path.c_str(), &info) == 0;
}

} // namespace

result<std::string> read_file(const std::string& path, bool secret) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0)
    return make_status(errc::io_error, "cannot read " + path + ": " + std::strerror(errno));
  if (secret && (info.st_mode & 077) != 0)
    return make_status(errc::permission_denied,
                       path
                         + " is readable or writable by others; chmod 600 it (and consider "
                           "the CA whose key it is compromised)");
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof())
    return make_status(errc::io_error, "cannot read " + path);
  return text.str();
}

result<crypto::key_and_cert> load_or_create_root_ca(const std::string& key_path,
                                                    const std::string& cert_path,
                                                    std::string_view common_name,
                                                    std::string_view trusted_by) {
  bool have_key = exists(key_path);
  bool have_cert = exists(cert_path);
  if (!have_key && !have_cert) {
    auto made = crypto::create_root_ca(common_name, root_valid_days);
    if (!made)
      return made.error();
    if (auto saved = write_file_atomically(key_path, made->key_pem, 0600); !saved)
      return saved;
    if (auto saved = write_file_atomically(cert_path, made->cert_pem, 0644); !saved)
      return saved;
    return made;
  }
  if (!have_key || !have_cert)
    return make_status(errc::corrupt_record,
                       "only one of " + key_path + " and " + cert_path
                         + " exists; restore the other from a backup (or remove both to make a new "
                           "CA, which "
                         + std::string(trusted_by) + " must then trust again)");
  auto key = read_file(key_path, true);
  if (!key)
    return key.error();
  auto cert = read_file(cert_path, false);
  if (!cert)
    return cert.error();
  return crypto::key_and_cert{std::move(*key), std::move(*cert)};
}

result<crypto::key_and_cert> load_or_create_egress_ca(const std::string& data_dir) {
  return load_or_create_root_ca(data_dir + "/egress-ca.key", data_dir + "/egress-ca.crt",
                                "airlock egress root CA", "every sandbox");
}

result<std::string> issue_worker_egress_ca(const crypto::key_and_cert& root,
                                           std::string_view public_key_pem,
                                           std::string_view worker_id) {
  auto intermediate = crypto::issue_intermediate(
    root, public_key_pem, "airlock egress " + std::string(worker_id), intermediate_valid_days);
  if (!intermediate)
    return intermediate.error();
  auto chain = std::move(*intermediate);
  if (!chain.empty() && chain.back() != '\n')
    chain += '\n';
  return chain + root.cert_pem;
}

result<cluster_authorities> load_or_create_cluster_authorities(const std::string& data_dir) {
  const std::string dir = data_dir + "/cluster";
  if (auto made = make_private_directories(dir); !made)
    return made;
  cluster_authorities out;
  out.control_ca_path = dir + "/control-ca.crt";
  out.worker_ca_path = dir + "/worker-ca.crt";
  out.control_key_path = dir + "/control.key";
  out.control_cert_path = dir + "/control.crt";
  auto control_ca = load_or_create_root_ca(dir + "/control-ca.key", out.control_ca_path,
                                           "airlock control-plane CA", "every worker");
  if (!control_ca)
    return control_ca.error();
  auto worker_ca = load_or_create_root_ca(dir + "/worker-ca.key", out.worker_ca_path,
                                          "airlock worker CA", "the control plane and clients");
  if (!worker_ca)
    return worker_ca.error();
  out.control_ca = std::move(*control_ca);
  out.worker_ca = std::move(*worker_ca);
  auto fingerprint = crypto::public_key_fingerprint(out.control_ca.cert_pem);
  if (!fingerprint)
    return fingerprint.error();
  out.control_ca_fingerprint = std::move(*fingerprint);

  // The control plane's own certificate: renewed once two thirds of its life
  // have passed, so that a restart every few weeks keeps it fresh.
  const int64_t now_s = static_cast<int64_t>(std::time(nullptr));
  bool fresh = false;
  if (exists(out.control_cert_path) && exists(out.control_key_path)) {
    auto cert = read_file(out.control_cert_path, false);
    auto key = read_file(out.control_key_path, true);
    if (!key)
      return key.error();
    // A crash between the two renames leaves a new key beside the old
    // certificate: that pair is made again.
    if (cert && crypto::key_matches_certificate(*key, *cert)) {
      auto member = crypto::verify_member_certificate(out.control_ca.cert_pem, *cert, now_s);
      fresh =
        member && member->not_after_s - now_s > int64_t{crypto::member_valid_days} * 86400 / 3;
    }
  }
  if (!fresh) {
    auto key = crypto::generate_key_pem();
    if (!key)
      return key.error();
    auto csr = crypto::create_csr(*key, control_member_name);
    if (!csr)
      return csr.error();
    auto cert = crypto::issue_member_certificate(out.control_ca, *csr, control_member_name,
                                                 crypto::member_valid_days);
    if (!cert)
      return cert.error();
    // The key first: a certificate on disk always has its key beside it.
    if (auto saved = write_file_atomically(out.control_key_path, *key, 0600); !saved)
      return saved;
    if (auto saved = write_file_atomically(out.control_cert_path, *cert, 0644); !saved)
      return saved;
  }
  return out;
}

} // namespace airlock::airlockd
