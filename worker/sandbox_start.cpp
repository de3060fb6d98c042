#include "worker/sandbox_start.hpp"

#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "worker/egress_binding.hpp"
#include "worker/process_identity.hpp"
#include "worker/rootfs/fs_util.hpp"
#include "worker/rootfs/templates.hpp"

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
/// At most 5 + 75 (a template's worker name) + 24 + 6 characters: within a
/// machine name's 128.
std::string base_machine_name(const create_sandbox_request& req) {
  const uint32_t vcpus = schema::whole_cpus(req.limits.cpu_millis);
  return "base-" + req.template_name + "-" + std::to_string(req.limits.memory_mb) + "m-"
         + std::to_string(vcpus) + "c-" + (req.network ? "net" : "nonet");
}

/// A guest restored from memory goes on with the saved kernel's random state,
/// clock, hostname, address and MAC: the refresh hands it fresh entropy, the
/// host's clock, its own id as hostname and its new slot's network and its
/// own MAC, and it answers with a hello.
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
              + handle.host_address + (handle.mac.empty() ? "" : "," + handle.mac);
  auto refreshed =
    client.refresh(std::move(entropy), realtime_ns, handle.id, std::move(network), timeout_ms);
  return refreshed ? status::ok() : refreshed.error();
}

/// A failure that means the machine was saved by another QEMU, kernel or
/// guest than this host's: it cannot come back here.
bool unrestorable(errc code) {
  return code == errc::wrong_state || code == errc::corrupt_record
         || code == errc::unsupported_version;
}

/// Where a sandbox's VM or namespace starts from.
struct start_source {
  std::string machine; ///< a saved machine to restore; "": a boot
  sandbox_runtime::machine_memory memory = sandbox_runtime::machine_memory::copy;
  /// Its address gets the request's egress entry. Off for a base's own VM,
  /// which runs no tenant's code and reaches nothing outside.
  bool egress = true;
};

/// The root, the runtime's start (a boot or a restore), the egress entry
/// and the guest's hello; undoes what it did on failure.
result<sandbox_parts> launch(const worker_context& ctx, const create_sandbox_request& req,
                             const std::shared_ptr<sandbox_runtime>& runtime,
                             const start_source& source) {
  const bool vm = req.runtime == "microvm";
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
    // A VM's disk is made from the root at create: the files go in before
    // (a base's too: the disks of its clones are copies of its disk).
    spec.prepare_root = [&ctx, root_path = spec.rootfs_path](const std::string& host_address) {
      return prepare_egress_files(root_path, host_address, ctx.egress->root_ca());
    };
  }
  auto handle = source.machine.empty()
                  ? runtime->create(spec)
                  : runtime->restore_machine(spec, source.machine, source.memory);
  ::close(pair[1]);
  if (!handle) {
    undo_root();
    return handle.error();
  }
  if (source.egress) {
    if (auto wired = attach_egress(ctx, req, *handle); !wired) {
      (void)runtime->destroy(req.id);
      undo_root();
      return wired;
    }
  }
  const int fd = host_end.get();
  auto client = std::make_unique<guest::guest_client>(std::move(host_end));
  const int handshake_ms =
    vm ? ctx.options.microvm_handshake_timeout_ms : ctx.options.guest_handshake_timeout_ms;
  auto greeted = [&]() -> status {
    if (!source.machine.empty())
      return greet_restored(*client, *handle, handshake_ms);
    auto hello = client->handshake(handshake_ms);
    return hello ? status::ok() : hello.error();
  };
  if (auto hello = greeted(); !hello) {
    auto failure = make_status(hello.code, "the guest of sandbox " + req.id
                                             + " did not say hello: " + hello.message);
    client.reset();
    if (ctx.egress && source.egress)
      ctx.egress->detach(req.id);
    (void)runtime->destroy(req.id);
    undo_root();
    return failure;
  }
  sandbox_parts parts;
  parts.id = req.id;
  parts.handle = std::move(*handle);
  parts.runtime = runtime;
  parts.rootfs = ctx.rootfs;
  // The VM's files are in its own disk image, made from the root above.
  parts.files_in_root = !vm;
  parts.client = std::move(client);
  parts.channel_fd = fd;
  return parts;
}

/// What a template's VM base runs before its memory is saved: the
/// manifest's start_cmd (started, left running) and ready_cmd (until it
/// succeeds), as its user, in its workdir, with its env.
struct base_warmup {
  std::string start_cmd;
  std::string ready_cmd;
  std::string workdir;
  std::string user;
  std::vector<std::string> env; ///< "KEY=VALUE"
  bool needed() const { return !start_cmd.empty() || !ready_cmd.empty(); }
};

