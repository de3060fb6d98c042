#include "airlockd/worker_host.hpp"

#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <vector>

#include "actors/api_keys.hpp"
#include "airlockd/version.hpp"
#include "crypto/certificates.hpp"
#include "worker/command/command.hpp"
#include "worker/egress/address_filter.hpp"
#include "worker/egress/egress_proxy.hpp"
#include "worker/host_capacity.hpp"
#include "worker/microvm/accel_probe.hpp"
#include "worker/microvm/microvm_runtime.hpp"
#include "worker/rootfs/rootfs_driver.hpp"
#include "worker/rootfs/templates.hpp"
#include "worker/runtime/namespace_runtime.hpp"
#include "worker/runtime/sys.hpp"

namespace airlock::airlockd {

namespace {

constexpr std::string_view worker_id_key = "worker_id";
constexpr auto setup_timeout = std::chrono::minutes(2);

/// airlock-guest next to this executable, else in the build tree's guest/.
std::string default_guest_binary() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec)
    return "airlock-guest";
  auto beside = self.parent_path() / "airlock-guest";
  if (::access(beside.c_str(), X_OK) == 0)
    return beside.string();
  return (self.parent_path().parent_path() / "guest" / "airlock-guest").string();
}

/// scripts/microvm-guest installed next to this executable as microvm-guest,
/// else in the source tree above a build tree inside it (build/airlockd/airlockd).
std::string default_microvm_guest_script() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec)
    return "microvm-guest";
  auto beside = self.parent_path() / "microvm-guest";
  if (::access(beside.c_str(), R_OK) == 0)
    return beside.string();
  return (self.parent_path().parent_path().parent_path() / "scripts" / "microvm-guest").string();
}

/// What this host lacks to build the guest and run QEMU ("" when nothing).
std::string microvm_tools_missing(const worker::microvm::vm_options& vm) {
  for (const char* tool : {"qemu-system-x86_64", "mkfs.ext4", "busybox", "objcopy", "xz"})
    if (worker::find_program(tool, worker::default_command_path).empty())
      return std::string("no ") + tool + " on this host";
  if (::access(vm.firmware.c_str(), R_OK) != 0)
    return "no " + vm.firmware + " (Debian's qemu-system-data)";
  return "";
}

/// Builds (or finds in `cache`) the guest with scripts/microvm-guest; its directory.
result<std::string> build_microvm_guest(const std::string& script, const std::string& agent,
                                        const std::string& cache) {
  worker::command_options run;
  run.timeout_ms = 600'000; // the first build downloads Debian's kernel package
  auto ran = worker::run_command({"bash", script, "--agent", agent, "--cache", cache}, run);
  if (!ran)
    return make_status(ran.code(), script + " did not run: " + ran.error().message);
  if (!ran->succeeded())
    return make_status(errc::io_error, script + " failed: " + ran->output);
  std::string out = ran->output;
  while (!out.empty() && out.back() == '\n')
    out.pop_back();
  auto last = out.rfind('\n');
  return out.substr(last == std::string::npos ? 0 : last + 1);
}

/// nftables table names take letters, digits and '_'.
std::string table_name(const std::string& instance) {
  std::string name = instance;
  for (char& c : name)
    if (c == '-' || c == '.')
      c = '_';
  return name;
}

worker::namespace_runtime_options runtime_options(const std::string& data_dir,
                                                  const sandbox_host_options& options,
                                                  uint16_t proxy_port, uint16_t dns_port) {
  worker::namespace_runtime_options runtime;
  runtime.state_dir = data_dir + "/runtime";
  runtime.cgroups.parent = options.instance;
  runtime.net.nft_table = table_name(options.instance);
  runtime.net.interface_prefix = options.veth_prefix;
  runtime.address_pool = options.address_pool;
  runtime.id_range_base = options.uid_base;
  runtime.slots_max = options.sandboxes_max;
  runtime.net.egress_proxy_port = proxy_port;
  runtime.net.egress_dns_port = dns_port;
  runtime.sandboxes_memory_max_mb = options.sandboxes_memory_max_mb;
  if (runtime.sandboxes_memory_max_mb == 0)
    if (auto capacity = worker::probe_host_capacity(data_dir))
      runtime.sandboxes_memory_max_mb = capacity->memory_mb;
  return runtime;
}

