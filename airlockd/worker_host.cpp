#include "airlockd/worker_host.hpp"

#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "actors/api_keys.hpp"
#include "airlockd/version.hpp"
#include "worker/host_capacity.hpp"
#include "worker/rootfs/rootfs_driver.hpp"
#include "worker/rootfs/templates.hpp"
#include "worker/runtime/namespace_runtime.hpp"

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

/// nftables table names take letters, digits and '_'.
std::string table_name(const std::string& instance) {
  std::string name = instance;
  for (char& c : name)
    if (c == '-' || c == '.')
      c = '_';
  return name;
}

worker::namespace_runtime_options runtime_options(const std::string& data_dir,
                                                  const sandbox_host_options& options) {
  worker::namespace_runtime_options runtime;
  runtime.state_dir = data_dir + "/runtime";
  runtime.cgroups.parent = options.instance;
  runtime.net.nft_table = table_name(options.instance);
  runtime.net.interface_prefix = options.veth_prefix;
  runtime.address_pool = options.address_pool;
  runtime.id_range_base = options.uid_base;
  runtime.slots_max = options.sandboxes_max;
  return runtime;
}

} // namespace

worker_host::~worker_host() { stop(); }

status worker_host::start(caf::actor_system& system, const std::string& data_dir,
                          const sandbox_host_options& options, storage::kv_store& store) {
  system_ = &system;
  data_dir_ = data_dir;
  store_ = &store;
  options_ = options;
  auto runtime = worker::namespace_runtime::open(runtime_options(data_dir, options));
  if (!runtime)
    return make_status(runtime.code(), "cannot start the namespace runtime: " +
                                         runtime.error().message);
  worker::rootfs_options rootfs;
  rootfs.data_dir = data_dir;
  rootfs.image_size_mb = options.image_size_mb;
  auto driver = worker::make_rootfs_driver(rootfs);
  if (!driver)
    return make_status(driver.code(), "cannot open the root filesystems: " +
                                        driver.error().message);
  std::shared_ptr<worker::rootfs_driver> shared_rootfs(std::move(*driver));
  worker::worker_context context;
  context.runtime = std::shared_ptr<worker::sandbox_runtime>(std::move(*runtime));
  context.rootfs = shared_rootfs;
  // The store belongs to the daemon and outlives the worker: no ownership.
  context.store = std::shared_ptr<storage::kv_store>(&store, [](storage::kv_store*) {});
  context.options.sandboxes_max = options.sandboxes_max;
  worker_ = worker::spawn_worker(system, std::move(context));
  caf::scoped_actor self{system};
  status outcome = status::ok();
  self->request(worker_, setup_timeout, worker::wk_recover_atom::value)
    .receive(
      [this](const worker::recover_report& report) {
        log_.info("cleaned up an earlier run", {{"sandboxes", report.cleaned.size()},
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
  node.templates.guest_binary =
    options.guest_binary.empty() ? default_guest_binary() : options.guest_binary;
  node.clock = std::make_shared<system_wall_clock>();
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
  for (const auto& entry : running)
    self->request(worker_, setup_timeout, worker::wk_destroy_atom::value, entry.id)
      .receive([](bool) {}, [](const caf::error&) {});
  if (node_)
    caf::anon_send_exit(node_, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(worker_, caf::exit_reason::user_shutdown);
  node_ = nullptr;
  worker_ = nullptr;
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
  auto capacity = worker::probe_host_capacity(data_dir_);
  if (!capacity)
    return capacity.error();
  capacity->sandboxes = std::min(capacity->sandboxes, options_.sandboxes_max);
  schema::worker_registration registration;
  registration.id = id;
  registration.name = name;
  registration.data_url = data_url;
  registration.capacity = *capacity;
  registration.runtimes = {"namespace"};
  registration.version = std::string(version());
  registration.started_at_ms = system_wall_clock{}.now_ms();
  return registration;
}

} // namespace airlock::airlockd
