#include "airlockd/admin_key.hpp"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "schema/atomic_file.hpp"
#include "storage/sandbox_store.hpp"
#include "storage/write_batch.hpp"

namespace airlock::airlockd {

namespace {

/// An existing CLI config larger than this is not ours to merge into.
constexpr std::uintmax_t cli_config_bytes_max = 1 << 20;

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

} // namespace

schema::api_key_record make_admin_record(const api_key& key, int64_t created_at_ms) {
  return actors::make_key_record(key, "admin", schema::api_key_role::admin, created_at_ms);
}

status write_cli_config(const std::string& path, std::string_view url, std::string_view key) {
  if (auto made = make_private_directories(std::filesystem::path(path).parent_path().string());
      !made)
    return made;
  nlohmann::json config = read_existing_config(path);
  config["url"] = std::string(url);
  config["api_key"] = std::string(key);
  return write_file_atomically(path, config.dump(2) + "\n", 0600);
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