/// airlockd serves every sandbox on this host: an OOM kill must pick a
/// sandbox's process first (the sandboxes' parent cgroup keeps them from
/// pushing the host there at all).
/// Each sandbox holds a few descriptors here (its guest channel, pidfd,
/// wakeup); the usual soft limit of 1024 would stop a host at a few hundred.
void raise_descriptor_limit(const actors::logger& log) {
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max)
    return;
  limit.rlim_cur = limit.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0)
    log.warn("cannot raise the descriptor limit: a few hundred sandboxes will exhaust it",
             {{"hard_limit", static_cast<uint64_t>(limit.rlim_max)}});
}

void protect_from_oom_killer(const actors::logger& log) {
  constexpr std::string_view daemon_oom_score_adj = "-950";
  if (auto written = worker::write_control_file("/proc/self/oom_score_adj", daemon_oom_score_adj);
      !written)
    log.warn("airlockd is not protected from the OOM killer", {{"error", written.message}});
}

/// The egress proxy's counters as families airlock_egress_* and
/// airlock_egress_dns_* (thread-safe: the proxy's figures are atomics).
void report_egress_metrics(const worker::egress::egress_proxy& proxy,
                           metrics::metrics_registry& metrics) {
  auto stats = proxy.stats();
  auto dns = proxy.dns_stats();
  const std::pair<const char*, uint64_t> egress_counters[] = {
    {"airlock_egress_connections_total", stats.connections},
    {"airlock_egress_denied_total", stats.denied},
    {"airlock_egress_requests_total", stats.allowed_requests},
    {"airlock_egress_tls_terminated_total", stats.tls_terminated},
    {"airlock_egress_credential_uses_total", stats.credential_uses},
    {"airlock_egress_rate_limited_total", stats.rate_limited},
    {"airlock_egress_upstream_failures_total", stats.upstream_failures},
    {"airlock_egress_tunnels_total", stats.upgrades + stats.passthrough},
    {"airlock_egress_switches_refused_total", stats.switches_refused},
    {"airlock_egress_dns_queries_total", dns.queries},
    {"airlock_egress_dns_refused_total", dns.refused},
  };
  for (const auto& [name, value] : egress_counters) {
    metrics.describe(name, "egress proxy: see docs/egress.md", "counter");
    metrics.counter_set(name, {}, static_cast<double>(value));
  }
  metrics.describe("airlock_egress_active_connections", "egress proxy connections open now",
                   "gauge");
  metrics.gauge_set("airlock_egress_active_connections", {},
                    static_cast<double>(stats.active_connections));
}

schema::resources default_request(const sandbox_host_options& options) {
  return schema::resources{options.cpu_request_millis, options.memory_request_mb,
                           options.disk_request_mb, 0};
}

} // namespace

worker_host::~worker_host() { stop(); }

