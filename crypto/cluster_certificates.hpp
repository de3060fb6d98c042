#pragma once
// Certificates of the cluster link. Two roots, one per direction, so that a
// certificate of one role can never pass for the other even where a TLS
// stack checks chains but no names: the control-plane CA signs the control
// plane's own certificate (workers pin it by the fingerprint their join token
// carries) and the worker CA signs one certificate per worker, for a key the
// worker made and never sent, naming its worker id. EC P-256 and SHA-256.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "crypto/certificates.hpp"
#include "schema/errc.hpp"

namespace airlock::crypto {

/// How long a member certificate is valid: renewed well before (workers
/// over the link, the control plane at start).
inline constexpr int member_valid_days = 90;

/// The largest certificate signing request read (PEM bytes).
inline constexpr size_t csr_pem_max = 8 * 1024;

/// IP addresses a member may ask to be named in its certificate (the
/// addresses its TLS listener serves).
inline constexpr size_t member_addresses_max = 8;

/// A certificate signing request (PEM) for the public key of `key_pem`,
/// naming `common_name`, asking for `ip_addresses` as subject alternative
/// names, signed with that key. invalid_argument for a key that does not
/// parse, a name that is not a member name (see is_member_name), an address
/// that is not an IP literal or more than member_addresses_max of them.
result<std::string> create_csr(std::string_view key_pem, std::string_view common_name,
                               const std::vector<std::string>& ip_addresses = {});

/// What a checked request asks for.
struct csr_subject {
  std::string common_name;
  std::string public_key_pem;
  std::vector<std::string> ip_addresses; ///< requested IP SANs, as text
};

/// Reads and checks a request: exactly one PEM request of at most
/// csr_pem_max bytes, signed by its own key, an EC P-256 key, a member name,
/// alternative names (if any) that are IP addresses, member_addresses_max at
/// most. invalid_argument with a sentence naming what is wrong otherwise.
result<csr_subject> read_csr(std::string_view csr_pem);

/// A member name (worker id, control-plane name): 1 to 63 of [a-z0-9_-],
/// starting with a letter or digit.
bool is_member_name(std::string_view name) noexcept;

/// Signs the key of `csr_pem` as member `name` (CN and SAN DNS name, plus
/// the request's IP addresses and `ip_addresses` as SAN IPs), for TLS clients
/// and servers, valid from an hour ago for `valid_days`. The issuer decides
/// who the member is: the request's own name is not used; the addresses are
/// the member's to claim (they only let it serve TLS at them). invalid_argument
/// for a bad request, name or address.
result<std::string> issue_member_certificate(const key_and_cert& ca, std::string_view csr_pem,
                                             std::string_view name, int valid_days,
                                             const std::vector<std::string>& ip_addresses = {});

/// The same, valid exactly from `not_before_s` to `not_after_s` (Unix
/// seconds): for certificates that must expire at a given moment (and for
/// testing what an expired one meets). invalid_argument as above or for an
/// empty window.
result<std::string> issue_member_certificate_between(const key_and_cert& ca,
                                                     std::string_view csr_pem,
                                                     std::string_view name, int64_t not_before_s,
                                                     int64_t not_after_s);

/// "sha256:" and 64 hex digits: SHA-256 of the certificate's public key
/// (DER SubjectPublicKeyInfo), as kubeadm pins a cluster CA.
/// invalid_argument when `cert_pem` holds no certificate.
result<std::string> public_key_fingerprint(std::string_view cert_pem);

/// A member certificate that verified.
struct verified_member {
  std::string name;       ///< its common name
  std::string serial_hex; ///< lower-case hex
  int64_t not_after_s = 0;
};

/// Verifies the first certificate of `cert_pem` (any others are untrusted
/// intermediates) against the root(s) of `ca_pem` at `now_s` (Unix seconds).
/// permission_denied naming the reason (expired, another CA, not a member
/// certificate); invalid_argument for PEM that does not parse.
result<verified_member> verify_member_certificate(std::string_view ca_pem,
                                                  std::string_view cert_pem, int64_t now_s);

/// A signature (hex, ECDSA with SHA-256) of `message` with `key_pem`.
/// invalid_argument when the key does not parse.
result<std::string> sign_message(std::string_view key_pem, std::string_view message);

/// Whether `signature_hex` is a signature of `message` by the key of the
/// first certificate of `cert_pem` (false for anything malformed).
bool verify_message(std::string_view cert_pem, std::string_view message,
                    std::string_view signature_hex);

/// Whether `key_pem` is the private key of the first certificate of
/// `cert_pem` (false when either does not parse).
bool key_matches_certificate(std::string_view key_pem, std::string_view cert_pem);

/// The seconds since the Unix epoch at which the first certificate of
/// `cert_pem` expires. invalid_argument when it does not parse.
result<int64_t> certificate_not_after(std::string_view cert_pem);

/// The IP addresses the first certificate of `cert_pem` names (SAN IPs, as
/// text); empty when it names none or does not parse.
std::vector<std::string> certificate_ip_addresses(std::string_view cert_pem);

} // namespace airlock::crypto