base_warmup warmup_of(const worker_context& ctx, const std::string& template_name) {
  auto text = read_file(manifest_path(ctx.rootfs->templates_dir(), template_name));
  if (!text)
    return {};
  auto manifest = parse_manifest(*text);
  if (!manifest)
    return {};
  return {manifest->start_cmd, manifest->ready_cmd, manifest->workdir, manifest->user,
          manifest->env};
}

/// How long a base's ready_cmd is tried, once a second, and the margin its
/// loop's process gets beyond that. Half a build's tries: it succeeded at
/// the build already, and the whole create must fit the node's timeout.
constexpr int ready_attempts_max = 60;
constexpr int ready_margin_ms = 30'000;

/// Events of the base's guest until `done` says the one it waits for came
/// (true) or failed (its status). Every event is taken, so that a chatty
/// start_cmd keeps its output credit.
status await_guest(guest::guest_client& client, int timeout_ms,
                   const std::function<std::optional<status>(const guest::guest_message&)>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now())
                        .count();
    if (left <= 0)
      return make_status(errc::timeout, "no answer in " + std::to_string(timeout_ms) + " ms");
    auto event = client.next_event(static_cast<int>(left));
    if (!event)
      return event.error();
    if (auto outcome = done(*event))
      return *outcome;
  }
}

/// Runs the warmup in a base's VM, whose hello came: start_cmd started,
/// ready_cmd succeeded.
status warm_up(guest::guest_client& client, const base_warmup& warmup, int timeout_ms) {
  auto user = user_without_passwd(warmup.user);
  if (!user) {
    auto passwd = client.read_file("/etc/passwd", timeout_ms);
    if (!passwd)
      return make_status(passwd.code(), "read /etc/passwd: " + passwd.error().message);
    user = find_user(*passwd, warmup.user);
  }
  if (!*user)
    return user->error();
  auto env = fixed_process_env(default_process_path, **user);
  for (const auto& pair : warmup.env) {
    auto eq = pair.find('=');
    env[pair.substr(0, eq)] = eq == std::string::npos ? "" : pair.substr(eq + 1);
  }
  auto request = [&](const std::string& cmd) {
    guest::start_request start;
    start.process.cmd = cmd;
    start.process.cwd = warmup.workdir.empty() ? "/" : warmup.workdir;
    start.process.env.assign(env.begin(), env.end());
    start.process.run_as = **user;
    return start;
  };
  if (!warmup.start_cmd.empty()) {
    auto stream = client.start(request(warmup.start_cmd), timeout_ms);
    if (!stream)
      return make_status(stream.code(), "start_cmd: " + stream.error().message);
    auto started = await_guest(
      client, timeout_ms, [id = *stream](const guest::guest_message& m) -> std::optional<status> {
        if (const auto* up = std::get_if<guest::started>(&m); up && up->stream_id == id)
          return status::ok();
        if (const auto* failure = std::get_if<guest::error_reply>(&m);
            failure && failure->stream_id == id)
          return make_status(failure->code, failure->message);
        return std::nullopt;
      });
    if (!started)
      return make_status(started.code, "start_cmd did not start: " + started.message);
  }
  if (warmup.ready_cmd.empty())
    return status::ok();
  auto stream =
    client.start(request(retried_each_second(warmup.ready_cmd, ready_attempts_max)), timeout_ms);
  if (!stream)
    return make_status(stream.code(), "ready_cmd: " + stream.error().message);
  return await_guest(
    client, ready_attempts_max * 1000 + ready_margin_ms,
    [id = *stream](const guest::guest_message& m) -> std::optional<status> {
      if (const auto* end = std::get_if<guest::exited>(&m); end && end->stream_id == id)
        return end->exit_code == 0 && end->signal == 0
                 ? status::ok()
                 : make_status(errc::timeout, "ready_cmd did not succeed in "
                                                + std::to_string(ready_attempts_max) + " tries");
      if (const auto* failure = std::get_if<guest::error_reply>(&m);
          failure && failure->stream_id == id && failure->ended)
        return make_status(failure->code, "ready_cmd: " + failure->message);
      return std::nullopt;
    });
}