status worker_host::start(caf::actor_system& system, const std::string& data_dir,
                          const sandbox_host_options& options, storage::kv_store& store) {
  system_ = &system;
  data_dir_ = data_dir;
  store_ = &store;
  options_ = options;
  protect_from_oom_killer(log_);
  raise_descriptor_limit(log_);
  if (auto egress = start_egress(system, options); !egress)
    return egress;
  auto runtime_config = runtime_options(data_dir, options, egress_proxy_port(), egress_dns_port());
  runtime_config.net.drop_log_group = drop_log_group_;
  // VMs draw their addresses from the same pool: one table of taken blocks.
  runtime_config.shared_slots = std::make_shared<worker::slot_table>();
  const worker::namespace_runtime_options vm_network = runtime_config;
  auto runtime = worker::namespace_runtime::open(std::move(runtime_config));
  if (!runtime)
    return make_status(runtime.code(),
                       "cannot start the namespace runtime: " + runtime.error().message);
  worker::rootfs_options rootfs;
  rootfs.data_dir = data_dir;
  rootfs.image_size_mb = options.image_size_mb;
  auto driver = worker::make_rootfs_driver(rootfs);
  if (!driver)
    return make_status(driver.code(),
                       "cannot open the root filesystems: " + driver.error().message);
  std::shared_ptr<worker::rootfs_driver> shared_rootfs(std::move(*driver));
  rootfs_ = shared_rootfs;
  sandbox_filesystem_ = shared_rootfs->templates_dir().string();
  runtime_slots_ = (*runtime)->slots();
  const std::string guest_binary =
    options.guest_binary.empty() ? default_guest_binary() : options.guest_binary;
  auto guest = worker::open_guest_binary(guest_binary);
  if (!guest)
    return guest.error();
  worker::worker_context context;
  context.guest = std::move(*guest);
  context.runtime = std::shared_ptr<worker::sandbox_runtime>(std::move(*runtime));
  if (auto vms = start_microvm(options, guest_binary, vm_network, context); !vms)
    return vms;
  context.rootfs = shared_rootfs;
  // The store belongs to the daemon and outlives the worker: no ownership.
  context.store = std::shared_ptr<storage::kv_store>(&store, [](storage::kv_store*) {});
  context.options.sandboxes_max = std::min(options.sandboxes_max, runtime_slots_);
  context.options.default_request = default_request(options);
  context.options.pressure.available_mb_min = options.pressure_available_mb_min;
  context.options.pressure.full_avg10_percent_max = options.pressure_full_avg10_percent;
  context.egress = egress_;
  auto base_makers = context.base_makers;
  worker_ = worker::spawn_worker(system, std::move(context));
  caf::scoped_actor self{system};
  status outcome = status::ok();
  self->request(worker_, setup_timeout, worker::wk_recover_atom::value)
    .receive(
      [this](const worker::recover_report& report) {
        log_.info("cleaned up an earlier run", {{"sandboxes", report.cleaned.size()},
                                                {"kept", report.kept.size()},
                                                {"failures", report.failures.size()}});
        for (const auto& failure : report.failures)
          log_.warn("could not clean up", {{"what", failure}});
      },
      [&outcome](const caf::error& error) { outcome = to_status(error); });
  if (!outcome)
    return make_status(outcome.code, "worker recovery failed: " + outcome.message);
  worker::node_context node;
  node.worker = worker_;
  node.rootfs = shared_rootfs;
  node.clock = std::make_shared<system_wall_clock>();
  node.egress = egress_;
  node.host_figures = [proxy = egress_proxy_, base_makers](metrics::metrics_registry& figures) {
    if (proxy)
      report_egress_metrics(*proxy, figures);
    figures.describe("airlock_worker_vm_base_boots_total",
                     "MicroVMs this worker booted to make the base of their shape (the first VM "
                     "of a shape, or a VM of its own for a template with a start_cmd); later "
                     "creates of the shape clone the base instead of booting.",
                     "counter");
    figures.counter_set("airlock_worker_vm_base_boots_total", {},
                        static_cast<double>(base_makers->boots()));
  };
  node_ = worker::spawn_node(system, std::move(node));
  log_.info("worker ready", {{"instance", options.instance},
                             {"address_pool", options.address_pool},
                             {"rootfs", std::string(shared_rootfs->kind())}});
  return status::ok();
}

