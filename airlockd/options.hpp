#pragma once
// Options of the airlockd subcommands and how they are read. Every option has
// a flag, an environment variable and a config-file key, applied in this
// order, later ones winning:
//
//   built-in default < config file (--config / AIRLOCK_CONFIG) < environment < flag
//
// docs/configuration.md lists them all; a test keeps it in step with the
// tables in options.cpp.

#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "actors/log.hpp"
#include "gateway/endpoint.hpp"
#include "gateway/http_server.hpp"
#include "schema/errc.hpp"
#include "schema/sandbox.hpp"

namespace airlock::airlockd {

/// What a process starts with besides its arguments. main() reads it once and
/// passes it down, so that parsing is a pure function tests can drive.
struct process_env {
  std::map<std::string, std::string, std::less<>> variables;
  bool is_root = false;
  std::string hostname;

  /// The variable's value; nullopt when unset or empty (an empty variable
  /// means "not set", as in most shells' `VAR= cmd`).
  std::optional<std::string> get(std::string_view name) const;
};

/// Reads environ, the effective uid and the host name.
process_env current_process_env();

/// /var/lib/airlock as root, else $HOME/.local/share/airlock.
std::string default_data_dir(const process_env& env);

/// $XDG_CONFIG_HOME/airlock/config.json, else $HOME/.config/airlock/config.json.
std::string default_cli_config(const process_env& env);

/// How a worker host runs sandboxes (serve and worker). Two airlockd
/// processes on one host need different instance names, pools and uid bases.
struct sandbox_host_options {
  /// Names this host's nftables table, cgroup parent and veth prefix, so that
  /// several airlockd processes can share a machine. Default: airlock.
  std::string instance = "airlock";
  /// First two characters of the host-side veth names. Default: al.
  std::string veth_prefix = "al";
  /// IPv4 block the sandboxes' /30 networks come from. Default: 10.200.0.0/16.
  std::string address_pool = "10.200.0.0/16";
  /// First host uid/gid mapped into sandboxes (65536 per sandbox). Default: 100000.
  uint32_t uid_base = 100'000;
  /// The airlock-guest binary put into templates. Default: airlock-guest next
  /// to airlockd, else ../guest/airlock-guest (the build tree).
  std::string guest_binary;
  /// Size of the btrfs image created when the data directory is not on btrfs.
  /// Default: 16384.
  uint32_t image_size_mb = 16'384;
  /// Sandboxes this host runs at once (the runtime's own bound may be
  /// lower: the address pool's blocks, uid ranges). Default: 1000.
  uint32_t sandboxes_max = 1000;
  /// How long a stop (SIGTERM) spends stopping sandboxes, keeping their
  /// files; any left then end with the process, their files kept all the
  /// same. Default: 30.
  uint32_t stop_timeout_s = 30;
  /// What placement reserves for a sandbox that names no request; see
  /// docs/capacity.md for why these fit an idle agent's sandbox. Defaults:
  /// 2 mCPU, 16 MiB memory, 8 MiB disk.
  uint32_t cpu_request_millis = 2;
  uint32_t memory_request_mb = 16;
  uint32_t disk_request_mb = 8;
  /// The sum of the sandboxes' memory limits may reach this percent of the
  /// host's capacity (overcommit); 0: unbounded. Default: 3200.
  uint32_t memory_limit_percent = 3200;
  /// Memory of all sandboxes together, enforced by their parent cgroup.
  /// 0: the host's memory capacity (MemTotal less the host's reserve).
  /// Default: 0.
  uint32_t sandboxes_memory_max_mb = 0;
  /// The host is under memory pressure (creates refused) when MemAvailable
  /// falls below this. Default: 512.
  uint32_t pressure_available_mb_min = 512;
  /// ... or when PSI memory "full avg10" reaches this percent. Default: 10.
  uint32_t pressure_full_avg10_percent = 10;
  /// Run the egress proxy; false: nothing leaves any sandbox. Default: true.
  bool egress = true;
  /// The egress proxy's proxy port (all sandbox TCP is redirected there); 0 takes
  /// a free port. Default: 0.
  uint16_t egress_proxy_port = 0;
  /// The egress proxy's DNS port (all sandbox DNS goes there); 0 takes a free
  /// port. Default: 0.
  uint16_t egress_dns_port = 0;
  /// A static name map ("name address..." per line) the egress proxy resolves
  /// with instead of the system resolver; for tests and air-gapped sites.
  /// Default: none.
  std::string egress_hosts_file;
  /// Extra CA certificates (PEM) the egress proxy trusts for upstream TLS, beside
  /// the host's trust store. Default: none.
  std::string egress_upstream_ca;
  /// Private ranges (comma-separated CIDRs) sandboxes may reach by name; all
  /// private, loopback, link-local and metadata ranges are refused otherwise.
  /// Default: none.
  std::string egress_allow_private;
  /// Sandboxes created with "runtime": "microvm" (docs/microvm.md): off; auto
  /// (when QEMU and the guest's build tools are here and the guest builds;
  /// else a warning and namespace sandboxes only); on (airlockd does not
  /// start without it). Default: off.
  std::string microvm = "off";
  /// The microVM guest's build cache (the kernel package, the built guests).
  /// Default: DATA_DIR/microvm/cache.
  std::string microvm_cache;
  /// The script that builds the guest. Default: microvm-guest next to
  /// airlockd, else ../../scripts/microvm-guest (a build tree in the source tree).
  std::string microvm_guest_script;
  /// probe (KVM only when a probe guest boots under it, else TCG), kvm or tcg.
  /// Default: probe.
  std::string microvm_accel = "probe";
  /// Host uid and gid the microVMs' QEMU runs as (in its jail: its own
  /// namespaces, only its files); never root. Default: 65534 (nobody).
  uint32_t microvm_vmm_uid = 65'534;
  /// VMs started from their shape's base machine map its RAM file private
  /// and share the pages none has written; false: each copies it. Off by
  /// default: a shared VM's first suspend and what is restored from it are
  /// slower (its RAM goes through the migration stream), and QEMU 7.2 may
  /// write the shared file (docs/microvm.md, "Base machines"). Default: false.
  bool microvm_share_memory = false;
};

/// What the control plane keeps and decides (serve, control).
struct control_settings {
  /// Audit records older than this are deleted (swept every minute).
  /// Default: 720 (30 days).
  uint32_t audit_retention_hours = 720;
  /// Egress of a sandbox whose create request names none, per template:
  /// "base=open;tools=allowlist:pypi.org,*.pythonhosted.org". Templates not
  /// named get profile none. Default: none (every template: none).
  std::string template_egress;
  /// The domain of E2B's host-name envd addresses (`49983-<sandbox>.<domain>`,
  /// which the SDK uses without E2B_SANDBOX_URL; a TLS proxy for
  /// *.<domain> goes in front). Empty: not served. Default: empty.
  std::string e2b_domain;
};

/// The non-empty items of `text` between `separator`s ("a,,b" -> a, b).
std::vector<std::string> split_list(std::string_view text, char separator);

/// control_settings::template_egress as a map (validated allow rules).
/// invalid_argument with a sentence on malformed text.
result<std::map<std::string, schema::egress_policy>> parse_template_egress(std::string_view text);

/// `airlockd serve`: control plane and a local worker in one process.
struct serve_options {
  /// Root of airlock's durable state; created with mode 0700. Default:
  /// /var/lib/airlock as root, else ~/.local/share/airlock.
  std::string data_dir;
  /// Address of the HTTP listener; port 0 takes a free port. Default: 127.0.0.1:7070.
  gateway::endpoint listen{"127.0.0.1", 7070};
  /// Where the first start writes the CLI's url and admin key (mode 0600).
  /// Default: $XDG_CONFIG_HOME/airlock/config.json, else ~/.config/airlock/config.json.
  std::string cli_config;
  /// Least severe level written to the log on stderr. Default: info.
  actors::log_level log_level = actors::log_level::info;
  /// Threads, limits and timeouts of the HTTP listener. Default: see
  /// gateway::http_server_options.
  gateway::http_server_options http;
  /// The local worker. Default: see sandbox_host_options.
  sandbox_host_options sandboxes;
  /// Audit retention, template egress defaults. Default: see control_settings.
  control_settings control;
};

/// `airlockd control`: the control plane alone, for a cluster.
struct control_options {
  /// Root of the control plane's durable state. Default: as serve_options::data_dir.
  std::string data_dir;
  /// Address of the HTTP listener. Default: 127.0.0.1:7070.
  gateway::endpoint listen{"127.0.0.1", 7070};
  /// Address workers join (CAF's cluster transport); port 0 takes a free
  /// port. Default: 127.0.0.1:7071.
  gateway::endpoint cluster_listen{"127.0.0.1", 7071};
  /// Where the first start writes the CLI's url and admin key (mode 0600).
  /// Default: as serve_options::cli_config.
  std::string cli_config;
  /// Default: info.
  actors::log_level log_level = actors::log_level::info;
  /// Default: see gateway::http_server_options.
  gateway::http_server_options http;
  /// Default: see control_settings.
  control_settings control;
};

/// `airlockd worker`: runs sandboxes on this host for a control plane.
struct worker_options {
  /// The control plane's cluster address. Required; no default.
  gateway::endpoint join;
  /// Root of the worker's local state. Default: as serve_options::data_dir.
  std::string data_dir;
  /// Address of the worker's data-plane listener (processes, files, /healthz,
  /// /readyz); port 0 takes a free port. Default: 127.0.0.1:7072.
  gateway::endpoint data_listen{"127.0.0.1", 7072};
  /// The worker's name in the cluster. Default: the host name.
  std::string name;
  /// A join token, spent once to get the worker's certificate. Default: none.
  std::string token;
  /// The control plane's API URL, where the token is redeemed. Default: none.
  std::string control_url;
  /// Renew the certificate once less than this many days of it are left.
  /// Default: 30 (of 90).
  int64_t cert_renew_before_days = 30;
  /// How often to check. Default: 3600.
  uint32_t cert_check_interval_s = 3600;
  /// Default: info.
  actors::log_level log_level = actors::log_level::info;
  /// Default: see gateway::http_server_options.
  gateway::http_server_options http;
  /// Default: see sandbox_host_options.
  sandbox_host_options sandboxes;
};

/// A parsed command line: the options to run with, or a request for help.
template <class Options>
struct command_line {
  Options options;
  bool help = false;
  std::string config_file; ///< the config file that was read; empty if none
};

/// Parse the arguments that follow the subcommand. invalid_argument with a
/// sentence naming the flag, variable or config key at fault.
result<command_line<serve_options>> parse_serve(std::span<const std::string> args,
                                                const process_env& env);
result<command_line<control_options>> parse_control(std::span<const std::string> args,
                                                    const process_env& env);
result<command_line<worker_options>> parse_worker(std::span<const std::string> args,
                                                  const process_env& env);

/// One option as documented: for usage text, docs and tests.
struct option_info {
  std::string flag;       ///< "--data-dir"
  std::string env;        ///< "AIRLOCK_DATA_DIR"
  std::string config_key; ///< "data_dir"; empty for --config itself
  std::string value_name; ///< "DIR"
  std::string default_text;
  std::string help;
};

/// Every option of `command` ("serve", "control" or "worker"), --config first;
/// empty for another command.
std::vector<option_info> describe_options(std::string_view command);

/// Usage of one subcommand, listing every option with its variable and default.
std::string command_usage(std::string_view command);

/// Usage of airlockd as a whole.
std::string general_usage();

} // namespace airlock::airlockd
