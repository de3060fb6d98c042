#pragma once
// The control plane's certificate authorities, each a key (mode 0600) and a
// certificate in its data directory, made on the first start; no CA key ever
// leaves the control plane.
// - The egress root CA (egress-ca.key, .crt): workers' egress proxies get an
//   intermediate signed by it at registration; sandboxes trust the root.
// - The cluster link's two roots (cluster/, crypto/cluster_certificates.hpp):
//   the control-plane CA, which signs the control plane's own certificate and
//   which workers pin, and the worker CA, which signs each worker's
//   certificate and which the control plane and data-plane clients trust.

#include <string>
#include <string_view>

#include "crypto/certificates.hpp"
#include "crypto/cluster_certificates.hpp"
#include "schema/errc.hpp"

namespace airlock::airlockd {

/// Loads a root CA's key and certificate, creating both (key 0600) when
/// neither exists; `trusted_by` names who trusts it, for the error that says
/// what a new one costs. Errors: permission_denied (a key file others may
/// read), corrupt_record (only one of the two), io_error. Blocking.
result<crypto::key_and_cert> load_or_create_root_ca(const std::string& key_path,
                                                    const std::string& cert_path,
                                                    std::string_view common_name,
                                                    std::string_view trusted_by);

/// The bytes of `path`; with `secret`, permission_denied when others may
/// read or write it (a key file must be 0600). io_error when it cannot be read.
result<std::string> read_file(const std::string& path, bool secret);

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

/// The cluster link's authorities and the control plane's own member
/// certificate, with the paths a TLS stack reads them from.
struct cluster_authorities {
  crypto::key_and_cert control_ca;
  crypto::key_and_cert worker_ca;
  std::string control_ca_fingerprint; ///< what join tokens pin ("sha256:...")
  std::string control_key_path;       ///< the control plane's own key (0600)
  std::string control_cert_path;      ///< its certificate, named control_member_name
  std::string control_ca_path;
  std::string worker_ca_path;
};

/// The name in the control plane's own certificate.
inline constexpr std::string_view control_member_name = "airlock-control-plane";

/// Loads `data_dir`/cluster/, creating what is missing: both roots on the
/// first start, and the control plane's own certificate whenever it is
/// missing or has less than a third of its life left (replaced atomically).
/// Errors as load_or_create_root_ca. Blocking: call from set-up code.
result<cluster_authorities> load_or_create_cluster_authorities(const std::string& data_dir);

} // namespace airlock::airlockd
