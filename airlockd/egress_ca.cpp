#include "airlockd/egress_ca.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
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

result<std::string> read_file(const std::string& path, bool secret) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0)
    return make_status(errc::io_error, "cannot read " + path + ": " + std::strerror(errno));
  if (secret && (info.st_mode & 077) != 0)
    return make_status(errc::permission_denied,
                       path
                         + " is readable or writable by others; chmod 600 it (and consider "
                           "the egress CA compromised)");
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof())
    return make_status(errc::io_error, "cannot read " + path);
  return text.str();
}

} // namespace

result<crypto::key_and_cert> load_or_create_egress_ca(const std::string& data_dir) {
  auto key_path = data_dir + "/egress-ca.key";
  auto cert_path = data_dir + "/egress-ca.crt";
  bool have_key = exists(key_path);
  bool have_cert = exists(cert_path);
  if (!have_key && !have_cert) {
    auto made = crypto::create_root_ca("airlock egress root CA", root_valid_days);
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
                           "CA, which every sandbox must then trust again)");
  auto key = read_file(key_path, true);
  if (!key)
    return key.error();
  auto cert = read_file(cert_path, false);
  if (!cert)
    return cert.error();
  return crypto::key_and_cert{std::move(*key), std::move(*cert)};
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

} // namespace airlock::airlockd