/// Makes the base `base` of `req`'s shape for a template whose VMs start
/// warm: a VM of its own (no tenant's id, env, files or egress in it) boots
/// from the template, runs the warmup and is saved; the VM and its root go
/// either way.
status make_warm_base(const worker_context& ctx, const create_sandbox_request& req,
                      const std::shared_ptr<sandbox_runtime>& runtime, const std::string& base,
                      const base_warmup& warmup) {
  uint64_t nonce = 0;
  if (::getrandom(&nonce, sizeof nonce, 0) != static_cast<ssize_t>(sizeof nonce))
    return make_status(errc::internal, "getrandom failed");
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(nonce));
  create_sandbox_request builder = req;    // the shape, a new VM
  builder.id = std::string("base-") + hex; // sandbox ids are "sb_...": never this
  builder.egress = {};                     // no tenant's entry: it gets none
  start_source boot;
  boot.egress = false;
  auto parts = launch(ctx, builder, runtime, boot);
  if (!parts)
    return parts.error();
  ctx.base_makers->count_boot();
  auto warmed = warm_up(*parts->client, warmup, ctx.options.microvm_handshake_timeout_ms);
  status saved = warmed;
  if (warmed) {
    if (auto bytes = runtime->save_machine(builder.id, base);
        !bytes && !runtime->has_machine(base)) // another create's base is as good
      saved = bytes.error();
  }
  parts->client.reset();
  (void)runtime->destroy(builder.id);
  (void)ctx.rootfs->delete_sandbox(builder.id);
  if (!saved)
    return make_status(saved.code, "the template's VM base could not be made: " + saved.message
                                     + (warmed ? std::string()
                                               : "; its start_cmd and ready_cmd run in a VM "
                                                 "of their own, with the template's env and "
                                                 "no egress: check them with a create of "
                                                 "runtime namespace"));
  return status::ok();
}

} // namespace

result<sandbox_parts> start_sandbox(const worker_context& ctx, const create_sandbox_request& req) {
  auto runtime = runtime_for(ctx, req);
  if (!runtime)
    return runtime.error();
  const bool vm = req.runtime == "microvm";
  // A VM from a checkpoint (a restore or a fork) comes back from its
  // machine snapshot, memory and processes included.
  const bool from_checkpoint = vm && !req.from_snapshot.empty() && !req.reuse_root;
  if (from_checkpoint && !(*runtime)->has_machine(req.from_snapshot))
    return make_status(errc::not_found, "checkpoint " + req.from_snapshot
                                          + " holds no microVM memory on this worker; restore "
                                            "another checkpoint or create the sandbox anew");
  if (!vm || !req.from_snapshot.empty() || req.reuse_root) {
    start_source source;
    if (from_checkpoint)
      source.machine = req.from_snapshot;
    return launch(ctx, req, *runtime, source);
  }
  // A new VM is a clone of its shape's base. VMs of one shape share their
  // base's unwritten pages (when the runtime maps them shared); a
  // checkpoint's are copies, so that their own suspends stay quick.
  start_source clone;
  clone.machine = base_machine_name(req);
  clone.memory = sandbox_runtime::machine_memory::shared;
  const auto warmup = warmup_of(ctx, req.template_name);
  if (warmup.needed()) {
    // The base runs the template's start_cmd: every VM of the template is
    // a clone of it (the node starts no start_cmd in a new VM).
    for (int attempt = 0;; ++attempt) {
      {
        auto maker = ctx.base_makers->lock_for(clone.machine);
        std::lock_guard<std::mutex> making(*maker);
        if (!(*runtime)->has_machine(clone.machine))
          if (auto made = make_warm_base(ctx, req, *runtime, clone.machine, warmup); !made)
            return made;
      }
      auto parts = launch(ctx, req, *runtime, clone);
      if (parts || attempt == 1 || !unrestorable(parts.code()))
        return parts;
      (void)(*runtime)->delete_machine(clone.machine); // this host's QEMU or guest changed
    }
  }
  if ((*runtime)->has_machine(clone.machine)) {
    auto parts = launch(ctx, req, *runtime, clone);
    if (parts || !unrestorable(parts.code()))
      return parts;
    // A base this host can no longer restore: it goes, and this VM boots
    // and leaves the next base.
    (void)(*runtime)->delete_machine(clone.machine);
  }
  auto parts = launch(ctx, req, *runtime, start_source{});
  // The first VM of its shape to boot here leaves the base the next ones
  // are cloned from: saved now, before anything of its own ran in it (a
  // pause of a few hundred ms). Another create that saved it first wins;
  // a failure only means the next VM boots too.
  if (parts) {
    ctx.base_makers->count_boot();
    if (!(*runtime)->has_machine(clone.machine))
      (void)(*runtime)->save_machine(req.id, clone.machine);
  }
  return parts;
}

} // namespace airlock::worker
