#pragma once
// A worker's identity in its cluster: the key it made (never sent), the
// certificate naming its worker id that the control plane signed for it,
// and the two CA certificates, in `data_dir`/cluster/. A worker without one
// joins with a token (actors/join_tokens.hpp): it sends a certificate
// signing request, and trusts the answer only when its MAC checks under the
// token's key and the control-plane CA's fingerprint is the one the token
// pins.

#include <chrono>
#include <optional>
#include <string>

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

/// What a join needs; `token` empty: no join, only a stored identity.
struct join_request {
  std::string token;
  std::string control_url; ///< http://HOST:PORT
  std::string name;        ///< the worker's name, shown by GET /v1/workers
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

} // namespace airlock::airlockd
