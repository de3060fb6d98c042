#pragma once
// C++ value types for template records (schema/template.capnp), as in API.md.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "schema/errc.hpp"
#include "schema/operation.hpp"

namespace airlock::schema {

inline constexpr uint16_t template_schema_version = 1;

enum class template_version_state : uint8_t { building, ready, failed };

std::string_view to_string(template_version_state state) noexcept;

struct template_version {
  uint32_t version = 0;
  template_version_state state = template_version_state::building;
  std::string source_json;
  std::string digest;
  uint64_t size_bytes = 0;
  uint64_t files = 0;
  std::string build_log_tail;
  std::vector<std::pair<std::string, std::string>> env;
  std::string workdir;
  std::string user;
  std::string start_cmd;
  std::string ready_cmd;
  std::string default_runtime;
  int64_t created_at_ms = 0;
  std::string worker_id; ///< holds its files; empty: every worker builds it on first use
  std::string operation_id;
  std::optional<error_info> error;
  std::string worker_name; ///< its name in the worker's rootfs
  bool operator==(const template_version&) const = default;
};

/// A template's warm pool; size 0: none.
struct pool_settings {
  uint32_t size = 0;       ///< members per worker that can hold the current version
  uint32_t cpu_millis = 0; ///< the members' limits; 0: a create's defaults
  uint32_t memory_mb = 0;
  uint32_t disk_mb = 0;
  bool operator==(const pool_settings&) const = default;
};

struct template_record {
  std::string name;
  std::string tenant_id; ///< empty: shared by every tenant
  uint32_t current_version = 0;
  std::vector<template_version> versions; ///< oldest first
  int64_t created_at_ms = 0;
  int64_t updated_at_ms = 0;
  pool_settings pool;
  bool operator==(const template_record&) const = default;

  template_version* find(uint32_t version);
  const template_version* find(uint32_t version) const;
  /// The next version number a build gets.
  uint32_t next_version() const;
};

std::string encode(const template_record& record);
result<template_record> decode_template(std::string_view bytes);

} // namespace airlock::schema
