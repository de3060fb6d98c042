#pragma once
// The worker's side of egress: which running sandbox the egress proxy
// serves under which policy (by sandbox id, since the egress proxy knows
// sandboxes by address), and the files a new sandbox needs to use it: a
// resolv.conf naming its host-side address and the cluster CA in its trust
// store. The CA's key never enters a sandbox; only the root certificate does.

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "schema/errc.hpp"
#include "schema/sandbox.hpp"
#include "worker/egress/egress_types.hpp"

namespace airlock::worker {

namespace egress {
class egress_proxy;
}

/// Thread-safe; shared by the worker actor's create threads and the node actor.
class egress_binding {
public:
  /// `proxy` may be null: then no sandbox has egress (the firewall drops all).
  explicit egress_binding(std::shared_ptr<egress::egress_proxy> proxy);

  bool enabled() const noexcept { return proxy_ != nullptr; }

  /// The cluster's root CA certificate (PEM), known once the worker joined.
  void set_root_ca(std::string pem);
  std::string root_ca() const;

  /// The egress proxy serves `view` from now on (replaces an earlier entry);
  /// `host_interface` is the host side of its veth, which names it in the
  /// firewall's drop log.
  void attach(egress::sandbox_view view, const std::string& host_interface = {});
  /// The sandbox behind a host-side interface index (for the drop log).
  std::shared_ptr<const egress::sandbox_view> by_interface(int ifindex) const;
  /// Forgets the sandbox; its address may be reused. Idempotent.
  void detach(const std::string& sandbox_id);
  /// New connections of the sandbox follow `policy`. False for an unknown id.
  bool set_policy(const std::string& sandbox_id, const schema::egress_policy& policy);
  /// The sandbox changes hands (a claimed warm pool member): new connections
  /// are `tenant_id`'s (its credentials, its audit) under `policy`. False for
  /// an unknown id.
  bool set_owner(const std::string& sandbox_id, const std::string& tenant_id,
                 const schema::egress_policy& policy);

private:
  /// Changes the entry of `sandbox_id` with `change` and republishes it.
  bool update(const std::string& sandbox_id,
              const std::function<void(egress::sandbox_view&)>& change);

  std::shared_ptr<egress::egress_proxy> proxy_;
  mutable std::mutex mutex_;
  std::string root_ca_;
  std::map<std::string, egress::sandbox_view> attached_;
  std::map<std::string, int> interface_of_; ///< sandbox id -> ifindex
  std::map<int, std::shared_ptr<const egress::sandbox_view>> by_interface_;
};

/// Where the CA certificate goes inside a sandbox; SSL_CERT_FILE and friends
/// point at the bundle that also holds it.
inline constexpr const char* sandbox_ca_file = "/etc/ssl/certs/airlock-egress-ca.pem";
inline constexpr const char* sandbox_ca_bundle = "/etc/ssl/certs/ca-certificates.crt";

/// Writes /etc/resolv.conf (nameserver = `nameserver`) and, when
/// `root_ca_pem` is not empty, the CA file and the CA appended to the bundle
/// (created when the template has none) inside `rootfs_path`. Paths resolve
/// inside the rootfs (openat2 RESOLVE_IN_ROOT): a symlink in the template can
/// never send a write to the host.
status prepare_egress_files(const std::string& rootfs_path, const std::string& nameserver,
                            const std::string& root_ca_pem);

} // namespace airlock::worker
