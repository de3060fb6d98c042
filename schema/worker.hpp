#pragma once
// C++ value types for worker registration and heartbeat (schema/worker.capnp).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "schema/errc.hpp"

namespace airlock::schema {

inline constexpr uint16_t worker_schema_version = 1;

struct resources {
  uint32_t cpu_millis = 0;
  uint32_t memory_mb = 0;
  uint32_t disk_mb = 0;
  uint32_t sandboxes = 0;
  bool operator==(const resources&) const = default;
  resources& operator+=(const resources& more) {
    cpu_millis += more.cpu_millis;
    memory_mb += more.memory_mb;
    disk_mb += more.disk_mb;
    sandboxes += more.sandboxes;
    return *this;
  }
};

struct worker_registration {
  std::string id;
  std::string name;
  std::string cluster_address;
  std::string data_url;
  resources capacity;
  std::vector<std::string> runtimes;
  std::string version;
  int64_t started_at_ms = 0;
  /// PEM public key of the worker's egress CA key; the control plane issues
  /// an intermediate certificate for it at registration. Empty: none wanted.
  std::string egress_ca_public_key;
  /// Reserved for a sandbox whose spec names no request (`sandboxes` unused).
  resources default_request;
  /// How far the sum of its sandboxes' memory limits may exceed capacity, in
  /// percent of capacity.memory_mb. 0: unbounded.
  uint32_t memory_limit_percent = 0;
  /// Its cluster certificate (PEM), naming `id`, and a signature with that
  /// certificate's key over registration_proof_message: who holds the
  /// certificate's key registers as the id it names, and nobody else.
  /// Empty in `serve` (in-process, nothing to prove).
  std::string certificate;
  std::string proof;
  /// What the control plane's calls to this worker's node gate must carry
  /// (actors/session_gate.hpp): random per process, sent only over the
  /// worker's own connection. Empty in `serve` (in-process: no gate).
  std::string session_secret;
  bool operator==(const worker_registration&) const = default;
};

/// What a registration's proof signs: the worker id and the CAF node the
/// registration comes from, so that a proof cannot be replayed from another
/// connection.
inline std::string registration_proof_message(std::string_view worker_id, std::string_view node) {
  return "airlock worker registration\n" + std::string(worker_id) + "\n" + std::string(node);
}

struct worker_heartbeat {
  std::string worker_id;
  uint64_t sequence = 0;
  int64_t sent_at_ms = 0;
  /// What its sandboxes requested (placement reserves this).
  resources allocated;
  std::vector<std::string> sandbox_ids;
  uint32_t load_milli = 0;
  /// The sum of its sandboxes' limits.
  resources limited;
  /// What they use now: CPU in millicores over the last interval, memory and
  /// disk in MiB, sandboxes running.
  resources used;
  /// Under memory pressure the worker refuses placements; the reason says what it saw.
  bool memory_pressure = false;
  std::string pressure_reason;
  bool operator==(const worker_heartbeat&) const = default;
};

std::string encode(const worker_registration& registration);
result<worker_registration> decode_worker_registration(std::string_view bytes);
std::string encode(const worker_heartbeat& heartbeat);
result<worker_heartbeat> decode_worker_heartbeat(std::string_view bytes);

} // namespace airlock::schema
