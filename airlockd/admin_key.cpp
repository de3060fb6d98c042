#include "airlockd/admin_key.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "storage/sandbox_store.hpp"
#include "storage/write_batch.hpp"

namespace airlock::airlockd {

namespace {

/// An existing CLI config larger than this is not ours to merge into.
constexpr std::uintmax_t cli_config_bytes_max = 1 << 20;

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

schema::api_key_record make_admin_record(const api_key& key, int64_t created_at_ms) {
  return actors::make_key_record(key, "admin", schema::api_key_role::admin, created_at_ms);
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
  auto key = actors::generate_api_key();
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
