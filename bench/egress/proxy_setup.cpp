#include "bench/egress/proxy_setup.hpp"

#include <cstdlib>
#include <netinet/in.h>

#include <fstream>
#include <utility>

#include "bench/egress/tls_io.hpp"
#include "schema/egress.hpp"

namespace airlock::egress_bench {

using namespace airlock::worker::egress;

void counting_audit::record(schema::audit_record record) {
  std::lock_guard lock{mutex_};
  ++counts_[record.kind + " " + record.decision];
  if (record.decision == "denied" && first_denial_.empty())
    first_denial_ = record.kind + " " + record.target + ": " + record.reason;
}

std::map<std::string, uint64_t> counting_audit::counts() const {
  std::lock_guard lock{mutex_};
  return counts_;
}

std::string counting_audit::first_denial() const {
  std::lock_guard lock{mutex_};
  return first_denial_;
}

void bench_credentials::fetch(const worker::egress::sandbox_view&,
                              std::function<void(result<grants>)> done) {
  ++fetches;
  schema::credential_grant grant;
  grant.credential_id = "cred_bench";
  grant.name = "bench";
  grant.scope = schema::credential_scope::sandbox;
  grant.hosts = {bench_host};
  grant.header = "Authorization";
  grant.value = bench_secret;
  done(grants{grant}); // allowed on any thread, this one included: the proxy posts it
}

scratch_dir::scratch_dir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "egress-bench-XXXXXX").string();
  if (::mkdtemp(pattern.data()))
    path = pattern;
}

scratch_dir::~scratch_dir() {
  std::error_code ignored;
  if (!path.empty())
    std::filesystem::remove_all(path, ignored);
}

result<std::string> scratch_dir::write(const std::string& name, const std::string& text) const {
  if (path.empty())
    return make_status(errc::io_error, "no scratch directory");
  auto file = (path / name).string();
  std::ofstream out{file};
  out << text;
  if (!out.flush())
    return make_status(errc::io_error, "cannot write " + file);
  return file;
}

result<proxy_setup> start_proxy(const bench_options& opt, const bench_pki& pki,
                                const scratch_dir& dir, uint16_t upstream_port) {
  auto hosts = dir.write("hosts", std::string(bench_host) + " 127.0.0.1\n");
  if (!hosts)
    return hosts.error();
  auto root_file = dir.write("root.pem", pki.root.cert_pem);
  if (!root_file)
    return root_file.error();
  egress_proxy_options options;
  options.bind_address = "127.0.0.1";
  options.network_threads = opt.proxy_threads;
  options.hosts_file = *hosts; // a static_resolver: bench.test -> 127.0.0.1
  options.allowed_private = {"127.0.0.0/8"};
  options.connection.upstream_ca_file = *root_file;
  if (opt.relay_chunk_kb > 0)
    options.connection.relay_chunk_bytes = opt.relay_chunk_kb * 1024;
  // No nftables redirect here: every connection "meant" the upstream.
  options.original_destination = [upstream_port](int) -> result<std::pair<uint32_t, uint16_t>> {
    return std::pair<uint32_t, uint16_t>{INADDR_LOOPBACK, upstream_port};
  };
  proxy_setup setup;
  auto proxy = egress_proxy::start(std::move(options), setup.audit, setup.credentials);
  if (!proxy)
    return proxy.error();
  setup.proxy = std::move(proxy.value());
  if (auto installed = setup.proxy->set_authority(pki.proxy_key_pem, pki.proxy_chain_pem);
      !installed)
    return installed;
  sandbox_view sandbox;
  sandbox.sandbox_id = "sb_egress_bench";
  sandbox.tenant_id = "tn_bench";
  sandbox.template_name = "base";
  sandbox.address = "127.0.0.1"; // the client's source address
  sandbox.policy = schema::egress_policy{schema::egress_profile::allowlist, {bench_host}};
  setup.proxy->attach(std::move(sandbox));
  return setup;
}

} // namespace airlock::egress_bench