void worker_host::stop() {
  if (!worker_)
    return;
  caf::scoped_actor self{*system_};
  std::vector<worker::sandbox_entry> running;
  self->request(worker_, setup_timeout, worker::wk_list_atom::value)
    .receive([&running](std::vector<worker::sandbox_entry>& entries) { running = entries; },
             [](const caf::error&) {});
  // Every sandbox stops but keeps its files: the next start (or the control
  // plane's reconciler, once this worker rejoins) brings it back. A window
  // of stops in flight: each waits mostly on the kernel (a process group to
  // die), so a thousand sandboxes one after another would hold a stop for
  // minutes.
  // Bounded by stop_timeout_s: sandboxes not stopped by then end with this
  // process (their guests see the channel close) and keep their files too.
  constexpr size_t stops_in_flight = 16;
  const auto deadline =
    std::chrono::steady_clock::now() + std::chrono::seconds(options_.stop_timeout_s);
  size_t stopped = 0;
  for (size_t first = 0; first < running.size(); first += stops_in_flight) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      break;
    std::vector<decltype(self->request(worker_, left, worker::wk_release_atom::value,
                                       std::string{}))>
      pending;
    for (size_t i = first; i < std::min(running.size(), first + stops_in_flight); ++i)
      pending.push_back(
        self->request(worker_, left, worker::wk_release_atom::value, running[i].id));
    for (auto& reply : pending)
      reply.receive([&stopped](bool) { ++stopped; }, [](const caf::error&) {});
  }
  if (stopped < running.size())
    log_.warn("not every sandbox stopped within the stop timeout; the rest end with airlockd, "
              "their files kept",
              {{"stopped", stopped},
               {"sandboxes", running.size()},
               {"stop_timeout_s", options_.stop_timeout_s}});
  if (node_) {
    self->send_exit(node_, caf::exit_reason::user_shutdown);
    self->wait_for(node_);
  }
  self->send_exit(worker_, caf::exit_reason::user_shutdown);
  self->wait_for(worker_);
  node_ = nullptr;
  worker_ = nullptr;
  // Unmount the btrfs image this worker mounted and free its loop device;
  // the files stay and the next start mounts them again.
  if (rootfs_)
    if (auto detached = rootfs_->detach(); !detached)
      log_.warn("could not unmount the root filesystems' image",
                {{"error", detached.message}, {"data_dir", data_dir_}});
  rootfs_.reset();
  if (firewall_log_)
    firewall_log_->stop();
  if (egress_proxy_)
    egress_proxy_->stop();
}

void worker_host::set_join(const worker::cluster_join_actor& join) {
  if (egress_bridge_)
    egress_bridge_->set_join(join);
}

void worker_host::joined(const actors::registration_ack& ack) {
  if (!egress_proxy_)
    return;
  if (ack.egress_ca_chain.empty()) {
    log_.warn("the control plane issued no egress CA: TLS egress is refused until it does", {});
    return;
  }
  if (auto set = egress_proxy_->set_authority(egress_key_pem_, ack.egress_ca_chain); !set) {
    log_.error("the egress CA chain from the control plane is unusable", {{"error", set.message}});
    return;
  }
  // The chain is the worker's intermediate then the root; sandboxes trust the root.
  auto root_begin = ack.egress_ca_chain.rfind("-----BEGIN CERTIFICATE-----");
  egress_->set_root_ca(ack.egress_ca_chain.substr(root_begin));
}

void worker_host::start_firewall_log(const sandbox_host_options& options) {
  // One NFLOG group per instance, so that two airlockd on a host do not
  // read each other's drops.
  uint32_t hash = 2166136261U;
  for (char c : options.instance)
    hash = (hash ^ static_cast<unsigned char>(c)) * 16777619U;
  worker::egress::firewall_log_options log_options;
  log_options.group = static_cast<uint16_t>(1000 + hash % 60000);
  auto binding = egress_;
  auto started = worker::egress::firewall_log::start(
    log_options, [binding](int ifindex) { return binding->by_interface(ifindex); }, egress_bridge_);
  if (!started) {
    log_.warn("the firewall's drops will not be audited",
              {{"error", started.error().message}, {"group", log_options.group}});
    return;
  }
  firewall_log_ = std::move(*started);
  drop_log_group_ = log_options.group;
}

