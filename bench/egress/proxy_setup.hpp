// egress_bench: the egress proxy as the worker runs it (worker/egress's
// egress_proxy on 127.0.0.1, one sandbox with an allowlist), and its
// doubles: an audit sink that counts, one credential grant.

#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "bench/egress/options.hpp"
#include "bench/egress/pki.hpp"
#include "schema/errc.hpp"
#include "worker/egress/egress_proxy.hpp"

namespace airlock::egress_bench {

/// Counts records by kind and decision and keeps the first denial's reason.
class counting_audit : public worker::egress::audit_sink {
public:
  void record(schema::audit_record record) override;
  std::map<std::string, uint64_t> counts() const;
  std::string first_denial() const;

private:
  mutable std::mutex mutex_;
  std::map<std::string, uint64_t> counts_;
  std::string first_denial_;
};

/// One grant for bench.test (Authorization, unlimited), answered at once.
class bench_credentials : public worker::egress::credential_source {
public:
  void fetch(const worker::egress::sandbox_view&,
             std::function<void(result<grants>)> done) override;
  std::atomic<uint64_t> fetches{0};
};

/// A scratch directory for the egress proxy's hosts file and upstream CA file.
struct scratch_dir {
  std::filesystem::path path;
  scratch_dir();
  ~scratch_dir();
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
  /// Writes `text` to the file `name` in it; returns the file's path.
  result<std::string> write(const std::string& name, const std::string& text) const;
};

struct proxy_setup {
  std::shared_ptr<counting_audit> audit = std::make_shared<counting_audit>();
  std::shared_ptr<bench_credentials> credentials = std::make_shared<bench_credentials>();
  std::unique_ptr<worker::egress::egress_proxy> proxy;
};

/// The egress proxy bound to 127.0.0.1, every connection's original destination
/// the upstream's port (no nftables redirect here), 127.0.0.0/8 allowed,
/// bench.test resolved from a hosts file in `dir`, the upstream verified
/// against the bench's root, one sandbox at 127.0.0.1 allowed bench.test.
result<proxy_setup> start_proxy(const bench_options& opt, const bench_pki& pki,
                                const scratch_dir& dir, uint16_t upstream_port);

} // namespace airlock::egress_bench
