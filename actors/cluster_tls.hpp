#pragma once
// The cluster link's mutual TLS in an actor system's configuration: CAF's
// OpenSSL module with this member's certificate and key and the one CA a
// peer must chain to (docs/cluster.md). Inline so that only what calls it
// links caf::openssl.

#include <caf/actor_system_config.hpp>
#include <caf/openssl/manager.hpp>

#include <string>

namespace airlock::actors {

/// The files of one side of the cluster link.
struct cluster_tls_files {
  std::string certificate; ///< PEM chain, this member's certificate first
  std::string key;         ///< its key (0600)
  std::string cafile;      ///< the one CA a peer's certificate must chain to
};

/// Loads CAF's TLS module with `files` (re-read for every connection, so
/// replacing them atomically rotates them). Call before constructing the
/// actor system, after use_middleman.
inline void use_cluster_tls(caf::actor_system_config& config, const cluster_tls_files& files) {
  config.load<caf::openssl::manager>();
  config.openssl_certificate = files.certificate;
  config.openssl_key = files.key;
  config.openssl_cafile = files.cafile;
}

} // namespace airlock::actors
