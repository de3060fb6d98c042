#include "worker/sandbox_start.hpp"

#include <sys/socket.h>
#include <unistd.h>

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

} // namespace

result<sandbox_parts> start_sandbox(const worker_context& ctx,
                                    const create_sandbox_request& request) {
  auto runtime = runtime_for(ctx, request);
  if (!runtime)
    return runtime.error();
  const bool vm = request.runtime == "microvm";
  const create_sandbox_request& req = request;
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
  auto handle = (*runtime)->create(spec);
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
  if (auto hello = client->handshake(handshake_ms); !hello) {
    auto failure = make_status(hello.code(), "the guest of sandbox " + req.id
                                               + " did not say hello: " + hello.error().message);
    client.reset();
    if (ctx.egress)
      ctx.egress->detach(req.id);
    (void)(*runtime)->destroy(req.id);
    undo_root();
    return failure;
  }
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