status worker_host::start_microvm(const sandbox_host_options& options,
                                  const std::string& guest_binary,
                                  const worker::namespace_runtime_options& network,
                                  worker::worker_context& context) {
  if (options.microvm == "off")
    return status::ok();
  namespace microvm = worker::microvm;
  microvm::microvm_runtime_options vms;
  // QEMU runs as an unprivileged uid in its jail (vmm_jail.hpp): the jail
  // binds each of its files at its own path, so the 0700 data directory
  // need not be open to that uid.
  vms.vm.vmm_uid = vms.vm.vmm_gid = options.microvm_vmm_uid;
  vms.cgroups.parent = options.instance; // one memory bound with the namespace sandboxes
  // The namespace runtime's addressing, table, interface prefix and egress
  // ports: the host side and the egress proxy see a VM as any sandbox.
  vms.net = network.net;
  vms.address_pool = network.address_pool;
  vms.shared_slots = network.shared_slots;
  const std::string dir = data_dir_ + "/microvm";
  const std::string cache = options.microvm_cache.empty() ? dir + "/cache" : options.microvm_cache;
  vms.run_dir = dir + "/run";
  // Checkpoints of VMs (memory, devices, disk), named as the worker's
  // checkpoints; they outlive a restart as the rootfs driver's do.
  vms.machine_dir = dir + "/machines";
  vms.clone_machines = options.microvm_share_memory;
  auto fail = [this, &options, &context](std::string why) {
    context.microvm_missing = why;
    if (options.microvm == "on")
      return make_status(errc::unavailable, "cannot start the microvm runtime: " + why);
    log_.warn("microvm sandboxes are refused on this worker", {{"reason", why}});
    return status::ok();
  };
  if (auto missing = microvm_tools_missing(vms.vm); !missing.empty())
    return fail(missing);
  for (const auto& made : {cache, vms.run_dir, vms.machine_dir}) {
    std::error_code ec;
    std::filesystem::create_directories(made, ec);
    if (ec)
      return fail("cannot make " + made + ": " + ec.message());
  }
  // The base machines new VMs are cloned from (worker/sandbox_start.cpp)
  // are made again after a start: the QEMU, the guest or the egress CA in
  // them may be another now. A checkpoint's machine stays while its
  // checkpoint does (one deleted while this worker was down goes now).
  {
    std::error_code ec;
    std::vector<std::filesystem::path> stale;
    for (const auto& entry : std::filesystem::directory_iterator(vms.machine_dir, ec)) {
      const auto name = entry.path().filename().string();
      if (name.rfind("base-", 0) == 0 || (rootfs_ && !rootfs_->checkpoint_path(name)))
        stale.push_back(entry.path());
    }
    for (const auto& path : stale)
      std::filesystem::remove_all(path, ec);
  }
  const std::string script = options.microvm_guest_script.empty() ? default_microvm_guest_script()
                                                                  : options.microvm_guest_script;
  auto guest_dir = build_microvm_guest(script, guest_binary, cache);
  if (!guest_dir)
    return fail(guest_dir.error().message);
  auto guest = microvm::guest_image_in(*guest_dir);
  if (guest.kernel_path.empty() || guest.initrd_path.empty())
    return fail(script + " left no vmlinux and initramfs.cpio in " + *guest_dir);
  microvm::accel_options accel;
  accel.mode = options.microvm_accel == "kvm"   ? microvm::accel_mode::kvm
               : options.microvm_accel == "tcg" ? microvm::accel_mode::tcg
                                                : microvm::accel_mode::probe;
  auto log = log_;
  auto choice = microvm::choose_accelerator(guest, vms.run_dir, accel, vms.vm,
                                            [log](std::string_view line) { log.info(line); });
  vms.guest_dir = *guest_dir;
  vms.accel = choice.accel;
  context.microvm = std::make_shared<microvm::microvm_runtime>(std::move(vms));
  runtimes_ = {"namespace", "microvm"};
  log_.info("microvm runtime ready", {{"guest", *guest_dir}, {"kernel", guest.release}});
  return status::ok();
}

