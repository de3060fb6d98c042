#pragma once
// A worker's identity in its cluster: the key it made (never sent), the
// certificate naming its worker id that the control plane signed for it,
// and the two CA certificates, in `data_dir`/cluster/. A worker without one
// joins with a token (actors/join_tokens.hpp): it sends a certificate
// signing request, and trusts the answer only when its MAC checks under the
// token's key and the control-plane CA's fingerprint is the one the token
// pins.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "actors/log.hpp"
#include "schema/errc.hpp"

namespace airlock::airlockd {

struct worker_identity {
  std::string worker_id; ///< the certificate's name
  std::string key_path;  ///< 0600
  std::string cert_path;
  std::string control_ca_path; ///< the CA the control plane's certificate must chain to
  std::string worker_ca_path;
  int64_t not_after_s = 0;
};

/// The PEM texts of an identity's certificate, key and worker CA.
struct identity_files {
  std::string certificate;
  std::string key;
  std::string worker_ca;
};

/// Reads them; permission_denied for a key others may read, io_error.
result<identity_files> read_identity_files(const worker_identity& identity);

/// Where a worker's identity files are in `data_dir` (they may not exist yet).
worker_identity identity_paths(const std::string& data_dir);

/// What a join needs; `token` empty: no join, only a stored identity.
struct join_request {
  std::string token;
  std::string control_url; ///< http://HOST:PORT
  std::string name;        ///< the worker's name, shown by GET /v1/workers
  /// The IP addresses the worker's data listener serves TLS at: named in its
  /// certificate so that clients can check whom they reach.
  std::vector<std::string> addresses;
  std::chrono::milliseconds timeout{30'000};
};

/// The stored identity when there is one (the token, if any, is then not
/// spent); else, with a token, the identity a join gets and stores; else
/// nullopt. Errors say what to do: permission_denied when the control plane
/// is not the one the token pins or refused the token, unavailable when it
/// cannot be reached, corrupt_record for stored files that do not fit
/// together. Blocking: call from set-up code.
result<std::optional<worker_identity>>
load_or_join(const std::string& data_dir, const join_request& request, const actors::logger& log);

/// The worker's certificate and key as they are now: read from its files
/// at start, replaced when they are renewed. Thread-safe.
class member_credentials {
public:
  /// Reads the files of `identity`; errors of reading them. `addresses`: the
  /// IP addresses its certificates must name (see join_request).
  static result<std::shared_ptr<member_credentials>> load(const worker_identity& identity,
                                                          std::vector<std::string> addresses = {});

  std::string certificate() const;
  /// A signature of `message` with the current key (crypto::sign_message).
  result<std::string> sign(const std::string& message) const;
  /// Seconds since the epoch at which the current certificate expires.
  int64_t not_after_s() const;
  /// Whether the current certificate names every address it must (one from
  /// before the listener served TLS, or moved, does not: it is renewed).
  bool names_addresses() const;

  /// Makes a new key, has `issue` sign a certificate for it (a CSR in, the
  /// certificate out), checks the answer (it chains to the worker CA, names
  /// this worker, is for the new key) and replaces the files atomically,
  /// key first: CAF reads both for each new connection, so open sessions
  /// are untouched and a connection made between the two renames fails its
  /// handshake and is retried. Blocking (fsync): call from a thread of its
  /// own.
  status renew(const std::function<result<std::string>(const std::string& csr)>& issue);

private:
  explicit member_credentials(worker_identity identity) : identity_(std::move(identity)) {}

  worker_identity identity_;
  std::vector<std::string> addresses_;
  mutable std::mutex mutex_;
  std::string certificate_;
  std::string key_;
  std::string worker_ca_;
  int64_t not_after_s_ = 0;
};

/// Renews a worker's certificate over the cluster link once less than
/// `renew_before_s` of its life is left or it does not name the listener's
/// addresses, checking at once and then every `check_interval` on a thread of
/// its own; logs each renewal and each failure (retried after
/// renew_retry_interval, or check_interval if shorter). Stops (and joins) on
/// destruction.
class certificate_renewer {
public:
  using issuer = std::function<result<std::string>(const std::string& csr)>;
  certificate_renewer(std::shared_ptr<member_credentials> credentials, issuer issue,
                      int64_t renew_before_s, std::chrono::milliseconds check_interval,
                      const actors::logger& log);
  ~certificate_renewer();
  certificate_renewer(const certificate_renewer&) = delete;
  certificate_renewer& operator=(const certificate_renewer&) = delete;

private:
  void run();

  std::shared_ptr<member_credentials> credentials_;
  issuer issue_;
  int64_t renew_before_s_;
  std::chrono::milliseconds check_interval_;
  actors::logger log_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

} // namespace airlock::airlockd
