#pragma once
// The cluster's egress root CA on the control plane: its key and
// certificate live in the data directory (egress-ca.key, mode 0600, and
// egress-ca.crt), made on the first start. Workers' egress proxies get an
// intermediate signed by it at registration; sandboxes trust the root. The
// root key never leaves the control plane.

#include <string>
#include <string_view>

#include "crypto/certificates.hpp"
#include "schema/errc.hpp"

namespace airlock::airlockd {

/// Loads `data_dir`/egress-ca.{key,crt}, creating both when neither exists.
/// Errors: permission_denied (a key file others may read), corrupt_record
/// (only one of the two, or PEM that does not parse), io_error. Blocking:
/// call from set-up code.
result<crypto::key_and_cert> load_or_create_egress_ca(const std::string& data_dir);

/// The chain a worker gets: an intermediate for `public_key_pem` (valid a
/// year), then the root certificate.
result<std::string> issue_worker_egress_ca(const crypto::key_and_cert& root,
                                           std::string_view public_key_pem,
                                           std::string_view worker_id);

} // namespace airlock::airlockd