uint16_t worker_host::egress_proxy_port() const noexcept {
  return egress_proxy_ ? egress_proxy_->proxy_port() : 0;
}

uint16_t worker_host::egress_dns_port() const noexcept {
  return egress_proxy_ ? egress_proxy_->dns_port() : 0;
}

status worker_host::start_egress(caf::actor_system& system, const sandbox_host_options& options) {
  if (!options.egress) {
    egress_ = std::make_shared<worker::egress_binding>(nullptr);
    log_.info("egress proxy disabled: nothing leaves any sandbox", {});
    return status::ok();
  }
  auto key = crypto::generate_key_pem();
  if (!key)
    return key.error();
  egress_key_pem_ = std::move(*key);
  egress_bridge_ = std::make_shared<worker::cluster_egress_bridge>(system);
  worker::egress::egress_proxy_options egress;
  egress.proxy_port = options.egress_proxy_port;
  egress.dns_port = options.egress_dns_port;
  egress.hosts_file = options.egress_hosts_file;
  egress.connection.upstream_ca_file = options.egress_upstream_ca;
  egress.allowed_private = split_list(options.egress_allow_private, ',');
  // Sandboxes never reach each other through the egress proxy either.
  egress.denied = {options.address_pool};
  auto started = worker::egress::egress_proxy::start(egress, egress_bridge_, egress_bridge_);
  if (!started)
    return make_status(started.code(), "cannot start the egress proxy: " + started.error().message);
  egress_proxy_ = std::move(*started);
  egress_ = std::make_shared<worker::egress_binding>(egress_proxy_);
  start_firewall_log(options);
  log_.info("egress proxy listening",
            {{"proxy_port", egress_proxy_->proxy_port()}, {"dns_port", egress_proxy_->dns_port()}});
  return status::ok();
}

status worker_host::adopt_worker_id(const std::string& id) {
  auto stored = store_->get(storage::keyspace::meta, worker_id_key);
  if (!stored)
    return stored.error();
  if (stored->has_value() && **stored == id)
    return status::ok();
  if (stored->has_value())
    log_.warn("the worker's certificate names another id than it had: sandboxes the control "
              "plane placed under the old id are no longer this worker's",
              {{"old_id", **stored}, {"id", id}});
  return store_->put(storage::keyspace::meta, worker_id_key, id);
}

result<schema::worker_registration> worker_host::registration(const std::string& name,
                                                              const std::string& data_url) const {
  auto stored = store_->get(storage::keyspace::meta, worker_id_key);
  if (!stored)
    return stored.error();
  std::string id;
  if (stored->has_value()) {
    id = **stored;
  } else {
    auto key = actors::generate_api_key(); // 16 random hex digits for the id
    if (!key)
      return key.error();
    id = "wk_" + key->key_id;
    if (auto saved = store_->put(storage::keyspace::meta, worker_id_key, id); !saved)
      return saved;
  }
  // Disk is what the sandboxes' filesystem (a btrfs image, perhaps) offers.
  auto capacity =
    worker::probe_host_capacity(sandbox_filesystem_.empty() ? data_dir_ : sandbox_filesystem_);
  if (!capacity)
    return capacity.error();
  capacity->sandboxes = std::min({capacity->sandboxes, options_.sandboxes_max, runtime_slots_});
  schema::worker_registration registration;
  registration.id = id;
  registration.name = name;
  registration.data_url = data_url;
  registration.capacity = *capacity;
  registration.runtimes = runtimes_;
  registration.default_request = default_request(options_);
  registration.memory_limit_percent = options_.memory_limit_percent;
  registration.version = std::string(version());
  registration.started_at_ms = system_wall_clock{}.now_ms();
  if (!egress_key_pem_.empty()) {
    auto public_key = crypto::public_key_pem(egress_key_pem_);
    if (!public_key)
      return public_key.error();
    registration.egress_ca_public_key = *public_key;
  }
  return registration;
}

} // namespace airlock::airlockd
