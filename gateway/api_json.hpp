#pragma once
// The API's JSON shapes (API.md): records to JSON, request bodies to values.
// Parsing validates types and ranges and says what is wrong in a sentence
// that names the field; it never throws.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "actors/cluster_protocol.hpp"
#include "actors/sandbox_registry.hpp"
#include "gateway/router.hpp"
#include "schema/errc.hpp"
#include "schema/operation.hpp"
#include "schema/sandbox.hpp"

namespace airlock::gateway {

/// Limits on what a client may ask for in a sandbox spec.
struct spec_limits {
  /// Largest cpu_millis. Default: 64000.
  uint32_t cpu_millis_max = 64'000;
  /// Largest memory_mb. Default: 262144.
  uint32_t memory_mb_max = 262'144;
  /// Largest disk_mb. Default: 1048576.
  uint32_t disk_mb_max = 1'048'576;
  /// Entries of env plus metadata. Default: 256.
  size_t map_entries_max = 256;
  /// Bytes of one key or value in env, metadata, template, allow. Default: 4096.
  size_t text_bytes_max = 4096;
  /// Entries of egress.allow. Default: 256.
  size_t allow_entries_max = 256;
};

/// The HTTP status for an expected failure (400, 401, 403, 404, 409, 410,
/// 413, 429, 503, 504; 500 for the rest).
http::status http_status_of(errc code) noexcept;

/// The API's error response for `failure`.
http_response error_response(const status& failure);

/// RFC 3339 UTC with milliseconds ("2026-11-30T15:04:05.123Z"); null for 0.
nlohmann::json timestamp_json(int64_t unix_ms);

nlohmann::json to_json(const schema::operation_record& record);
nlohmann::json to_json(const schema::sandbox_record& record);
nlohmann::json to_json(const schema::snapshot_record& record);
nlohmann::json to_json(const schema::template_version& version);
/// Text field `field` of `body`: absent or null is nullopt; invalid_argument
/// for a non-string or one longer than limits.text_bytes_max.
result<std::optional<std::string>> read_text(const nlohmann::json& body, const char* field,
                                             const spec_limits& limits);

/// A template's warm pool settings.
nlohmann::json to_json(const schema::pool_settings& pool);
/// A template with its versions (oldest first) and its current version's
/// state and size at the top level, as GET /v1/templates lists it.
nlohmann::json to_json(const schema::template_record& record);
nlohmann::json to_json(const actors::process_view& process);
nlohmann::json to_json(const actors::file_entry& entry);

/// Parses a body as a JSON object: invalid_argument naming the problem.
result<nlohmann::json> parse_object(std::string_view body);

/// POST /v1/sandboxes. `template` is required; other fields take defaults.
result<schema::sandbox_spec> parse_sandbox_spec(const nlohmann::json& body,
                                                const spec_limits& limits);

/// The body's "metadata" object (string values, within the spec limits);
/// absent or null: an empty map.
result<std::map<std::string, std::string>> parse_metadata(const nlohmann::json& body,
                                                          const spec_limits& limits);

/// PATCH /v1/sandboxes/{id}: at least one of egress, metadata, idle_timeout_s, on_idle,
/// max_lifetime_s, checkpoint_interval_s, checkpoints_max.
result<actors::sandbox_patch> parse_sandbox_patch(const nlohmann::json& body,
                                                  const spec_limits& limits);

/// POST .../processes.
result<actors::exec_spec> parse_exec_spec(const nlohmann::json& body, const spec_limits& limits);

/// `"TERM"`, `"SIGTERM"` or a number 1..64.
result<int32_t> parse_signal(const nlohmann::json& value);

/// True when `bytes` is valid UTF-8 (SSE data is sent as text then).
bool is_utf8(std::string_view bytes) noexcept;

std::string base64_encode(std::string_view bytes);

} // namespace airlock::gateway
