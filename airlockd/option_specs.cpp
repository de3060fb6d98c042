// The option tables: the groups the subcommands share (log and HTTP limits,
// the control plane's settings, the sandbox host and its egress proxy) and
// the options of serve, control and worker built from them.

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "airlockd/option_spec.hpp"

namespace airlock::airlockd::option_detail {

namespace {

constexpr std::string_view data_dir_doc = "/var/lib/airlock as root, else ~/.local/share/airlock";

template <class T>
std::string show_number(T value) {
  return std::to_string(value);
}

/// Options every subcommand has: log level and the HTTP listener's limits.
template <class O>
void add_common_specs(std::vector<option_spec<O>>& specs) {
  using limits = std::numeric_limits<uint32_t>;
  specs.push_back({"log-level", "LEVEL",
                   "least severe log level written: debug, info, warn or error",
                   [](O& o, std::string_view v) { return set_log_level(o.log_level, v); },
                   [](const O& o) { return std::string(actors::to_string(o.log_level)); }});
  specs.push_back(
    {"http-threads", "N", "threads serving HTTP",
     [](O& o, std::string_view v) { return set_number<size_t>(o.http.threads, v, 1, 256); },
     [](const O& o) { return show_number(o.http.threads); }});
  specs.push_back({"http-connections-max", "N",
                   "open HTTP connections; one more is answered 503 and closed",
                   [](O& o, std::string_view v) {
                     return set_number<size_t>(o.http.connections_max, v, 1, 1'000'000);
                   },
                   [](const O& o) { return show_number(o.http.connections_max); }});
  specs.push_back({"http-request-timeout-ms", "MS",
                   "time to receive a whole request once it has started, and to send a response",
                   [](O& o, std::string_view v) {
                     return set_number<uint32_t>(o.http.request_timeout_ms, v, 1, limits::max());
                   },
                   [](const O& o) { return show_number(o.http.request_timeout_ms); }});
  specs.push_back({"http-idle-timeout-ms", "MS",
                   "time an open connection may wait for its next request",
                   [](O& o, std::string_view v) {
                     return set_number<uint32_t>(o.http.idle_timeout_ms, v, 1, limits::max());
                   },
                   [](const O& o) { return show_number(o.http.idle_timeout_ms); }});
  specs.push_back({"http-header-bytes-max", "BYTES",
                   "largest request line plus headers; larger requests get 431",
                   [](O& o, std::string_view v) {
                     return set_number<uint32_t>(o.http.header_bytes_max, v, 256, 1u << 20);
                   },
                   [](const O& o) { return show_number(o.http.header_bytes_max); }});
  specs.push_back({"http-body-bytes-max", "BYTES", "largest request body; larger bodies get 413",
                   [](O& o, std::string_view v) {
                     return set_number<uint64_t>(o.http.body_bytes_max, v, 0, uint64_t{1} << 32);
                   },
                   [](const O& o) { return show_number(o.http.body_bytes_max); }});
  specs.push_back({"http-keep-alive", "BOOL", "keep HTTP connections open between requests",
                   [](O& o, std::string_view v) { return set_bool(o.http.keep_alive, v); },
                   [](const O& o) { return std::string(o.http.keep_alive ? "true" : "false"); }});
  specs.push_back({"shutdown-timeout-ms", "MS",
                   "on SIGTERM, how long requests in flight may take before they are cut off",
                   [](O& o, std::string_view v) {
                     return set_number<uint32_t>(o.http.shutdown_timeout_ms, v, 0, 600'000);
                   },
                   [](const O& o) { return show_number(o.http.shutdown_timeout_ms); }});
}

/// TLS on the API listener (serve, control): API keys cross the network.
template <class O>
void add_listener_tls_specs(std::vector<option_spec<O>>& specs) {
  specs.push_back({"tls-cert", "FILE",
                   "serve the HTTP listener over TLS with this PEM certificate (and chain); "
                   "a replaced file is used from the next connection on; needs --tls-key",
                   [](O& o, std::string_view v) {
                     if (!o.http.tls)
                       o.http.tls.emplace();
                     return set_path(o.http.tls->certificate_file, v);
                   },
                   [](const O& o) { return o.http.tls ? o.http.tls->certificate_file : ""; },
                   "none (plain HTTP)"});
  specs.push_back({"tls-key", "FILE", "the private key (PEM) of --tls-cert",
                   [](O& o, std::string_view v) {
                     if (!o.http.tls)
                       o.http.tls.emplace();
                     return set_path(o.http.tls->key_file, v);
                   },
                   [](const O& o) { return o.http.tls ? o.http.tls->key_file : ""; }, "none"});
}

template <class O>
option_spec<O> data_dir_spec(std::string_view help) {
  return {"data-dir",
          "DIR",
          help,
          [](O& o, std::string_view v) { return set_path(o.data_dir, v); },
          [](const O& o) { return o.data_dir; },
          data_dir_doc};
}

template <class O>
option_spec<O> cli_config_spec() {
  return {"cli-config",
          "FILE",
          "where the first start writes the CLI's url and admin key (mode 0600)",
          [](O& o, std::string_view v) { return set_path(o.cli_config, v); },
          [](const O& o) { return o.cli_config; },
          "$XDG_CONFIG_HOME/airlock/config.json, else ~/.config/airlock/config.json"};
}

/// The control plane's settings (serve, control).
template <class O>
void add_control_settings_specs(std::vector<option_spec<O>>& specs) {
  specs.push_back({"audit-retention-hours", "HOURS", "audit records older than this are deleted",
                   [](O& o, std::string_view v) {
                     return set_number<uint32_t>(o.control.audit_retention_hours, v, 1, 876'000);
                   },
                   [](const O& o) { return show_number(o.control.audit_retention_hours); }});
  specs.push_back(
    {"template-egress", "RULES",
     "egress per template when a create names none: base=open;t=allowlist:a.com,*.b.org",
     [](O& o, std::string_view v) {
       auto parsed = parse_template_egress(v);
       if (!parsed)
         return parsed.error();
       o.control.template_egress = std::string(v);
       return status::ok();
     },
     [](const O& o) { return o.control.template_egress; }, "none"});
  specs.push_back({"e2b-domain", "DOMAIN",
                   "serve E2B's host-name envd addresses, 49983-<sandbox>.DOMAIN (docs/e2b.md)",
                   [](O& o, std::string_view v) {
                     if (v.empty() || v.front() == '.' || v.back() == '.'
                         || v.find_first_not_of("abcdefghijklmnopqrstuvwxyz"
                                                "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-")
                              != std::string_view::npos)
                       return make_status(errc::invalid_argument,
                                          "--e2b-domain must be a DNS name such as "
                                          "sandboxes.example.com");
                     o.control.e2b_domain = std::string(v);
                     return status::ok();
                   },
                   [](const O& o) { return o.control.e2b_domain; }, "none"});
}

/// A uint32_t field of sandbox_host_options as a flag.
template <class O, uint32_t sandbox_host_options::*Field, uint32_t Min, uint32_t Max>
option_spec<O> host_number(std::string_view name, std::string_view help) {
  return {
    name, "N", help,
    [](O& o, std::string_view v) { return set_number<uint32_t>(o.sandboxes.*Field, v, Min, Max); },
    [](const O& o) { return show_number(o.sandboxes.*Field); }};
}

template <class O>
void add_capacity_specs(std::vector<option_spec<O>>& specs) {
  using H = sandbox_host_options;
  specs.push_back(host_number<O, &H::cpu_request_millis, 1, 64'000>(
    "cpu-request-millis", "mCPU reserved for a sandbox that names no cpu_request_millis"));
  specs.push_back(host_number<O, &H::memory_request_mb, 1, 262'144>(
    "memory-request-mb", "MiB reserved for a sandbox that names no memory_request_mb"));
  specs.push_back(host_number<O, &H::disk_request_mb, 0, 1'048'576>(
    "disk-request-mb", "MiB of disk reserved for a sandbox that names no disk_request_mb"));
  specs.push_back(host_number<O, &H::memory_limit_percent, 0, 1'000'000>(
    "memory-limit-percent",
    "the sum of sandboxes' memory limits may reach this % of capacity; 0: unbounded"));
  specs.push_back(host_number<O, &H::sandboxes_memory_max_mb, 0, 16'777'216>(
    "sandboxes-memory-max-mb",
    "memory of all sandboxes together (their parent cgroup); 0: the host's capacity"));
  specs.push_back(host_number<O, &H::pressure_available_mb_min, 0, 16'777'216>(
    "pressure-available-mb-min",
    "under memory pressure (creates refused) below this MemAvailable"));
  specs.push_back(host_number<O, &H::pressure_full_avg10_percent, 1, 100>(
    "pressure-full-avg10-percent", "under memory pressure at this PSI memory full avg10"));
}

/// The egress proxy's options (serve, worker).
template <class O>
void add_egress_specs(std::vector<option_spec<O>>& specs) {
  specs.push_back({"egress", "BOOL", "run the egress proxy (false: nothing leaves a sandbox)",
                   [](O& o, std::string_view v) { return set_bool(o.sandboxes.egress, v); },
                   [](const O& o) { return std::string(o.sandboxes.egress ? "true" : "false"); }});
  specs.push_back({"egress-proxy-port", "PORT",
                   "the egress proxy's proxy port; 0 takes a free port",
                   [](O& o, std::string_view v) {
                     return set_number<uint16_t>(o.sandboxes.egress_proxy_port, v, 0, 65535);
                   },
                   [](const O& o) { return show_number(o.sandboxes.egress_proxy_port); }});
  specs.push_back({"egress-dns-port", "PORT", "the egress proxy's DNS port; 0 takes a free port",
                   [](O& o, std::string_view v) {
                     return set_number<uint16_t>(o.sandboxes.egress_dns_port, v, 0, 65535);
                   },
                   [](const O& o) { return show_number(o.sandboxes.egress_dns_port); }});
  specs.push_back(
    {"egress-hosts-file", "FILE", "static name map the egress proxy resolves with",
     [](O& o, std::string_view v) { return set_path(o.sandboxes.egress_hosts_file, v); },
     [](const O& o) { return o.sandboxes.egress_hosts_file; }, "none"});
  specs.push_back(
    {"egress-upstream-ca", "FILE", "extra CA certificates trusted for upstream TLS",
     [](O& o, std::string_view v) { return set_path(o.sandboxes.egress_upstream_ca, v); },
     [](const O& o) { return o.sandboxes.egress_upstream_ca; }, "none"});
  specs.push_back({"egress-allow-private", "CIDRS",
                   "private ranges (comma-separated) sandboxes may reach by name",
                   [](O& o, std::string_view v) {
                     o.sandboxes.egress_allow_private = std::string(v);
                     return status::ok();
                   },
                   [](const O& o) { return o.sandboxes.egress_allow_private; }, "none"});
}

/// `field` = `v` when it is one of `allowed`.
status set_one_of(std::string& field, std::string_view v,
                  std::initializer_list<std::string_view> allowed) {
  for (auto choice : allowed)
    if (v == choice) {
      field = std::string(v);
      return status::ok();
    }
  std::string names;
  for (auto choice : allowed)
    names += (names.empty() ? "" : ", ") + std::string(choice);
  return invalid("expected one of " + names + ", got '" + std::string(v) + "'");
}

template <class O>
void add_microvm_specs(std::vector<option_spec<O>>& specs) {
  specs.push_back({"microvm", "off|auto|on", "run sandboxes that ask for the microvm runtime",
                   [](O& o, std::string_view v) {
                     return set_one_of(o.sandboxes.microvm, v, {"off", "auto", "on"});
                   },
                   [](const O& o) { return o.sandboxes.microvm; }});
  specs.push_back({"microvm-cache", "DIR", "the microVM guest's build cache",
                   [](O& o, std::string_view v) { return set_path(o.sandboxes.microvm_cache, v); },
                   [](const O& o) { return o.sandboxes.microvm_cache; }, "DATA_DIR/microvm/cache"});
  specs.push_back(
    {"microvm-guest-script", "FILE", "the script that builds the microVM guest",
     [](O& o, std::string_view v) { return set_path(o.sandboxes.microvm_guest_script, v); },
     [](const O& o) { return o.sandboxes.microvm_guest_script; },
     "microvm-guest next to airlockd, else ../../scripts/microvm-guest"});
  specs.push_back({"microvm-accel", "probe|kvm|tcg", "the microVMs' accelerator",
                   [](O& o, std::string_view v) {
                     return set_one_of(o.sandboxes.microvm_accel, v, {"probe", "kvm", "tcg"});
                   },
                   [](const O& o) { return o.sandboxes.microvm_accel; }});
  specs.push_back({"microvm-vmm-uid", "N", "the host uid and gid QEMU runs as (not root)",
                   [](O& o, std::string_view v) {
                     return set_number<uint32_t>(o.sandboxes.microvm_vmm_uid, v, 1, 4'000'000'000);
                   },
                   [](const O& o) { return show_number(o.sandboxes.microvm_vmm_uid); }});
  specs.push_back(
    {"microvm-share-memory", "BOOL",
     "VMs of one base share the RAM pages none has written (false: a copy each)",
     [](O& o, std::string_view v) { return set_bool(o.sandboxes.microvm_share_memory, v); },
     [](const O& o) { return std::string(o.sandboxes.microvm_share_memory ? "true" : "false"); }});
}

/// Options of the hosts that run sandboxes (serve, worker).
template <class O>
void add_sandbox_host_specs(std::vector<option_spec<O>>& specs) {
  specs.push_back({"instance", "NAME",
                   "names this host's nftables table, cgroup parent and veth prefix",
                   [](O& o, std::string_view v) { return set_name(o.sandboxes.instance, v); },
                   [](const O& o) { return o.sandboxes.instance; }});
  specs.push_back({"veth-prefix", "XY", "first two characters of the host-side veth names",
                   [](O& o, std::string_view v) {
                     bool ok = v.size() == 2 && std::all_of(v.begin(), v.end(), [](char c) {
                                 return std::islower(static_cast<unsigned char>(c)) != 0;
                               });
                     if (!ok)
                       return invalid("expected two lower-case letters, got '" + std::string(v)
                                      + "'");
                     o.sandboxes.veth_prefix = std::string(v);
                     return status::ok();
                   },
                   [](const O& o) { return o.sandboxes.veth_prefix; }});
  specs.push_back({"address-pool", "CIDR", "IPv4 block the sandboxes' networks come from",
                   [](O& o, std::string_view v) { return set_path(o.sandboxes.address_pool, v); },
                   [](const O& o) { return o.sandboxes.address_pool; }});
  specs.push_back({"uid-base", "N", "first host uid/gid mapped into sandboxes (65536 each)",
                   [](O& o, std::string_view v) {
                     return set_number<uint32_t>(o.sandboxes.uid_base, v, 65'536, 4'000'000'000);
                   },
                   [](const O& o) { return show_number(o.sandboxes.uid_base); }});
  specs.push_back({"guest-binary", "FILE", "the airlock-guest binary put into templates",
                   [](O& o, std::string_view v) { return set_path(o.sandboxes.guest_binary, v); },
                   [](const O& o) { return o.sandboxes.guest_binary; },
                   "airlock-guest next to airlockd, else ../guest/airlock-guest"});
  specs.push_back({"image-size-mb", "MB",
                   "btrfs image created when the data directory is not on btrfs",
                   [](O& o, std::string_view v) {
                     return set_number<uint32_t>(o.sandboxes.image_size_mb, v, 512, 16'777'216);
                   },
                   [](const O& o) { return show_number(o.sandboxes.image_size_mb); }});
  specs.push_back({"sandboxes-max", "N", "sandboxes this host runs at once",
                   [](O& o, std::string_view v) {
                     return set_number<uint32_t>(o.sandboxes.sandboxes_max, v, 1, 100'000);
                   },
                   [](const O& o) { return show_number(o.sandboxes.sandboxes_max); }});
  specs.push_back({"stop-timeout-s", "S",
                   "how long a stop spends stopping sandboxes (their files are kept)",
                   [](O& o, std::string_view v) {
                     return set_number<uint32_t>(o.sandboxes.stop_timeout_s, v, 1, 3600);
                   },
                   [](const O& o) { return show_number(o.sandboxes.stop_timeout_s); }});
  add_capacity_specs(specs);
  add_egress_specs(specs);
  add_microvm_specs(specs);
}

} // namespace

std::vector<option_spec<serve_options>> serve_specs() {
  using opts = serve_options;
  std::vector<option_spec<opts>> specs;
  specs.push_back(data_dir_spec<opts>("root of the durable state; created with mode 0700"));
  specs.push_back({"listen", "HOST:PORT", "address of the HTTP listener; port 0 takes a free port",
                   [](opts& o, std::string_view v) { return set_endpoint(o.listen, v); },
                   [](const opts& o) { return gateway::to_string(o.listen); }});
  specs.push_back(cli_config_spec<opts>());
  add_common_specs(specs);
  add_listener_tls_specs(specs);
  add_sandbox_host_specs(specs);
  add_control_settings_specs(specs);
  return specs;
}

std::vector<option_spec<control_options>> control_specs() {
  using opts = control_options;
  std::vector<option_spec<opts>> specs;
  specs.push_back(data_dir_spec<opts>("root of the control plane's durable state; created 0700"));
  specs.push_back({"listen", "HOST:PORT", "address of the HTTP listener; port 0 takes a free port",
                   [](opts& o, std::string_view v) { return set_endpoint(o.listen, v); },
                   [](const opts& o) { return gateway::to_string(o.listen); }});
  specs.push_back({"cluster-listen", "HOST:PORT",
                   "address workers join (CAF cluster transport); port 0 takes a free port",
                   [](opts& o, std::string_view v) { return set_endpoint(o.cluster_listen, v); },
                   [](const opts& o) { return gateway::to_string(o.cluster_listen); }});
  specs.push_back(cli_config_spec<opts>());
  add_common_specs(specs);
  add_listener_tls_specs(specs);
  add_control_settings_specs(specs);
  return specs;
}

std::vector<option_spec<worker_options>> worker_specs() {
  using opts = worker_options;
  std::vector<option_spec<opts>> specs;
  specs.push_back({"join", "HOST:PORT", "the control plane's cluster address (required)",
                   [](opts& o, std::string_view v) { return set_endpoint(o.join, v); },
                   [](const opts&) { return std::string(); }, "none: required"});
  specs.push_back(data_dir_spec<opts>("root of the worker's local state; created 0700"));
  specs.push_back({"data-listen", "HOST:PORT", "address of the worker's data-plane listener",
                   [](opts& o, std::string_view v) { return set_endpoint(o.data_listen, v); },
                   [](const opts& o) { return gateway::to_string(o.data_listen); }});
  specs.push_back({"name", "NAME", "the worker's name in the cluster",
                   [](opts& o, std::string_view v) { return set_name(o.name, v); },
                   [](const opts& o) { return o.name; }, "the host name"});
  specs.push_back({"token", "TOKEN",
                   "a join token (`airlockd token create`); needed until the worker holds a "
                   "certificate (data dir's cluster/)",
                   [](opts& o, std::string_view v) { return set_join_token(o.token, v); },
                   [](const opts&) { return std::string(); }, "none"});
  specs.push_back({"cert-renew-before-days", "N",
                   "renew the worker's certificate (over the cluster link) once fewer days are "
                   "left",
                   [](opts& o, std::string_view v) {
                     return set_number<int64_t>(o.cert_renew_before_days, v, 1, 3650);
                   },
                   [](const opts& o) { return std::to_string(o.cert_renew_before_days); }});
  specs.push_back({"cert-check-interval-s", "N", "how often the certificate's age is checked",
                   [](opts& o, std::string_view v) {
                     return set_number<uint32_t>(o.cert_check_interval_s, v, 1, 86400);
                   },
                   [](const opts& o) { return std::to_string(o.cert_check_interval_s); }});
  specs.push_back({"control-url", "URL",
                   "the control plane's API (http://HOST:PORT), where a worker with a token joins",
                   [](opts& o, std::string_view v) { return set_http_url(o.control_url, v); },
                   [](const opts& o) { return o.control_url; }, "none"});
  add_common_specs(specs);
  add_sandbox_host_specs(specs);
  return specs;
}

} // namespace airlock::airlockd::option_detail
