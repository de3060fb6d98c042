#include "worker/sandbox_start.hpp"

#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "worker/egress_binding.hpp"

namespace airlock::worker {

namespace {

bool has_egress(const worker_context& ctx, const create_sandbox_request& req) {
  return ctx.egress && ctx.egress->enabled() && req.network;
}

/// The egress proxy's entry for the sandbox's address (before any of its
/// processes runs). Its resolv.conf and trust store were written into the
/// root by the launch spec's prepare_root, before the runtime read the root.
status attach_egress(const worker_context& ctx, const create_sandbox_request& req,
                     const sandbox_handle& handle) {
  if (!has_egress(ctx, req))
    return status::ok();
  egress::sandbox_view view = req.egress;
  view.sandbox_id = req.id;
  view.address = handle.sandbox_address;
  ctx.egress->attach(std::move(view), handle.host_interface);
  return status::ok();
}

/// The runtime `req` names: the namespace runtime, or the microvm one when
/// this worker has it; unavailable saying why when it has not.
result<std::shared_ptr<sandbox_runtime>> runtime_for(const worker_context& ctx,
                                                     const create_sandbox_request& req) {
  if (req.runtime.empty() || req.runtime == "namespace")
    return ctx.runtime;
  if (req.runtime != "microvm")
    return make_status(errc::invalid_argument,
                       "unknown runtime \"" + req.runtime + "\": namespace or microvm");
  if (!ctx.microvm)
    return make_status(errc::unavailable,
                       "this worker cannot run microvm sandboxes: " + ctx.microvm_missing);
  return ctx.microvm;
}

/// The base machine of VMs of `req`'s shape: what a saved machine fixes
/// (the template version its disk came from, memory, vCPUs, a NIC or none).
/// Bases live with the worker's machine snapshots (machine names are
/// checkpoint ids, which never start with "base-") and are wiped when the
/// worker starts (airlockd): a new QEMU, guest or egress CA makes new ones.
/// "": no base for a name that would be too long.
std::string base_machine_name(const create_sandbox_request& req) {
  const uint32_t vcpus = schema::whole_cpus(req.limits.cpu_millis);
  std::string name = "base-" + req.template_name + "-" + std::to_string(req.limits.memory_mb) + "m-"
                     + std::to_string(vcpus) + "c-" + (req.network ? "net" : "nonet");
  return name.size() <= 128 ? name : std::string();
}

/// A guest restored from memory goes on with the saved kernel's random state,
/// clock, hostname and address: the refresh hands it fresh entropy, the
/// host's clock, its own id as hostname and its new slot's network, and it
/// answers with a hello.
status greet_restored(guest::guest_client& client, const sandbox_handle& handle, int timeout_ms) {
  std::string entropy(64, '\0');
  if (::getrandom(entropy.data(), entropy.size(), 0) != static_cast<ssize_t>(entropy.size()))
    return make_status(errc::internal, "getrandom failed");
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  const int64_t realtime_ns = static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
  std::string network;
  if (!handle.sandbox_address.empty())
    network = handle.sandbox_address + "/" + std::to_string(handle.prefix_length) + ","
              + handle.host_address;
  auto refreshed =
    client.refresh(std::move(entropy), realtime_ns, handle.id, std::move(network), timeout_ms);
  return refreshed ? status::ok() : refreshed.error();
}

} // namespace

result<sandbox_parts> start_sandbox(const worker_context& ctx, const create_sandbox_request& req) {
  auto runtime = runtime_for(ctx, req);
  if (!runtime)
    return runtime.error();
  const bool vm = req.runtime == "microvm";
  // A VM from a checkpoint (a restore or a fork) comes back from its
  // machine snapshot, memory and processes included; a new VM is a clone
  // of its shape's base machine once one was saved.
  const bool from_checkpoint = vm && !req.from_snapshot.empty() && !req.reuse_root;
  if (from_checkpoint && !(*runtime)->has_machine(req.from_snapshot))
    return make_status(errc::not_found, "checkpoint " + req.from_snapshot
                                          + " holds no microVM memory on this worker; restore "
                                            "another checkpoint or create the sandbox anew");
  const std::string base =
    vm && req.from_snapshot.empty() && !req.reuse_root ? base_machine_name(req) : std::string();
  std::string machine = from_checkpoint                                  ? req.from_snapshot
                        : !base.empty() && (*runtime)->has_machine(base) ? base
                                                                         : std::string();
  // A root left for an id this worker does not run is stale (kept by a
  // restart, or a create cut short): a fresh start replaces it.
  if (!req.reuse_root && ctx.rootfs->sandbox_path(req.id))
    (void)ctx.rootfs->delete_sandbox(req.id);
  auto root = req.reuse_root ? ctx.rootfs->sandbox_path(req.id)
              : !req.from_snapshot.empty()
                ? ctx.rootfs->fork(req.from_snapshot, req.id, req.disk_mb)
                : ctx.rootfs->create_sandbox(req.id, req.template_name, req.disk_mb);
  if (!root)
    return root.error();
  // A kept root outlives a failed start: a later one may still bring it back.
  auto undo_root = [&ctx, &req] {
    if (!req.reuse_root)
      (void)ctx.rootfs->delete_sandbox(req.id);
  };
  int pair[2] = {-1, -1};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    undo_root();
    return make_status(errc::resource_exhausted, "socketpair failed: out of descriptors?");
  }
  unique_fd host_end(pair[0]);
  sandbox_launch_spec spec;
  spec.id = req.id;
  spec.rootfs_path = root->string();
  spec.init_argv = ctx.options.guest_argv;
  if (ctx.guest)
    spec.init_fd = ctx.guest->get();
  spec.channel_fd = pair[1];
  spec.limits = req.limits;
  spec.network.enabled = req.network;
  if (has_egress(ctx, req)) {
    // A VM's disk is made from the root at create: the files go in before.
    spec.prepare_root = [&ctx, root_path = spec.rootfs_path](const std::string& host_address) {
      return prepare_egress_files(root_path, host_address, ctx.egress->root_ca());
    };
  }
  // VMs of one shape share their base's unwritten pages; a checkpoint's are
  // copies, so that their own suspends and checkpoints stay quick.
  auto handle =
    machine.empty()
      ? (*runtime)->create(spec)
      : (*runtime)->restore_machine(spec, machine,
                                    machine == base ? sandbox_runtime::machine_memory::shared
                                                    : sandbox_runtime::machine_memory::copy);
  if (!handle && !base.empty() && machine == base
      && (handle.code() == errc::wrong_state || handle.code() == errc::corrupt_record
          || handle.code() == errc::unsupported_version)) {
    // A base this host can no longer restore (another QEMU or guest): it
    // goes, and this VM boots and leaves the next base.
    (void)(*runtime)->delete_machine(base);
    machine.clear();
    handle = (*runtime)->create(spec);
  }
  ::close(pair[1]);
  if (!handle) {
    undo_root();
    return handle.error();
  }
  if (auto wired = attach_egress(ctx, req, *handle); !wired) {
    (void)(*runtime)->destroy(req.id);
    undo_root();
    return wired;
  }
  const int fd = host_end.get();
  auto client = std::make_unique<guest::guest_client>(std::move(host_end));
  const int handshake_ms =
    vm ? ctx.options.microvm_handshake_timeout_ms : ctx.options.guest_handshake_timeout_ms;
  auto greeted = [&]() -> status {
    if (!machine.empty())
      return greet_restored(*client, *handle, handshake_ms);
    auto hello = client->handshake(handshake_ms);
    return hello ? status::ok() : hello.error();
  };
  if (auto hello = greeted(); !hello) {
    auto failure = make_status(hello.code, "the guest of sandbox " + req.id
                                             + " did not say hello: " + hello.message);
    client.reset();
    if (ctx.egress)
      ctx.egress->detach(req.id);
    (void)(*runtime)->destroy(req.id);
    undo_root();
    return failure;
  }
  // The first VM of its shape to boot here leaves the base the next ones
  // are cloned from: saved now, before anything of its own ran in it (a
  // pause of a few hundred ms). Another create that saved it first wins;
  // a failure only means the next VM boots too.
  if (!base.empty() && machine.empty() && !(*runtime)->has_machine(base))
    (void)(*runtime)->save_machine(req.id, base);
  sandbox_parts parts;
  parts.id = req.id;
  parts.handle = std::move(*handle);
  parts.runtime = *runtime;
  parts.rootfs = ctx.rootfs;
  // The VM's files are in its own disk image, made from the root above.
  parts.files_in_root = !vm;
  parts.client = std::move(client);
  parts.channel_fd = fd;
  return parts;
}

} // namespace airlock::worker
