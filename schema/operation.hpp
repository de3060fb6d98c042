#pragma once
// C++ value type for an operation record and its one conversion to and from
// Cap'n Proto bytes (schema/operation.capnp).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "schema/errc.hpp"

namespace airlock::schema {

/// The newest operation record version this build reads and writes.
inline constexpr uint16_t operation_schema_version = 1;

enum class operation_state : uint8_t { pending, running, succeeded, failed, cancelled };

std::string_view to_string(operation_state state) noexcept;
std::optional<operation_state> parse_operation_state(std::string_view text) noexcept;

/// True for succeeded, failed and cancelled: nothing moves after these.
constexpr bool is_terminal(operation_state state) noexcept {
  return state == operation_state::succeeded || state == operation_state::failed
         || state == operation_state::cancelled;
}

struct error_info {
  std::string code;
  std::string message;
  bool operator==(const error_info&) const = default;
};

struct operation_record {
  std::string id;
  std::string kind;
  std::string target_id;
  std::string tenant_id;
  operation_state state = operation_state::pending;
  std::optional<error_info> error;
  std::string result_json;
  int64_t created_at_ms = 0;
  int64_t updated_at_ms = 0;
  std::string idempotency_key;
  std::string params_json;
  uint32_t step = 0;
  bool step_started = false;
  std::string step_data;
  bool cancel_requested = false;
  int64_t deadline_ms = 0;
  uint32_t attempts = 0;
  uint64_t sequence = 0;
  /// The last progress a long step reported (a JSON object: step, percent,
  /// bytes_done, bytes_total); "" = none. Kept in memory between transitions.
  std::string progress_json;

  bool operator==(const operation_record&) const = default;
};

/// Cap'n Proto bytes (unpacked, word-aligned length) of `record`.
std::string encode(const operation_record& record);

/// Fails with corrupt_record on bytes that are not a valid record and with
/// unsupported_version on a record written by a newer airlock.
result<operation_record> decode_operation(std::string_view bytes);

} // namespace airlock::schema
