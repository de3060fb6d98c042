// sandbox_bench: a checkpoint through the worker (freeze, read-only snapshot
// of the sandbox's root, thaw) against a bare read-only btrfs snapshot of the
// same subvolume, with the sandbox idle and with a writer running in it.

#include <iostream>
#include <string>
#include <vector>

#include "bench/sandbox/cases.hpp"
#include "worker/rootfs/btrfs_ops.hpp"

namespace airlock::sandbox_bench {
namespace {

struct checkpoint_figures {
  std::vector<double> worker_ms;
  std::vector<double> bare_ms;
};

/// `rounds` checkpoints through the worker, then as many bare snapshots of
/// the same subvolume; each is deleted again, untimed.
checkpoint_figures measure(caf::scoped_actor& self, const worker_actor& worker, host_pieces& host,
                           const std::string& sandbox_id, int rounds) {
  checkpoint_figures out;
  auto root = host.rootfs->sandbox_path(sandbox_id);
  if (!root) {
    std::cerr << "no root for " << sandbox_id << ": " << root.error().message << "\n";
    return out;
  }
  for (int i = 0; i < rounds; ++i) {
    const std::string id = sandbox_id + "-ck" + std::to_string(i);
    auto start = clock_type::now();
    auto taken = ask<uint64_t>(self, worker, wk_ckpt_atom::value, sandbox_id, id, false);
    out.worker_ms.push_back(ms_since(start));
    if (!taken) {
      std::cerr << "checkpoint failed: " << taken.error().message << "\n";
      return out;
    }
    (void)ask<bool>(self, worker, wk_ckptdel_atom::value, id);
  }
  const auto scratch = root->parent_path();
  for (int i = 0; i < rounds; ++i) {
    const std::string name = sandbox_id + "-bare" + std::to_string(i);
    auto start = clock_type::now();
    auto made = worker::btrfs_snapshot(*root, scratch, name, true);
    out.bare_ms.push_back(ms_since(start));
    if (!made) {
      std::cerr << "bare snapshot failed: " << made.message << "\n";
      return out;
    }
    (void)worker::btrfs_delete_subvolume(scratch / name);
  }
  return out;
}

void print(const char* label, const checkpoint_figures& figures) {
  if (figures.worker_ms.empty() || figures.bare_ms.empty())
    return;
  std::cout << label << "checkpoint " << percentiles(figures.worker_ms) << "\n"
            << "                        bare snap  " << percentiles(figures.bare_ms) << "\n";
}

} // namespace

void bench_checkpoint(caf::scoped_actor& self, const worker_actor& worker, host_pieces& host,
                      const bench_options& opt) {
  create_sandbox_request request;
  request.id = "bench-ckpt";
  auto box = ask<sandbox_actor>(self, worker, wk_create_atom::value, request);
  if (!box) {
    std::cerr << "create failed: " << box.error().message << "\n";
    return;
  }
  print("idle sandbox            ", measure(self, worker, host, request.id, opt.checkpoints));
  // Busy: a writer rewriting a 1 MiB file in 64 KiB writes, without pause.
  exec_spec writer;
  writer.cmd = "while true; do dd if=/dev/zero of=/busy bs=65536 count=16 2>/dev/null; done";
  auto proc = ask<std::string>(self, *box, sbx_exec_atom::value, writer);
  if (!proc) {
    std::cerr << "writer failed to start: " << proc.error().message << "\n";
  } else {
    print("writer running          ", measure(self, worker, host, request.id, opt.checkpoints));
  }
  (void)ask<bool>(self, worker, wk_destroy_atom::value, request.id);
}

} // namespace airlock::sandbox_bench
