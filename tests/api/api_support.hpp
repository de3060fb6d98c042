#pragma once
// Helpers of the HTTP API end-to-end tests: a real `airlockd serve` child
// process with this suite's sandbox host options, and a small JSON client on
// the raw-socket HTTP client of tests/support/http_client.hpp. Every wait is
// bounded; nothing sleeps to synchronise.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/child_process.hpp"
#include "tests/support/environment.hpp"
#include "tests/support/host.hpp"
#include "tests/support/http_client.hpp"

namespace airlock::test {

/// How long one operation (create, pause, ...) may take, template build included.
inline constexpr milliseconds operation_wait_max{120'000};

/// A reply, with its body parsed when it is JSON (else `json` is null).
struct api_reply {
  int status = 0; ///< 0 when nothing answered
  std::map<std::string, std::string> headers;
  std::string body;
  nlohmann::json json;

  /// The error code of an {"error": {"code", "message"}} body, else "".
  std::string error_code() const;
  /// True when the body is {"error": {"code": string, "message": string}}.
  bool is_error_shape() const;
};

/// `airlockd serve` on a fresh data directory with the API tests' own
/// instance, veth prefix, address pool and uid base, so that it never meets
/// another airlockd on this host. Needs root.
class serve_process {
public:
  struct options {
    /// Default: apie2e.
    std::string instance = "apie2e";
    /// Default: ae.
    std::string veth_prefix = "ae";
    /// Default: 10.204.0.0/16.
    std::string address_pool = "10.204.0.0/16";
    /// Default: 700000000.
    uint32_t uid_base = 700'000'000;
    /// The btrfs loop image (sparse). Default: 4096.
    uint32_t image_size_mb = 4096;
    /// More flags for airlockd serve (egress options, say). Default: none.
    std::vector<std::string> extra_args;
    /// How long a stop may take (it destroys every sandbox). Default:
    /// operation_wait_max.
    milliseconds stop_wait = operation_wait_max;
  };

  /// Starts it and reads its admin key and port; nullptr (and `error` set)
  /// when it does not come up.
  static std::unique_ptr<serve_process> start(const options& opts, std::string& error);
  /// Stops it (SIGTERM), unmounts DATA/rootfs and removes the directory.
  ~serve_process();
  serve_process(const serve_process&) = delete;
  serve_process& operator=(const serve_process&) = delete;

  const std::string& host() const { return host_; }
  uint16_t port() const { return port_; }
  const std::string& admin_key() const { return admin_key_; }
  const std::string& dir() const { return dir_.path(); }
  std::string data_dir() const { return dir_.path() + "/data"; }
  std::string url() const { return "http://" + host_ + ":" + std::to_string(port_); }
  /// SIGTERM and wait; the exit status, nullopt if it did not stop in time.
  std::optional<int> stop();
  enum class stop_kind { sigterm, sigkill };
  /// Stops it (SIGTERM and a wait, or SIGKILL: a crash) and starts it again
  /// on the same data directory; it listens on a new port. False with a
  /// reason when the new one does not come up.
  bool restart(stop_kind how, std::string& error);
  /// The log airlockd wrote to stderr so far (for failure messages).
  std::string log() const;

private:
  serve_process() = default;
  bool launch(std::string& error);
  temp_dir dir_;
  options options_;
  std::string instance_;
  std::unique_ptr<child_process> process_;
  std::string host_;
  uint16_t port_ = 0;
  std::string admin_key_;
  milliseconds stop_wait_ = operation_wait_max;
};

/// The output of one process read through its SSE stream.
struct process_output {
  std::string stdout_bytes; ///< decoded (base64 chunks too)
  std::string stderr_bytes;
  std::vector<sse_event> events;      ///< every event, in order
  std::optional<nlohmann::json> exit; ///< the exit event's data
  std::string last_id;                ///< id of the last stdout/stderr/exit event
  bool ended = false;                 ///< the server closed the stream
};

/// A started process.
struct started_process {
  std::string process_id;
  std::string attach_path; ///< attach_url without scheme and authority
  std::string attach_token;
};

/// A JSON client of one airlockd with one credential (API key or token).
class api_client {
public:
  api_client(std::string host, uint16_t port, std::string credential)
      : host_(std::move(host)), port_(port), credential_(std::move(credential)) {}

  /// Sends a request with `Authorization: Bearer <credential>` (unless the
  /// credential is empty) plus `headers`.
  api_reply call(const std::string& method, const std::string& target, const std::string& body = {},
                 std::vector<std::pair<std::string, std::string>> headers = {},
                 milliseconds timeout = milliseconds(90'000)) const;
  api_reply get(const std::string& target) const { return call("GET", target); }
  api_reply post(const std::string& target, const nlohmann::json& body) const {
    return call("POST", target, body.dump());
  }

  /// Opens a GET stream; the caller reads events from the connection.
  std::optional<std::pair<http_connection, http_reply>>
  open_stream(const std::string& target,
              std::vector<std::pair<std::string, std::string>> headers = {}) const;

  /// POST /v1/sandboxes with `spec`; the 202's body (sandbox_id, operation_id).
  api_reply create(const nlohmann::json& spec) const;
  /// GET /v1/operations/{id}?wait= until it ends (bounded by operation_wait_max).
  nlohmann::json wait_operation(const std::string& operation_id) const;
  /// Creates a sandbox of small_spec(extra) and waits until it runs; its id,
  /// or "" (with a gtest failure added) when it did not get there.
  std::string create_running(const nlohmann::json& extra = nlohmann::json::object()) const;

  /// POST .../processes; nullopt (with a gtest failure) unless 201.
  std::optional<started_process> exec(const std::string& sandbox_id,
                                      const nlohmann::json& body) const;
  /// Reads `process`'s output stream with its attach token (plus `headers`,
  /// e.g. Last-Event-ID) until the exit event, the end of the stream or
  /// `timeout`; a stream that does not open adds a gtest failure.
  process_output read_output(const started_process& process, const std::string& query = {},
                             std::vector<std::pair<std::string, std::string>> headers = {},
                             milliseconds timeout = milliseconds(60'000)) const;
  /// Runs `cmd` (a shell line) and collects its output to the end.
  process_output run(const std::string& sandbox_id, const std::string& cmd) const;

  const std::string& host() const { return host_; }
  uint16_t port() const { return port_; }
  const std::string& credential() const { return credential_; }

private:
  std::string host_;
  uint16_t port_;
  std::string credential_;
};

/// A sandbox spec of template `minimal` small enough that many fit on a
/// two-core test machine (100 mCPU, 128 MiB), with `extra` fields merged in.
nlohmann::json small_spec(const nlohmann::json& extra = nlohmann::json::object());

/// Decodes standard base64; nullopt for malformed text.
std::optional<std::string> base64_decode(const std::string& text);

/// Adds one stdout/stderr/exit event to `out` (decoding base64 data).
void collect_event(process_output& out, const sse_event& event);

/// The path and query of an http://host:port/... URL.
std::string path_of_url(const std::string& url);

} // namespace airlock::test
