#include "airlockd/admin_key.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "storage/sandbox_store.hpp"
#include "storage/write_batch.hpp"

namespace airlock::airlockd {

namespace {

constexpr size_t key_id_bytes = 8;
constexpr size_t secret_bytes = 32;
/// An existing CLI config larger than this is not ours to merge into.
constexpr std::uintmax_t cli_config_bytes_max = 1 << 20;

std::string to_hex(const unsigned char* bytes, size_t size) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (size_t i = 0; i < size; ++i) {
    out += digits[bytes[i] >> 4];
    out += digits[bytes[i] & 0xf];
  }
  return out;
}

result<std::string> random_hex(size_t size) {
  std::array<unsigned char, 64> bytes{};
  if (size > bytes.size() || RAND_bytes(bytes.data(), static_cast<int>(size)) != 1)
    return make_status(errc::internal, "the OpenSSL random generator failed");
  return to_hex(bytes.data(), size);
}

status io_failure(const std::string& what, const std::string& path, int error) {
  return make_status(errc::io_error, what + " " + path + ": " + std::strerror(error));
}

/// Creates the missing directories of `dir` with mode 0700: the CLI config
/// holds a secret, so nobody else may even list its directory.
status make_private_parents(const std::filesystem::path& dir) {
  if (dir.empty())
    return status::ok();
  std::filesystem::path partial;
  for (const auto& part : dir) {
    partial /= part;
    if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST)
      return io_failure("cannot create directory", partial.string(), errno);
  }
  return status::ok();
}

/// The existing config's other settings, so a first start does not wipe them.
nlohmann::json read_existing_config(const std::string& path) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  if (ec || size > cli_config_bytes_max)
    return nlohmann::json::object();
  std::ifstream in(path, std::ios::binary);
  auto doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return doc.is_object() ? doc : nlohmann::json::object();
}

status write_file_atomically(const std::string& path, const std::string& content) {
  std::string temp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return io_failure("cannot create", temp, errno);
  // O_CREAT's mode does not apply to a file that already existed.
  bool ok = ::fchmod(fd, 0600) == 0
            && ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size())
            && ::fsync(fd) == 0;
  int error = errno;
  ::close(fd);
  if (!ok || ::rename(temp.c_str(), path.c_str()) != 0) {
    error = ok ? errno : error;
    ::unlink(temp.c_str());
    return io_failure("cannot write", path, error);
  }
  return status::ok();
}

} // namespace

result<api_key> generate_api_key() {
  auto id = random_hex(key_id_bytes);
  if (!id)
    return id.error();
  auto secret = random_hex(secret_bytes);
  if (!secret)
    return secret.error();
  return api_key{std::move(*id), std::move(*secret)};
}

std::string sha256(std::string_view text) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  // EVP_Digest with SHA-256 cannot fail short of memory exhaustion.
  EVP_Digest(text.data(), text.size(), digest.data(), &size, EVP_sha256(), nullptr);
  return {reinterpret_cast<const char*>(digest.data()), size};
}

schema::api_key_record make_admin_record(const api_key& key, int64_t created_at_ms) {
  schema::api_key_record record;
  record.key_id = key.key_id;
  record.tenant_id = "admin";
  record.secret_sha256 = sha256(key.text());
  record.role = schema::api_key_role::admin;
  record.created_at_ms = created_at_ms;
  return record;
}

status write_cli_config(const std::string& path, std::string_view url, std::string_view key) {
  if (auto made = make_private_parents(std::filesystem::path(path).parent_path()); !made)
    return made;
  nlohmann::json config = read_existing_config(path);
  config["url"] = std::string(url);
  config["api_key"] = std::string(key);
  return write_file_atomically(path, config.dump(2) + "\n");
}

result<std::optional<std::string>> bootstrap_admin_key(storage::kv_store& store,
                                                       const std::string& cli_config_path,
                                                       std::string_view url, int64_t now_ms) {
  storage::api_key_store keys(store);
  auto has_keys = keys.any();
  if (!has_keys)
    return has_keys.error();
  if (has_keys.value())
    return std::optional<std::string>{};
  auto key = generate_api_key();
  if (!key)
    return key.error();
  if (auto written = write_cli_config(cli_config_path, url, key->text()); !written)
    return written;
  storage::write_batch batch;
  storage::api_key_store::stage_put(batch, make_admin_record(*key, now_ms));
  if (auto stored = store.write(batch, storage::durability::synced); !stored)
    return stored;
  return std::optional<std::string>{key->text()};
}

} // namespace airlock::airlockd
