#include "worker/sandbox_start.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <utility>

#include "worker/egress_binding.hpp"

namespace airlock::worker {

namespace {

/// Points the sandbox at the egress proxy: its resolv.conf and trust store,
/// then the egress proxy's entry for its address (before any of its processes runs).
status attach_egress(const worker_context& ctx, const create_sandbox_request& req,
                     const sandbox_handle& handle, const std::string& rootfs_path) {
  if (!ctx.egress || !ctx.egress->enabled() || !req.network)
    return status::ok();
  if (auto files = prepare_egress_files(rootfs_path, handle.host_address, ctx.egress->root_ca());
      !files)
    return files;
  egress::sandbox_view view = req.egress;
  view.sandbox_id = req.id;
  view.address = handle.sandbox_address;
  ctx.egress->attach(std::move(view), handle.host_interface);
  return status::ok();
}

} // namespace

result<sandbox_parts> start_sandbox(const worker_context& ctx, const create_sandbox_request& req) {
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
  auto handle = ctx.runtime->create(spec);
  ::close(pair[1]);
  if (!handle) {
    undo_root();
    return handle.error();
  }
  if (auto wired = attach_egress(ctx, req, *handle, spec.rootfs_path); !wired) {
    (void)ctx.runtime->destroy(req.id);
    undo_root();
    return wired;
  }
  const int fd = host_end.get();
  auto client = std::make_unique<guest::guest_client>(std::move(host_end));
  if (auto hello = client->handshake(ctx.options.guest_handshake_timeout_ms); !hello) {
    auto failure = make_status(hello.code(), "the guest of sandbox " + req.id
                                               + " did not say hello: " + hello.error().message);
    client.reset();
    if (ctx.egress)
      ctx.egress->detach(req.id);
    (void)ctx.runtime->destroy(req.id);
    undo_root();
    return failure;
  }
  sandbox_parts parts;
  parts.id = req.id;
  parts.handle = std::move(*handle);
  parts.runtime = ctx.runtime;
  parts.rootfs = ctx.rootfs;
  parts.client = std::move(client);
  parts.channel_fd = fd;
  return parts;
}

} // namespace airlock::worker
